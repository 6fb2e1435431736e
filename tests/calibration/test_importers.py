"""`gpuplan calibrate import KIND FILE`: each importer on its sample (tests/calibration/samples,
written in the tool's documented output format: see samples/README.md and each importer's
docstring), the rows it makes (figures read off the sample by hand), and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.cli.main import app
from gpuplan.interfaces.calibration.importers import import_file, parse_config
from gpuplan.interfaces.validation.validate import validate_rows

SAMPLES = Path(__file__).parent / "samples"


def rows_of(kind, name, config=None, sets=()):
    cfg = parse_config(SAMPLES / config if config else None, sets)
    return import_file(kind, SAMPLES / name, cfg).rows


def by_metric(rows):
    return {r["metric"]: r for r in rows}


def test_nccl_tests_out_of_place_busbw_per_size():
    rows = rows_of("nccl-tests", "nccl_all_reduce_dgx_h100.txt", sets=["system=dgx-h100"])
    assert len(rows) == 8  # 32 MiB .. 4 GiB, x2 steps
    third = rows[2]
    # '134217728  33554432  float  sum  -1  613.3  218.85  382.99 ...': out-of-place busbw = 382.99
    assert (third["size_bytes"], third["value"], third["metric"]) == ("134217728", "382.99", "busbw_gbps")
    # eight '# Rank' lines on one host; the test is named by 'Collective test concluded: all_reduce_perf'
    assert third["num_gpus"] == "8" and third["nodes"] == "1" and third["collective"] == "all_reduce"
    assert rows[0]["id"] == "nccl_all_reduce_dgx_h100-1"


def test_mamf_per_shape_mean_tflops():
    rows = rows_of("mamf", "mamf_h100_bf16.txt", sets=["system=h100-sxm5-80gb"])
    assert len(rows) == 8
    last = rows[-1]  # '8 |  779.4(mean) ... @ 8192x4096x4096'
    assert (last["m"], last["n"], last["k"], last["value"], last["dtype"]) == ("8192", "4096", "4096", "779.4", "bf16")


def test_vllm_result_json():
    rows = by_metric(rows_of("vllm", "vllm_bench_serve_llama8b.json", "serving_llama8b_h100.toml"))
    assert set(rows) == {"output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "ttft_ms", "tpot_ms",
                         "e2e_latency_ms"}
    r = rows["tpot_ms"]
    assert r["value"] == "19.03" and rows["e2e_latency_ms"]["value"] == "2727"  # mean_tpot_ms, mean_e2el_ms
    # max_concurrency 64 and request_rate "inf": a closed loop of 64; lengths 512000 / 500 and 64000 / 500
    assert r["concurrency"] == "64" and "request_rate" not in r and "max_load" not in r
    assert (r["input_len"], r["output_len"], r["engine"], r["system"]) == ("1024", "128", "vllm", "h100-sxm5-80gb")


def test_sglang_jsonl_one_set_per_line():
    rows = rows_of("sglang", "sglang_bench_serving_llama8b.jsonl", "serving_llama8b_h100.toml")
    assert len(rows) == 12  # two lines x six metrics
    first, second = by_metric(rows[:6]), by_metric(rows[6:])
    assert first["output_tokens_per_s"]["request_rate"] == "4" and "concurrency" not in first["ttft_ms"]
    assert second["ttft_ms"]["concurrency"] == "32" and second["ttft_ms"]["value"] == "121.9"
    # no total_throughput key: input_throughput + output_throughput = 4092.7 + 1023.2
    assert float(first["total_tokens_per_s"]["value"]) == pytest.approx(5115.9)
    assert first["e2e_latency_ms"]["value"] == "3420.5" and first["e2e_latency_ms"]["input_len"] == "1024"


def test_torchtitan_log_median_after_the_first_step():
    rows = by_metric(rows_of("torchtitan", "torchtitan_llama3_8b.log", "torchtitan_llama3_8b.toml"))
    # steps 10..40 (step 1 dropped): tps 5731, 5762, 5770, 5749 -> median (5749 + 5762) / 2 = 5755.5
    assert rows["tokens_per_s_per_gpu"]["value"] == "5755.5"
    assert float(rows["tflops_per_gpu_model"]["value"]) == pytest.approx((332.97 + 333.73) / 2)
    assert float(rows["mfu_pct"]["value"]) == pytest.approx((33.67 + 33.74) / 2)
    assert rows["peak_mem_reserved_gib"]["value"] == "53.3"  # the largest 'memory:' after step 1
    assert rows["mfu_pct"]["framework"] == "torchtitan" and rows["mfu_pct"]["layers"] == "32"


def test_megatron_log():
    rows = by_metric(rows_of("megatron", "megatron_gpt_dgx_h100.log", "megatron_gpt_dgx_h100.toml"))
    # iterations 20, 30, 40 (10 dropped): 4187.9, 4179.6, 4201.1 ms -> median 4187.9 ms
    assert float(rows["iteration_time_s"]["value"]) == pytest.approx(4.1879)
    assert rows["tflops_per_gpu_model"]["value"] == "419"  # median of 419.0, 419.8, 417.7
    # max allocated 48211.8 MB (rank 0, the larger of two ranks) / 1024 MB per GiB
    assert float(rows["peak_mem_gib"]["value"]) == pytest.approx(48211.8 / 1024)
    assert float(rows["peak_mem_reserved_gib"]["value"]) == pytest.approx(52224.0 / 1024)
    assert rows["peak_mem_gib"]["tp"] == "4" and rows["peak_mem_gib"]["framework"] == "megatron"


@pytest.mark.parametrize("kind, name, config, sets", [
    ("nccl-tests", "nccl_all_reduce_dgx_h100.txt", None, ["system=dgx-h100"]),
    ("mamf", "mamf_h100_bf16.txt", None, ["system=h100-sxm5-80gb"]),
    ("vllm", "vllm_bench_serve_llama8b.json", "serving_llama8b_h100.toml", []),
    ("sglang", "sglang_bench_serving_llama8b.jsonl", "serving_llama8b_h100.toml", []),
    ("torchtitan", "torchtitan_llama3_8b.log", "torchtitan_llama3_8b.toml", []),
    ("megatron", "megatron_gpt_dgx_h100.log", "megatron_gpt_dgx_h100.toml", []),
])
def test_every_imported_row_is_predicted(kind, name, config, sets):
    report = validate_rows(rows_of(kind, name, config, sets))
    assert report.rows and not [r.reason for r in report.rows if r.skipped]


def test_cli_import_then_fit(tmp_path, runner):
    rows_csv = tmp_path / "mamf.csv"
    res = runner.invoke(app, ["calibrate", "import", "mamf", str(SAMPLES / "mamf_h100_bf16.txt"), "--set",
                              "system=h100-sxm5-80gb", "--out", str(rows_csv), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["count"] == 8 and rows_csv.read_text().startswith("id,source,")
    res = runner.invoke(app, ["calibrate", "fit", str(rows_csv), "--out", str(tmp_path / "p.toml"), "--json"])
    assert res.exit_code == 0, res.output
    # GEMM rows of an H100 in bf16 read its bf16 matmul ceiling (op_cost: the GPU-specific knob)
    assert "efficiency.matmul_ceiling.h100-sxm5-80gb.bf16" in json.loads(res.stdout)["values"]


@pytest.mark.parametrize("kind, text, sets, expected", [
    ("nccl-tests", "hello world\n", ["system=dgx-h100"], "no nccl-tests results"),
    ("mamf", "** Dtype: torch.bfloat16\nnothing else\n", ["system=h100-sxm5-80gb"], "no mamf results"),
    ("vllm", "{not json", ["system=h100-sxm5-80gb", "hf_config=x"], "not JSON"),
    ("sglang", '{"backend": "sglang"}\n', ["system=h100-sxm5-80gb", "layers=2", "hidden=64"], "no sglang results"),
    ("torchtitan", "step: ten\n", ["system=dgx-h100", "num_gpus=8", "layers=2", "hidden=64"], "no torchtitan results"),
    ("megatron", "iteration 10\n", ["system=dgx-h100", "num_gpus=8", "layers=2", "hidden=64"], "no megatron results"),
    ("torchtitan", "x\n", ["system=dgx-h100"], "needs num_gpus"),
    ("megatron", "x\n", ["system=dgx-h100", "num_gpus=8", "layers=2", "hidden=64", "colour=red"], "unknown key(s) colour"),
    ("nvprof", "x\n", [], "unknown 'nvprof'"),
])
def test_unparseable_input_exits_2_with_one_line(tmp_path, runner, kind, text, sets, expected):
    f = tmp_path / "log.txt"
    f.write_text(text)
    out = tmp_path / "rows.csv"
    args = ["calibrate", "import", kind, str(f), "--out", str(out)]
    for s in sets:
        args += ["--set", s]
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and not out.exists()


def test_nemo_progress_lines():
    rows = by_metric(rows_of("nemo", "nemo_llama3_70b.log", "training_llama3_70b_1024.toml"))
    # train_step_timing in s of iterations 19, 29, 39 (the first logged, 4.873, is warm-up): median 3.803
    assert set(rows) == {"iteration_time_s"} and rows["iteration_time_s"]["value"] == "3.803"
    assert (rows["iteration_time_s"]["framework"], rows["iteration_time_s"]["tp"]) == ("megatron", "2")


def test_maxtext_completed_step_lines():
    rows = by_metric(rows_of("maxtext", "maxtext_llama3_70b.log", "training_llama3_70b_1024.toml"))
    # steps 1-3 after the warm-up step 0: medians of (3.752, 3.741, 3.748), (510.6, 512.1, 511.2), (2183.3, 2189.7, 2185.8)
    assert (rows["iteration_time_s"]["value"], rows["tflops_per_gpu_model"]["value"],
            rows["tokens_per_s_per_gpu"]["value"]) == ("3.748", "511.2", "2185.8")
    assert rows["iteration_time_s"]["framework"] == "maxtext"  # SCHEMA.md framework value
