"""Request streams for the serving simulator: arrival process and input/output length distributions.

Every random draw comes from a numpy Generator the caller passes (seeded), never a global one.
- Poisson (open loop): inter-arrival gaps ~ Exponential(1/rate).
- Closed loop: `concurrency` requests in flight; a new one is sent when one finishes.
- Burst (max load): every request at t = 0 (an infinite request rate, as trtllm-bench's max-load runs).
- Trace: a CSV with columns arrival_s, input_len, output_len.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np

from gpuplan.errors import InputError


class ArrivalKind(str, Enum):
    POISSON = "poisson"
    CLOSED_LOOP = "closed_loop"
    BURST = "burst"
    TRACE = "trace"


class LengthKind(str, Enum):
    FIXED = "fixed"
    UNIFORM = "uniform"  # uniform on [mean x (1 - spread), mean x (1 + spread)]
    LOGNORMAL = "lognormal"  # lognormal with the given mean and coefficient of variation `spread`


@dataclass(frozen=True)
class LengthDistribution:
    mean: int
    kind: LengthKind = LengthKind.FIXED
    spread: float = 0.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.mean < 1:
            raise InputError(f"length: mean must be >= 1 token, got {self.mean}", field="length")
        if self.kind == LengthKind.FIXED or self.spread <= 0:
            return np.full(n, int(self.mean), dtype=np.int64)
        if self.kind == LengthKind.UNIFORM:
            lo, hi = self.mean * (1 - min(self.spread, 1.0)), self.mean * (1 + min(self.spread, 1.0))
            out = rng.uniform(lo, hi, n)
        else:
            sigma2 = np.log1p(self.spread ** 2)
            out = rng.lognormal(np.log(self.mean) - sigma2 / 2, np.sqrt(sigma2), n)
        return np.maximum(1, np.rint(out)).astype(np.int64)


@dataclass(frozen=True)
class Workload:
    """The requests to simulate: arrival times (s; +inf = released by the closed loop), lengths."""

    arrival_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray
    kind: ArrivalKind
    concurrency: int = 0  # closed loop only


class SeededGenerator:
    """`np.random.default_rng(seed)`, made at its first use: a workload of fixed lengths in a
    closed loop or a burst draws nothing, and then numpy.random is never imported (~4 ms of a
    `serve run` start). The draws are the Generator's own, from the same seed."""

    __slots__ = ("_seed", "_rng")

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._rng = None

    def __getattr__(self, name: str):
        if name.startswith("_"):  # a slot not yet set (copy, pickle): not the Generator's
            raise AttributeError(name)
        if self._rng is None:
            self._rng = np.random.default_rng(self._seed)
        return getattr(self._rng, name)


def make_workload(rng: np.random.Generator, n: int, kind: ArrivalKind, *, input_len=None, output_len=None,
                  rate: float | None = None, concurrency: int | None = None, lengths=None) -> Workload:
    """n requests of the given arrival process (Poisson needs `rate` > 0, closed loop `concurrency` >= 1).
    Lengths: `input_len` / `output_len` (LengthDistribution or lengths.LengthSpec, anything with
    `.sample(rng, n)`), or `lengths` (lengths.RequestLengths: both sides, CSV pairs or a dataset)."""
    kind = ArrivalKind(kind)
    if n < 1:
        raise InputError(f"requests: need at least 1, got {n}", field="requests")
    if lengths is not None:
        ins, outs = lengths.sample(rng, n)
    else:
        ins, outs = input_len.sample(rng, n), output_len.sample(rng, n)
    if kind == ArrivalKind.POISSON:
        if rate is None or not rate > 0:
            raise InputError(f"rate: a Poisson arrival process needs rate > 0 requests/s, got {rate}", field="rate")
        arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
        return Workload(arrivals, ins, outs, kind)
    if kind == ArrivalKind.CLOSED_LOOP:
        if concurrency is None or concurrency < 1:
            raise InputError(f"concurrency: must be >= 1, got {concurrency}", field="concurrency")
        arrivals = np.full(n, np.inf)
        arrivals[: min(n, concurrency)] = 0.0
        return Workload(arrivals, ins, outs, kind, concurrency=int(concurrency))
    if kind == ArrivalKind.BURST:
        return Workload(np.zeros(n), ins, outs, kind)
    raise InputError("kind: use load_trace() for trace workloads", field="kind")


def load_trace(path: str | Path) -> Workload:
    """A trace CSV (header arrival_s,input_len,output_len; any order of rows) as a Workload."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except FileNotFoundError:
        raise InputError(f"trace: file not found: {path}", field="trace") from None
    need = {"arrival_s", "input_len", "output_len"}
    if not rows or not need <= set(rows[0]):
        raise InputError(f"trace: {path} needs columns {', '.join(sorted(need))}", field="trace")
    try:
        arr = np.array([float(r["arrival_s"]) for r in rows])
        ins = np.array([int(r["input_len"]) for r in rows], dtype=np.int64)
        outs = np.array([int(r["output_len"]) for r in rows], dtype=np.int64)
    except ValueError as exc:
        raise InputError(f"trace: {path}: non-numeric cell ({exc})", field="trace") from None
    if (ins < 1).any() or (outs < 1).any() or (arr < 0).any():
        raise InputError(f"trace: {path}: lengths must be >= 1 and arrival_s >= 0", field="trace")
    order = np.argsort(arr, kind="stable")
    return Workload(arr[order], ins[order], outs[order], ArrivalKind.TRACE)
