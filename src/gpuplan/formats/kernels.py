"""Compiled single-pass MX quantiser and dequantiser (numba): one read of the float32 input, one
write of the codes (optionally FP4-packed) and scales, and back. Same arithmetic as the numpy
reference path (`scale.e8m0_from_amax`, `element.encode_minifloat`, `element.encode_int8`,
`QuantizedTensor.dequantize`), checked equal to it by tests/formats/test_kernels_storage.py; used
by `quantize` for large inputs blocked along the last axis, and by `quantize_packed`.

One kernel is compiled per element format, block size and scale rule (`_make_mx_kernel`,
`_make_dequant_kernel`): with those constants LLVM unrolls and vectorises each block's loops
(AVX2/AVX-512 where the host has them), which a run-time block size prevents. Integer work runs in
32-bit lanes through `int32_ops` (numba would widen it to 64 bits: half the lanes) and the block
amax is one vector reduction (`int32_ops.max_magnitude_bits`). The kernels are serial and release
the GIL; `over_block_ranges` splits the blocks over one thread per core in chunks the threads take
in turn (a few chunks, not a Python loop per block). Integer arithmetic and exact float32
operations only (power-of-two products, an addition whose rounding is the element's RNE, one float32
division for RCEIL, a float64 product for INT8); no fastmath, so NaN, Inf and subnormals behave as
IEEE says and results are bit-exact. Compiled lazily on first use (cache=False).
"""

from __future__ import annotations

import numpy as np
import os
from concurrent.futures import ThreadPoolExecutor

from numba import njit

from gpuplan.formats.block_format import BlockFormat
from gpuplan.formats.element import IntElement
from gpuplan.formats.int32_ops import (i32_add, i32_and, i32_max, i32_min, i32_or, i32_select, i32_shl, i32_sub, max_magnitude_bits,
                                      u32_shr)
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
        qb = np.int64(np.uint32(q.view(np.uint32))) & 0x7FFFFFFF
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
def _pow2_f32(e):
    """2^e as float32, exactly, for -149 <= e <= 127, built from its bits (no pow call per block):
    normal 2^e has exponent field e + 127; below 2^-126 the one mantissa bit 22 + (e + 127)."""
    field = e + 127
    if field >= 1:
        return np.uint32(field << 23).view(np.float32)
    return np.uint32(1 << (22 + field)).view(np.float32)


MAGIC_RNE = np.float32(12582912.0)  # 1.5 * 2^23: (y + M) - M rounds |y| < 2^22 to an integer, ties to even


@njit(cache=False, inline="always")
def _encode_scaled(xv, inv_scale, mbits, ebits, bias, emin, max_mag, min_normal, sub_factor):
    """RNE + saturate code of float32 `xv` x 2^-se (`inv_scale` = 2^-se, exact power of two).

    v = |x| 2^-se is exact in float32 (a power-of-two product; when it would be an FP32
    subnormal it is far below the element's smallest subnormal and gives 0 either way).
    Normal range: round the float32 bits of v to `mbits` mantissa bits (ties to even) and
    rebias the exponent: code = round(bits >> (23 - M)) - ((127 - bias) << M).
    Subnormal range (v < 2^emin): code = RNE(v 2^(M - emin)) via the 1.5 * 2^23 magic add.
    Branch-free so LLVM can vectorise the block loop.
    """
    v = abs(xv) * inv_scale
    vb = np.float32(v).view(np.int32)  # v >= 0: the sign bit is clear, int32 holds the bits
    sh = np.int32(23 - mbits)
    # vb <= 0x7F800000 (+Inf), so vb + 2^(sh-1) stays below 2^31: int32 arithmetic is exact (and
    # converts float32 to int32, which AVX2 has, where int64 conversions are scalar)
    normal_code = ((vb + (np.int32(1) << (sh - np.int32(1))) - np.int32(1) + ((vb >> sh) & np.int32(1))) >> sh) \
        - (np.int32(127 - bias) << np.int32(mbits))
    y = np.float32(v * sub_factor)
    sub_code = np.int32(np.float32(y + MAGIC_RNE) - MAGIC_RNE)
    mag = sub_code if v < min_normal else normal_code
    mag = min(mag, np.int32(max_mag))
    sign = np.float32(xv).view(np.uint32) >> np.uint32(31)
    return (np.int32(sign) << np.int32(ebits + mbits)) | mag


