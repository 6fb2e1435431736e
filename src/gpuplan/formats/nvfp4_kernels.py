"""Compiled NVFP4 quantiser and dequantiser (numba): one pass over the blocks, bit for bit the numpy
reference of `block.quantize_nvfp4_blocks` / `QuantizedTensor.dequantize` (tests/formats/
test_nvfp4_kernels.py), which they replace for large inputs blocked along the last axis.

Per block of k elements (16; NVIDIA NVFP4, TE nvfp4.rst, torchao `nvfp4_quantize` operation order):
    amax        = max |x|                                   (NaN when a NaN is in the block)
    s_block     = fp32(fp32(amax / 6) / s_global)           (without s_global: fp32(amax / 6))
    scale code  = E4M3(clip(s_block, 2^-6, 448)), RNE       (0x7F, NaN, when s_block is not finite)
    element     = E2M1(clip(fp32(fp32(x x fp32(1 / s_global)) / S), -6, 6)), RNE, S = E4M3 value
                  (without s_global: fp32(x / S)); 0 for every element of a non-finite block
    dequantized = fp32(E2M1 value x fp32(s_global x S))
Each float32 operation is an IEEE float32 operation (correctly rounded; the dequantizer does it in
float64 and rounds once, which gives the same result: 53 >= 2 x 24 + 2 bits, no double rounding).
The global amax is one more read of the input (`tensor_amax`): s_global must be known before the
first block.
Blocks are split over one thread per core (`kernels.over_block_ranges`; the kernels release the GIL);
one kernel is compiled per block size (and level), so its block loops unroll and vectorise.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpuplan.formats.element import ELEMENTS
from gpuplan.formats.int32_ops import max_magnitude_bits
from gpuplan.formats.kernels import _encode_scaled, _make_minifloat_encoder, over_block_ranges

E4M3, E2M1 = ELEMENTS["e4m3"], ELEMENTS["e2m1"]

#: torchao's clamp of the block scale: the smallest normal E4M3 and the largest E4M3 (block.py)
SCALE_MIN = np.float32(2.0**-6)
SCALE_MAX = np.float32(448.0)
E4M3_NAN = np.uint8(E4M3.nan_code)
#: E2M1 has no NaN: a NaN element becomes code 0b1000 (-0), as encode_minifloat writes it (ml_dtypes)
E2M1_NAN_AS = 1 << (E2M1.ebits + E2M1.mbits)


@njit(cache=False, nogil=True, error_model="numpy")  # x / 0 -> inf, as in numpy
def _amax_bits(bits):
    """max over |x| of the float32 bit patterns (> 0x7F800000: a NaN is present)."""
    ab = np.uint32(0)
    for i in range(bits.shape[0]):
        ab = max(ab, bits[i] & np.uint32(0x7FFFFFFF))
    return ab


def _make_nvfp4_kernel(k, two_level):
    """The quantiser of blocks of `k`, single- or two-level, both compiled in as constants (the block
    loops unrolled and vectorised; a run-time k leaves them scalar, as in kernels._make_mx_kernel).
    The block amax is one vector reduction (`max_magnitude_bits`); the elements are divided in
    float32 (IEEE division is correctly rounded: the same as float64 then one rounding, 16 lanes
    instead of 8) and encoded by the MX kernels' E2M1 encoder (32-bit lanes)."""
    one = np.float32(1.0)
    six = np.float32(6.0)
    # E4M3 (bias 7, emin -6, 3 mantissa bits, largest code magnitude 0x7E) parameters of kernels._encode_scaled
    e4_min_normal, e4_sub = np.float32(2.0**-6), np.float32(2.0**9)
    # E2M1: 1 mantissa bit, 2 exponent bits, bias 1, emin 0, largest code magnitude 0x7 (6.0)
    encode_e2m1 = _make_minifloat_encoder(1, 2, 1, 0, 0x7)

    @njit(cache=False, nogil=True, error_model="numpy", boundscheck=False)  # x / 0 -> inf, as in numpy
    def kernel(bits, xf, s_global, inv_global, lut_e4m3, codes, scales):
        n_blocks = xf.shape[0] // k
        for blk in range(n_blocks):
            base = blk * k
            ab = max_magnitude_bits(bits, base, k)
            if ab >= 0x7F800000:  # Inf or NaN in the block: s_block is not finite
                finite = False
                s_block = np.float32(0.0)
            else:
                amax = np.int32(ab).view(np.float32)
                s_block = np.float32(amax / six)
                if two_level:
                    s_block = np.float32(s_block / s_global)
                finite = np.isfinite(s_block)
            if not finite:
                scales[blk] = E4M3_NAN
                for i in range(k):
                    codes[base + i] = 0
                continue
            clamped = min(max(s_block, SCALE_MIN), SCALE_MAX)
            sc = np.uint8(_encode_scaled(clamped, one, 3, 4, 7, -6, 0x7E, e4_min_normal, e4_sub))
            scales[blk] = sc
            s_val = lut_e4m3[sc]
            for i in range(k):
                x = xf[base + i]
                if two_level:
                    y = np.float32(np.float32(x * inv_global) / s_val)
                else:
                    y = np.float32(x / s_val)
                y_clamped = min(max(y, np.float32(-6.0)), np.float32(6.0))
                code = encode_e2m1(np.float32(y_clamped).view(np.int32), y_clamped, one)
                codes[base + i] = E2M1_NAN_AS if np.isnan(y) else code

    return kernel


