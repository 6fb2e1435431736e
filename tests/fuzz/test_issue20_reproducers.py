"""Every reproducer of issue 20 (hardening), as written there: each exits 2 with a one-line
message naming the field (or succeeds correctly where the input was valid)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from harness import judge, run_case

REPO = Path(__file__).resolve().parents[2]
MODELS = REPO / "src" / "gpuplan" / "catalog" / "data" / "models"


def _run(*args: str):
    result = run_case(list(args))
    why = judge(list(args), result)
    assert why is None, why
    return result


def _bad(*args: str, names: str):
    """Exit 2, one line on stderr (or a JSON error object under --json) that contains `names`."""
    result = _run(*args)
    assert result.exit_code == 2, result.output
    if "--json" in args:
        err = json.loads(result.stdout)["error"]
        assert names in err["message"], err
        return err
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], result.stderr
    return lines[0]


# --- NaN and inf pass every range check --------------------------------------------------------

def test_dc_power_pue_nan_is_a_json_error():
    err = _bad("dc", "power", "--system", "dgx-h100", "--nodes", "16", "--pue", "nan", "--json", names="--pue")
    assert err["field"] == "--pue" and err["allowed"] == "a finite number > 0"


def test_negative_price_is_refused():
    _bad("train", "gpt3-125m", "--gpus", "8", "--usd-per-gpu-hour", "-1", names="--usd-per-gpu-hour")


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_set_assumption_must_be_finite_and_non_negative(value):
    _bad("dc", "power", "--nodes", "4", "--set", f"pue={value}", names="pue")


# --- plans the user gave that cannot fit -----------------------------------------------------

def test_user_plan_that_does_not_fit_exits_2_with_the_reason():
    # Megatron 1T: ~1e12 parameters x 18 bytes (bf16 weights + fp32 grads/Adam) ~ 17,000 GiB on one GPU
    line = _bad("train", "megatron-gpt-1t", "--gpus", "1", "--tp", "1", names="GiB usable")
    assert "80 GiB" in line


def test_serve_frontier_unknown_dtype_and_zero_input_len():
    _bad("serve", "frontier", "gpt3-125m", "--weight-dtype", "fp7", names="weight_dtype")
    _bad("serve", "frontier", "gpt3-125m", "--input-len", "0", names="--input-len")


def test_infeasible_mig_plan_exits_2():
    # 7g.80gb takes all 8 memory slices of an A100 80GB: two need two GPUs, one is given
    result = _run("mig", "plan", "7g.80gb", "7g.80gb", "--gpus", "1")
    assert result.exit_code == 2 and "infeasible" in result.stderr


# --- crafted files ------------------------------------------------------------------------------

def _config(tmp_path, name="config.json", **changes) -> Path:
    cfg = json.loads((MODELS / "google--gemma-2-9b.json").read_text())
    cfg.update(changes)
    path = tmp_path / name
    path.write_text(json.dumps(cfg, ensure_ascii=False))
    return path


@pytest.mark.parametrize("changes, field", [
    ({"model_type": "gemma3_text", "sliding_window_pattern": 0}, "sliding_window_pattern"),
    ({"num_hidden_layers": "42"}, "num_hidden_layers"),
    ({"hidden_size": 2**70}, "hidden_size"),
    ({"num_hidden_layers": 10**9}, "num_hidden_layers"),
])
def test_crafted_config_fields(tmp_path, changes, field):
    _bad("model", "show", str(_config(tmp_path, **changes)), names=field)


def test_mla_q_lora_rank_negative(tmp_path):
    cfg = json.loads((MODELS / "deepseek-ai--DeepSeek-V3.json").read_text())
    cfg["q_lora_rank"] = -5
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    _bad("model", "show", str(path), names="q_lora_rank")


def test_config_not_utf8_and_deep_nesting(tmp_path):
    path = tmp_path / "latin.json"
    path.write_bytes(b'{"name": "caf\xe9"}')
    _bad("model", "show", str(path), names="not UTF-8")
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    _bad("model", "show", str(path), names="nests deeper")


def _safetensors(path: Path, header: bytes, data: bytes = b"") -> Path:
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def test_safetensors_overlap_wrap_and_deep_metadata(tmp_path):
    two = {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "b": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}
    p = _safetensors(tmp_path / "overlap.safetensors", json.dumps(two).encode(), b"\0" * 16)
    _bad("model", "params", str(p), names="overlap")  # counted twice before
    wrap = {"a": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 16]}}
    p = _safetensors(tmp_path / "wrap.safetensors", json.dumps(wrap).encode(), b"\0" * 16)
    _bad("model", "params", str(p), names="2^63-1")
    deep = b'{"__metadata__":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}"
    p = _safetensors(tmp_path / "deep.safetensors", deep)
    _bad("model", "params", str(p), names="nests deeper")


def test_toml_catalog_inf_folder_and_empty_path(tmp_path):
    cat = tmp_path / "cat.toml"
    cat.write_text('[[gpu]]\nid = "x1"\nname = "X"\nvendor = "x"\narchitecture = "x"\nmemory_gib = inf\n'
                   'memory_bandwidth_gbps = 1000\npeak_tflops = { bf16 = { dense = 100 } }\nsources = { default = "me" }\n')
    _bad("--catalog", str(cat), "hw", "list", names="memory_gib")
    _bad("--catalog", str(tmp_path), "hw", "list", names="is a folder")
    _bad("--catalog", "", "hw", "list", names="empty path")


def test_latin1_csv_names_the_encoding(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes("id,source,metric,value\nr1,caf\u00e9,x,1\n".encode("latin-1"))
    _bad("validate", str(path), names="not UTF-8")


def test_empty_npy_is_an_error_not_aborted(tmp_path):
    path = tmp_path / "empty.npy"
    np.save(path, np.zeros((0,), np.float32))
    line = _bad("formats", "compare", str(path), names="empty")
    assert "Aborted" not in line


# --- work that grows with user numbers -----------------------------------------------------------

def test_huge_counts_are_capped_or_refused():
    _bad("train", "gpt3-125m", "--gpus", "1e9", names="--gpus")  # not an integer
    _bad("train", "gpt3-125m", "--gpus", str(2**63), names="--gpus")
    _bad("train", "gpt3-125m", "--gpus", str(10**9), names="10x the largest announced cluster")
    _bad("fit", "min-gpus", "gpt3-125m", "--gpu", "h100-sxm5-80gb", "--max-gpus", str(10**12), names="--max-gpus")
    _bad("serve", "gpt3-125m", "--concurrency", str(10**8), names="--concurrency")
    _bad("formats", "matmul", "--k", str(2**31), names="2^29 multiply-adds")
    # 8 x 64 x 470,221: 240M MACs but 30M operand elements to quantise per format, ~30 s on a loaded
    # machine (found by the CI fuzz test): refused by the 2^23 operand-element cap
    _bad("formats", "matmul", "--m", "8", "--k", "64", "--n", "470221", names="2^23 operand elements")
    _bad("plan", "--model", "gpt3-125m", "--years", "1e9", names="--years")


@pytest.mark.parametrize("batch, names", [
    # no batch: each plan's default batch is at least one sequence per rank, 9,999,991 x 2,048 tokens,
    # past the 2^23-token cap of a default batch (plan_search.MAX_DEFAULT_BATCH_TOKENS)
    ([], "default global batch over 2^23 tokens"),
    # a given batch of 1,024 sequences cannot split over dp = 9,999,991 ranks
    (["--global-batch", "1024"], "does not divide"),
])
def test_train_on_a_prime_gpu_count_answers_by_arithmetic(batch, names):
    # 9,999,991 is prime: every degree but 1 fails to divide it, so the only layout is dp = 9,999,991;
    # the divisors come from the factorisation (not a loop to N), and the reason names the batch rule
    # that rejects that layout, not memory
    # (gpt3-13b: no published recipe in catalog.recipes, so each plan's default batch applies)
    line = _bad("train", "gpt3-13b", "--gpus", "9999991", *batch, names=names)
    assert "add GPUs" not in line


def test_validate_skips_a_row_past_a_cap(tmp_path):
    head = "id,source,metric,value,model,layers,hidden,heads,kv_heads,ffn,vocab,seq_len,system,num_gpus,tp,pp,dp,micro_batch,global_batch"
    row = "big,me,mfu,0.4,x,1000000000,4096,32,32,16384,50257,2048,dgx-h100,8,1,1,8,1,8"
    path = tmp_path / "rows.csv"
    path.write_text(head + "\n" + row + "\n")
    result = _run("validate", str(path), "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert rows[0]["skipped"] and rows[0]["reason"]


# --- division by zero and overflow ---------------------------------------------------------------

@pytest.mark.parametrize("args, field", [
    (["train", "gpt3-125m", "--gpus", "8", "--tp", "0"], "--tp"),
    (["train", "gpt3-125m", "--gpus", "8", "--micro-batch", "0"], "--micro-batch"),
    (["comm", "all_reduce", "--system", "dgx-h100", "--gpus", "8", "--size", "1e400"], "size"),
    (["dc", "fabric", "--scalable-units", "inf"], "--scalable-units"),
])
def test_zero_and_overflow(args, field):
    _bad(*args, names=field)


# --- rich-markup injection -------------------------------------------------------------------------

def test_markup_in_paths_and_names(tmp_path):
    folder = tmp_path / "x[" / "y]"  # the path text holds `x[/y]`
    folder.mkdir(parents=True)
    cfg = _config(folder, name="config.json")
    result = _run("model", "show", str(cfg))
    assert result.exit_code == 0 and "x[/y]" in result.stdout.replace("\n", "")
    cat = folder / "c[x].toml"
    cat.write_text('[[gpu]]\nid = "x1"\nname = "X [/x] [bold] :smile:"\nvendor = "x"\narchitecture = "x"\nmemory_type = "HBM3"\nmemory_gib = 80\n'
                   'memory_bandwidth_gbps = 1000\npeak_tflops = { bf16 = { dense = 100 } }\nsources = { default = "[/x]" }\n')
    result = _run("--catalog", str(cat), "hw", "show", "x1")
    assert result.exit_code == 0 and "X [/x] [bold] :smile:" in result.stdout  # no markup, no emoji codes
    csv_path = folder / "rows[z].csv"
    csv_path.write_text("id,source,metric,value\nr[/x],me,busbw_gbps,1\n")
    assert _run("validate", str(csv_path)).exit_code == 0


# --- output files ------------------------------------------------------------------------------------

def test_html_into_a_folder_or_unwritable_path(tmp_path):
    _bad("plan", "--model", "gpt3-125m", "--html", str(tmp_path), names="is a folder")
    _bad("plan", "--model", "gpt3-125m", "--html", str(tmp_path / "no" / "r.html"), names="does not exist")


def test_plot_is_written_whole(tmp_path):
    path = tmp_path / "occ.png"
    result = _run("kernel", "occupancy", "--cc", "9.0", "--threads", "256", "--regs", "32", "--plot", str(path))
    assert result.exit_code == 0 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["occ.png"]  # no temporary file left


# --- new-user items ---------------------------------------------------------------------------------

def test_h100_short_name_resolves_and_says_so():
    result = _run("hw", "show", "h100", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["id"] == "h100-sxm5-80gb"
