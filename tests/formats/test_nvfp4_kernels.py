"""The compiled NVFP4 kernels (formats.nvfp4_kernels) equal the numpy reference bit for bit:
codes, E4M3 scales, the FP32 tensor scale and the dequantized values, on inputs with NaN, Inf,
zeros of both signs, float32 subnormals, the largest float32 and values that tie in E2M1 and E4M3,
two-level and single-level."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import formats as F
from gpuplan.formats import block, nvfp4_kernels

from .extreme_inputs import extreme_blocks


@pytest.fixture(scope="module")
def hard_input() -> np.ndarray:
    x = extreme_blocks(1)
    # E2M1 ties once scaled (amax 6 -> block scale 1): 0.25, 0.75, 2.5, 5 round to even codes
    x[7, :16] = np.array([6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -0.75, -2.5, -5, 0, -0.0, 4, 3], np.float32)
    return x


def _reference(x: np.ndarray, two_level: bool):
    blocks = x.reshape(-1, 16)
    ts = block.nvfp4_tensor_scale(x) if two_level else None
    return block.quantize_nvfp4_blocks(blocks, ts)


@pytest.mark.parametrize("two_level", [True, False])
def test_quantize_kernel_equals_numpy_reference(hard_input, two_level):
    for x in (hard_input, np.where(np.isfinite(hard_input), hard_input, 1.0).astype(np.float32)):
        ts = block.nvfp4_tensor_scale(x) if two_level else None
        kc, ks = nvfp4_kernels.quantize_nvfp4_rows(x.reshape(-1, 16), ts)
        nc, ns = _reference(x, two_level)
        np.testing.assert_array_equal(ks, ns)
        np.testing.assert_array_equal(kc, nc)


def test_tensor_amax_equals_numpy(hard_input):
    finite = np.where(np.isfinite(hard_input), hard_input, -2.5).astype(np.float32)
    assert nvfp4_kernels.tensor_amax(finite) == np.max(np.abs(finite))
    assert np.isnan(nvfp4_kernels.tensor_amax(hard_input))  # a NaN in the tensor, as np.max gives
    assert nvfp4_kernels.tensor_amax(np.full(70_000, -np.inf, np.float32)) == np.inf


@pytest.mark.parametrize("two_level", [True, False])
def test_quantize_and_dequantize_use_the_kernels_with_the_same_result(hard_input, two_level):
    finite = np.where(np.isfinite(hard_input), hard_input, 3.0).astype(np.float32)
    assert finite.size >= block.FAST_PATH_MIN_ELEMENTS
    q = F.quantize(finite, "nvfp4", two_level=two_level)
    nc, ns = _reference(finite, two_level)
    np.testing.assert_array_equal(q.codes.reshape(-1, 16), nc)
    np.testing.assert_array_equal(q.scales.reshape(-1), ns)
    # the numpy dequantization of the same codes: E2M1 value x fp32(s_global x E4M3 value)
    total = (np.float32(q.tensor_scale) * block.E4M3.values[ns]).astype(np.float32)
    ref = (block.E2M1.values[nc].astype(np.float32) * total[:, None]).astype(np.float32)
    np.testing.assert_array_equal(q.dequantize().reshape(-1, 16), ref)


@settings(max_examples=40)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=16, max_size=16),
       st.floats(min_value=2.0**-100, max_value=2.0**100, width=32), st.booleans())
def test_any_block_equals_the_reference(values, scale, two_level):
    # one hypothesis block, repeated past the fast-path size beside a block that sets the tensor amax
    x = np.array(values, np.float32).reshape(1, 16)
    big = np.tile(x, (4096, 1))
    big[0] = np.float32(scale)
    ts = block.nvfp4_tensor_scale(big) if two_level else None
    kc, ks = nvfp4_kernels.quantize_nvfp4_rows(big, ts)
    nc, ns = block.quantize_nvfp4_blocks(big, ts)
    np.testing.assert_array_equal(ks, ns)
    np.testing.assert_array_equal(kc, nc)
