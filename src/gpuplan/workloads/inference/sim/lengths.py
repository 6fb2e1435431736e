"""Request-length distributions (tokens per request) of serving workloads: parse, sample, summarise.

A length spec (one side: input or output) is a string:

    N | fixed:N            every request N tokens
    uniform:LO:HI          integers uniform on [LO, HI] (mean (LO + HI) / 2)
    normal:MEAN:STD        normal, truncated at >= 1 token (draws below 0.5 are redrawn), rounded
    lognormal:MEAN:CV      lognormal with that mean and coefficient of variation CV = std / mean:
                           sigma^2 = ln(1 + CV^2), mu = ln(MEAN) - sigma^2 / 2; rounded, >= 1
    ...:max=M              any of the above capped at M tokens (e.g. an engine's max length)

Both sides together (`--lengths`):

    FILE.csv               (input, output) token pairs, columns `input_len,output_len` (or
                           `input,output`); requests draw rows uniformly with replacement
    DATASET                a catalog dataset (catalog/data/datasets.toml: `gpuplan.catalog.datasets`,
                           resolved by the interfaces layer), e.g. `sharegpt-vllm`, `openorca-mlperf`;
                           its specs carry their sources

Every draw uses the numpy Generator the caller passes (seeded); a fixed spec draws nothing, so a
workload of fixed lengths is the same with or without this module. `length_stats` gives the
mean and p50 / p90 / p99 of the lengths a workload actually drew (reported by `serve run/plan`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.validation_rules import MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS
from gpuplan.workloads.inference.sim.percentiles import linear_percentiles

#: Coefficient of variation (std / mean) of a dataset side whose sources state only its mean
#: (catalog datasets with shape = "mean-only"): 1.0 is the exponential distribution's, the
#: maximum-entropy law of a positive length with a given mean; drawn lognormal at that CV, capped at
#: the sampler's bound. Fitted: chosen while looking at the vllmci ShareGPT max-load rows, whose
#: 200-request runs last as long as their longest output (the tail, not the mean, sets them).
MEAN_ONLY_CV = knobs.register(
    "serving.lengths.mean_only_cv", unit="ratio", default=1.0, low=0.0, high=3.0,
    source="maximum-entropy prior (exponential law: CV 1) for dataset lengths stated only by their mean; fitted",
    scales="spread of catalog dataset lengths whose sources state only means (lognormal CV)",
    fitted_on=("vllmci",))

KINDS = ("fixed", "uniform", "normal", "lognormal")
#: largest lognormal coefficient of variation accepted (sigma^2 = ln(1 + cv^2) = 9.2: a median 1/100 of
#: the mean; published request-length CVs are about 0.5-3, e.g. ShareGPT outputs)
MAX_LOGNORMAL_CV = 100.0
_ALLOWED = "N, fixed:N, uniform:LO:HI, normal:MEAN:STD, lognormal:MEAN:CV (optionally :max=M)"


@dataclass(frozen=True)
class LengthSpec:
    """One side's length distribution (module docstring); `a`, `b` are the kind's two parameters."""

    kind: str
    a: float
    b: float = 0.0
    max_tokens: int | None = None
    limit: int = MAX_INPUT_TOKENS  # the simulator's bound for this side (validation_rules); draws are capped at it

    @property
    def mean(self) -> float:
        """Analytic mean before the cap and the rounding: N, (LO + HI) / 2, MEAN, MEAN."""
        return (self.a + self.b) / 2 if self.kind == "uniform" else float(self.a)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n lengths (int64, >= 1). Fixed specs draw nothing from `rng`."""
        if self.kind == "fixed":
            out = np.full(n, int(self.a), dtype=np.int64)
        elif self.kind == "uniform":
            out = rng.integers(int(self.a), int(self.b) + 1, n).astype(np.int64)
        elif self.kind == "normal":
            x = rng.normal(self.a, self.b, n)
            bad = x < 0.5
            while bad.any():  # truncation at >= 1 token: redraw what would round below 1
                x[bad] = rng.normal(self.a, self.b, int(bad.sum()))
                bad = x < 0.5
            out = np.rint(np.minimum(x, self.limit)).astype(np.int64)  # capped before the cast (huge STD)
        else:  # lognormal with mean a and coefficient of variation b
            sigma2 = math.log1p(self.b ** 2)
            x = rng.lognormal(math.log(self.a) - sigma2 / 2, math.sqrt(sigma2), n)
            out = np.rint(np.clip(x, 1, self.limit)).astype(np.int64)
        return np.minimum(out, self.limit if self.max_tokens is None else min(self.max_tokens, self.limit))

    def describe(self) -> str:
        body = {"fixed": f"fixed:{self.a:g}", "uniform": f"uniform:{self.a:g}:{self.b:g}",
                "normal": f"normal:{self.a:g}:{self.b:g}", "lognormal": f"lognormal:{self.a:g}:{self.b:g}"}[self.kind]
        return body + (f":max={self.max_tokens}" if self.max_tokens is not None else "")


