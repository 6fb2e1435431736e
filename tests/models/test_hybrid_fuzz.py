"""Property tests of config reading for hybrid and unknown configs: a crafted config is read (and its
counts are finite) or refused with a one-line InputError naming a field; booleans are booleans or
"true" / "false"; the CLI answers exit code 2 without a traceback."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from hybrid_configs import (  # noqa: E402
    LFM2_1_2B, LLAVA_1_5_7B, MAMBA_CODESTRAL_7B, NEMOTRON_H_8B, QWEN3_NEXT_80B_A3B, RECURRENTGEMMA_2B,
)

from gpuplan.cli.main import app  # noqa: E402
from gpuplan.errors import InputError  # noqa: E402
from gpuplan.layers import flops_per_token, kv_cache_bytes_per_token, parameter_counts, state_bytes_per_sequence  # noqa: E402
from gpuplan.models import model_from_hf_config  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BASES = [NEMOTRON_H_8B, QWEN3_NEXT_80B_A3B, MAMBA_CODESTRAL_7B, LFM2_1_2B, RECURRENTGEMMA_2B]
KEYS = sorted({k for base in BASES for k in base} | {"layer_types", "layers_block_type", "text_config", "vision_config",
                                                     "mlp_only_layers", "moe_latent_size", "n_routed_experts"})
#: JSON values a crafted file may hold where something else is expected
VALUES = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40), st.sampled_from([0, -1, 1, 2, 3, 7, 64, 10**9, 2**63]),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["", "true", "false", "no", "M*-E", "auto", "x"]),
    st.booleans(), st.none(),
    st.lists(st.one_of(st.integers(-2, 8), st.sampled_from(["mamba", "attention", "conv", "full_attention", "q"])),
             max_size=4),
    st.dictionaries(st.sampled_from(["model_type", "hidden_size"]), st.integers(0, 4), max_size=2),
)


@SETTINGS
@given(base=st.sampled_from(BASES), changes=st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=4))
def test_crafted_hybrid_config_read_or_refused(base, changes):
    try:
        m = model_from_hf_config({**base, **changes}, "fuzz")
    except InputError as exc:
        assert exc.field and "\n" not in str(exc)
        return
    counts = parameter_counts(m)
    assert counts.total > 0 and counts.active <= counts.total
    for value in (kv_cache_bytes_per_token(m, 2), state_bytes_per_sequence(m, 2), flops_per_token(m, 128).forward):
        assert math.isfinite(value) and value >= 0


#: (base config, a boolean field its family reads)
BOOLEAN_FIELDS = [
    (NEMOTRON_H_8B, "use_conv_bias"), (NEMOTRON_H_8B, "use_bias"), (NEMOTRON_H_8B, "tie_word_embeddings"),
    (NEMOTRON_H_8B, "mlp_bias"), (NEMOTRON_H_8B, "attention_bias"), (MAMBA_CODESTRAL_7B, "use_conv_bias"),
    (LFM2_1_2B, "tie_embedding"), (LFM2_1_2B, "conv_bias"), (LFM2_1_2B, "block_auto_adjust_ff_dim"),
    (RECURRENTGEMMA_2B, "attention_bias"), (QWEN3_NEXT_80B_A3B, "tie_word_embeddings"),
]


@SETTINGS
@given(case=st.sampled_from(BOOLEAN_FIELDS),
       value=st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=6).filter(
           lambda t: t.strip().lower() not in ("true", "false")), st.lists(st.booleans(), min_size=1, max_size=2)))
def test_boolean_fields_refuse_non_booleans(case, value):
    base, field = case
    try:
        model_from_hf_config({**base, field: value}, "fuzz")
    except InputError as exc:
        assert exc.field == field and "true or false" in str(exc)
    else:
        raise AssertionError(f"{field} = {value!r} was read as a boolean")


runner = CliRunner()


def test_cli_refusals_exit_2_with_one_line(tmp_path):
    for name, cfg in (("llava", LLAVA_1_5_7B), ("badpattern", {**NEMOTRON_H_8B, "hybrid_override_pattern": "MX"}),
                      ("badbool", {**MAMBA_CODESTRAL_7B, "use_conv_bias": "yes"})):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(cfg))
        r = runner.invoke(app, ["model", "show", str(path)])
        assert r.exit_code == 2 and r.output.count("\n") == 1 and r.output.startswith("error:"), r.output
        assert "Traceback" not in r.output


def test_cli_unknown_model_type_warns_on_stderr_and_in_json(tmp_path):
    cfg = {"model_type": "my_new_lm", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "vocab_size": 100, "hidden_act": "silu"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = runner.invoke(app, ["model", "show", str(path), "--json"])
    assert r.exit_code == 0
    assert "warning: model_type 'my_new_lm' is not one gpuplan knows" in r.stderr
    assert json.loads(r.stdout)["warnings"] == [r.stderr.strip().removeprefix("warning: ")]
    r = runner.invoke(app, ["model", "show", "llama-3-8b", "--json"])
    assert json.loads(r.stdout)["warnings"] == [] and "warning" not in r.stderr


def test_cli_hybrid_show_and_train_refusal(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(NEMOTRON_H_8B))
    d = json.loads(runner.invoke(app, ["model", "show", str(path), "--json"]).stdout)
    # 24 Mamba-2 + 4 attention mixers; KV of the 4 attention layers; state 51,806,208 B (test_hybrid_models)
    assert d["architecture"]["layers_by_mixer"] == {"mamba2": 24, "attention": 4}
    assert d["kv_cache"]["bytes_per_token"] == 16_384 and d["kv_cache"]["state_bytes_per_sequence"] == 51_806_208
    r = runner.invoke(app, ["train", str(path), "--gpus", "8"])
    assert r.exit_code == 2 and "mamba2" in r.output and "nemotron_h" in r.output
