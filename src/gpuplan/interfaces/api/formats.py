"""`gpuplan.api` for low-precision formats (gpuplan.formats): `formats_table`, `formats_compare`,
`formats_encode`, `formats_decode`, `formats_matmul`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import Result
from gpuplan.validation_rules import MAX_ARRAY_ELEMENTS

from gpuplan.interfaces.api.defaults import DEFAULT_COMPARE, DEFAULT_MATMUL  # noqa: E402,F401
RANDOM_KINDS = ("normal", "uniform", "laplace", "lognormal")
MAX_RANDOM_ELEMENTS = MAX_ARRAY_ELEMENTS  # one cap for generated and read arrays


def _names(formats: str | Sequence[str]) -> list[str]:
    return [f.strip() for f in formats.split(",") if f.strip()] if isinstance(formats, str) else list(formats)


def random_input(spec: str, seed: int):
    """`normal:N`, `uniform:N`, `laplace:N` or `lognormal:N` -> float32 array of N elements (seeded generator)."""
    import numpy as np

    from gpuplan.units import parse_count

    kind, _, n_text = spec.partition(":")
    if kind not in RANDOM_KINDS or not n_text:
        raise InputError(f"--random must be KIND:COUNT with KIND one of {', '.join(RANDOM_KINDS)}", field="random")
    n = int(parse_count(n_text))
    if not 0 < n <= MAX_RANDOM_ELEMENTS:
        raise InputError(f"--random COUNT must be between 1 and {MAX_RANDOM_ELEMENTS}", field="random")
    rng = np.random.default_rng(seed)
    x = {"normal": lambda: rng.standard_normal(n), "uniform": lambda: rng.uniform(-1, 1, n),
         "laplace": lambda: rng.laplace(size=n), "lognormal": lambda: rng.lognormal(size=n) * rng.choice([-1, 1], n)}[kind]()
    return x.astype(np.float32)


@dataclass(frozen=True)
class FormatTableResult(Result):
    """`formats_table`: every format's parameters and the value tables of the 4/6-bit types."""

    formats: list
    value_tables: dict

    def json_data(self) -> dict:
        return {"formats": self.formats, "value_tables": self.value_tables}


def formats_table() -> FormatTableResult:
    """Each format's bias, emax, largest normal, smallest normal/subnormal, and the 4/6-bit value tables."""
    from gpuplan.formats.tables import SMALL_TYPES, format_table, value_table

    return FormatTableResult(format_table(), {name: value_table(name) for name in SMALL_TYPES})


@dataclass(frozen=True)
class CompareResult(Result):
    """`formats_compare`: quantisation error of one tensor in each format."""

    source: str
    shape: tuple
    dtype: str
    scale_rule: Any
    reports: tuple

    def json_data(self) -> dict:
        return {"input": self.source, "shape": list(self.shape), "dtype": self.dtype, "scale_rule": self.scale_rule.value,
                "results": list(self.reports)}


def formats_compare(file: str | None = None, *, tensor: str | None = None, formats: str | Sequence[str] = DEFAULT_COMPARE,
                    random: str | None = None, seed: int = 0, scale_rule: str = "floor") -> CompareResult:
    """Quantisation error (MSE, SNR, max errors, saturation, bits, bytes) of one tensor, read from a
    .npy / .safetensors `file` or drawn as `random` KIND:COUNT, in each format."""
    from gpuplan.formats.analysis import compare
    from gpuplan.formats.scale import scale_rule as parse_rule
    from gpuplan.formats.tensorfile import read_tensor

    rule = parse_rule(scale_rule)
    if (file is None) == (random is None):
        raise InputError("give exactly one input: FILE (.npy/.safetensors) or --random KIND:COUNT", field="file")
    if tensor is not None and random is not None:  # it would be ignored: say so rather than accept it
        raise InputError("tensor: names a tensor of a .safetensors FILE; --random draws its own", field="tensor")
    x = random_input(random, seed) if random is not None else read_tensor(file, tensor)  # "" is a bad KIND:COUNT
    reports = compare(x, _names(formats), rule)
    source = f"random {random} seed {seed}" if random is not None else f"{file}" + (f" [{tensor}]" if tensor else "")
    return CompareResult(source, tuple(x.shape), str(x.dtype), rule, tuple(reports))


