"""Compiled single-pass MX quantiser (numba): one read of the float32 input, one write of the
codes (optionally FP4-packed) and scales. Same arithmetic as the numpy reference path
(`scale.e8m0_from_amax`, `element.encode_minifloat`, `element.encode_int8`), checked equal to it
by tests/formats/test_kernels.py; used by `quantize` for large inputs blocked along the last
axis, and by `quantize_packed`.

Integer arithmetic only (plus one float32 division for RCEIL and a float64 product for INT8),
so fastmath is irrelevant and results are exact. Compiled lazily on first use (cache=False).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from gpuplan.formats.block import BlockFormat
from gpuplan.formats.element import IntElement
from gpuplan.formats.scale import ScaleRule

RULE_IDS = {ScaleRule.FLOOR: 0, ScaleRule.CEIL: 1, ScaleRule.EVEN: 2, ScaleRule.RCEIL: 3}


@njit(cache=False, inline="always")
def _floor_log2(ab):
    """Exact floor(log2(v)) of a positive finite float32 given its magnitude bits `ab`."""
    exp_field = ab >> 23
    if exp_field > 0:
        return exp_field - 127
    man = ab & 0x7FFFFF
    n = -1
    while man > 0:
        man >>= 1
        n += 1
    return n - 149


@njit(cache=False, inline="always")
def _scale_code(ab, amax_f, rule, emax, mbits, max_value):
    if ab >= 0x7F800000:
        return 255
    if ab == 0:
        return 0
    if rule == 3:  # RCEIL
        q = np.float32(amax_f / max_value)
        qb = np.int64(np.array([q], dtype=np.float32).view(np.uint32)[0]) & 0x7FFFFFFF
        qexp = qb >> 23
        qman = qb & 0x7FFFFF
        if (qexp > 0 and qman > 0) or (qexp == 0 and qman > 0x400000):
            qexp += 1
        return min(qexp, 254)
    fl = _floor_log2(ab)
    if rule == 1:  # CEIL
        if ab >> 23 > 0:
            if ab & 0x7FFFFF:
                fl += 1
        else:
            man = ab & 0x7FFFFF
            if man & (man - 1):
                fl += 1
    elif rule == 2:  # EVEN
        rexp = (ab + (1 << (22 - mbits))) >> 23
        if rexp > 0:
            fl = rexp - 127
    se = fl - emax
    if se < -127:
        se = -127
    if se > 127:
        se = 127
    return se + 127


@njit(cache=False, inline="always")
def _encode_float(b, se, mbits, ebits, emin, max_mag):
    """RNE + saturate code of float32 bits `b` divided by 2^se (see element.encode_minifloat)."""
    sign = (b >> 31) & 1
    a = b & 0x7FFFFFFF
    exp_field = a >> 23
    if exp_field == 0:
        sig = a & 0x7FFFFF
        e = -126 - se
    else:
        sig = (a & 0x7FFFFF) | 0x800000
        e = exp_field - 127 - se
    extra = emin - e
    if extra < 0:
        extra = 0
    shift = 23 - mbits + extra
    if shift > 40:
        shift = 40
    q = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    if rem > half or (rem == half and (q & 1) == 1):
        q += 1
    ee = e if e > emin else emin
    mag = ((ee - emin) << mbits) + q
    if mag > max_mag:
        mag = max_mag
    return (sign << (ebits + mbits)) | mag


@njit(cache=False, parallel=True)
def _mx_kernel(bits, xf, k, rule, emax, mbits, ebits, emin, max_mag, nan_code, is_int, max_value, pack4, codes, scales):
    n_blocks = bits.shape[0] // k
    for blk in prange(n_blocks):
        base = blk * k
        ab = np.int64(0)
        for i in range(k):
            v = np.int64(bits[base + i]) & 0x7FFFFFFF
            if v > ab:
                ab = v
        amax_f = np.float32(0.0)
        if rule == 3 and ab < 0x7F800000:
            for i in range(k):
                av = abs(xf[base + i])
                if av > amax_f:
                    amax_f = av
        code = _scale_code(ab, amax_f, rule, emax, mbits, max_value)
        scales[blk] = code
        se = np.int64(code) - 127
        if pack4:
            out_base = blk * (k // 2)
            for j in range(k // 2):
                if code == 255:
                    codes[out_base + j] = 0
                else:
                    lo = _encode_float(np.int64(bits[base + 2 * j]), se, mbits, ebits, emin, max_mag)
                    hi = _encode_float(np.int64(bits[base + 2 * j + 1]), se, mbits, ebits, emin, max_mag)
                    codes[out_base + j] = lo | (hi << 4)
        elif is_int:
            factor = 2.0 ** (6 - se)
            for i in range(k):
                if code == 255:
                    codes[base + i] = 0
                else:
                    r = np.rint(np.float64(xf[base + i]) * factor)
                    if r > 127.0:
                        r = 127.0
                    if r < -127.0:
                        r = -127.0
                    codes[base + i] = np.uint8(np.int64(r) & 0xFF)
        else:
            for i in range(k):
                if code == 255:
                    codes[base + i] = nan_code
                else:
                    codes[base + i] = _encode_float(np.int64(bits[base + i]), se, mbits, ebits, emin, max_mag)


def _params(bf: BlockFormat):
    el = bf.element
    if isinstance(el, IntElement):
        return dict(emax=0, mbits=el.mbits, ebits=0, emin=0, max_mag=127, nan_code=0, is_int=True)
    nan = el.nan_code if el.nan_code is not None else 0
    return dict(emax=el.emax, mbits=el.mbits, ebits=el.ebits, emin=el.emin, max_mag=el.max_code_magnitude,
                nan_code=nan, is_int=False)


def quantize_mx_rows(blocks: np.ndarray, bf: BlockFormat, rule: ScaleRule, pack4: bool = False):
    """(codes, scales) of contiguous float32 `blocks` (n_blocks, k). With pack4 (FP4 only),
    codes come two per byte, low nibble first: shape (n_blocks, k // 2)."""
    blocks = np.ascontiguousarray(blocks, dtype=np.float32)
    n_blocks, k = blocks.shape
    p = _params(bf)
    flat = blocks.reshape(-1)
    if pack4:
        codes = np.empty(n_blocks * (k // 2), dtype=np.uint8)
    else:
        codes = np.empty(n_blocks * k, dtype=np.uint8)
    scales = np.empty(n_blocks, dtype=np.uint8)
    _mx_kernel(flat.view(np.uint32), flat, k, RULE_IDS[rule], p["emax"], p["mbits"], p["ebits"], p["emin"],
               p["max_mag"], p["nan_code"], p["is_int"], np.float32(bf.element.max_value), pack4, codes, scales)
    return codes.reshape(n_blocks, -1), scales
