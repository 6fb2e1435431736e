"""Element formats of at most 8 bits: OFP8 E4M3/E5M2, FNUZ FP8, MX FP6 E3M2/E2M3, FP4 E2M1,
MXINT8's INT8 and the E8M0 scale type. Bit-exact encode (float32 -> uint8 code) and decode.

Sources (see ../shared/reference/formats.md):
- OFP8 rev 1.0 Tables 1-2 (E4M3: bias 7, no Inf, NaN = S.1111.111, max 448; E5M2: IEEE-like,
  bias 15, max 57344), formats.md section 1.1.
- OCP MX v1.0 sections 5.3.2-5.3.3 (FP6, FP4: no Inf, no NaN) and 5.4.1 (E8M0: bias 127,
  2^-127..2^127, 0xFF = NaN), formats.md sections 2.2-2.3.
- FNUZ types (ml_dtypes README): no Inf, no -0, NaN = 0x80, bias one above the OCP type.

Rounding: the value is rounded once, on the integer significand of the float32 input, to the
element's grid (round to nearest, ties to even by default; ties away as microxcaling's
`round='nearest'` and PTX `cvt.rna` do, selectable). "Overflow" is decided after rounding
(OFP8 section 1.2 of formats.md): E4M3 464 -> 448, 465 -> overflow.

Overflow and special values:
- saturate=True (OFP8 saturating mode; what MX quantisation requires): a finite value or Inf
  beyond the largest finite value becomes +-max. NaN stays NaN where the type has one.
- saturate=False (OFP8 non-saturating mode): E4M3 -> NaN (0x7F|sign), E5M2 -> +-Inf,
  FNUZ -> NaN (0x80).
- FP6 and FP4 have neither Inf nor NaN, so they always saturate; NaN input gives the sign-only
  code (-0), as ml_dtypes does (the MX spec leaves it implementation-defined, formats.md 7.2 #30).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property

import numpy as np

from gpuplan.errors import InputError


class Specials(str, Enum):
    """Which bit patterns a minifloat reserves for non-finite values."""

    IEEE = "ieee"  # exponent all ones: mantissa 0 = Inf, else NaN (E5M2)
    FN = "fn"  # only S.1..1.1..1 is NaN, no Inf (OFP8 E4M3)
    FINITE = "finite"  # every pattern is a number (MX FP6, FP4)
    FNUZ = "fnuz"  # only 0x80 (negative-zero pattern) is NaN, no Inf, no -0


class Rounding(str, Enum):
    """Tie rule of round-to-nearest."""

    NEAREST_EVEN = "rne"  # IEEE default, OFP8/MX implementations, ml_dtypes
    NEAREST_AWAY = "rna"  # PTX cvt.rna (TF32), microxcaling round='nearest'


@dataclass(frozen=True)
class MiniFloat:
    """A sign + `ebits` exponent + `mbits` mantissa floating-point element type."""

    name: str
    ebits: int
    mbits: int
    bias: int
    specials: Specials
    ml_dtypes_name: str | None = None

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal: 1 - bias."""
        return 1 - self.bias

    @property
    def max_code_magnitude(self) -> int:
        """The magnitude bits (sign cleared) of the largest finite value."""
        all_ones = (1 << (self.ebits + self.mbits)) - 1
        if self.specials is Specials.IEEE:
            return ((1 << self.ebits) - 1 << self.mbits) - 1  # S.11110.11 for E5M2
        if self.specials is Specials.FN:
            return all_ones - 1  # S.1111.110 for E4M3
        return all_ones

    @property
    def nan_code(self) -> int | None:
        """Canonical NaN code (the one encode produces), or None when the type has no NaN."""
        if self.specials is Specials.FN:
            return (1 << (self.ebits + self.mbits)) - 1  # 0x7F, as ml_dtypes and torch
        if self.specials is Specials.IEEE:
            return ((1 << self.ebits) - 1 << self.mbits) | (1 << (self.mbits - 1))  # quiet NaN 0x7E
        if self.specials is Specials.FNUZ:
            return 1 << (self.ebits + self.mbits)  # 0x80
        return None

    @property
    def inf_code(self) -> int | None:
        if self.specials is Specials.IEEE:
            return (1 << self.ebits) - 1 << self.mbits  # 0x7C for E5M2
        return None

    @cached_property
    def values(self) -> np.ndarray:
        """float32 value of every code 0 .. 2^bits - 1 (the decode table; 2^19 entries for TF32)."""
        codes = np.arange(1 << self.bits, dtype=np.int64)
        sign = codes >> (self.ebits + self.mbits)
        mag = codes & ((1 << (self.ebits + self.mbits)) - 1)
        exp_field = mag >> self.mbits
        man_field = mag & ((1 << self.mbits) - 1)
        # value = (1 + m/2^M) 2^(e - bias) for e >= 1, m 2^(emin - M) for e = 0 (subnormal)
        normal = np.ldexp(1.0 + man_field / (1 << self.mbits), exp_field - self.bias)
        subnormal = np.ldexp(man_field.astype(np.float64), self.emin - self.mbits)
        value = np.where(exp_field == 0, subnormal, normal)
        value = np.where(sign == 1, -value, value)
        if self.specials is Specials.IEEE:
            top = exp_field == (1 << self.ebits) - 1
            value = np.where(top & (man_field == 0), np.copysign(np.inf, value), value)
            value = np.where(top & (man_field != 0), np.nan, value)
        elif self.specials is Specials.FN:
            value = np.where(mag == (1 << (self.ebits + self.mbits)) - 1, np.nan, value)
        elif self.specials is Specials.FNUZ:
            value = np.where(codes == 1 << (self.ebits + self.mbits), np.nan, value)
        out = value.astype(np.float32)
        out.setflags(write=False)
        return out

    @property
    def max_value(self) -> float:
        return float(self.values[self.max_code_magnitude])

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest normal: floor(log2(max_value)) (MX 'emax_elem')."""
        return int(np.frexp(self.max_value)[1]) - 1

    @property
    def min_normal(self) -> float:
        return float(2.0**self.emin)

    @property
    def min_subnormal(self) -> float:
        return float(2.0 ** (self.emin - self.mbits))

    @property
    def max_subnormal(self) -> float:
        return float((1 - 2.0**-self.mbits) * 2.0**self.emin)


@dataclass(frozen=True)
class IntElement:
    """MXINT8 element: 8-bit two's complement with an implied scale 2^-6 (value = k/64).

    The range is made symmetric, [-127, 127]/64, as microxcaling and the ARM reference do
    ("the OCP spec permits us to reduce the negative range", formats.md section 2.2); code 0x80
    (-2.0) is decoded but never produced.
    """

    name: str = "int8"
    bits: int = 8
    frac_bits: int = 6
    mbits: int = 6  # significand bits after the point of the largest value 1.111111b
    emax: int = 0

    @property
    def max_value(self) -> float:
        return 127 / 64

    @property
    def max_code_magnitude(self) -> int:
        return 127

    @cached_property
    def values(self) -> np.ndarray:
        out = (np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float32) / 64).astype(np.float32)
        out.setflags(write=False)
        return out


@dataclass(frozen=True)
class E8M0:
    """OCP MX v1.0 section 5.4.1 scale type: value 2^(code - 127), 0x00 = 2^-127, 0xFF = NaN.

    No sign, no zero, no Inf. Encoding (standalone cast) follows ml_dtypes' float8_e8m0fnu:
    round to nearest on the significand (so 1.5 -> 2, 3 -> 4, 0.75 -> 1), float32 subnormals
    above 2^-127 -> 0x01 and the rest -> 0x00, zero / negative / NaN / Inf -> 0xFF. saturate=True sends a finite overflow
    (>= 1.5 * 2^127) to 0xFE instead of NaN.
    """

    name: str = "e8m0"
    bits: int = 8
    bias: int = 127

    @cached_property
    def values(self) -> np.ndarray:
        exact = np.ldexp(1.0, np.arange(256) - 127)  # 0x00 -> 2^-127 (a float32 subnormal)
        exact[255] = np.nan
        out = exact.astype(np.float32)
        out.setflags(write=False)
        return out


ELEMENTS: dict[str, MiniFloat] = {
    f.name: f
    for f in (
        MiniFloat("e4m3", 4, 3, 7, Specials.FN, "float8_e4m3fn"),
        MiniFloat("e5m2", 5, 2, 15, Specials.IEEE, "float8_e5m2"),
        MiniFloat("e3m2", 3, 2, 3, Specials.FINITE, "float6_e3m2fn"),
        MiniFloat("e2m3", 2, 3, 1, Specials.FINITE, "float6_e2m3fn"),
        MiniFloat("e2m1", 2, 1, 1, Specials.FINITE, "float4_e2m1fn"),
        MiniFloat("e4m3fnuz", 4, 3, 8, Specials.FNUZ, "float8_e4m3fnuz"),
        MiniFloat("e5m2fnuz", 5, 2, 16, Specials.FNUZ, "float8_e5m2fnuz"),
    )
}
INT8 = IntElement()
SCALE_E8M0 = E8M0()
ALIASES = {
    "fp8_e4m3_raw": "e4m3", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "fp6_e3m2": "e3m2",
    "fp6_e2m3": "e2m3", "fp4": "e2m1", "fp4_e2m1": "e2m1", "float8_e4m3fnuz": "e4m3fnuz",
    "float8_e5m2fnuz": "e5m2fnuz", "ue8m0": "e8m0", "float8_e8m0fnu": "e8m0",
}
ELEMENT_NAMES = [*ELEMENTS, "int8", "e8m0"]


def element_format(name: str) -> MiniFloat | IntElement | E8M0:
    """Look up an element type by name (e4m3, e5m2, e3m2, e2m3, e2m1, e4m3fnuz, e5m2fnuz, int8, e8m0)."""
    key = ALIASES.get(str(name).lower(), str(name).lower())
    if key in ELEMENTS:
        return ELEMENTS[key]
    if key == "int8":
        return INT8
    if key == "e8m0":
        return SCALE_E8M0
    raise InputError(f"unknown element format '{name}'; allowed: {', '.join(ELEMENT_NAMES)}", field="format")


def as_float32(x) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiub":
        raise InputError(f"input must be numeric, got dtype {arr.dtype}", field="x")
    return np.ascontiguousarray(arr, dtype=np.float32)


def encode_minifloat(
    x32: np.ndarray,
    fmt: MiniFloat,
    *,
    saturate: bool = True,
    rounding: Rounding = Rounding.NEAREST_EVEN,
    exp_offset: np.ndarray | int = 0,
) -> np.ndarray:
    """Codes of float32 `x32 / 2^exp_offset` in `fmt`, rounded once (exact, no double rounding).

    Algorithm: take the 24-bit integer significand `sig` (leading 1 at bit 23; float32
    subnormals are normalised first) and unbiased exponent `e` of the float32, subtract `exp_offset` from `e` (the MX shared
    exponent), and shift `sig` right so `mbits` fraction bits remain, plus (emin - e) more when
    the result is subnormal in `fmt`. The dropped bits decide the rounding. The code's magnitude
    bits are then ((max(e, emin) - emin) << mbits) + q, which carries naturally into the next
    binade when q rounds up to 2^(mbits+1).
    """
    bits = x32.view(np.uint32).astype(np.int64)
    sign = bits >> 31
    mag_bits = bits & 0x7FFFFFFF
    exp_field = mag_bits >> 23
    man_field = mag_bits & 0x7FFFFF
    # normalise float32 subnormals so sig always carries its leading 1 at bit 23:
    # man = 2^(bl-1).. with bl = bit length -> sig = man << (24 - bl), e = -126 - (24 - bl)
    bit_length = np.frexp(man_field.astype(np.float64))[1].astype(np.int64)
    lz = np.where(exp_field == 0, np.where(man_field == 0, 0, 24 - bit_length), 0)
    sig = np.where(exp_field == 0, man_field << lz, man_field | 0x800000)
    e = np.where(exp_field == 0, -126 - lz, exp_field - 127) - np.asarray(exp_offset, dtype=np.int64)
    m = fmt.mbits
    shift = np.minimum(23 - m + np.maximum(fmt.emin - e, 0), 40)
    q = sig >> shift
    rem = sig & ((np.int64(1) << shift) - 1)
    half = np.int64(1) << (shift - 1)
    if rounding is Rounding.NEAREST_EVEN:
        up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    else:
        up = rem >= half
    q = q + up
    mag = np.where(sig == 0, 0, ((np.maximum(e, fmt.emin) - fmt.emin) << m) + q)
    nan_in = (exp_field == 255) & (man_field != 0)
    over = (mag > fmt.max_code_magnitude) & ~nan_in  # includes +-Inf inputs
    sign_shift = fmt.ebits + m
    if saturate or fmt.specials is Specials.FINITE:
        mag = np.where(over, fmt.max_code_magnitude, mag)
    elif fmt.specials is Specials.IEEE:
        mag = np.where(over, fmt.inf_code, mag)
    elif fmt.specials is Specials.FN:
        mag = np.where(over, fmt.nan_code, mag)
    code = (sign << sign_shift) | np.minimum(mag, (1 << sign_shift) - 1)
    if fmt.specials is Specials.FNUZ:
        code = np.where(mag == 0, 0, code)  # no negative zero
        if not saturate:
            code = np.where(over, fmt.nan_code, code)
    if fmt.nan_code is not None:
        code = np.where(nan_in, fmt.nan_code, code)
    else:
        code = np.where(nan_in, 1 << sign_shift, code)  # ml_dtypes: NaN -> -0 code
    return code.astype(np.uint8 if fmt.bits <= 8 else np.uint16 if fmt.bits <= 16 else np.uint32)


def encode_int8(x32: np.ndarray, exp_offset: np.ndarray | int = 0) -> np.ndarray:
    """MXINT8 element codes: RNE(x / 2^exp_offset * 64) clamped to [-127, 127]; NaN -> 0.

    x * 2^(6 - exp_offset) is exact in float64 (|exponent| < 300), and np.rint ties to even.
    """
    scaled = np.ldexp(x32.astype(np.float64), 6 - np.asarray(exp_offset, dtype=np.int64))
    k = np.clip(np.rint(np.nan_to_num(scaled, nan=0.0, posinf=127, neginf=-127)), -127, 127)
    return k.astype(np.int8).view(np.uint8)


def encode_e8m0(x32: np.ndarray, saturate: bool = True) -> np.ndarray:
    """E8M0 codes of a float32 array (see `E8M0`): biased exponent, +1 when the significand >= 1.5."""
    bits = x32.view(np.uint32).astype(np.int64)
    exp_field = (bits >> 23) & 0xFF
    man_field = bits & 0x7FFFFF
    negative = (bits >> 31) == 1
    # normal: 2^(e-127) * 1.m rounds up iff 1.m >= 1.5. float32 subnormals (ml_dtypes, and
    # torchao's RCEIL for the same bits): above 2^-127 (mantissa > 0x400000) -> 0x01, else 0x00.
    code = np.where(exp_field == 0, (man_field > 0x400000).astype(np.int64), exp_field + (man_field >= 0x400000))
    overflow = (code >= 255) & (exp_field != 255)
    code = np.where(overflow, 254 if saturate else 255, code)
    invalid = negative | (exp_field == 255) | ((exp_field == 0) & (man_field == 0))
    return np.where(invalid, 255, code).astype(np.uint8)
