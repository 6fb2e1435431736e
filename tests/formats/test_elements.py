"""Exhaustive decode of every code of every 4/6/8-bit element type, and encode sweeps over every
representable value, midpoint and midpoint +- 1 float32 ulp, against ml_dtypes 0.6 (the oracle
formats.md section 7.6 recommends) and against hand-derived tables.

Where ml_dtypes differs from gpuplan, by design:
- ml_dtypes casts to FP8 are non-saturating only (E4M3 overflow -> NaN, E5M2 -> Inf,
  jax-ml/ml_dtypes #260/#400). gpuplan's saturate=False equals it; saturate=True equals
  ml_dtypes after clamping to +-max (the SAT oracle of formats.md 7.6 step 2).
- E8M0: ml_dtypes sends a finite overflow (>= 1.5 * 2^127) to NaN; gpuplan's saturate=True
  sends it to 0xFE (2^127); saturate=False matches ml_dtypes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from gpuplan import formats as F
from gpuplan.formats.element import ELEMENTS

ML = {name: getattr(ml_dtypes, f.ml_dtypes_name) for name, f in ELEMENTS.items()}


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: equal values with equal sign (so -0 != +0), or both NaN."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return (np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))


@pytest.mark.parametrize("name", list(ELEMENTS))
def test_decode_every_code_matches_ml_dtypes(name):
    f = ELEMENTS[name]
    codes = np.arange(1 << f.bits, dtype=np.uint8)
    ref = codes.view(ML[name]).astype(np.float32)
    ours = F.decode(codes, name)
    ok = same_values(ours, ref)
    # NaN sign is irrelevant: compare NaN-ness only (same_values already does)
    assert ok.all(), codes[~ok]


def test_decode_hand_tables():
    # formats.md 2.2: all 16 E2M1 values (0bSEEM)
    assert F.decode(np.arange(8), "e2m1").tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert F.decode(np.arange(8, 16), "e2m1").tolist() == [-0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    # E2M3 positive grid: subnormals k/8, then 1..1.875 step 1/8, 2..3.75 step 1/4, 4..7.5 step 1/2
    e2m3 = [k / 8 for k in range(8)] + [1 + k / 8 for k in range(8)] + [2 + k / 4 for k in range(8)] + [4 + k / 2 for k in range(8)]
    assert F.decode(np.arange(32), "e2m3").tolist() == e2m3
    # E3M2: subnormals k/16, then each binade 2^e (1, 1.25, 1.5, 1.75), e = -2..4
    e3m2 = [k / 16 for k in range(4)] + [2.0**e * (1 + m / 4) for e in range(-2, 5) for m in range(4)]
    assert F.decode(np.arange(32), "e3m2").tolist() == e3m2
    # E4M3 (OFP8 Table 1): 0x7E = 448, 0x08 = 2^-6, 0x07 = 0.875 * 2^-6, 0x01 = 2^-9
    assert F.decode([0x7E, 0x08, 0x07, 0x01, 0x80], "e4m3").tolist() == [448, 2.0**-6, 0.875 * 2.0**-6, 2.0**-9, -0.0]
    # E5M2 (OFP8 Table 2): 0x7B = 57344, 0x7C = Inf, 0x7D..0x7F NaN, 0x04 = 2^-14, 0x01 = 2^-16
    d = F.decode([0x7B, 0x7C, 0xFC, 0x04, 0x01], "e5m2").tolist()
    assert d == [57344, np.inf, -np.inf, 2.0**-14, 2.0**-16]
    assert np.isnan(F.decode([0x7D, 0x7E, 0x7F], "e5m2")).all()
    # FNUZ (formats.md 1.4): e4m3fnuz max 240 at 0x7F, min subnormal 2^-10, 0x80 NaN
    assert F.decode([0x7F, 0x01], "e4m3fnuz").tolist() == [240, 2.0**-10]
    assert np.isnan(F.decode([0x80], "e4m3fnuz")[0]) and np.isnan(F.decode([0x80], "e5m2fnuz")[0])
    # MXINT8 element k/64, two's complement
    assert F.decode([0x40, 0x7F, 0x80, 0xFF, 0x01], "int8").tolist() == [1.0, 127 / 64, -2.0, -1 / 64, 1 / 64]


def test_decode_all_e8m0_codes():
    codes = np.arange(256, dtype=np.uint8)
    ref = codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    assert same_values(F.decode(codes, "e8m0"), ref).all()
    # hand: code c -> 2^(c - 127)
    assert F.decode([127, 128, 254], "e8m0").tolist() == [1.0, 2.0, 2.0**127]


def sweep_inputs(name: str) -> np.ndarray:
    """Every finite value, every midpoint, each +-1 float32 ulp, plus out-of-range and specials."""
    f = ELEMENTS[name]
    v = np.unique(f.values[np.isfinite(f.values)].astype(np.float64))
    mids = (v[1:] + v[:-1]) / 2  # exact in float64 and float32 (few significant bits)
    beyond = np.array([f.max_value * 1.01, f.max_value * 1.5, f.max_value * 2, 1e30, 3.4e38, -3.4e38])
    base = np.concatenate([v, mids, beyond]).astype(np.float32)
    x = np.concatenate([base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf)),
                        np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45])])
    return x.astype(np.float32)


@pytest.mark.parametrize("name", list(ELEMENTS))
def test_encode_sweep_non_saturating_matches_ml_dtypes(name):
    x = sweep_inputs(name)
    ours = F.decode(F.encode(x, name, saturate=False), name)
    ref = x.astype(ML[name]).astype(np.float32)
    ok = same_values(ours, ref)
    assert ok.all(), list(zip(x[~ok][:5], ours[~ok][:5], ref[~ok][:5]))


@pytest.mark.parametrize("name", list(ELEMENTS))
def test_encode_sweep_saturating_matches_clamped_ml_dtypes(name):
    f = ELEMENTS[name]
    x = sweep_inputs(name)
    ours = F.decode(F.encode(x, name, saturate=True), name)
    clamped = np.where(np.isnan(x), x, np.clip(x, -f.max_value, f.max_value)).astype(np.float32)
    ref = clamped.astype(ML[name]).astype(np.float32)
    ok = same_values(ours, ref)
    assert ok.all(), list(zip(x[~ok][:5], ours[~ok][:5], ref[~ok][:5]))


@pytest.mark.parametrize("name", list(ELEMENTS))
def test_encode_decode_round_trip_every_code(name):
    f = ELEMENTS[name]
    codes = np.arange(1 << f.bits)
    vals = F.decode(codes, name)
    keep = ~np.isnan(vals) & ~((f.specials.value == "fnuz") & (codes == 0x80))
    assert np.array_equal(F.encode(vals[keep], name, saturate=False), codes[keep])


def test_encode_e8m0_matches_ml_dtypes():
    e = np.arange(-127, 128, dtype=np.float64)
    base = np.concatenate([2.0**e, 1.5 * 2.0**e]).astype(np.float32)  # powers and ties
    x = np.concatenate([base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(0)),
                        np.float32([0.0, -1.0, np.inf, np.nan, 1e-45, 3.4e38])])
    ours = F.encode(x, "e8m0", saturate=False)
    ref = x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)
    assert np.array_equal(ours, ref), list(zip(x[ours != ref][:5], ours[ours != ref][:5], ref[ours != ref][:5]))
    # saturating: 3.4e38 (>= 1.5 * 2^127) -> 0xFE instead of NaN
    assert F.encode([3.4e38], "e8m0", saturate=True)[0] == 0xFE


def test_int8_element_rounding():
    # k = RNE(64 x): 0.5/64 -> 0 and 1.5/64 -> 2 (ties to even); clamp to +-127 (symmetric)
    got = F.encode(np.float32([0.5 / 64, 1.5 / 64, 2.5 / 64, 3.0, -3.0, -2.0, np.nan]), "int8").view(np.int8).tolist()
    assert got == [0, 2, 2, 127, -127, -127, 0]


def test_rounding_ties_away():
    # ties away (microxcaling round='nearest', formats.md 5.1 quirk 1): E4M3 17 -> 18, 400 -> 416; E2M1 0.25 -> 0.5
    assert F.decode(F.encode([17, 400], "e4m3", rounding="rna"), "e4m3").tolist() == [18, 416]
    assert F.decode(F.encode([0.25, 2.5], "e2m1", rounding="rna"), "e2m1").tolist() == [0.5, 3.0]


def test_bad_names_and_codes_raise_input_error():
    from gpuplan.errors import InputError

    with pytest.raises(InputError, match="allowed"):
        F.encode([1.0], "e9m9")
    with pytest.raises(InputError, match="codes"):
        F.decode([16], "e2m1")
    with pytest.raises(InputError, match="rounding"):
        F.encode([1.0], "e4m3", rounding="up")


def test_wide_formats_match_ml_dtypes_and_numpy():
    rng = np.random.default_rng(1)
    with np.errstate(over="ignore"):
        x = (rng.standard_normal(100_000) * np.exp(rng.uniform(-100, 100, 100_000))).astype(np.float32)
    assert np.array_equal(F.encode(x, "bf16", saturate=False), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    with np.errstate(over="ignore"):
        assert np.array_equal(F.encode(x, "fp16", saturate=False), x.astype(np.float16).view(np.uint16))