@dataclass(frozen=True)
class CodesResult(Result):
    """`formats_encode` / `formats_decode`: one row per number or code."""

    header: dict
    key: str  # "codes" (encode) or "values" (decode)
    rows: tuple

    def json_data(self) -> dict:
        return {**self.header, self.key: list(self.rows)}


def _ascii(value: Any) -> Any:
    """`value`, unless it is text with characters other than ASCII or an underscore (float() and int()
    read other scripts' digits, '１' or '٣', and '1_0'; gpuplan reads ASCII digits only): ValueError."""
    if isinstance(value, bool) or isinstance(value, str) and (not value.isascii() or "_" in value):
        raise ValueError(value)
    return value


def formats_encode(values: Sequence[float | str], format_name: str = "e4m3", *, saturate: bool = True,
                   rounding: str = "rne") -> CodesResult:
    """Codes of numbers in an element format, and the values they decode to."""
    from gpuplan.formats.codec import decode, encode

    try:
        xs = [float(_ascii(v)) for v in values]  # nan and inf are values a format encodes too
    except (ValueError, TypeError):
        raise InputError("values must be numbers written with ASCII digits (nan and inf allowed)",
                         field="values") from None
    codes = encode(xs, format_name, saturate=saturate, rounding=rounding)
    back = decode(codes, format_name)
    rows = tuple({"input": x, "code": int(c), "code_hex": f"0x{int(c):02X}", "value": float(v)}
                 for x, c, v in zip(xs, codes, back))
    return CodesResult({"format": format_name, "saturate": saturate, "rounding": rounding}, "codes", rows)


def formats_decode(codes: Sequence[int | str], format_name: str = "e4m3") -> CodesResult:
    """Values of codes (integers, or text in decimal or 0x-hex) in an element format."""
    from gpuplan.formats.codec import decode

    try:
        ints = [c if isinstance(c, int) and not isinstance(c, bool) else int(_ascii(c), 0) for c in codes]
    except (ValueError, TypeError):
        raise InputError("codes must be integers (decimal or 0x-hex)", field="codes") from None
    vals = decode(ints, format_name)
    rows = tuple({"code": c, "code_hex": f"0x{c:02X}", "value": float(v)} for c, v in zip(ints, vals))
    return CodesResult({"format": format_name}, "values", rows)


@dataclass(frozen=True)
class MatmulResult(Result):
    """`formats_matmul`: the error of an MX matmul per format."""

    m: int
    k: int
    n: int
    seed: int
    results: tuple

    def json_data(self) -> dict:
        return {"m": self.m, "k": self.k, "n": self.n, "seed": self.seed, "results": list(self.results)}


#: Work caps of `formats_matmul`, so one call stays within seconds: measured on a loaded 2-core
#: machine, ~0.6 s per million operand elements quantised (m k + k n, all formats) plus ~13 s per
#: 2^30 multiply-adds (m k n); the default 128 x 4096 x 128 is 2^20 elements and 2^26 MACs.
MAX_MATMUL_OPERAND_ELEMENTS = 1 << 23
MAX_MATMUL_MACS = 1 << 29


def formats_matmul(m: int = 128, k: int = 4096, n: int = 128, *, formats: str | Sequence[str] = DEFAULT_MATMUL,
                   seed: int = 0, scale_rule: str = "floor") -> MatmulResult:
    """Error of an MX matmul (scaled block products, FP32 accumulation) on seeded random normal operands."""
    import numpy as np

    from gpuplan.formats.block import block_format
    from gpuplan.formats.dot import matmul_error

    if min(m, k, n) < 1 or m * k * n > MAX_MATMUL_MACS or m * k + k * n > MAX_MATMUL_OPERAND_ELEMENTS:
        raise InputError("--m, --k, --n must be >= 1 with m*k*n <= 2^29 multiply-adds and m*k + k*n <= 2^23 "
                         "operand elements", field="shape")
    names = [block_format(f).name for f in _names(formats)]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return MatmulResult(m, k, n, seed, tuple(matmul_error(a, b, f, scale_rule) for f in names))
