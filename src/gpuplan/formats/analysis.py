"""Quantisation error of a tensor in each format: MSE, SNR, max abs/rel error, saturation,
flush-to-zero, bits per element including scales, bytes saved.

Definitions (x = input as float64, y = the value stored in the format, read back, as float64):
- mse = mean((y - x)^2) over elements where both are finite; snr_db = 10 log10(mean(x^2) / mse).
- max_abs_error = max |y - x|; max_rel_error = max |y - x| / |x| over x != 0.
- fraction_saturated: x beyond the largest magnitude the element (times its block scale) holds,
  i.e. clamped to +-max (for plain casts: |x| > max finite value).
- fraction_flushed_to_zero: x != 0 but y == 0. fraction_nonfinite: y NaN/Inf where x is finite.
- bits_per_element = storage bytes x 8 / elements (MXFP4: 4 + 8/32 = 4.25; scales included;
  NVFP4 adds its 4-byte tensor scale; TF32 is stored in 32 bits).
- bytes_saved = bytes of the input in its own dtype - storage bytes.

Format names: the block formats (mxfp8_e4m3, ..., nvfp4); fp8_e4m3 / fp8_e5m2 = per-tensor
scaled FP8 (FP32 scale amax / max_value, saturating cast: Transformer Engine current scaling);
and the plain casts e4m3, e5m2, e3m2, e2m3, e2m1, bf16, fp16, tf32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.formats.block import quantize
from gpuplan.formats.block_format import BLOCK_FORMATS, block_format
from gpuplan.formats.codec import WIDE, decode, encode
from gpuplan.formats.element import ELEMENTS, IntElement, MiniFloat
from gpuplan.formats.scale import ScaleRule

PER_TENSOR = {"fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2"}
CAST = [*ELEMENTS, *WIDE]
COMPARE_FORMATS = [*BLOCK_FORMATS, *PER_TENSOR, *CAST]


@dataclass(frozen=True)
class ErrorReport:
    format: str
    elements: int
    mse: float
    snr_db: float
    max_abs_error: float
    max_rel_error: float
    fraction_saturated: float
    fraction_flushed_to_zero: float
    fraction_nonfinite: float
    bits_per_element: float
    storage_bytes: int
    input_bytes: int
    bytes_saved: int


def _stored(x32: np.ndarray, name: str, rule: ScaleRule) -> tuple[np.ndarray, np.ndarray, int]:
    """(values read back, saturated mask, storage bytes) of float32 `x32` stored as `name`."""
    n = x32.size
    if name in BLOCK_FORMATS:
        q = quantize(x32, name, scale_rule=rule)
        y = q.dequantize()
        codes = q.layout.crop(q.codes)
        el = q.fmt.element
        if isinstance(el, IntElement):
            at_max = np.abs(codes.view(np.int8).astype(np.int16)) == 127
        else:
            at_max = (codes & ((1 << (el.bits - 1)) - 1)) == el.max_code_magnitude
        with np.errstate(invalid="ignore"):
            sat = at_max & (np.abs(x32) > np.abs(y))
        return y, sat, q.storage_bytes
    if name in PER_TENSOR:
        el = ELEMENTS[PER_TENSOR[name]]
        amax = np.float32(np.max(np.abs(x32))) if n else np.float32(0)
        s = np.float32(amax / np.float32(el.max_value)) if amax > 0 and np.isfinite(amax) else np.float32(1)
        with np.errstate(invalid="ignore", over="ignore"):
            y = (decode(encode(x32 / s, el.name), el.name) * s).astype(np.float32)
            sat = np.abs(x32 / s) > el.max_value
        return y, sat, n + 4
    if name in CAST:
        f: MiniFloat = ELEMENTS.get(name) or WIDE[name]
        y = decode(encode(x32, name, saturate=True), name)
        finite_max = np.abs(y[np.isfinite(y)]).max() if False else _max_finite(name)
        with np.errstate(invalid="ignore"):
            sat = np.isfinite(x32) & (np.abs(x32) > finite_max) | np.isinf(x32)
        bits = 32 if name == "tf32" else f.bits
        return y, sat, -(-n * bits // 8)
    raise InputError(f"unknown format '{name}'; allowed: {', '.join(COMPARE_FORMATS)}", field="formats")


def _max_finite(name: str) -> float:
    if name in ELEMENTS:
        return ELEMENTS[name].max_value
    f = WIDE[name]
    return float((2 - 2.0**-f.mbits) * 2.0 ** ((1 << f.ebits) - 2 - f.bias))


def error_report(x, name: str, scale_rule: ScaleRule | str = ScaleRule.FLOOR) -> ErrorReport:
    """Error of storing `x` in format `name` (see the module docstring for each figure)."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub" and arr.dtype.name not in ("bfloat16",) and not arr.dtype.name.startswith("float"):
        raise InputError(f"input must be numeric, got dtype {arr.dtype}", field="x")
    x32 = np.ascontiguousarray(arr.astype(np.float32))
    key = name.lower()
    if key in BLOCK_FORMATS or key in ("mxfp8", "mxfp6"):
        key = block_format(key).name
    y, sat, storage = _stored(x32, key, ScaleRule(getattr(scale_rule, "value", scale_rule)))
    xs = x32.astype(np.float64).reshape(-1)
    ys = y.astype(np.float64).reshape(-1)
    n = xs.size
    if n == 0:
        raise InputError("the tensor has no elements", field="x")
    finite_in = np.isfinite(xs)
    ok = finite_in & np.isfinite(ys)
    err = np.abs(ys[ok] - xs[ok])
    mse = float(np.mean(err**2)) if err.size else float("nan")
    power = float(np.mean(xs[ok] ** 2)) if err.size else float("nan")
    snr = float("inf") if mse == 0 else 10 * np.log10(power / mse) if power > 0 else float("-inf")
    nz = ok & (xs != 0)
    rel = np.abs(ys[nz] - xs[nz]) / np.abs(xs[nz])
    return ErrorReport(
        format=key, elements=n, mse=mse, snr_db=float(snr),
        max_abs_error=float(err.max()) if err.size else float("nan"),
        max_rel_error=float(rel.max()) if rel.size else 0.0,
        fraction_saturated=float(np.count_nonzero(sat) / n),
        fraction_flushed_to_zero=float(np.count_nonzero((xs != 0) & finite_in & (ys == 0)) / n),
        fraction_nonfinite=float(np.count_nonzero(finite_in & ~np.isfinite(ys)) / n),
        bits_per_element=storage * 8 / n, storage_bytes=int(storage), input_bytes=int(arr.nbytes),
        bytes_saved=int(arr.nbytes - storage),
    )


def compare(x, formats: list[str], scale_rule: ScaleRule | str = ScaleRule.FLOOR) -> list[ErrorReport]:
    """One ErrorReport per format name (validated up front, so nothing is half-done on bad input)."""
    names = [f.strip().lower() for f in formats if f.strip()]
    if not names:
        raise InputError(f"no formats given; allowed: {', '.join(COMPARE_FORMATS)}", field="formats")
    for f in names:
        if f not in COMPARE_FORMATS and f not in ("mxfp8", "mxfp6"):
            raise InputError(f"unknown format '{f}'; allowed: {', '.join(COMPARE_FORMATS)}", field="formats")
    return [error_report(x, f, scale_rule) for f in names]
