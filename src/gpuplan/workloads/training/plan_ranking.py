"""The plan search's ranking: the leading plans of a streamed grid (`Leaders`), the fastest plan per
value of the explained axes (`FastestPerValue`) and the lines that say why the others lose
(`explain`). Both keep only small arrays while the blocks of `plan_grid` stream past, so the
answer is that of one argsort of the whole grid in flat order (ties to the first). Both read a
block's fitting plans only (`Fitting`: finite ranking keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from gpuplan.specs import TrainPlan
from gpuplan.workloads.training.plan_codes import RECOMPUTE_CODE, RECOMPUTE_OF_CODE, SHARDING_CODE, SHARDING_OF_CODE
from gpuplan.workloads.training.plan_grid import AXES, _Block
from gpuplan.workloads.training.step.assembly import StepTime


@dataclass(frozen=True)
class RankedPlan:
    rank: int
    plan: TrainPlan
    step: StepTime
    memory_gib: float  # per GPU, exact (training_memory)


#: screened plans kept for the exact memory check: top x 50, at least 250: the best plan is the same for any top <= 5
MIN_LEADERS = 250
#: the axes `why_others_lose` explains, with the labels it prints
EXPLAINED = (("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("rc", "recompute"), ("sh", "sharding"))


class _Fitting:
    """The fitting plans of one block (finite ranking key), as flat arrays: `key`, `index` (flat index
    in the whole grid: the block's `offset` + its C-order index in AXES order) and `where` (one index
    array per axis of the block, AXES order). Found in the key's memory order, without a copy; a few
    percent of a block fits (validity and the memory screen drop the rest), so what the leaders and
    the fastest plan per value do after this runs on small arrays."""

    def __init__(self, block: _Block, offset: int):
        flat = block.key.ravel(order="K")  # in memory order (the block's COMPUTE_ORDER): a view, not a copy
        pos = np.flatnonzero(np.isfinite(flat))
        self.key = flat[pos]
        in_memory = np.unravel_index(pos, tuple(block.shape[a] for a in block.memory_axes))
        where = [in_memory[0]] * len(AXES)
        for dim, axis in enumerate(block.memory_axes):
            where[axis] = in_memory[dim]
        self.where = where
        self.index = np.ravel_multi_index(where, block.shape) + offset


class _Leaders:
    """The `k` fastest fitting plans seen so far, in (ranking key, flat index) order: exactly the first
    `k` of a stable argsort of the whole grid's keys (`_Block.key`), kept as small arrays (axis
    values, dp, m, global batch and step-time parts of each) while the grid streams past."""

    def __init__(self, k: int):
        self.k = k
        self.cols: dict[str, np.ndarray] | None = None

    def add(self, block: _Block, fit: _Fitting) -> None:
        if fit.key.size == 0:
            return
        if fit.key.size <= self.k:
            pick = slice(None)
        else:  # every plan at or below the k-th smallest key (ties included: the index breaks them)
            pick = np.flatnonzero(fit.key <= np.partition(fit.key, self.k - 1)[self.k - 1])
        where = [w[pick] for w in fit.where]
        cols = {"key": fit.key[pick], "index": fit.index[pick]}
        for name, arr in (*((a, block.g[a]) for a in AXES), ("dp", block.dp), ("m", block.m), ("gb", block.gb),
                          *block.parts.items()):
            cols[name] = _gather(arr, where)
        if self.cols is not None:
            cols = {name: np.concatenate([self.cols[name], col]) for name, col in cols.items()}
        keep = np.lexsort((cols["index"], cols["key"]))[: self.k]
        self.cols = {name: col[keep] for name, col in cols.items()}

    def rows(self) -> Iterator[dict[str, float]]:
        """The leaders in order, one dict per plan."""
        if self.cols is None:
            return
        for i in range(len(self.cols["key"])):
            yield {name: col[i] for name, col in self.cols.items()}


class _FastestPerValue:
    """For each explained axis (EXPLAINED) and each of its values: the fastest fitting plan's ranking
    key, step-time parts and global batch (the first in flat order among equals), kept as the grid
    streams past."""

    def __init__(self):
        self.best: dict[tuple[str, int], tuple[float, dict[str, float], float]] = {}

    def add(self, block: _Block, fit: _Fitting) -> None:
        if fit.key.size == 0:
            return
        found: list[tuple[tuple[str, int], float]] = []  # (axis name, value), ranking key of each new leader
        rows: list[np.ndarray] = []  # their rows in `fit`
        for name, _ in EXPLAINED:
            axis = AXES.index(name)
            values = block.g[name].ravel()
            code = fit.where[axis]  # each fitting plan's position on the axis
            fastest = np.full(len(values), np.inf)
            np.minimum.at(fastest, code, fit.key)
            # of the plans as fast as their value's fastest, the first in flat order
            tied = np.flatnonzero(fit.key == fastest[code])
            first = np.full(len(values), np.iinfo(np.int64).max)
            np.minimum.at(first, code[tied], fit.index[tied])
            winners = tied[fit.index[tied] == first[code[tied]]]
            for row in winners.tolist():
                key, step = (name, int(values[code[row]])), float(fit.key[row])
                if key in self.best and self.best[key][0] <= step:
                    continue
                found.append((key, step))
                rows.append(row)
        if not found:
            return
        # the parts and batch of every new leader, one gather per array
        at = [w[rows] for w in fit.where]
        parts = {p: _gather(v, at).tolist() for p, v in block.parts.items()}
        batch = _gather(block.gb, at).tolist()
        for i, (key, step) in enumerate(found):
            self.best[key] = (step, {p: v[i] for p, v in parts.items()}, batch[i])


def _gather(array, where) -> np.ndarray:
    """np.broadcast_to(array, shape)[where] (`where`: one index array per axis of the block, `array`
    0-d or with every axis of it, of length 1 where it does not vary), without the broadcast view."""
    shape = np.shape(array)
    if not shape:
        return np.full(len(where[0]), array)
    return np.broadcast_to(array[tuple(w if n > 1 else 0 for w, n in zip(where, shape))], np.shape(where[0]))


def _value_at(array, where: tuple[int, ...]) -> float:
    """np.broadcast_to(array, shape)[where] as a float, without the broadcast view: the array's axes
    align with the last of `where`'s, and an axis of length 1 is read at 0."""
    shape = np.shape(array)
    if not shape:
        return float(array)
    return float(array[tuple(i if n > 1 else 0 for i, n in zip(where[len(where) - len(shape):], shape))])


