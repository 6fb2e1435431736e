"""Matmul rows (interfaces/validation_matmul.py): one GEMM through primitives.op_cost."""

from __future__ import annotations

import pytest

from gpuplan.interfaces.validation.validate import row_kind
from gpuplan.interfaces.validation.matmul import predict_row


def row(**kw):
    base = {"id": "g-1", "system": "h100-sxm5-80gb", "m": "8192", "n": "4096", "k": "4096", "dtype": "bf16",
            "metric": "matmul_tflops", "value": "700"}
    return {**base, **kw}


def test_h100_bf16_large_gemm():
    # catalog dense bf16 peak 989.4 TFLOP/s x bf16 ceiling 0.8033 (efficiency.matmul_ceiling.h100-sxm5-80gb.bf16,
    # the registry default) x k-pipeline k / (k + 64) = 4096 / 4160 (efficiency.gemm_k_overhead; the
    # 8192x4096 tile grid fills whole waves): 989.4 x 0.80334 x 0.98462 = 782.6 TFLOP/s
    assert predict_row(row()).value == pytest.approx(782.6, rel=2e-3)


def test_time_metric_and_system_ids():
    tflops = predict_row(row()).value
    t_us = predict_row(row(metric="time_us")).value
    assert t_us == pytest.approx(2 * 8192 * 4096 * 4096 / (tflops * 1e12) * 1e6)
    assert predict_row(row(system="dgx-h100")).value == pytest.approx(tflops)  # a system id names its GPU


def test_kind_routing():
    assert row_kind(row()) == "matmul"
    assert row_kind({**row(), "layers": "2", "hidden": "64"}) == "training"