def _make_nvfp4_dequant_kernel(k):
    """out = fp32(E2M1 value x fp32(s_global x E4M3 value)); one code per byte (unpacked); `k` compiled in."""

    @njit(cache=False, nogil=True, error_model="numpy")  # x / 0 -> inf, as in numpy
    def kernel(codes, scales, s_global, lut_e2m1, lut_e4m3, out):
        for blk in range(scales.shape[0]):
            total = np.float64(np.float32(np.float64(s_global) * np.float64(lut_e4m3[scales[blk]])))
            base = blk * k
            for i in range(k):
                out[base + i] = np.float32(np.float64(lut_e2m1[codes[base + i] & np.uint8(0xF)]) * total)

    return kernel


_KERNELS: dict = {}


def _kernel_for(kind: str, *key):
    """The compiled kernel of `kind` ("quantize" with (k, two_level), "dequantize" with (k,)), built on first use."""
    if (kind, *key) not in _KERNELS:
        make = _make_nvfp4_kernel if kind == "quantize" else _make_nvfp4_dequant_kernel
        _KERNELS[(kind, *key)] = make(*key)
    return _KERNELS[(kind, *key)]


def tensor_amax(x32: np.ndarray) -> np.float32:
    """max |x| of a float32 array (NaN when it holds a NaN), in one read (threads over chunks)."""
    bits = np.ascontiguousarray(x32, dtype=np.float32).reshape(-1).view(np.uint32)
    if bits.size == 0:
        return np.float32(0.0)
    chunk = 1 << 16
    n = -(-bits.size // chunk)
    parts = np.zeros(n, dtype=np.uint32)

    def run(lo: int, hi: int) -> None:
        for c in range(lo, hi):
            parts[c] = _amax_bits(bits[c * chunk : (c + 1) * chunk])

    over_block_ranges(n, run, per_thread=4)
    ab = parts.max()
    return np.float32(np.nan) if ab > 0x7F800000 else np.uint32(ab).view(np.float32)


def quantize_nvfp4_rows(rows: np.ndarray, tensor_scale: np.float32 | None) -> tuple[np.ndarray, np.ndarray]:
    """(E2M1 codes (n_blocks, k) uint8, E4M3 scale codes (n_blocks,)) of contiguous float32 `rows`
    (n_blocks, k); `tensor_scale` the FP32 s_global, or None for single-level NVFP4."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    n_blocks, k = rows.shape
    flat = rows.reshape(-1)
    bits = flat.view(np.uint32)
    codes = np.empty(n_blocks * k, dtype=np.uint8)  # one code per byte: the QuantizedTensor's form
    scales = np.empty(n_blocks, dtype=np.uint8)
    two_level = tensor_scale is not None
    s_global = np.float32(tensor_scale if two_level else 1.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv_global = np.float32(np.float32(1.0) / s_global)
    lut = np.ascontiguousarray(E4M3.values, dtype=np.float32)

    kernel = _kernel_for("quantize", int(k), bool(two_level))

    def run(lo: int, hi: int) -> None:
        kernel(bits[lo * k : hi * k], flat[lo * k : hi * k], s_global, inv_global, lut, codes[lo * k : hi * k], scales[lo:hi])

    over_block_ranges(n_blocks, run)
    return codes.reshape(n_blocks, k), scales


def dequantize_nvfp4_rows(codes: np.ndarray, scales: np.ndarray, k: int, tensor_scale: float,
                          out: np.ndarray | None = None) -> np.ndarray:
    """float32 (n_blocks * k,) values of NVFP4 blocks stored row after row (one code per byte),
    written into `out` (contiguous float32 of that size) when given."""
    flat_codes = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    flat_scales = np.ascontiguousarray(scales, dtype=np.uint8).reshape(-1)
    if out is None:
        out = np.empty(flat_scales.size * k, dtype=np.float32)
    lut2 = np.ascontiguousarray(E2M1.values, dtype=np.float32)
    lut4 = np.ascontiguousarray(E4M3.values, dtype=np.float32)
    s_global = np.float32(tensor_scale)

    kernel = _kernel_for("dequantize", int(k))

    def run(lo: int, hi: int) -> None:
        kernel(flat_codes[lo * k : hi * k], flat_scales[lo:hi], s_global, lut2, lut4, out[lo * k : hi * k])

    over_block_ranges(flat_scales.size, run)
    return out


__all__ = ["dequantize_nvfp4_rows", "quantize_nvfp4_rows", "tensor_amax"]
