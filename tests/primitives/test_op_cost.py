"""op_cost: roofline with achievable efficiency. Expected numbers are hand derivations from the
catalog figures (H100 SXM: 989.4 TFLOP/s dense BF16, 3,350 GB/s, 132 SMs; A100 SXM4 80GB: 312, 2,039)
and the MAMF ceilings of ecosystem.md section 1.6."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import get_gpu
from gpuplan.errors import InputError
from gpuplan.primitives.efficiency import matmul_ceiling, shape_factor
from gpuplan.primitives.op_cost import (
    Bound, attention_time, gemm_time, gemm_time_array, memory_bound_time,
)

H100 = get_gpu("h100-sxm5-80gb")
A100 = get_gpu("a100-sxm4-80gb")


def test_catalog_figures_used_here():
    assert H100.peak("bf16") == 989.4 and H100.memory_bandwidth_gbps == 3350 and H100.sm_count == 132
    assert A100.peak("bf16") == 312


def test_mamf_ceilings():
    # ecosystem.md 1.6: H100 SXM 794.5/989, FP8 1402.6/1979, A100 271.2/312
    assert matmul_ceiling(H100, "bf16") == pytest.approx(0.80334, abs=1e-5)
    assert matmul_ceiling(H100, "fp8") == pytest.approx(0.70874, abs=1e-5)
    assert matmul_ceiling(A100, "fp16") == pytest.approx(0.86923, abs=1e-5)


def test_large_square_gemm_h100():
    # 8192^3: tiles 64x64 = 4096 >= 132 SMs (fill 1), multiples of 64 (padding 1),
    # k factor 8192/(8192+64) = 0.992248; eff = 0.803337 x 0.992248 = 0.797109;
    # flops = 2 x 8192^3 = 1.0995116e12; time = 1.0995116e12 / (989.4e12 x 0.797109) = 1.394152 ms
    c = gemm_time(H100, 8192, 8192, 8192, "bf16")
    assert c.flops == 2 * 8192**3
    assert c.efficiency == pytest.approx(0.797109, rel=1e-5)
    assert c.time_s == pytest.approx(1.394152e-3, rel=1e-5)
    assert c.bound is Bound.COMPUTE


def test_gemv_is_memory_bound():
    # m=1, n=k=8192 bf16: bytes = (1x8192 + 8192x8192) x 2 + 1x8192 x 2 = 134,250,496;
    # time = bytes / (3350e9 x 0.80) = 50.0935 us
    c = gemm_time(H100, 1, 8192, 8192, "bf16")
    assert c.bytes == 134_250_496
    assert c.bound is Bound.MEMORY
    assert c.time_s == pytest.approx(134_250_496 / 2.68e12, rel=1e-9)


def test_fp8_on_a100_falls_back_to_bf16_peak():
    # A100 has no FP8: 4096^3 at fp8 runs at the bf16 peak (312) with the A100 ceiling 0.869231;
    # shape: tiles 32x32=1024 >= 108 SMs, k 4096/4160 = 0.984615 -> eff 0.855858;
    # time = 2 x 4096^3 / (312e12 x 0.855858) = 0.51471 ms
    c = gemm_time(A100, 4096, 4096, 4096, "fp8")
    assert c.time_s == pytest.approx(2 * 4096**3 / (312e12 * 0.869231 * 4096 / 4160), rel=1e-5)


def test_small_gemm_underfills_sms():
    # 256 x 256 x 4096: 2 x 2 = 4 tiles on 132 SMs -> fill 4/132, padding 1
    assert float(shape_factor(H100, 256, 256, 4096)) == pytest.approx(4 / 132 * 4096 / 4160, rel=1e-9)


def test_memory_bound_time():
    # 1 GB over 3350 GB/s x 0.8 = 373.13 us
    assert memory_bound_time(H100, 1e9).time_s == pytest.approx(1e9 / 2.68e12)


def test_attention_flops_and_bytes():
    # causal prefill b=1, h=32, kv_h=8, d=128, q=kv=4096: pairs = 4096 x (4096 - 4095/2) = 8,390,656
    # flops = 4 x 32 x 128 x pairs = 137,472,507,904 ; bytes = 128 x 2 x (2x4096x32 + 2x4096x8) = 83,886,080
    c = attention_time(H100, 1, 4096, 4096, 32, 8, 128, "bf16")
    assert c.flops == 137_472_507_904
    assert c.bytes == 83_886_080
    # compute: fill = min(1, 32 x 32 tiles / 132) = 1, eff = FA3 0.66 -> 137.47e9 / (989.4e12 x 0.66) = 210.5 us
    assert c.time_s == pytest.approx(137_472_507_904 / (989.4e12 * 0.66), rel=1e-9)


def test_attention_decode_is_memory_bound():
    # decode q=1 over 8192 cached tokens, batch 8: bytes = 8 x 128 x 2 x (2x1x32 + 2x8192x8) = 268,566,528
    c = attention_time(H100, 8, 1, 8192, 32, 8, 128, "bf16", phase="decode")
    assert c.bound is Bound.MEMORY
    assert c.bytes == 268_566_528


def test_bad_inputs():
    with pytest.raises(InputError, match="m"):
        gemm_time(H100, 0, 1, 1, "bf16")
    with pytest.raises(InputError, match="dtype"):
        gemm_time(H100, 1, 1, 1, "fp3")
    with pytest.raises(InputError, match="kv_heads"):
        attention_time(H100, 1, 16, 16, 32, 5, 128, "bf16")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20000), st.integers(1, 20000), st.integers(1, 20000))
def test_array_matches_scalar_and_efficiency_bounded(m, n, k):
    c = gemm_time(H100, m, n, k, "bf16")
    arr = gemm_time_array(H100, np.array([m]), np.array([n]), np.array([k]), "bf16")
    assert arr[0] == pytest.approx(c.time_s, rel=1e-12)
    assert 0 < c.efficiency <= matmul_ceiling(H100, "bf16")
    # never faster than the dense peak or the datasheet bandwidth
    assert c.time_s >= c.flops / 989.4e12 and c.time_s >= c.bytes / 3350e9


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8192), st.integers(1, 8192), st.integers(1, 8192))
def test_more_work_never_takes_less_time(m, n, k):
    # time never drops when a dimension doubles
    t = gemm_time(H100, m, n, k, "bf16").time_s
    assert gemm_time(H100, 2 * m, n, k, "bf16").time_s >= t * (1 - 1e-12)
    assert gemm_time(H100, m, n, 2 * k, "bf16").time_s >= t * (1 - 1e-12)