#: blocks per group of the quantiser: its scratch (a float32 per block, a code byte per element) stays in L1
GROUP_BLOCKS = 64


@njit(cache=False, inline="always")
def _floor_scale_code(ab, emax):
    """E8M0 code of the FLOOR rule (OCP MX: 2^(floor(log2 amax) - emax)) from amax's bits `ab`, branch-free:
    floor(log2) is exponent field - 127 for a normal amax; for a subnormal one (field 0, value man x 2^-149)
    it is floor(log2(man)) - 149, the exponent field of float32(man) (exact: man < 2^23) - 127 - 149;
    amax = 0 gives -276, clamped like any tiny amax to code 0; Inf/NaN amax (ab >= 0x7F800000) -> 255.
    Equal to `_scale_code(ab, _, 0, ...)` (tests/formats/test_kernels_storage.py)."""
    field = u32_shr(ab, 23)
    sub_log2 = i32_sub(u32_shr(np.float32(np.float32(ab)).view(np.int32), 23), 276)
    log2 = i32_sub(field, 127) if field > 0 else sub_log2
    code = i32_add(i32_min(i32_max(i32_sub(log2, emax), -127), 127), 127)
    return np.int32(255) if ab >= 0x7F800000 else code


@njit(cache=False, inline="always")
def _inv_scale_of_code(code):
    """2^(127 - code) as float32 (the reciprocal of the E8M0 scale 2^(code - 127), exact for codes 0..254:
    2^-127 is the float32 subnormal 0x00400000); 0 for the NaN code 255 (its block is overwritten)."""
    field = i32_sub(254, code)
    bits = i32_shl(field, 23) if field > 0 else (np.int32(0x00400000) if field == 0 else np.int32(0))
    return np.int32(bits).view(np.float32)


def _make_minifloat_encoder(mbits, ebits, bias, emin, max_mag):
    """code(x) of float32 `x` (bits `xb`) times the block's 1/scale `inv` (an exact power of two) in an
    E`ebits`M`mbits` element: round to nearest even, saturate to `max_mag`, sign bit above. All in 32-bit
    lanes (int32_ops), no branch and no float32 subnormal result, so a block's loop vectorises 16-wide.

    v = |x| inv (exact). E = max(exponent of v, emin); C = 2^(E + 23 - mbits). v + C in float32 is
    C + n 2^(E - mbits), n = v / 2^(E - mbits) rounded to nearest even (the float32 spacing at C is
    2^(E - mbits); v < 2^(E+1) keeps the sum below 2C), so n = bits(v + C) - bits(C). The code is
    ((E + bias - 1) << mbits) + n: for a normal v, n = 2^mbits + mantissa (and 2^(mbits+1) when it rounds
    up to the next binade, which is the next binade's code); for a subnormal v, E + bias - 1 = 0
    (emin = 1 - bias) and n is the subnormal's mantissa. With ef = bits(2^E) = (E + 127) << 23 and
    bits(C) = ef + ((23 - mbits) << 23) this is (ef >> (23 - mbits)) + bits(v + C) - ef + const."""
    sh = 23 - mbits
    emin_field = (emin + 127) << 23
    c_shift = (23 - mbits) << 23
    const = (bias - 128) * (1 << mbits) - c_shift
    sign_shift = ebits + mbits

    @njit(cache=False, inline="always")
    def encode(xb, xv, inv):
        v = np.float32(abs(xv) * inv)
        ef = i32_max(i32_and(np.float32(v).view(np.int32), 0x7F800000), emin_field)
        c = np.int32(i32_add(ef, c_shift)).view(np.float32)
        sum_bits = np.float32(v + c).view(np.int32)
        code = i32_min(i32_add(i32_add(u32_shr(ef, sh), i32_sub(sum_bits, ef)), const), max_mag)
        return i32_or(code, i32_shl(u32_shr(xb, 31), sign_shift))

    return encode


