"""`gpuplan bench --device cpu --quick --json` on this machine (numpy, or torch when installed)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from gpuplan.cli.main import app
from gpuplan.interfaces.bench import match_catalog_gpu


def numpy_best_gflops(n: int, repeats: int = 7) -> float:
    """A plain numpy fp32 matmul of n x n x n: the best of `repeats` (2 n^3 FLOPs each)."""
    a = np.ones((n, n), dtype=np.float32)
    b = np.ones((n, n), dtype=np.float32)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best / 1e9


def test_bench_quick_json_gemm_matches_plain_numpy(runner, tmp_path):
    out = tmp_path / "rows.csv"
    res = runner.invoke(app, ["bench", "--device", "cpu", "--quick", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["device"] == "cpu" and d["run_time_s"] < 60
    assert d["catalog_gpu"] is None and "no peak to compare" in d["peak_comparison"]
    assert d["memory"]["copy_gbps"] > 0 and d["memory"]["triad_gbps"] > 0
    assert {r["metric"] for r in d["rows"]} == {"matmul_tflops"} and out.read_text().startswith("id,")
    if d["backend"] != "numpy" or d["gemm_best_dtype"] != "fp32":
        pytest.skip("torch is installed: the bench's fp32 GEMM is torch's, not numpy's")
    n = int(d["gemm_best_shape"].split("x")[0])
    # best of five rounds spread over time: a neighbouring test process (pytest -n 2) can hold the
    # cores for a while, and a BLAS call that waits for its threads is then many times slower
    reference = 0.0
    for _ in range(5):
        reference = max(reference, numpy_best_gflops(n))
        time.sleep(0.05)
    assert d["gemm_best_gflops"] == pytest.approx(reference, rel=0.30)


def test_unavailable_device_and_profile_on_cpu_exit_2(runner, tmp_path):
    res = runner.invoke(app, ["bench", "--device", "tpu"])
    assert res.exit_code == 2 and "--device" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    prof = tmp_path / "p.toml"
    res = runner.invoke(app, ["bench", "--device", "cpu", "--quick", "--profile", str(prof)])
    assert res.exit_code == 2 and "not a catalog GPU" in res.stderr and not prof.exists()


@pytest.mark.parametrize("name, gpu", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm5-80gb"), ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
    ("NVIDIA H200", "h200-sxm-141gb"), ("AMD Instinct MI300X", "mi300x"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("Intel(R) Xeon(R) Platinum 8480+", None),
])
def test_device_names_map_to_catalog_gpus(name, gpu):
    # names as torch.cuda.get_device_name reports them
    assert match_catalog_gpu(name) == gpu
