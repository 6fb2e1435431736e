"""Each cause the full fuzz run (benchmarks/fuzz_run.py) found, as its own case, with the fix's rule.

- validate rows bypassed the CLI's caps: a `concurrency=1e7` row simulated ten million requests
  (78 s, 8.3 GB peak) and a `num_gpus=0` row was predicted; rows now pass the rules of the CLI
  option holding the same quantity (validation_rules.ROW_COLUMN_OPTIONS) and are skipped with a
  one-line reason;
- `train` and `plan` name the price option the user typed, and refuse 0 alike (POSITIVE);
- caps that did not bound work: MAX_LAYERS (a Gemma-2 config at the old cap of 100,000 layers took
  479 s in `model show`) and `formats compare --random` / tensors (2^28 elements exhausted 3 GiB).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness import judge, run_case

REPO = Path(__file__).resolve().parents[2]
VALIDATION = REPO / "src" / "gpuplan" / "catalog" / "data" / "validation"


def _judged(args):
    result = run_case(args)
    why = judge(args, result)
    assert why is None, why
    return result


def _rows(tmp_path, which: str, changes: list[dict]) -> Path:
    rows = list(csv.DictReader((VALIDATION / which).open(encoding="utf-8")))
    out = tmp_path / which
    with out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for change in changes:
            w.writerow({**rows[0], **change})
    return out


@pytest.mark.parametrize("change,reason", [
    # the CLI's caps (validation_rules.CAPS): --concurrency and --batch <= 100,000, --output-len <= 32,768,
    # --input-len <= 2^20; --gpus > 0 (POSITIVE)
    ({"concurrency": "1e7", "max_load": ""}, "concurrency: must be an integer > 0 and <= 100000"),
    ({"batch": "10000000", "max_load": ""}, "batch: must be an integer > 0 and <= 100000"),
    ({"output_len": "1e7"}, "output_len: must be an integer > 0 and <= 32768"),
    ({"num_gpus": "0"}, "num_gpus: must be an integer > 0"),
    ({"tp": "2.5"}, "tp: must be an integer"),
    ({"request_rate": "nan", "max_load": ""}, "request_rate: must be a finite number"),
    ({"attention_dp": "0"}, "attention_dp: must be an integer > 0"),
])
def test_inference_rows_follow_the_cli_rules(tmp_path, change, reason):
    path = _rows(tmp_path, "inference.csv", [change])
    row = json.loads(_judged(["validate", str(path), "--json"]).stdout)["rows"][0]
    assert row["skipped"] and row["reason"].startswith(reason) and "\n" not in row["reason"], row


@pytest.mark.parametrize("change,reason", [
    ({"num_gpus": "0"}, "num_gpus: must be an integer > 0"),
    ({"seq_len": "-4096"}, "architecture column `seq_len` must be a non-negative integer"),  # read with the model
    ({"micro_batch": "0"}, "micro_batch: must be an integer > 0"),
    ({"tp": "\u00b2"}, "tp: must be a finite number"),
])
def test_training_rows_follow_the_cli_rules(tmp_path, change, reason):
    path = _rows(tmp_path, "training.csv", [change])
    row = json.loads(_judged(["validate", str(path), "--json"]).stdout)["rows"][0]
    assert row["skipped"] and row["reason"].startswith(reason), row


def test_collectives_rows_follow_the_cli_rules(tmp_path):
    path = _rows(tmp_path, "collectives.csv", [{"num_gpus": "0"}, {"num_gpus": "1e8"}])
    rows = json.loads(_judged(["validate", str(path), "--json"]).stdout)["rows"]
    assert rows[0]["reason"].startswith("num_gpus: must be an integer > 0")
    assert rows[1]["reason"].startswith("num_gpus: must be an integer > 0 and <= 10000000")  # MAX_GPUS = 1e7


@pytest.mark.parametrize("args,option", [
    (["train", "gpt3-125m", "--gpus", "8", "--usd-per-gpu-hour", "0"], "--usd-per-gpu-hour"),
    (["plan", "--model", "gpt3-125m", "--tokens", "1B", "--gpus", "8", "--cloud-usd-per-gpu-hour", "0"],
     "--cloud-usd-per-gpu-hour"),
    (["serve", "plan", "gpt3-125m", "--rate", "1", "--usd-per-gpu-hour", "0"], "--usd-per-gpu-hour"),
    (["dc", "tco", "--nodes", "4", "--system-price-usd", "0"], "--system-price-usd"),
])
def test_a_price_of_zero_is_refused_alike(args, option):
    result = _judged(args)
    assert result.exit_code == 2 and result.stderr.strip() == f"error: {option}: must be a finite number > 0, got 0.0"


def test_the_api_refuses_a_price_of_zero_as_well():
    from gpuplan import api
    from gpuplan.errors import InputError

    with pytest.raises(InputError, match="must be a finite number > 0"):
        api.train("gpt3-125m", gpus=8, usd_per_gpu_hour=0)


def test_layers_past_the_cap_are_one_line(tmp_path):
    from gpuplan.validation_rules import MAX_LAYERS

    cfg = json.loads((REPO / "src" / "gpuplan" / "catalog" / "data" / "models" / "google--gemma-2-9b.json").read_text())
    cfg["num_hidden_layers"] = MAX_LAYERS + 1
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    result = _judged(["model", "show", str(tmp_path / "config.json")])
    assert result.exit_code == 2 and "<= 2,048" in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_random_arrays_are_capped_where_memory_stays_bounded():
    from gpuplan.validation_rules import MAX_ARRAY_ELEMENTS

    assert MAX_ARRAY_ELEMENTS == 2**22  # ~150 bytes of working arrays per element: ~0.6 GiB at the cap
    result = _judged(["formats", "compare", "--random", f"normal:{MAX_ARRAY_ELEMENTS + 1}"])
    assert result.exit_code == 2 and "4194304" in result.stderr


def test_a_safetensors_tensor_past_the_cap_is_refused_before_it_is_read(tmp_path):
    import struct

    n = 2**22 + 1
    header = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
    path = tmp_path / "big.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * n)
    result = _judged(["formats", "compare", str(path)])
    assert result.exit_code == 2 and "limit is 4,194,304" in result.stderr, result.stderr


# ---- causes of the full run of 2026-11-28 (5,595 invocations; counts in docs/cli-errors.md) ----------------

@pytest.mark.parametrize("option,value,cap", [
    ("--pp", "2147483648", "<= 2048"),  # asked numpy for a 16 GiB array of 2^31 + 1 stages
    ("--vpp", "2147483648", "<= 2048"),
    ("--tp", "9223372036854775807", "<= 10000000"),  # a RuntimeWarning (int64 cast) printed a second line
])
def test_parallel_degrees_are_capped(option, value, cap):
    result = _judged(["train", "gpt3-125m", "--gpus", "8", option, value])
    assert result.exit_code == 2 and cap in result.stderr and result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("pair", ["num_gpus=0", "num_gpus=-0", "nodes=0"])
def test_calibrate_import_set_applies_the_row_rules(pair):
    sample = REPO / "tests" / "calibration" / "samples" / "nccl_all_reduce_dgx_h100.txt"
    result = _judged(["calibrate", "import", "nccl-tests", str(sample), "--set", "system=dgx-h100", "--set", pair])
    assert result.exit_code == 2 and "must be an integer > 0" in result.stderr, result.stdout[:300]


@pytest.mark.parametrize("line,message", [
    ("max_days = 1e400", "constraints.max_days = inf: numbers must be finite"),
    ("max_days = 9223372036854775808", "past the 64-bit range TOML allows"),
])
def test_sweep_spec_numbers_are_finite_and_within_int64(tmp_path, line, message):
    spec = tmp_path / "spec.toml"
    spec.write_text(f'goal = "train"\n[axes]\nmodels = ["gpt3-125m"]\nhardware = ["dgx-h100"]\ngpus = [8]\n'
                    f"[constraints]\n{line}\n")
    result = _judged(["sweep", "run", str(spec), "--dry-run"])
    assert result.exit_code == 2 and message in result.stderr, result.stderr


def test_sweep_report_of_a_csv_that_is_no_results_file(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")  # was a report with an empty front, exit 0
    result = _judged(["sweep", "report", str(path)])
    assert result.exit_code == 2 and "no point or status column" in result.stderr, result.stderr


def test_number_text_past_100_characters_is_refused():
    result = _judged(["dc", "tco", "--nodes", "4", "--cloud-usd-per-gpu-hour", "9" * 200])
    assert result.exit_code == 2 and "at most 100 characters" in result.stderr


def test_formats_compare_tensor_with_random_is_refused():
    result = _judged(["formats", "compare", "--random", "normal:256", "--tensor", "w"])
    assert result.exit_code == 2 and result.stderr.startswith("error: tensor:")


@pytest.mark.parametrize("path,body,field", [
    # the web part of the run: the error named `model` (the target) for a bad draft model
    ("/api/v1/serve/run", {"model": "gpt3-125m", "concurrency": 2, "input_len": 64, "output_len": 8, "spec_tokens": 2,
                           "spec_acceptance": 0.7, "draft_model": "a\nb"}, "draft_model"),
    ("/api/v1/formats/encode", {"values": ["1.5"], "format_name": "nope"}, "format"),  # was 'fmt'
    ("/api/v1/formats/matmul", {"m": 8, "k": 64, "n": 8, "formats": "nope"}, "formats"),  # was 'fmt'
    ("/api/v1/hw/compare", {"gpus": ["h100-sxm5-80gb"]}, "gpus"),  # was 'ID'
    ("/api/v1/mig/plan", {"profiles": [" "]}, "profiles"),  # was 'profile'
])
def test_web_errors_name_the_request_field(path, body, field):
    from fastapi.testclient import TestClient

    from gpuplan.web.app import create_app

    client = TestClient(create_app("127.0.0.1", 8000), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
    r = client.post(path, json=body)
    assert r.status_code == 400 and r.json()["error"]["field"] == field, r.text


@pytest.mark.parametrize("name", ["", "\n", "x" * 5000, "bad host"])
def test_web_allow_host_must_be_a_host_name(name):
    # these served (the run's oracle counted a served web run as done, not as accepted; fixed with it)
    result = _judged(["web", "--host", "127.0.0.1", "--port", "0", "--allow-host", name])
    assert result.exit_code == 2 and result.stderr.startswith("error: --allow-host:"), result.stderr


def test_roofline_elementwise_count_is_bounded():
    # found by the hypothesis fuzz test in the final suite run: 3e307 elements -> inf bytes -> ZeroDivisionError
    result = _judged(["kernel", "roofline", "--gpu", "h100-sxm5-80gb", "--elementwise", "2.9961552247705263e+307"])
    assert result.exit_code == 2 and result.stderr.startswith("error: elementwise:"), result.stderr
    assert _judged(["kernel", "roofline", "--gpu", "h100-sxm5-80gb", "--elementwise", "1e9", "--json"]).exit_code == 0
