"""`gpuplan model` CLI: JSON contract and clean errors."""

import json

from typer.testing import CliRunner

from gpuplan.cli.main import app

runner = CliRunner()


def test_show_json_contract():
    r = runner.invoke(app, ["model", "show", "llama-3-8b", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["total_params"] == 8_030_261_248 and isinstance(d["active_params"], int)  # HF safetensors total
    assert d["kv_cache"]["bytes_per_token"] == 131_072  # 2 x 8 x 128 x 2 B x 32 layers


def test_show_path_and_list(tmp_path):
    cfg = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = runner.invoke(app, ["model", "show", str(tmp_path), "--json"])
    assert json.loads(r.stdout)["total_params"] == 124_439_808  # GPT-2 small, HF openai-community/gpt2
    r = runner.invoke(app, ["model", "list", "--json"])
    assert "deepseek-v3" in {m["name"] for m in json.loads(r.stdout)}


def test_errors_exit_2():
    r = runner.invoke(app, ["model", "show", "no-such-model"])
    assert r.exit_code == 2 and "unknown model" in r.output
    r = runner.invoke(app, ["model", "params", "/no/such/file.safetensors"])
    assert r.exit_code == 2 and "no such file" in r.output
