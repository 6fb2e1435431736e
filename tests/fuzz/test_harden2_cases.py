"""Representative cases of the second fuzz run (benchmarks/fuzz_run.py, issue 20's size): each cause
it found, fixed at the boundary, kept here as a regression test (exit 2, one line)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from harness import judge, run_case

GPU_TOML = ('[[gpu]]\nid = "fz"\nname = "Fz[/x]"\nvendor = "x"\narchitecture = "x"\nmemory_type = "HBM3"\n'
            'memory_gib = 80\nmemory_bandwidth_gbps = 3350\npeak_tflops = {{ bf16 = {{ dense = {dense} }} }}\n'
            'sources = {{ default = "fuzz" }}\n{extra}\n')


def _exit_2(*args: str, names: str) -> None:
    result = run_case(list(args))
    assert judge(list(args), result) is None
    assert result.exit_code == 2, result.output
    message = json.loads(result.stdout)["error"]["message"] if "--json" in args else result.stderr.strip()
    assert names in message and "\n" not in message, message


@pytest.mark.parametrize("dense, extra, names", [
    ("100", 'tdp_w = "700"', "field tdp_w: must be a number, got '700'"),  # was read as 700.0
    ("100", "sm_count = true", "field sm_count: must be a number, got True"),  # was read as 1 SM
    ("true", "", "peak_tflops.bf16: field dense: must be a number, got True"),
])
def test_toml_strings_and_booleans_are_not_numbers(tmp_path, dense, extra, names):
    cat = tmp_path / "cat.toml"
    cat.write_text(GPU_TOML.format(dense=dense, extra=extra))
    _exit_2("--catalog", str(cat), "hw", "show", "fz", "--json", names=names)


def _safetensors(path: Path, header: dict, data_bytes: int) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * data_bytes)
    return path


@pytest.mark.parametrize("shape, offsets, names", [
    # U8 [1, 0, 2^63]: zero elements, so the int64 product check passed; a dimension past int64 is refused
    ([1, 0, 2**63], [0, 20], "dimension past int64"),
    # F32 [4] is 16 bytes; a 20-byte range is not a valid tensor (safetensors TensorInvalidInfo)
    ([4], [0, 20], "is 16 bytes but data_offsets [0, 20] span 20"),
])
def test_safetensors_shape_must_match_its_bytes(tmp_path, shape, offsets, names):
    dtype = "U8" if 0 in shape else "F32"
    p = _safetensors(tmp_path / "m.safetensors", {"t.weight": {"dtype": dtype, "shape": shape, "data_offsets": offsets}}, 20)
    _exit_2("model", "params", str(p), "--json", names=names)
    _exit_2("formats", "compare", str(p), "--json", names=names)


def test_a_consistent_safetensors_file_still_reads(tmp_path):
    # F32 [2, 3] = 24 bytes at [0, 24): 6 parameters
    p = _safetensors(tmp_path / "ok.safetensors", {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}, 24)
    result = run_case(["model", "params", str(p), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["total_params"] == 6


@pytest.mark.parametrize("args, names", [
    (["hw", "list", "--format", "xml"], "--format: must be one of table, md, csv, json"),
    (["hw", "list", "--format", ""], "--format: must be one of"),
    (["formats", "encode", "1.5", "--output-format", "[/x]"], "--format: must be one of"),
    (["fit", "max-batch", "gpt3-125m", "--gpu", "h100-sxm5-80gb", "--memory-headroom", "nan"], "--memory-headroom"),
    (["fit", "max-batch", "gpt3-125m", "--gpu", "h100-sxm5-80gb", "--memory-headroom", "1"], "--memory-headroom"),
    (["train", "gpt3-125m", "--gpus", "8", "--set", "usable_memory_fraction=0"], "usable_memory_fraction"),
])
def test_new_options_refuse_bad_values(args, names):
    _exit_2(*args, names=names)


def test_empty_random_spec_is_a_bad_kind_count():
    # `--random ""` used to fall through to reading FILE=None (internal error: TypeError)
    _exit_2("formats", "compare", "--random", "", "--json", names="--random must be KIND:COUNT")


def test_toml_integer_past_int64_is_refused(tmp_path):
    # TOML integers are 64-bit signed (TOML spec 1.0, "Integer"); tomllib reads 2^70 as a Python int
    cat = tmp_path / "cat.toml"
    cat.write_text(GPU_TOML.format(dense=str(2**70), extra=""))
    _exit_2("--catalog", str(cat), "hw", "list", "--json", names="past the 64-bit range TOML allows")
