"""The one registry of efficiency knobs: every efficiency, overhead or modelling switch a
prediction uses, with its unit, default, the source of the default, the range physics allows and
what it scales.

Operators read a knob only through `value(name)`, so a calibration profile or a cross-validation
fold can override any of them without touching code:

    with overridden({"training.sustained_gemm_fraction": 0.8}):
        ...  # every prediction in here sees 0.8

A knob whose default was chosen while looking at validation rows is *fitted*: `fitted_on` names
those rows (families, as SCHEMA.md defines them). `validate --cv family` refits exactly the fitted
knobs without the family it scores; the fitter lives in `gpuplan.interfaces.fitting.least_squares`.

This module sits at the bottom of the layer stack (beside `units` and `errors`): it imports nothing
of gpuplan's, so every layer may read knobs.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Mapping


@dataclass(frozen=True)
class Knob:
    """One named efficiency, overhead or switch (see module docstring)."""

    name: str  # dotted: "<area>.<what>", e.g. "training.sustained_gemm_fraction"
    unit: str  # "fraction", "s", "bytes", "ratio", "tokens", ...
    default: float
    source: str  # where the default comes from (paper, vendor doc, framework source, or "fitted")
    low: float  # the range physics allows (inclusive)
    high: float
    scales: str  # which operators / collectives / engines it scales
    fitted_on: tuple[str, ...] = ()  # validation families the default was chosen on (empty: not fitted)
    #: the value physics or sources give before any validation row is looked at (None: the default
    #: itself). Cross-validation starts every fitted knob here, so a left-out family that is the only
    #: one informing the knob is predicted with the prior, not with a default fitted on it.
    prior: float | None = None

    @property
    def fitted(self) -> bool:
        return bool(self.fitted_on)

    @property
    def prior_value(self) -> float:
        return self.default if self.prior is None else self.prior

    def to_dict(self) -> dict:
        return {
            "name": self.name, "unit": self.unit, "default": self.default, "source": self.source,
            "low": self.low, "high": self.high, "scales": self.scales, "fitted_on": list(self.fitted_on),
            "prior": self.prior_value, "value": value(self.name),
        }


REGISTRY: dict[str, Knob] = {}
_LOCAL = threading.local()
#: Bumped on every change of the active overrides, so caches keyed on it stay correct.
_GENERATION = [0]


def register(name: str, *, unit: str, default: float, source: str, low: float, high: float, scales: str,
             fitted_on: tuple[str, ...] | list[str] = (), prior: float | None = None) -> float:
    """Declare a knob (idempotent for an identical declaration) and return its default, so a module
    can keep a readable constant beside the declaration: `X = register("area.x", ...)`. A fitted knob
    whose default was fitted (not sourced) declares its unfitted `prior` (Knob.prior)."""
    if name.endswith(PREFIX_READ):
        raise ValueError(f"knob {name}: a name may not end with {PREFIX_READ!r} (the mark of a prefix read)")
    if not (math.isfinite(default) and math.isfinite(low) and math.isfinite(high) and low <= default <= high):
        raise ValueError(f"knob {name}: default {default} outside its range [{low}, {high}]")
    if prior is not None and not (math.isfinite(prior) and low <= prior <= high):
        raise ValueError(f"knob {name}: prior {prior} outside its range [{low}, {high}]")
    knob = Knob(name, unit, float(default), source, float(low), float(high), scales, tuple(fitted_on),
                None if prior is None else float(prior))
    old = REGISTRY.get(name)
    if old is not None and old != knob:
        raise ValueError(f"knob {name} is declared twice with different values")
    REGISTRY[name] = knob
    return knob.default


def _stack() -> list[dict[str, float]]:
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
    return stack


def value(name: str) -> float:
    """The knob's value in effect: the innermost override, else its default. KeyError if unknown."""
    reads = getattr(_LOCAL, "reads", None)
    if reads is not None:
        reads.add(name)
    for layer in reversed(_stack()):
        if name in layer:
            return layer[name]
    return REGISTRY[name].default


