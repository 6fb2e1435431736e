"""Roofline and speedup-law hand derivations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import InputError
from gpuplan.kernel import (
    Bound, amdahl, attention_work, elementwise_work, gemm_work, gustafson, littles_law, place, roofline, step_work,
)


def test_h100_bf16_ridge(h100):
    r = roofline(h100, "bf16")
    # dense peak (catalog: 1,979 sparse / 2) over HBM: 989.4e12 / 3.35e12 = 295.34 FLOP/B
    assert r.peak_tflops == 989.4
    assert r.hbm.ridge_flop_per_byte == pytest.approx(989.4e12 / 3.35e12)
    assert r.hbm.ridge_flop_per_byte == pytest.approx(295.3, abs=0.05)
    # sparse peak doubles the ridge: 1978.9e12 / 3.35e12 = 590.7
    assert roofline(h100, "bf16", sparse=True).hbm.ridge_flop_per_byte == pytest.approx(590.7, abs=0.05)
    # shared memory: 128 B/clock/SM x 132 SMs x 1.98e9 = 33.454 TB/s; ridge 989.4e12 / 33.454e12 = 29.6
    smem = next(c for c in r.ceilings if c.name == "shared_memory")
    assert smem.bandwidth_gbps == pytest.approx(33454.08)
    assert smem.ridge_flop_per_byte == pytest.approx(29.57, abs=0.01)
    # L2: the sourced 5.5 TB/s measurement -> ridge 989.4 / 5.5 = 179.9
    assert next(c for c in r.ceilings if c.name == "l2").ridge_flop_per_byte == pytest.approx(179.9, abs=0.05)


def test_gemm_4096_cubed_is_compute_bound(h100):
    w = gemm_work(4096, 4096, 4096, "bf16")
    # FLOPs = 2 x 4096^3 = 137,438,953,472; bytes = 3 x 4096^2 x 2 = 100,663,296
    assert w.flops == 137_438_953_472
    assert w.bytes == 100_663_296
    # intensity = 2 x 4096^3 / (6 x 4096^2) = 4096/3 = 1365.33 FLOP/B
    assert w.intensity_flop_per_byte == pytest.approx(4096 / 3)
    p = place(roofline(h100, "bf16"), w)
    assert p.bound is Bound.COMPUTE
    assert p.attainable_tflops == 989.4
    # 1365.33 / 295.34 = 4.62x past the ridge
    assert p.bound_factor == pytest.approx((4096 / 3) / (989.4 / 3.35))
    # min time = 1.374e11 / 989.4e12 = 138.9 us
    assert p.min_time_s == pytest.approx(137_438_953_472 / 989.4e12)


def test_elementwise_is_memory_bound(h100):
    # c = a + b in bf16: 1 FLOP per 3 x 2 bytes -> 1/6 FLOP/B; attainable = 3.35e12 / 6 = 0.558 TFLOP/s
    p = place(roofline(h100, "bf16"), elementwise_work(1e8, "bf16"))
    assert p.intensity_flop_per_byte == pytest.approx(1 / 6)
    assert p.bound is Bound.MEMORY
    assert p.attainable_tflops == pytest.approx(3.35 / 6)
    assert p.bound_factor == pytest.approx((989.4 / 3.35) * 6)  # 1772x below the ridge


def test_attention_and_decode(h100):
    # b1 h32 Lq=Lk=4096 d128: FLOPs = 4 x 32 x 4096^2 x 128 = 2.749e11;
    # bytes = 2 x 128 x (32 x 4096 + 32 x 4096) x 2 = 134,217,728; intensity 2048 -> compute-bound
    w = attention_work(1, 32, 4096, 4096, 128, "bf16")
    assert w.flops == 4 * 32 * 4096**2 * 128
    assert w.bytes == 134_217_728
    assert w.intensity_flop_per_byte == pytest.approx(2048)
    # causal halves the FLOPs; GQA with 8 KV heads shrinks K/V traffic: 2 x 128 x (32+8) x 4096 x 2
    assert attention_work(1, 32, 4096, 4096, 128, causal=True).flops == w.flops / 2
    assert attention_work(1, 32, 4096, 4096, 128, kv_heads=8).bytes == 2 * 128 * 40 * 4096 * 2
    # 7B-parameter bf16 decode at batch 1: 2 x 7e9 FLOPs over 14e9 weight bytes = 1 FLOP/B
    # -> 3.35 TFLOP/s attainable, 295x below the ridge, min time 14e9 / 3.35e12 = 4.18 ms
    p = place(roofline(h100, "bf16"), step_work(14e9, 14e9, "decode"))
    assert p.bound is Bound.MEMORY
    assert p.attainable_tflops == pytest.approx(3.35)
    assert p.min_time_s == pytest.approx(14e9 / 3.35e12)


def test_point_above_roof_is_flagged(h100):
    roof = roofline(h100, "bf16")
    w = gemm_work(4096, 4096, 4096, "bf16")
    ok = place(roof, w, achieved_tflops=750)  # 750 / 989.4 = 75.8% of the roof
    assert not ok.above_roof and not ok.warnings
    assert ok.fraction_of_roof == pytest.approx(750 / 989.4)
    bad = place(roof, w, achieved_tflops=1500)  # a sparse-peak or units mistake
    assert bad.above_roof
    assert "sparse" in bad.warnings[0] and "units" in bad.warnings[0]
    # memory-bound point: 1/6 FLOP/B cannot exceed 0.558 TFLOP/s
    assert place(roof, elementwise_work(1e8), achieved_tflops=1.0).above_roof


@settings(max_examples=100, deadline=None)
@given(st.floats(1e-3, 1e5))
def test_attainable_is_min_of_roofs(intensity):
    from gpuplan.specs import Gpu

    g = Gpu(id="t", name="t", vendor="nvidia", architecture="t", peak_tflops={"bf16": {"dense": 1000}},
            memory_bytes=1, memory_type="x", memory_bandwidth_gbps=2000, tdp_w=1, sources={"default": "test"})
    a = roofline(g, "bf16").attainable_tflops(intensity)
    assert a == pytest.approx(min(1000, intensity * 2))
    assert a <= 1000


def test_speedup_laws():
    # Amdahl p=0.95, n=8: 1 / (0.05 + 0.95/8) = 1 / 0.16875 = 5.926; limit 1/0.05 = 20
    a = amdahl(0.95, 8)
    assert a.speedup == pytest.approx(1 / 0.16875)
    assert a.limit_speedup == pytest.approx(20)
    # Gustafson p=0.95, n=8: 0.05 + 0.95 x 8 = 7.65
    assert gustafson(0.95, 8).speedup == pytest.approx(7.65)
    assert amdahl(0.0, 100).speedup == 1.0
    with pytest.raises(InputError, match="parallel_fraction"):
        amdahl(1.5, 2)
    with pytest.raises(InputError, match="workers"):
        gustafson(0.5, 0)


def test_littles_law_h100():
    # 3350 GB/s x 600 ns = 3350 B/ns x 600 ns = 2,010,000 B in flight; / 132 SMs = 15,227 B per SM;
    # one warp of 4-byte loads has 128 B outstanding -> 118.96 warps per SM, vs 64 resident: 186%
    r = littles_law(3350, 600, sm_count=132, max_warps_per_sm=64)
    assert r.bytes_in_flight == pytest.approx(2_010_000)
    assert r.bytes_in_flight_per_sm == pytest.approx(2_010_000 / 132)
    assert r.warps_needed_per_sm == pytest.approx(2_010_000 / 132 / 128)
    assert r.occupancy_needed == pytest.approx(2_010_000 / 132 / 128 / 64)
    # 16-byte loads with 2 in flight per thread: 1024 B per warp -> 14.87 warps per SM
    r = littles_law(3350, 600, sm_count=132, bytes_per_load=16, loads_in_flight_per_thread=2)
    assert r.warps_needed_per_sm == pytest.approx(2_010_000 / 132 / 1024)


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1), st.floats(1, 1e4))
def test_amdahl_never_beats_gustafson_or_n(p, n):
    a, g = amdahl(p, n), gustafson(p, n)
    assert 1 - 1e-9 <= a.speedup <= n * (1 + 1e-9)
    assert a.speedup <= g.speedup * (1 + 1e-9)
