"""The 32-bit integer intrinsics of the numba kernels equal two's complement int32 arithmetic."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from gpuplan.formats import int32_ops as ops

int32s = st.integers(-(2**31), 2**31 - 1)


@njit(cache=False)
def _all_ops(a, b, s):
    return (ops.i32_add(a, b), ops.i32_sub(a, b), ops.i32_and(a, b), ops.i32_or(a, b), ops.i32_shl(a, s),
            ops.i32_shr(a, s), ops.u32_shr(a, s), ops.i32_max(a, b), ops.i32_min(a, b), ops.u32_max(a, b),
            ops.i32_select(a < b, a, b))


@settings(max_examples=200, deadline=None)
@given(a=int32s, b=int32s, s=st.integers(0, 31))
def test_ops_equal_int32_arithmetic(a, b, s):
    # reference: numpy int32 / uint32 scalars (wrap-around), shifts on the 32-bit patterns
    ua, ub = np.uint32(a & 0xFFFFFFFF), np.uint32(b & 0xFFFFFFFF)
    with np.errstate(over="ignore"):
        want = (np.int32(a) + np.int32(b), np.int32(a) - np.int32(b), a & b, a | b,
                np.uint32((int(ua) << s) & 0xFFFFFFFF).view(np.int32), a >> s, np.uint32(ua >> np.uint32(s)).view(np.int32),
                max(a, b), min(a, b), np.uint32(max(ua, ub)).view(np.int32), min(a, b))
    got = _all_ops(np.int32(a), np.int32(b), np.int32(s))
    assert [int(g) for g in got] == [int(w) for w in want]


@njit(cache=False)
def _amax32(bits, start):
    return ops.max_magnitude_bits(bits, start, 32)


@settings(max_examples=100, deadline=None)
@given(words=st.lists(st.integers(0, 2**32 - 1), min_size=40, max_size=40), start=st.integers(0, 8))
def test_max_magnitude_bits_is_the_max_of_the_sign_cleared_patterns(words, start):
    bits = np.array(words, dtype=np.uint32)
    want = int((bits[start : start + 32] & np.uint32(0x7FFFFFFF)).max())  # NaN patterns > 0x7F800000 stay largest
    assert _amax32(bits, start) == want
