"""`encode` / `decode`: the element-level public API, for 4/6/8-bit element types and for the
16/32-bit IEEE-like types BF16, FP16 and TF32.

BF16 (1/8/7), FP16 (1/5/10) and TF32 (1/8/10) are rounded from float32 with the same exact
single-rounding routine as the small types (`element.encode_minifloat`), which reproduces
PyTorch's `round_to_nearest_even` for BF16 ((u + 0x7FFF + ((u >> 16) & 1)) >> 16, formats.md
section 4) and numpy's float16 cast. TF32 defaults to round-to-nearest-even; PTX `cvt.rna`
(ties away from zero) is `rounding="rna"`. Codes: BF16/FP16 as uint16 bit patterns, TF32 as the
uint32 float32 bit pattern with the low 13 mantissa bits zero (how TF32 is held in registers).

saturate=True clamps a finite overflow (and Inf) to the largest finite value (`.satfinite`);
saturate=False is the IEEE cast (overflow -> Inf), which formats.md section 7.5 tabulates.
"""

from __future__ import annotations

import numpy as np

from gpuplan.errors import InputError
from gpuplan.formats.element import (
    ELEMENT_NAMES, E8M0, IntElement, MiniFloat, Rounding, Specials, as_float32, element_format,
    encode_e8m0, encode_int8, encode_minifloat,
)

WIDE: dict[str, MiniFloat] = {
    "bf16": MiniFloat("bf16", 8, 7, 127, Specials.IEEE, "bfloat16"),
    "fp16": MiniFloat("fp16", 5, 10, 15, Specials.IEEE, "float16"),
    "tf32": MiniFloat("tf32", 8, 10, 127, Specials.IEEE, None),
}
WIDE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
CODEC_NAMES = [*ELEMENT_NAMES, *WIDE]


def _wide(name: str) -> MiniFloat | None:
    key = str(name).lower()
    return WIDE.get(WIDE_ALIASES.get(key, key))


def encode(x, fmt: str, saturate: bool = True, rounding: Rounding | str = Rounding.NEAREST_EVEN) -> np.ndarray:
    """Codes of `x` (cast to float32 first) in format `fmt`.

    fmt: "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "e4m3fnuz", "e5m2fnuz", "int8" (MXINT8 element
    k/64), "e8m0" -> uint8; "bf16", "fp16" -> uint16; "tf32" -> uint32 (float32 bits).
    saturate: OFP8 saturating mode (default) vs non-saturating (E4M3 -> NaN, E5M2 -> Inf).
    rounding: "rne" (default) or "rna" (ties away; PTX cvt.rna for TF32).
    """
    try:
        rounding = Rounding(rounding)
    except ValueError:
        raise InputError(f"unknown rounding '{rounding}'; allowed: rne, rna", field="rounding") from None
    x32 = as_float32(x)
    wide = _wide(fmt)
    if wide is not None:
        code = encode_minifloat(x32, wide, saturate=saturate, rounding=rounding)
        if wide.name == "tf32":
            return (code.astype(np.uint32) << 13).astype(np.uint32)
        return code
    spec = element_format(fmt)
    if isinstance(spec, MiniFloat):
        return encode_minifloat(x32, spec, saturate=saturate, rounding=rounding)
    if isinstance(spec, IntElement):
        return encode_int8(x32)
    return encode_e8m0(x32, saturate=saturate)


def decode(codes, fmt: str) -> np.ndarray:
    """float32 values of integer `codes` in format `fmt` (exact; table lookup for <= 8 bits)."""
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        raise InputError(f"codes must be integers, got dtype {arr.dtype}", field="codes")
    wide = _wide(fmt)
    if wide is not None:
        limit = 1 << (32 if wide.name == "tf32" else 16)
        if arr.size and (arr.min() < 0 or arr.max() >= limit):
            raise InputError(f"codes for {wide.name} must lie in [0, {limit - 1}]", field="codes")
        if wide.name == "bf16":
            return (arr.astype(np.uint32) << 16).view(np.float32)
        if wide.name == "fp16":
            return arr.astype(np.uint16).view(np.float16).astype(np.float32)
        return (arr.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    spec = element_format(fmt)
    if arr.size and (arr.min() < 0 or arr.max() >= 1 << spec.bits):
        raise InputError(f"codes for {spec.name} must lie in [0, {(1 << spec.bits) - 1}]", field="codes")
    return spec.values[arr.astype(np.intp)]


def round_trip(x, fmt: str, saturate: bool = True, rounding: Rounding | str = Rounding.NEAREST_EVEN) -> np.ndarray:
    """decode(encode(x, fmt)) as float32: the value `x` takes when stored in `fmt`."""
    return decode(encode(x, fmt, saturate=saturate, rounding=rounding), fmt)


__all__ = ["encode", "decode", "round_trip", "WIDE", "CODEC_NAMES", "E8M0"]
