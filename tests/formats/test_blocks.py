"""Block quantisation: axes, ragged tails, 2-D tiles, scale rules, and hypothesis properties
(formats.md section 7.6 step 4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import formats as F
from gpuplan.errors import InputError

MX = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8"]
RULES = ["floor", "rceil", "ceil", "even"]


def test_contract_shapes_and_dtypes():
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    q = F.quantize(x, "mxfp4")
    assert isinstance(q, F.QuantizedTensor)
    assert q.codes.dtype == np.uint8 and q.codes.shape == (3, 64)
    assert q.scales.dtype == np.uint8 and q.scales.shape == (3, 2)
    d = q.dequantize()
    assert d.dtype == np.float32 and d.shape == x.shape
    n = F.quantize(x, "nvfp4")
    assert n.scales.shape == (3, 4)  # block 16


def test_axis_zero_equals_transposed_last_axis():
    x = np.random.default_rng(1).standard_normal((64, 5)).astype(np.float32)
    a = F.quantize(x, "mxfp8_e4m3", axis=0)
    b = F.quantize(x.T, "mxfp8_e4m3", axis=-1)
    assert a.scales.shape == (2, 5)
    np.testing.assert_array_equal(a.scales, b.scales.T)
    np.testing.assert_array_equal(a.codes, b.codes.T)
    np.testing.assert_array_equal(a.dequantize(), b.dequantize().T)


def test_transpose_does_not_commute():
    # formats.md 2.4 / TE docs: rowwise and columnwise quantisation differ. Row 0 holds a large
    # value, so its row blocks get a large scale; column blocks elsewhere keep fine scales.
    x = np.full((32, 32), 0.3, np.float32)
    x[0, 0] = 1000.0
    rows = F.quantize(x, "mxfp4", axis=1).dequantize()
    cols = F.quantize(x, "mxfp4", axis=0).dequantize()
    # 1000 -> floor scale 2^(9-2) = 128; 0.3/128 flushes to 0 in row 0 and column 0 only
    assert rows[0, 1] == 0 and cols[0, 1] != 0


def test_ragged_tail_is_zero_padded():
    x = np.arange(1, 34, dtype=np.float32)  # 33 elements -> 2 blocks, the second holds 33 alone
    q = F.quantize(x, "mxfp8_e4m3")
    assert q.codes.shape == (64,) and q.scales.shape == (2,)
    # second block amax 33 -> floor(log2 33) - 8 = -3 -> 0x7C; 33 * 8 = 264 -> E4M3 256 -> 32
    assert q.scales[1] == 0x7C and q.dequantize()[-1] == 32
    assert q.dequantize().shape == (33,)


def test_two_d_tiles():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((130, 260)).astype(np.float32)
    q = F.quantize(x, "mxfp8_e4m3", block_shape=(128, 128))
    assert q.scales.shape == (2, 3) and q.dequantize().shape == x.shape
    # the (0, 1) tile's scale is the MX scale of those 128x128 elements as one block
    tile = x[:128, 128:256].reshape(-1)
    one = F.quantize(tile, "mxfp8_e4m3", block_size=tile.size)
    assert q.scales[0, 1] == one.scales[0]
    n = F.quantize(x[:32, :32], "nvfp4", block_shape=(16, 16))
    assert n.scales.shape == (2, 2)
    # 2-D tiles give identical scales for x and x.T (why NVFP4 uses them for weights)
    nt = F.quantize(x[:32, :32].T, "nvfp4", block_shape=(16, 16))
    np.testing.assert_array_equal(n.scales, nt.scales.T)


def test_bad_arguments():
    with pytest.raises(InputError, match="allowed"):
        F.quantize(np.ones(32), "mxfp3")
    with pytest.raises(InputError, match="scale rule"):
        F.quantize(np.ones(32), "mxfp4", scale_rule="round")
    with pytest.raises(InputError, match="axis"):
        F.quantize(np.ones(32), "mxfp4", axis=2)


def test_bits_per_element():
    # MX: 8 + 32 b bits per 32 elements (formats.md 2.1): MXFP4 4.25, MXFP6 6.25, MXFP8 8.25; NVFP4 4.5
    got = {k: v.bits_per_element for k, v in F.BLOCK_FORMATS.items()}
    assert got == {"mxfp8_e4m3": 8.25, "mxfp8_e5m2": 8.25, "mxfp6_e3m2": 6.25, "mxfp6_e2m3": 6.25,
                   "mxfp4": 4.25, "mxint8": 8.25, "nvfp4": 4.5}


def test_rceil_never_saturates_block_max():
    # formats.md 7.6: RCEIL guarantees |x| / X <= max_elem, so the block max is never clipped
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2000, 32)) * np.exp(rng.uniform(-20, 20, (2000, 1)))).astype(np.float32)
    for fmt in MX:
        q = F.quantize(x, fmt, scale_rule="rceil")
        el = q.fmt.element
        X = np.ldexp(1.0, q.scales[:, 0].astype(int) - 127)
        assert (np.abs(x).max(axis=1) / X <= el.max_value).all()


def test_floor_can_clip_block_max():
    # formats.md 7.6: FLOOR clips when amax's significand exceeds the element's max significand
    # (E2M1 1.5): amax 7 = 1.75 * 4 -> X = 1 -> 7 clamps to 6
    x = np.zeros(32, np.float32)
    x[0] = 7
    assert F.quantize(x, "mxfp4").dequantize()[0] == 6


# ---- hypothesis properties ---------------------------------------------------------------

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(finite32, min_size=32, max_size=32), st.sampled_from(MX[:5]), st.sampled_from(RULES))
def test_error_bounded_by_half_ulp_times_scale(values, fmt, rule):
    """Each element is off by at most half an element ulp x X, unless clamped to +-max x X."""
    x = np.array(values, np.float32)
    q = F.quantize(x, fmt, scale_rule=rule)
    el = q.fmt.element
    se = int(q.scales[0]) - 127
    y = q.dequantize().astype(np.float64)
    v = np.abs(x.astype(np.float64)) * 2.0**-se
    with np.errstate(divide="ignore"):
        exp = np.maximum(np.floor(np.log2(np.where(v > 0, v, 1.0))), el.emin)
    half_ulp = 2.0 ** (exp - el.mbits - 1) * 2.0**se
    clipped = v > el.max_value
    err = np.abs(y - x.astype(np.float64))
    finite_y = np.isfinite(y)
    assert (err[~clipped & finite_y] <= half_ulp[~clipped & finite_y]).all()
    assert (np.abs(y[clipped & finite_y]) == el.max_value * 2.0**se).all()


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(MX), st.data())
def test_representable_blocks_are_idempotent(fmt, data):
    """Values already of the form P_i x 2^s, with one element at +-max, quantise to exactly
    those codes and scale (FLOOR), and dequantise to themselves."""
    el = F.block_format(fmt).element
    shared_exp = data.draw(st.integers(-127, 126 - el.emax))  # keep max x 2^s below FLT_MAX
    finite_codes = [c for c in range(1 << el.bits) if np.isfinite(el.values[c]) and not (el.bits == 8 and fmt == "mxint8" and c == 0x80)]
    codes = np.array(data.draw(st.lists(st.sampled_from(finite_codes), min_size=32, max_size=32)), np.uint8)
    codes[data.draw(st.integers(0, 31))] = el.max_code_magnitude
    y = (el.values[codes].astype(np.float64) * 2.0**shared_exp).astype(np.float32)
    q = F.quantize(y, fmt)
    assert int(q.scales[0]) == shared_exp + 127
    np.testing.assert_array_equal(q.dequantize(), y)
    again = F.quantize(q.dequantize(), fmt)
    np.testing.assert_array_equal(again.codes, q.codes)


@settings(max_examples=40, deadline=None)
@given(st.lists(finite32, min_size=1, max_size=100), st.sampled_from(MX + ["nvfp4"]))
def test_nan_anywhere_gives_nan_block_and_nothing_else(values, fmt):
    x = np.array(values, np.float32)
    x[0] = np.nan
    q = F.quantize(x, fmt)
    d = q.dequantize()
    k = q.layout.tile[0]
    assert np.isnan(d[:k]).all()
