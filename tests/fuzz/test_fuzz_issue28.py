"""The fuzz suite's cases for the causes issue 28 fixed, as a small fixed sample (the oracle of
harness.judge, plus: a `--set` value outside its documented range is never an exit 0, and no input
path of any kind is ever an internal error or a hang).

- every `--set KEY` of the facilities assumptions with edge values (0, 1e-300, 1e308, a Unicode
  digit, full-width digits, 1e400, 0x10, an underscore);
- every input option that takes a path with each kind of path (missing, folder, device, FIFO with
  no writer, dangling link, loop of links, a name too long);
- numbers from text in structured options (`--gemm`, `--pd-ratio`, `calibrate import --set`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from harness import judge, run_case

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "tests" / "calibration" / "samples"


def _judged(args: list[str]):
    result = run_case(args)
    why = judge(args, result)
    assert why is None, f"gpuplan {' '.join(args)[:300]}: {why}"
    return result


def _assumptions():
    from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS

    return list(DEFAULT_ASSUMPTIONS.items.values())


EDGE_VALUES = ["0", "1e-300", "1e308", "\u00b2", "\uff11", "1e400", "0x10", "1_0", "-0", "42.5"]


def _set_cases():
    keys = _assumptions()
    return [(a.key, v) for i, a in enumerate(keys) for j, v in enumerate(EDGE_VALUES) if (i + j) % 3 == 0]


@pytest.mark.parametrize("key,value", _set_cases())
def test_set_values_outside_the_range_are_never_accepted(key, value):
    a = next(x for x in _assumptions() if x.key == key)
    result = _judged(["dc", "power", "--system", "dgx-h100", "--nodes", "4", "--set", f"{key}={value}", "--json"])
    try:
        number = float(value) if value.isascii() and "_" not in value and not value.startswith("0x") else None
    except ValueError:
        number = None
    inside = number is not None and math.isfinite(number) and a.min_value <= number <= a.max_value and \
        (not a.integer or number.is_integer())
    if not inside:  # a silent acceptance is an exit 0 on a value outside the documented range
        assert result.exit_code == 2, f"{key}={value} accepted: {result.stdout[:200]}"


@pytest.fixture
def paths(tmp_path, monkeypatch):
    import gpuplan.input_files as input_files

    monkeypatch.setattr(input_files, "FIFO_WRITER_WAIT_S", 0.2)  # a FIFO with no writer: refused quickly
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    return {"missing": str(tmp_path / "absent.toml"), "folder": str(tmp_path / "folder"), "device": "/dev/zero",
            "fifo": str(tmp_path / "fifo"), "dangling": str(tmp_path / "dangling"), "loop": str(tmp_path / "loop1"),
            "long": str(tmp_path / ("x" * 300)), "deep": str(tmp_path / "/".join(["d"] * 2100))}


INPUT_OPTIONS = [
    (["--catalog", "{}", "hw", "list"], "catalog"),
    (["--calibration", "{}", "hw", "list"], "calibration"),
    (["validate", "{}"], "file"),
    (["calibrate", "fit", "{}"], "file"),
    (["calibrate", "import", "vllm", "{}"], "file"),
    (["calibrate", "import", "vllm", str(SAMPLES / "vllm_bench_serve_llama8b.json"), "--config", "{}"], "config"),
    (["model", "show", "{}"], "model"),
    (["model", "params", "{}"], "path"),
    (["sweep", "run", "{}"], "spec"),
    (["sweep", "report", "{}.csv"], "results"),
    (["formats", "compare", "{}"], "file"),
    (["serve", "run", "gpt3-125m", "--concurrency", "2", "--input-len", "64", "--output-len", "8", "--lengths", "{}"],
     "lengths"),
]


@pytest.mark.parametrize("index", range(len(INPUT_OPTIONS)))
@pytest.mark.parametrize("kind", ["missing", "folder", "device", "fifo", "dangling", "loop", "long", "deep"])
def test_every_input_path_kind_is_one_line(paths, index, kind):
    template, field = INPUT_OPTIONS[index]
    args = [a.replace("{}", paths[kind]) for a in template] + ["--json"]
    result = _judged(args)
    assert result.exit_code == 2, result.stdout[:300]
    err = json.loads(result.stdout)["error"]
    assert field in (err["field"] or "") or err["message"].startswith(f"{field}"), err


@pytest.mark.parametrize("args", [
    ["kernel", "roofline", "--gpu", "h100-sxm5-80gb", "--gemm", "\uff18x8x8"],
    ["kernel", "roofline", "--gpu", "h100-sxm5-80gb", "--gemm", "8x8x8@\u00b2"],
    ["kernel", "roofline", "--gpu", "h100-sxm5-80gb", "--attention", "1x1x1x1x99999999999999"],
    ["serve", "plan", "gpt3-125m", "--disaggregated", "--pd-ratio", "\u0661:1"],
    ["calibrate", "import", "vllm", str(SAMPLES / "vllm_bench_serve_llama8b.json"), "--config",
     str(SAMPLES / "serving_llama8b_h100.toml"), "--set", "tp=\uff12"],
    ["formats", "encode", "\uff11.5", "--format", "e4m3"],
    ["formats", "decode", "0x3_c", "--format", "e4m3"],
    ["kernel", "divergence", "--predicate", "lane < \u0663"],
    ["dc", "fabric", "--nodes", "64", "--oversubscription", "64"],
    ["mig", "plan", *["1g.10gb"] * 70_001],
])
def test_structured_numbers_take_ascii_digits_in_range(args):
    assert _judged([*args, "--json"]).exit_code == 2
