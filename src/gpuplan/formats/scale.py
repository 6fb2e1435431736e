"""Shared-scale rules of MX block formats: the E8M0 code of a block from its float32 amax.

All rules work on exact float32 exponent bits (never a float log2, which is off by one just
below powers of two: microxcaling's float path, formats.md section 5.1 quirk 2). `emax` is
the element's emax_elem (E4M3 8, E5M2 15, E3M2 4, E2M3 2, E2M1 2, INT8 0), `max_value` its
largest finite value, `mbits` its mantissa bits.

- FLOOR (OCP MX v1.0 section 6.3, Algorithm 1 of Rouhani et al. 2023, the default):
  shared_exp = floor(log2(amax)) - emax.
- CEIL: shared_exp = ceil(log2(amax)) - emax (torchao ScaleCalculationMode.CEIL).
- EVEN: amax rounded half-up to `mbits` mantissa bits first, then FLOOR (torchao EVEN:
  (bits(amax) + (1 << (22 - mbits))) & 0xFF800000). Unlike torchao, a carry out of FLT_MAX gives
  exponent 128 (then clamped), not a NaN scale (formats.md section 5.2 "EVEN + FLT_MAX").
- RCEIL (cuBLAS / Transformer Engine / torchao RCEIL, PTX cvt.rp.satfinite.ue8m0x2.f32):
  E8M0 = round-up-to-power-of-two of the float32 quotient amax / max_value, from its bits
  (torchao `_f32_to_e8m0_rceil`: biased exponent +1 when the mantissa is non-zero; for an fp32
  subnormal quotient, +1 when the mantissa exceeds 0x400000 = 2^-127). Saturates at 0xFE.

Every rule then clamps shared_exp to [-127, 127] (E8M0 codes 0x00..0xFE). amax = 0 gives
0x00 (2^-127, formats.md 7.3 #35); a NaN or Inf amax gives 0xFF (the block is NaN, #37-38).
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from gpuplan.errors import InputError

E8M0_BIAS = 127
E8M0_NAN = 255


class ScaleRule(str, Enum):
    FLOOR = "floor"
    RCEIL = "rceil"
    CEIL = "ceil"
    EVEN = "even"


def scale_rule(value: "ScaleRule | str") -> ScaleRule:
    try:
        return ScaleRule(str(getattr(value, "value", value)).lower())
    except ValueError:
        allowed = ", ".join(r.value for r in ScaleRule)
        raise InputError(f"unknown scale rule '{value}'; allowed: {allowed}", field="scale_rule") from None


def e8m0_from_amax(amax: np.ndarray, *, emax: int, max_value: float, mbits: int, rule: ScaleRule) -> np.ndarray:
    """E8M0 scale codes (uint8) for float32 block maxima `amax` (>= 0 or NaN/Inf) under `rule`."""
    amax = np.asarray(amax, dtype=np.float32)
    bits = amax.view(np.uint32).astype(np.int64) & 0x7FFFFFFF
    nonfinite = (bits >> 23) == 255
    if rule is ScaleRule.RCEIL:
        quotient = (amax / np.float32(max_value)).astype(np.float32)
        qbits = quotient.view(np.uint32).astype(np.int64) & 0x7FFFFFFF
        qexp, qman = qbits >> 23, qbits & 0x7FFFFF
        round_up = ((qexp > 0) & (qman > 0)) | ((qexp == 0) & (qman > 0x400000))
        code = np.minimum(qexp + round_up, 254)
    else:
        # exact floor(log2(amax)) for normal and subnormal float32 (frexp is exact)
        mant, exp2 = np.frexp(amax.astype(np.float64))
        floor_log2 = exp2.astype(np.int64) - 1
        if rule is ScaleRule.CEIL:
            floor_log2 = floor_log2 + (mant != 0.5)
        elif rule is ScaleRule.EVEN:
            # add half an ulp at mbits fraction bits to the float32 bits; a carry bumps the exponent
            rounded_exp = (bits + (1 << (22 - mbits))) >> 23
            floor_log2 = np.where(rounded_exp > 0, rounded_exp - 127, floor_log2)
        shared_exp = np.clip(floor_log2 - emax, -E8M0_BIAS, E8M0_BIAS)
        code = shared_exp + E8M0_BIAS
    code = np.where(amax == 0, 0, code)
    code = np.where(nonfinite | np.isnan(amax), E8M0_NAN, code)
    return code.astype(np.uint8)