def _make_mx_kernel(k, rule, emax, mbits, ebits, bias, emin, max_mag, nan_code, is_int, max_value, pack4):
    """The quantiser of one element format, block size `k` and scale rule, all compiled in as constants
    (shift counts and bounds folded, the format and rule branches removed). Signature
    kernel(bits, xf, codes, scales, inv, tmp, tmp16): the input as uint32 bits and as float32, the
    outputs, and scratch (`GROUP_BLOCKS` float32, `GROUP_BLOCKS * k` bytes and their uint16 view).

    Minifloat elements, per group of `GROUP_BLOCKS` blocks (input 8 KiB for k = 32, in L1):
    1. per block: amax as the largest magnitude bit pattern (`max_magnitude_bits`, one vector
       reduction), the E8M0 code (`_floor_scale_code` for FLOOR, else `_scale_code`), 1/scale;
    2. every element: `_make_minifloat_encoder`'s code, into `codes` (8-bit) or, for FP4, into `tmp`;
    3. FP4: each pair of codes read as one uint16 (c0 | c1 << 8) is packed as (w | w >> 4) & 0xFF =
       c0 | c1 << 4 (element 2j in the low nibble);
    4. blocks with an Inf/NaN (code 255) are filled with the NaN code (0 when packed).
    INT8 (MXINT8): per block as before: RNE of x 2^(6 - se) in float64, clamped to +-127."""
    k_fill = 0 if (pack4 or is_int) else nan_code
    max_value = np.float32(max_value)
    per_block = k // 2 if pack4 else k
    group = GROUP_BLOCKS
    if is_int:
        @njit(cache=False, nogil=True, boundscheck=False)
        def int_kernel(bits, xf, codes, scales, inv, tmp, tmp16):
            for blk in range(bits.shape[0] // k):
                base = blk * k
                ab = np.int64(max_magnitude_bits(bits, base, k))
                amax_f = np.float32(np.uint32(ab).view(np.float32)) if ab < 0x7F800000 else np.float32(0.0)
                code = _scale_code(ab, amax_f, rule, emax, mbits, max_value)
                scales[blk] = code
                if code == 255:
                    for i in range(k):
                        codes[base + i] = k_fill
                    continue
                factor = 2.0 ** (133 - np.int64(code))  # 2^(6 - se) in float64: 2^(6 + 127) does not fit float32
                for i in range(k):
                    r = min(max(np.rint(np.float64(xf[base + i]) * factor), -127.0), 127.0)
                    codes[base + i] = np.uint8(np.int64(r) & 0xFF)

        return int_kernel

    encode = _make_minifloat_encoder(mbits, ebits, bias, emin, max_mag)

    @njit(cache=False, nogil=True, boundscheck=False)
    def kernel(bits, xf, codes, scales, inv, tmp, tmp16):
        n_blocks = bits.shape[0] // k
        for grp in range((n_blocks + group - 1) // group):
            first = grp * group
            nb = min(group, n_blocks - first)
            any_nan = False
            for b in range(nb):
                ab = max_magnitude_bits(bits, (first + b) * k, k)
                if rule == 0:
                    code = _floor_scale_code(ab, emax)
                else:
                    ab64 = np.int64(ab)
                    amax_f = np.float32(np.uint32(ab).view(np.float32)) if ab64 < 0x7F800000 else np.float32(0.0)
                    code = np.int32(_scale_code(ab64, amax_f, rule, emax, mbits, max_value))
                scales[first + b] = code
                inv[b] = _inv_scale_of_code(code)
                any_nan |= code == 255
            if pack4:
                for b in range(nb):
                    base = (first + b) * k
                    s = inv[b]
                    for i in range(k):
                        tmp[b * k + i] = np.uint8(encode(bits[base + i], xf[base + i], s))
                out = first * per_block
                for j in range(nb * per_block):
                    w = tmp16[j]
                    codes[out + j] = np.uint8(i32_or(w, u32_shr(w, 4)))
            else:
                for b in range(nb):
                    base = (first + b) * k
                    s = inv[b]
                    for i in range(k):
                        codes[base + i] = np.uint8(encode(bits[base + i], xf[base + i], s))
            if any_nan:
                for b in range(nb):
                    if scales[first + b] == 255:
                        for j in range(per_block):
                            codes[(first + b) * per_block + j] = k_fill

    return kernel


_MX_KERNELS: dict = {}


def _mx_kernel_for(bf: BlockFormat, k: int, rule: ScaleRule, pack4: bool):
    """The compiled quantiser of `bf`'s element in blocks of `k` under `rule` (one per element format,
    block size, rule and packing, built on first use)."""
    p = _params(bf)
    key = (tuple(sorted(p.items())), float(bf.element.max_value), int(k), RULE_IDS[rule], pack4)
    if key not in _MX_KERNELS:
        _MX_KERNELS[key] = _make_mx_kernel(k=int(k), rule=RULE_IDS[rule], max_value=bf.element.max_value, pack4=pack4, **p)
    return _MX_KERNELS[key]


@njit(cache=False, inline="always")
def _fp4_value_bits(c):
    """float32 bits (int32) of the E2M1 value of 4-bit code `c` (OCP MX 5.3.3: bias 1, values 0, 0.5, 1,
    1.5, 2, 3, 4, 6; the sign is bit 3), in 32-bit lanes: for magnitude code g = c & 7 >= 2 (exponent
    field e = g >> 1 > 0, value 2^(e - 1) (1 + m / 2)) the float32 exponent field is e + 126 and bit 22
    is m, i.e. (g << 22) + (126 << 23); g = 1 is 0.5 (0x3F000000), g = 0 is 0. Equal to
    `ELEMENTS["e2m1"].values` for all 16 codes (tests/formats/test_kernels_storage.py)."""
    low = i32_and(c, 7)
    normal = i32_add(i32_shl(low, 22), 0x3F000000)
    small = i32_and(i32_sub(0, low), 0x3F000000)  # low 1 -> 0x3F000000 (0.5), low 0 -> 0
    return i32_or(i32_select(low >= 2, normal, small), i32_shl(i32_and(c, 8), 28))


def _make_minifloat_decoder(ebits, mbits, bias, first_special, inf_magnitude):
    """decode(c): float32 bits (int32) of minifloat code `c` (E`ebits`M`mbits`, `bias`), in 32-bit lanes.
    Magnitude g = c & (2^(E+M) - 1), sign bit E+M. Normal (g >= 2^M): the float32 exponent field is
    e - bias + 127 and the mantissa's top M bits are g's, i.e. (g << (23 - M)) + ((127 - bias) << 23).
    Subnormal (g < 2^M): g x 2^(1 - bias - M), as float32(g) times that power of two (both exact).
    Magnitudes >= `first_special` are NaN (0x7FC00000, whatever the sign, as the element's value table
    holds it) except `inf_magnitude` (+-Inf). `_decoder_for` checks it against the table on every code."""
    mag_mask = (1 << (ebits + mbits)) - 1
    sh = 23 - mbits
    rebias = (127 - bias) << 23
    sub_scale = np.float32(2.0 ** (1 - bias - mbits))

    @njit(cache=False, inline="always")
    def decode(c):
        g = i32_and(c, mag_mask)
        sign = i32_shl(u32_shr(c, ebits + mbits), 31)  # codes < 2^(E+M+1): bit E+M alone survives the shift to 31
        normal = i32_add(i32_shl(g, sh), rebias)
        sub = np.float32(np.float32(g) * sub_scale).view(np.int32)
        bits = i32_or(i32_select(g >= (1 << mbits), normal, sub), sign)
        special = i32_select(g == inf_magnitude, i32_or(0x7F800000, sign), 0x7FC00000)
        return i32_select(g >= first_special, special, bits)

    return decode


def _decoder_for(element):
    """The code -> float32 bits function of a minifloat element (FP4 `_fp4_value_bits`, else
    `_make_minifloat_decoder`), or None (INT8, or a decoder that differs from the element's value
    table on some code: the kernel then reads the table)."""
    if element.name == "e2m1":
        return _fp4_value_bits
    if isinstance(element, IntElement) or element.bits > 8:
        return None
    values = np.asarray(element.values, dtype=np.float32)
    mag = np.arange(values.size) & ((1 << (element.ebits + element.mbits)) - 1)
    special = mag[~np.isfinite(values)]
    inf = mag[np.isinf(values)]
    decode = _make_minifloat_decoder(element.ebits, element.mbits, element.bias,
                                     int(special.min()) if special.size else values.size, int(inf[0]) if inf.size else -1)

    @njit(cache=False)
    def all_codes(n):
        out = np.empty(n, dtype=np.int32)
        for c in range(n):
            out[c] = decode(np.int32(c))
        return out

    return decode if np.array_equal(all_codes(values.size), values.view(np.int32)) else None


def _make_dequant_kernel(k, packed4, decode):
    """The dequantiser of blocks of `k` (a compile-time constant, as in `_make_mx_kernel`):
    out = value x 2^(scale - 127) in float32 (one rounding, exact power-of-two factor), scale 0xFF
    -> NaN block. The value's float32 bits come from `decode(code)` (`_decoder_for`: 32-bit lanes, no
    table gather, so the loop vectorises), or from lut[code] when `decode` is None; the same product
    either way. `codes` holds two FP4 codes per byte, low nibble first, when packed4."""
    use_lut = decode is None
    if use_lut:
        @njit(cache=False, inline="always")
        def decode(c):
            return np.int32(0)

    @njit(cache=False, nogil=True, boundscheck=False)
    def kernel(codes, scales, lut, out):
        nan = np.float32(np.nan)
        for blk in range(scales.shape[0]):
            sc = np.int64(scales[blk])
            factor = nan if sc == 255 else _pow2_f32(sc - 127)  # = np.float32(2.0 ** (sc - 127)), exact
            base = blk * k
            if packed4:
                cb = blk * (k // 2)
                for j in range(k // 2):
                    byte = np.int32(codes[cb + j])
                    out[base + 2 * j] = np.int32(decode(i32_and(byte, 0xF))).view(np.float32) * factor
                    out[base + 2 * j + 1] = np.int32(decode(u32_shr(byte, 4))).view(np.float32) * factor
            elif use_lut:
                for i in range(k):
                    out[base + i] = lut[codes[base + i]] * factor
            else:
                for i in range(k):
                    out[base + i] = np.int32(decode(np.int32(codes[base + i]))).view(np.float32) * factor

    return kernel


_DEQUANT_KERNELS: dict = {}


def _dequant_kernel_for(k: int, packed4: bool, element):
    key = (int(k), bool(packed4), element.name)
    if key not in _DEQUANT_KERNELS:
        _DEQUANT_KERNELS[key] = _make_dequant_kernel(int(k), bool(packed4), _decoder_for(element))
    return _DEQUANT_KERNELS[key]


def dequantize_mx_rows(codes: np.ndarray, scales: np.ndarray, bf: BlockFormat, packed4: bool = False,
                       out: np.ndarray | None = None) -> np.ndarray:
    """float32 (n_blocks * k,) values of MX blocks stored row after row (see `_make_dequant_kernel`),
    written into `out` (contiguous float32 of that size) when given."""
    k = bf.block_size
    flat_codes = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    flat_scales = np.ascontiguousarray(scales, dtype=np.uint8).reshape(-1)
    if out is None:
        out = np.empty(flat_scales.size * k, dtype=np.float32)
    lut = np.ascontiguousarray(bf.element.values, dtype=np.float32)
    per_block = k // 2 if packed4 else k
    n_blocks = flat_scales.size
    kernel = _dequant_kernel_for(k, packed4, bf.element)

    def run(lo: int, hi: int) -> None:
        kernel(flat_codes[lo * per_block : hi * per_block], flat_scales[lo:hi], lut, out[lo * k : hi * k])

    _over_block_ranges(n_blocks, run)
    return out


def threads_for(n_blocks: int, per_thread: int = 4096) -> int:
    """Threads `over_block_ranges` runs for `n_blocks`: one per core, each with at least `per_thread` blocks."""
    return min(os.cpu_count() or 1, max(1, n_blocks // per_thread))


#: chunks per thread: the threads take contiguous chunks in turn, so a core slowed by another
#: process does less of the work instead of leaving the other thread waiting at the end
CHUNKS_PER_THREAD = 8


def over_block_ranges(n_blocks: int, run, per_thread: int = 4096) -> None:
    """Call `run(lo, hi)` over contiguous block ranges, one thread per core when there are more than
    `per_thread` blocks per thread (the numba kernels release the GIL, so the threads run in parallel),
    each thread taking the next of `CHUNKS_PER_THREAD` chunks per thread as it finishes one."""
    workers = threads_for(n_blocks, per_thread)
    if workers == 1:
        run(0, n_blocks)
        return
    chunks = min(workers * CHUNKS_PER_THREAD, max(workers, n_blocks // 512))
    edges = np.linspace(0, n_blocks, chunks + 1).astype(int)
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(run, edges[:-1], edges[1:]))


_over_block_ranges = over_block_ranges


def _params(bf: BlockFormat):
    el = bf.element
    if isinstance(el, IntElement):
        return dict(emax=0, mbits=el.mbits, ebits=0, bias=0, emin=0, max_mag=127, nan_code=0, is_int=True)
    nan = el.nan_code if el.nan_code is not None else 0
    return dict(emax=el.emax, mbits=el.mbits, ebits=el.ebits, bias=el.bias, emin=el.emin, max_mag=el.max_code_magnitude,
                nan_code=nan, is_int=False)


def quantize_mx_rows(blocks: np.ndarray, bf: BlockFormat, rule: ScaleRule, pack4: bool = False):
    """(codes, scales) of contiguous float32 `blocks` (n_blocks, k). With pack4 (FP4 only),
    codes come two per byte, low nibble first: shape (n_blocks, k // 2)."""
    blocks = np.ascontiguousarray(blocks, dtype=np.float32)
    n_blocks, k = blocks.shape
    flat = blocks.reshape(-1)
    if pack4:
        codes = np.empty(n_blocks * (k // 2), dtype=np.uint8)
    else:
        codes = np.empty(n_blocks * k, dtype=np.uint8)
    scales = np.empty(n_blocks, dtype=np.uint8)
    bits = flat.view(np.uint32)
    per_block = k // 2 if pack4 else k
    kernel = _mx_kernel_for(bf, k, rule, pack4)

    def run(lo: int, hi: int) -> None:  # blocks [lo, hi): the kernel releases the GIL
        inv = np.empty(GROUP_BLOCKS, dtype=np.float32)
        tmp = np.empty(GROUP_BLOCKS * k, dtype=np.uint8)  # even length (64 k): its uint16 view
        kernel(bits[lo * k : hi * k], flat[lo * k : hi * k], codes[lo * per_block : hi * per_block], scales[lo:hi],
               inv, tmp, tmp.view(np.uint16))

    _over_block_ranges(n_blocks, run)
    return codes.reshape(n_blocks, -1), scales
