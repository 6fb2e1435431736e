"""Serving GEMM time from its math and memory times (operators.gemm_roofline_seconds):
max(math, memory) + (1 - o) x min(math, memory), o = knob `serving.gemm_overlap`."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.operators import gemm_roofline_seconds, step_time_model


def test_limits_are_the_roofline_and_the_sum():
    # Llama-2-7B's 128-token prefill on an A100 (fp16), whole-model GEMMs: 2 x 6.74e9 x 128 = 1.73
    # TFLOP at 312 TFLOP/s = 5.53 ms of math; 13.5 GB of weights at 2.04 TB/s = 6.61 ms of memory
    math_s, memory_s = 1.725e12 / 312e12, 13.48e9 / 2.039e12
    with knobs.overridden({"serving.gemm_overlap": 1.0}):
        assert gemm_roofline_seconds(math_s, memory_s) == pytest.approx(memory_s)          # roofline
    with knobs.overridden({"serving.gemm_overlap": 0.0}):
        assert gemm_roofline_seconds(math_s, memory_s) == pytest.approx(math_s + memory_s)  # no overlap
    with knobs.overridden({"serving.gemm_overlap": 0.6}):
        assert gemm_roofline_seconds(math_s, memory_s) == pytest.approx(memory_s + 0.4 * math_s)


def test_far_from_the_ridge_it_is_the_roofline():
    # batch-1 decode: math 1e-6 of memory, so overlap changes the time by < 1e-6 relative
    assert gemm_roofline_seconds(np.array([1e-9]), np.array([1e-3]))[0] == pytest.approx(1e-3, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(tokens=st.integers(1, 8192), lo=st.floats(0.0, 1.0), hi=st.floats(0.0, 1.0))
def test_step_time_falls_as_overlap_rises(tokens, lo, hi):
    lo, hi = min(lo, hi), max(lo, hi)
    cat = load_catalog()
    gpu = cat.gpu("h100-sxm5-80gb")
    dep = Deployment(load_model("llama-3-8b"), gpu, cat.system(gpu.id))
    with knobs.overridden({"serving.gemm_overlap": lo}):
        t_lo = float(step_time_model(dep, table_tokens=16).linear_time(tokens))
    with knobs.overridden({"serving.gemm_overlap": hi}):
        t_hi = float(step_time_model(dep, table_tokens=16).linear_time(tokens))
    assert t_hi <= t_lo * (1 + 1e-12)