def _explain(best: RankedPlan, fastest: _FastestPerValue, per_token: bool) -> list[str]:
    """For each other value of tp, pp, cp, recompute and sharding: how much slower its best plan is and
    which part of the step grows most (or that its faster plans do not fit in memory). `per_token`
    (plans with different global batches): slower in time per token, parts compared per token."""
    lines = []
    p = best.plan
    base = best.step.step_time_s / p.global_batch if per_token else best.step.step_time_s
    measure = "time per token" if per_token else "step time"
    index_of = {"tp": p.tp, "pp": p.pp, "cp": p.cp, "rc": RECOMPUTE_CODE[p.recompute], "sh": SHARDING_CODE[p.sharding]}
    shown = {"rc": {code: r.value for code, r in RECOMPUTE_OF_CODE.items()},
             "sh": {code: s.value for code, s in SHARDING_OF_CODE.items()}}
    for name, label in EXPLAINED:
        for v in sorted(value for axis, value in fastest.best if axis == name):
            if v == index_of[name]:
                continue
            step, parts, batch = fastest.best[(name, v)]
            value = shown.get(name, {}).get(v, v)
            slower = step / base - 1
            if slower < 0:
                lines.append(f"{label}={value}: its faster plans exceed GPU memory (exact check)")
                continue
            # parts scaled to the best plan's batch (a factor of exactly 1 when the batches are equal)
            scale = p.global_batch / batch
            worst = max(parts, key=lambda k: parts[k] * scale - best.step.breakdown_s.get(k, 0.0))
            lines.append(f"{label}={value}: best such plan {100 * slower:+.1f}% {measure}, mostly more {worst.removesuffix('_s')}")
    return lines



__all__ = ["EXPLAINED", "MIN_LEADERS", "RankedPlan"]