def fixed(n: int) -> LengthSpec:
    return LengthSpec("fixed", float(n))


def _num(text: str, field: str, spec: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{field}: '{spec}' has a non-number '{text}'; allowed: {_ALLOWED}", field=field) from None
    if not math.isfinite(v):
        raise InputError(f"{field}: '{spec}' has a non-finite number; allowed: {_ALLOWED}", field=field)
    return v


def parse_length_spec(spec: str, field: str = "length", limit: int = MAX_INPUT_TOKENS) -> LengthSpec:
    """A LengthSpec from its string (module docstring); a one-line InputError naming `field` else.
    `limit`: the most tokens this side may have (validation_rules.MAX_INPUT_TOKENS for prompts,
    MAX_OUTPUT_TOKENS for outputs: the simulator runs prefill chunk by chunk and decode step by step);
    a fixed length, a range's top, a mean or a cap above it is refused, and draws are capped at it."""
    spec_out = _parse_length_spec(spec, field)
    top = {"fixed": spec_out.a, "uniform": spec_out.b}.get(spec_out.kind, spec_out.a)
    for what, v in (("length" if spec_out.kind == "fixed" else "HI" if spec_out.kind == "uniform" else "mean", top),
                    ("max", spec_out.max_tokens)):
        if v is not None and v > limit:
            raise InputError(f"{field}: {what} must be <= {limit:,} tokens, got {v:g}", field=field)
    return LengthSpec(spec_out.kind, spec_out.a, spec_out.b, spec_out.max_tokens, limit)


def _parse_length_spec(spec: str, field: str) -> LengthSpec:
    text = str(spec).strip().lower()
    parts = [p for p in text.split(":") if p != ""]
    if not parts:
        raise InputError(f"{field}: empty length spec; allowed: {_ALLOWED}", field=field)
    cap = None
    if parts[-1].startswith("max="):
        cap_v = _num(parts[-1][4:], field, spec)
        if cap_v < 1 or cap_v != int(cap_v):
            raise InputError(f"{field}: max must be a whole number >= 1 token, got {parts[-1][4:]}", field=field)
        cap = int(cap_v)
        parts = parts[:-1]
    if len(parts) == 1 and parts[0] not in KINDS:
        parts = ["fixed", parts[0]]
    kind, args = parts[0], [_num(p, field, spec) for p in parts[1:]]
    need = {"fixed": 1, "uniform": 2, "normal": 2, "lognormal": 2}
    if kind not in need:
        raise InputError(f"{field}: unknown kind '{kind}'; allowed: {_ALLOWED}", field=field)
    if len(args) != need[kind]:
        raise InputError(f"{field}: '{spec}': {kind} takes {need[kind]} number(s); allowed: {_ALLOWED}", field=field)
    if kind == "fixed":
        if args[0] < 1 or args[0] != int(args[0]):
            raise InputError(f"{field}: fixed length must be a whole number >= 1 token, got {args[0]:g}", field=field)
        return LengthSpec("fixed", args[0], max_tokens=cap)
    if kind == "uniform":
        lo, hi = args
        if lo < 1 or hi < lo or lo != int(lo) or hi != int(hi):
            raise InputError(f"{field}: uniform:LO:HI needs whole numbers 1 <= LO <= HI, got {lo:g}, {hi:g}", field=field)
        return LengthSpec("uniform", lo, hi, cap)
    mean, second = args
    if mean < 1:
        raise InputError(f"{field}: {kind} mean must be >= 1 token, got {mean:g}", field=field)
    if second < 0:
        raise InputError(f"{field}: {kind} {'std' if kind == 'normal' else 'cv'} must be >= 0, got {second:g}", field=field)
    if kind == "lognormal" and second > MAX_LOGNORMAL_CV:
        raise InputError(f"{field}: lognormal cv must be <= {MAX_LOGNORMAL_CV:g}, got {second:g}", field=field)
    if second == 0:
        return LengthSpec("fixed", float(round(mean)), max_tokens=cap)
    return LengthSpec(kind, mean, second, cap)


@dataclass(frozen=True)
class PairedLengths:
    """(input, output) token pairs of a CSV; requests draw rows uniformly with replacement."""

    inputs: np.ndarray
    outputs: np.ndarray
    origin: str

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        idx = rng.integers(0, self.inputs.shape[0], n)
        return self.inputs[idx], self.outputs[idx]


def load_pairs(path: str | Path, field: str = "lengths") -> PairedLengths:
    """A CSV of (input, output) token pairs (header input_len,output_len or input,output)."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise InputError(f"{field}: file not found: {path}", field=field) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"{field}: {path}: not a UTF-8 CSV ({exc})", field=field) from None
    cols = set(rows[0]) if rows else set()
    pair = next(((i, o) for i, o in (("input_len", "output_len"), ("input", "output")) if {i, o} <= cols), None)
    if pair is None:
        raise InputError(f"{field}: {path} needs a header with input_len,output_len (or input,output) and at least one row",
                         field=field)
    try:
        ins = np.array([int(float(r[pair[0]])) for r in rows], dtype=np.int64)
        outs = np.array([int(float(r[pair[1]])) for r in rows], dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InputError(f"{field}: {path}: non-numeric or out-of-range cell ({exc})", field=field) from None
    if (ins < 1).any() or (outs < 1).any():
        raise InputError(f"{field}: {path}: token counts must be >= 1", field=field)
    if (ins > MAX_INPUT_TOKENS).any() or (outs > MAX_OUTPUT_TOKENS).any():
        raise InputError(f"{field}: {path}: input lengths must be <= {MAX_INPUT_TOKENS:,} and output lengths "
                         f"<= {MAX_OUTPUT_TOKENS:,} tokens", field=field)
    return PairedLengths(ins, outs, str(path))


@dataclass(frozen=True)
class RequestLengths:
    """Both sides of a workload's lengths: independent specs, or CSV pairs (`pairs`)."""

    input: LengthSpec | None = None
    output: LengthSpec | None = None
    pairs: PairedLengths | None = None
    name: str = ""  # dataset id or CSV path where the lengths came from one
    sources: tuple[str, ...] = ()

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(input_len, output_len) arrays of n requests; input drawn before output (fixed: no draw)."""
        if self.pairs is not None:
            return self.pairs.sample(rng, n)
        assert self.input is not None and self.output is not None
        return self.input.sample(rng, n), self.output.sample(rng, n)

    @property
    def is_fixed(self) -> bool:
        return self.pairs is None and self.input is not None and self.output is not None and \
            self.input.kind == "fixed" and self.output.kind == "fixed" and self.input.max_tokens is None \
            and self.output.max_tokens is None

    def describe(self) -> dict:
        if self.pairs is not None:
            return {"lengths": self.name or self.pairs.origin}
        out = {"input_dist": self.input.describe(), "output_dist": self.output.describe()}
        if self.name:
            out["lengths"] = self.name
        return out


def dataset_lengths(ds, field: str = "lengths") -> RequestLengths:
    """The RequestLengths of a catalog dataset `ds` (gpuplan.catalog.datasets.Dataset, resolved by the
    caller: workloads do not read the catalog): its specs, with a "mean-only" side drawn lognormal at
    its mean with CV knob `serving.lengths.mean_only_cv`, capped at the side's max."""
    sides = [parse_length_spec(ds.input, f"{field}.input"),
             parse_length_spec(ds.output, f"{field}.output", MAX_OUTPUT_TOKENS)]
    cv = knobs.value("serving.lengths.mean_only_cv")
    if ds.shape == "mean-only" and cv > 0:
        sides = [LengthSpec("lognormal", s.mean, cv, s.max_tokens) if s.kind == "fixed" else s for s in sides]
    return RequestLengths(sides[0], sides[1], name=ds.id, sources=(ds.input_source, ds.output_source))


def is_pairs_file(text: str) -> bool:
    """Whether a `--lengths` value names a CSV of pairs (else it names a dataset)."""
    t = str(text).strip()
    return t.lower().endswith(".csv") or Path(t).is_file()


def request_lengths(input_len: int, output_len: int, *, input_dist: str | None = None, output_dist: str | None = None,
                    lengths: str | None = None, dataset=None) -> RequestLengths:
    """The workload's lengths from the options: `lengths` (a CSV of pairs) or `dataset` (a catalog
    Dataset the caller resolved) is exclusive with `input_dist` / `output_dist`, which default to
    fixed input_len / output_len."""
    if lengths or dataset is not None:
        if input_dist or output_dist:
            raise InputError("lengths: give --lengths or --input-dist/--output-dist, not both", field="lengths")
        if dataset is not None:
            return dataset_lengths(dataset)
        return RequestLengths(pairs=load_pairs(str(lengths).strip()), name=str(lengths).strip())
    for v, f in ((input_len, "input_len"), (output_len, "output_len")):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise InputError(f"{f}: must be a whole number >= 1 token, got {v!r}", field=f)
    return RequestLengths(parse_length_spec(input_dist, "input_dist") if input_dist else fixed(int(input_len)),
                          parse_length_spec(output_dist, "output_dist", MAX_OUTPUT_TOKENS) if output_dist
                          else fixed(int(output_len)))


@dataclass(frozen=True)
class LengthStats:
    """Mean and percentiles of the lengths a workload drew, tokens."""

    mean: float
    p50: float
    p90: float
    p99: float


def length_stats(x: np.ndarray) -> LengthStats:
    p50, p90, p99 = linear_percentiles(x, (50, 90, 99))  # np.percentile's values without numpy.ma's import
    return LengthStats(float(np.mean(x)), p50, p90, p99)
