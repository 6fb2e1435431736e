"""Packing sub-byte element codes into bytes, and the gpt-oss `*_blocks` / `*_scales` layout.

- FP4 (E2M1): two codes per byte, element 2j in the LOW nibble, 2j+1 in the high nibble, as the
  gpt-oss checkpoints (`gpt_oss/torch/weights.py`: lut[blk & 0xF] -> even, lut[blk >> 4] -> odd)
  and PyTorch's float4_e2m1fn_x2 store them (formats.md section 2.2).
- FP6 (E3M2/E2M3): four codes in three bytes, little-endian bit stream: the 24-bit word
  c0 | c1 << 6 | c2 << 12 | c3 << 18 is stored low byte first. (The MX spec does not fix a
  physical layout; this is the natural extension of low-first nibble packing.)
- 8-bit codes are stored as they are.
The packed axis is the last one; its length must be a multiple of 2 (FP4) or 4 (FP6).
"""

from __future__ import annotations

import numpy as np

from gpuplan.errors import InputError


def _check(codes: np.ndarray, bits: int, multiple: int) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        raise InputError(f"codes must be integers, got dtype {arr.dtype}", field="codes")
    if arr.ndim == 0 or arr.shape[-1] % multiple:
        raise InputError(f"the last axis of codes must be a multiple of {multiple} to pack {bits}-bit codes", field="codes")
    if arr.size and (arr.min() < 0 or arr.max() >= 1 << bits):
        raise InputError(f"codes must lie in [0, {(1 << bits) - 1}] to pack as {bits}-bit", field="codes")
    return arr.astype(np.uint8)


def pack_fp4(codes) -> np.ndarray:
    """(..., n) 4-bit codes -> (..., n/2) bytes, low nibble = even element."""
    arr = _check(codes, 4, 2)
    return (arr[..., 0::2] | (arr[..., 1::2] << 4)).astype(np.uint8)


def unpack_fp4(packed) -> np.ndarray:
    """(..., n/2) bytes -> (..., n) 4-bit codes (inverse of pack_fp4)."""
    arr = np.asarray(packed, dtype=np.uint8)
    out = np.empty(arr.shape[:-1] + (arr.shape[-1] * 2,), dtype=np.uint8)
    out[..., 0::2] = arr & 0x0F
    out[..., 1::2] = arr >> 4
    return out


def pack_fp6(codes) -> np.ndarray:
    """(..., n) 6-bit codes -> (..., 3n/4) bytes: each 4 codes as a 24-bit little-endian word."""
    arr = _check(codes, 6, 4).astype(np.uint32)
    g = arr.reshape(arr.shape[:-1] + (-1, 4))
    word = g[..., 0] | (g[..., 1] << 6) | (g[..., 2] << 12) | (g[..., 3] << 18)
    out = np.stack([word & 0xFF, (word >> 8) & 0xFF, word >> 16], axis=-1).astype(np.uint8)
    return out.reshape(arr.shape[:-1] + (-1,))


def unpack_fp6(packed) -> np.ndarray:
    """(..., 3n/4) bytes -> (..., n) 6-bit codes (inverse of pack_fp6)."""
    arr = np.asarray(packed, dtype=np.uint8)
    if arr.ndim == 0 or arr.shape[-1] % 3:
        raise InputError("the last axis of packed FP6 data must be a multiple of 3 bytes", field="packed")
    g = arr.reshape(arr.shape[:-1] + (-1, 3)).astype(np.uint32)
    word = g[..., 0] | (g[..., 1] << 8) | (g[..., 2] << 16)
    out = np.stack([(word >> s) & 0x3F for s in (0, 6, 12, 18)], axis=-1).astype(np.uint8)
    return out.reshape(arr.shape[:-1] + (-1,))


def pack(codes, bits: int) -> np.ndarray:
    """Pack `bits`-bit codes along the last axis (4, 6 or 8)."""
    if bits == 4:
        return pack_fp4(codes)
    if bits == 6:
        return pack_fp6(codes)
    if bits == 8:
        return _check(codes, 8, 1)
    raise InputError(f"cannot pack {bits}-bit codes; allowed: 4, 6, 8", field="bits")


def unpack(packed, bits: int) -> np.ndarray:
    if bits == 4:
        return unpack_fp4(packed)
    if bits == 6:
        return unpack_fp6(packed)
    if bits == 8:
        return np.asarray(packed, dtype=np.uint8)
    raise InputError(f"cannot unpack {bits}-bit codes; allowed: 4, 6, 8", field="bits")
