"""Units and parsing of human quantities. Conventions (DESIGN.md):

- bandwidth and FLOPs are SI decimal: 1 GB/s = 1e9 B/s, 1 TFLOP/s = 1e12 FLOP/s;
  `*_gbps` in gpuplan always means gigaBYTES per second; network line rates are `*_gbit_s`.
- memory capacity is reported in binary units (GiB = 2**30 B) and stored in bytes.
"""

from __future__ import annotations

import math
import re

from gpuplan.errors import InputError
from gpuplan.validation_rules import INT64_MAX, check_number, show

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4
KB = 1000
MB = 1000**2
GB = 1000**3
TB = 1000**4

_BYTE_UNITS = {
    "": 1, "b": 1,
    "k": KB, "kb": KB, "m": MB, "mb": MB, "g": GB, "gb": GB, "t": TB, "tb": TB,
    "kib": KIB, "mib": MIB, "gib": GIB, "tib": TIB,
}
_COUNT_SUFFIX = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_NUM = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


def parse_bytes(text: str | int | float, field: str = "size") -> int:
    """'1GiB' -> 1073741824, '48KiB' -> 49152, '2GB' -> 2e9, '4096' -> 4096 bytes."""
    allowed = "a size >= 0 bytes and < 2^63, e.g. 80GiB, 48KiB, 2GB or 4096"
    if isinstance(text, (int, float)):
        value = float(text) if isinstance(text, float) else text
    else:
        if not isinstance(text, str):
            raise InputError(f"{field}: must be {allowed}, got {show(text)}", field=field, allowed=allowed)
        m = re.fullmatch(_NUM + r"\s*([a-zA-Z]*)", text.strip())
        unit = m.group(2).lower() if m else None
        if not m or unit not in _BYTE_UNITS:
            raise InputError(
                f"{field}: cannot read '{text}' as a size; use a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB",
                field=field, allowed=allowed,
            )
        value = float(m.group(1)) * _BYTE_UNITS[unit]
    if isinstance(value, float) and (not math.isfinite(value) or value < 0 or value >= 2.0**63):
        raise InputError(f"{field}: must be {allowed}, got {show(text)}", field=field, allowed=allowed)
    if isinstance(value, int) and not 0 <= value <= INT64_MAX:
        raise InputError(f"{field}: must be {allowed}, got {show(text)}", field=field, allowed=allowed)
    return int(round(value))


def parse_count(text: str | int | float, field: str = "count") -> float:
    """'15T' -> 1.5e13, '300B' -> 3e11, '2.5M' -> 2.5e6, '1e12' -> 1e12 (tokens, FLOPs, params)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text) if abs(text) < 2.0**1023 else math.inf
    else:
        if not isinstance(text, str):
            raise InputError(f"{field}: must be a count like 300B or 1e12, got {show(text)}", field=field)
        m = re.fullmatch(_NUM + r"\s*([a-zA-Z]?)", text.strip())
        unit = m.group(2).lower() if m else None
        if not m or unit not in _COUNT_SUFFIX:
            raise InputError(f"{field}: cannot read '{text}' as a count; use e.g. 300B, 15T, 2.5M or 1e12", field=field,
                             allowed="a finite count >= 0, e.g. 300B, 15T, 2.5M or 1e12")
        value = float(m.group(1)) * _COUNT_SUFFIX[unit]
    if not math.isfinite(value):
        raise InputError(f"{field}: must be a finite count >= 0, got {show(text)}", field=field, allowed="a finite count >= 0")
    return float(check_number(value, field, ge=0))


def to_gib(n_bytes: float) -> float:
    return n_bytes / GIB
