"""The points of a sweep: one value per axis, numbered 0..N-1 (the row order of the output).

- cartesian: every combination, the last axis varying fastest (numpy C order).
- random: `points` combinations, each axis index drawn uniformly by numpy's Generator(seed).
- latin-hypercube: `points` combinations whose unit-cube coordinates are stratified on every axis
  (McKay, Beckman & Conover 1979): scipy.stats.qmc.LatinHypercube(seed) when scipy is installed,
  else numpy (one random permutation of the strata per axis, a uniform offset in each); the
  coordinate u in [0, 1) picks value floor(u x len(axis)). Which generator made the points is part
  of the sweep's identity (`Points.sampler`), so a resumed run never mixes two.

Sampled points may repeat a combination; each keeps its own number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.interfaces.sweep.spec import MAX_POINTS, SweepSpec

#: axes of each goal, in point order (an axis left out of the spec is one None: its default)
TRAIN_AXES = ("model", "hardware", "gpus", "seq_len", "tokens")
SERVE_AXES = ("model", "hardware", "seq_len", "rate", "output_len")


def axis_values(spec: SweepSpec) -> dict[str, list]:
    """The values of each axis of `spec`'s goal."""
    a = spec.axes
    values = {"model": list(a.models), "hardware": spec.hardware_axis, "gpus": list(a.gpus),
              "seq_len": list(a.seq_len), "tokens": list(a.tokens), "rate": list(a.rate), "output_len": list(a.output_len)}
    names = TRAIN_AXES if spec.goal == "train" else SERVE_AXES
    return {n: values[n] or [None] for n in names}


@dataclass(frozen=True)
class Points:
    """N points as an (N, axes) array of value indices into `values`."""

    values: dict[str, list]
    index: np.ndarray
    sampler: str

    def __len__(self) -> int:
        return len(self.index)

    def point(self, i: int) -> dict:
        """Point `i`: {"point": i, axis: value, ...}."""
        return {"point": int(i), **{name: vals[int(self.index[i, j])] for j, (name, vals) in enumerate(self.values.items())}}


def _latin_hypercube(n: int, d: int, seed: int) -> tuple[np.ndarray, str]:
    try:
        from scipy.stats import qmc
    except ImportError:
        rng = np.random.default_rng(seed)
        u = np.empty((n, d))
        for j in range(d):
            u[:, j] = (rng.permutation(n) + rng.random(n)) / n
        return u, "latin-hypercube/numpy"
    return qmc.LatinHypercube(d=d, seed=seed).random(n), "latin-hypercube/scipy"


def make_points(spec: SweepSpec) -> Points:
    """The points of `spec` (module docstring)."""
    values = axis_values(spec)
    sizes = [len(v) for v in values.values()]
    method = spec.sampling.method
    if method == "cartesian":
        total = int(np.prod(sizes, dtype=object))
        if total > MAX_POINTS:
            raise InputError(f"axes: {total:,} combinations exceed {MAX_POINTS:,}; use [sampling] method = \"random\" "
                             "or \"latin-hypercube\" with points = N", field="axes")
        index = np.stack(np.unravel_index(np.arange(total), sizes), axis=1) if total else np.zeros((0, len(sizes)), int)
        return Points(values, index, "cartesian")
    n = spec.sampling.points
    if method == "random":
        rng = np.random.default_rng(spec.sampling.seed)
        index = np.stack([rng.integers(0, s, size=n) for s in sizes], axis=1)
        return Points(values, index, "random/numpy")
    u, sampler = _latin_hypercube(n, len(sizes), spec.sampling.seed)
    index = np.minimum((u * np.array(sizes)).astype(int), np.array(sizes) - 1)
    return Points(values, index, sampler)