def active_overrides() -> dict[str, float]:
    """Every knob whose value is overridden right now, innermost winning: what a worker process must re-apply to
    predict as this one does (knob scopes are per thread and do not cross process boundaries)."""
    out: dict[str, float] = {}
    for layer in _stack():
        out.update(layer)
    return out


def generation() -> int:
    """A number that changes whenever the active overrides change (for caches of knob-dependent values)."""
    return _GENERATION[0] + 1_000_003 * len(_stack())


def check_values(values: Mapping[str, float]) -> dict[str, float]:
    """Validate overrides: known names, finite, inside the knob's physical range. Returns floats."""
    out = {}
    for name, raw in values.items():
        if name not in REGISTRY:
            raise KeyError(name)
        v = float(raw)
        k = REGISTRY[name]
        if not math.isfinite(v) or not (k.low <= v <= k.high):
            raise ValueError(f"{name} = {raw}: allowed {k.low} .. {k.high} {k.unit}")
        out[name] = v
    return out


@contextmanager
def overridden(values: Mapping[str, float]) -> Iterator[None]:
    """Within the block, `value(name)` returns the given values (validated by `check_values`)."""
    layer = check_values(values)
    stack = _stack()
    stack.append(layer)
    _GENERATION[0] += 1
    try:
        yield
    finally:
        stack.pop()
        _GENERATION[0] += 1


@contextmanager
def recording_reads(prefix_marks: bool = False) -> Iterator[set[str]]:
    """Within the block, collect in the yielded set the name of every knob `value()` is asked for:
    the knobs a computation reads (calibration screens candidates with it; a cached result that
    skips its computation skips its reads too, unless the cache checks its key with `read_state`,
    which reads them again). `prefix_marks`: also collect `prefix + PREFIX_READ` for every
    `overrides_key(prefix)` (the dependence of a cache keyed on it; `read_state` reads it back).
    An enclosing recorder receives the reads of the block too (the marks only if it collects them)."""
    outer, outer_marks = getattr(_LOCAL, "reads", None), getattr(_LOCAL, "marks", False)
    reads: set[str] = set()
    _LOCAL.reads, _LOCAL.marks = reads, prefix_marks
    try:
        yield reads
    finally:
        _LOCAL.reads, _LOCAL.marks = outer, outer_marks
        if outer is not None:
            outer |= reads if outer_marks else {n for n in reads if not n.endswith(PREFIX_READ)}


def overrides_key(prefix: str = "") -> tuple:
    """The active overrides of knobs whose name starts with `prefix`, as a sorted tuple of
    (name, value): a cache key that changes only when a knob that can matter changes (empty, and
    free, when nothing is overridden)."""
    if getattr(_LOCAL, "marks", False):  # the key stands for every knob of the prefix: a dependence on all of them
        _LOCAL.reads.add(prefix + PREFIX_READ)
    if not _stack():
        return ()
    return tuple(sorted((k, v) for k, v in active_overrides().items() if k.startswith(prefix)))


#: The mark `recording_reads` collects for `overrides_key(prefix)`: `prefix + PREFIX_READ` (a knob name never
#: ends with it), the dependence of a cache keyed on it on every knob of the prefix.
PREFIX_READ = "*"


def read_state(names: tuple[str, ...]) -> tuple:
    """The state of the knobs `names` (as `recording_reads` collects them) in effect now: `value(name)` per
    knob, `overrides_key(prefix)` per `prefix + PREFIX_READ`. Two equal states give every computation that
    reads only these knobs the same knob values; reading the state counts as reading them (an outer
    `recording_reads` sees them), so a cache validated with it replays the reads of what it skips."""
    return tuple(overrides_key(n[:-1]) if n.endswith(PREFIX_READ) else value(n) for n in names)


def fitted_knobs() -> list[Knob]:
    return [k for k in REGISTRY.values() if k.fitted]


__all__ = ["Knob", "REGISTRY", "active_overrides", "check_values", "fitted_knobs", "generation", "overridden",
           "overrides_key", "PREFIX_READ", "read_state", "recording_reads", "register", "value"]
