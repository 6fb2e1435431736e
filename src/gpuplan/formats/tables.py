"""Reference table of every format: bias, emax, largest/smallest normal, smallest subnormal,
and the complete value table of the 4- and 6-bit element types (formats.md sections 1.1, 2.2, 4)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.formats.block_format import BLOCK_FORMATS
from gpuplan.formats.codec import WIDE
from gpuplan.formats.element import ELEMENTS, INT8, SCALE_E8M0, MiniFloat


@dataclass(frozen=True)
class FormatInfo:
    name: str
    bits: int
    exponent_bits: int | None
    mantissa_bits: int | None
    bias: int | None
    emax: int | None
    max_normal: float
    min_normal: float | None
    min_subnormal: float | None
    max_subnormal: float | None
    has_inf: bool
    has_nan: bool
    bits_per_element: float
    block_size: int | None = None
    scale: str | None = None


def _minifloat_info(f: MiniFloat) -> FormatInfo:
    return FormatInfo(
        name=f.name, bits=f.bits, exponent_bits=f.ebits, mantissa_bits=f.mbits, bias=f.bias, emax=f.emax,
        max_normal=float(np.float64(f.max_value)) if f.bits <= 8 else _wide_max(f), min_normal=f.min_normal,
        min_subnormal=f.min_subnormal, max_subnormal=f.max_subnormal, has_inf=f.inf_code is not None,
        has_nan=f.nan_code is not None, bits_per_element=float(32 if f.name == "tf32" else f.bits),
    )


def _wide_max(f: MiniFloat) -> float:
    """(2 - 2^-M) * 2^(2^E - 2 - bias) for the IEEE-like 16/19-bit types."""
    return float((2 - 2.0**-f.mbits) * 2.0 ** ((1 << f.ebits) - 2 - f.bias))


def format_table() -> list[FormatInfo]:
    """One row per element type, per IEEE-like wide type, and per block format."""
    rows = [_minifloat_info(f) for f in ELEMENTS.values()]
    rows.append(FormatInfo("int8", 8, None, 7, None, INT8.emax, INT8.max_value, None, 1 / 64, None, False, False, 8.0))
    rows.append(FormatInfo("e8m0", 8, 8, 0, SCALE_E8M0.bias, 127, 2.0**127, 2.0**-127, None, None, False, True, 8.0))
    rows += [_minifloat_info(f) for f in WIDE.values()]
    for bf in BLOCK_FORMATS.values():
        el = bf.element
        rows.append(FormatInfo(
            name=bf.name, bits=el.bits, exponent_bits=getattr(el, "ebits", None), mantissa_bits=el.mbits,
            bias=getattr(el, "bias", None), emax=el.emax, max_normal=float(el.max_value),
            min_normal=getattr(el, "min_normal", None), min_subnormal=getattr(el, "min_subnormal", 1 / 64),
            max_subnormal=getattr(el, "max_subnormal", None), has_inf=False,
            has_nan=True, bits_per_element=bf.bits_per_element, block_size=bf.block_size, scale=bf.scale_kind.value,
        ))
    return rows


def value_table(fmt: str) -> list[dict]:
    """Every code of a 4- or 6-bit element type with its value: [{code, bits, value}, ...]."""
    f = ELEMENTS[fmt]
    return [
        {"code": c, "bits": format(c, f"0{f.bits}b"), "value": float(v)}
        for c, v in enumerate(f.values.tolist())
    ]


SMALL_TYPES = ("e2m1", "e3m2", "e2m3")
