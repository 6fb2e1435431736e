"""One prediction per distinct row and state of the knobs it reads: `validate` predicts a row that
repeats an earlier one (every cell the same but its `id`) once, and `--cv` (the knob fitter's
Jacobians, one knob moved at a time) predicts a row again only when a knob it reads has changed.

A predictor is a pure function of the row's cells and of the knob values it reads (gpuplan.knobs:
every knob is read through `knobs.value`, and a cache keyed on `knobs.overrides_key(prefix)` counts
as reading every knob of the prefix), never of the row's id (the predictors read `id` only in error
messages, and errors are not memoised). So a prediction is remembered under the row's cells without
its id, with the names of the knobs it read (`knobs.recording_reads`) and their state then
(`knobs.read_state`); it is reused while those knobs have that state. The prediction's path through
the code depends only on the cells and those knob values, so the same path reads the same knobs:
the check is exact, not a heuristic. A lookup reads the knobs again (`read_state`), so a caller
recording reads sees those of a remembered prediction too. A SkipRow is memoised as such (the same
reason again). Any other exception (InputError of a malformed cell, a pydantic ValidationError, a
predictor bug) is raised again at each call, with that row's own id.
"""

from __future__ import annotations

from typing import Callable, Mapping

from gpuplan import knobs
from gpuplan.interfaces.row_types import Prediction, SkipRow

#: predictions remembered per predictor (bounded memory; the rows first seen longest ago go first)
MAX_ROWS = 1 << 16

Predictor = Callable[[dict], Prediction]


def row_key(row: Mapping[str, str]) -> tuple:
    """The row's cells without its id, in a fixed order."""
    return tuple(sorted((k, v) for k, v in row.items() if k != "id"))


class _RowMemo:
    """{cells: {names of the knobs read: {their state: prediction or SkipRow}}}, MAX_ROWS entries at most."""

    def __init__(self, max_rows: int):
        self.by_cells: dict[tuple, dict[tuple, dict[tuple, Prediction | SkipRow]]] = {}
        self.size = 0
        self.max_rows = max_rows

    def get(self, cells: tuple) -> Prediction | SkipRow | None:
        for names, by_state in self.by_cells.get(cells, {}).items():
            hit = by_state.get(knobs.read_state(names))
            if hit is not None:
                return hit
        return None

    def put(self, cells: tuple, names: tuple, state: tuple, result: Prediction | SkipRow) -> None:
        while self.size >= self.max_rows and self.by_cells:
            oldest = self.by_cells.pop(next(iter(self.by_cells)))
            self.size -= sum(len(by_state) for by_state in oldest.values())
        self.by_cells.setdefault(cells, {}).setdefault(names, {})[state] = result
        self.size += 1


def memoised(predict: Predictor, max_rows: int = MAX_ROWS) -> Predictor:
    """`predict` with one evaluation per (row without id, state of the knobs it reads) (module docstring)."""
    memo = _RowMemo(max_rows)

    def predict_once(row: dict, cells: tuple | None = None) -> Prediction:
        """`cells`: row_key(row), when the caller has it already."""
        cells = row_key(row) if cells is None else cells
        hit = memo.get(cells)
        if hit is None:
            with knobs.recording_reads(prefix_marks=True) as reads:
                try:
                    hit = predict(row)
                except SkipRow as exc:
                    hit = exc
            names = tuple(sorted(reads))
            memo.put(cells, names, knobs.read_state(names), hit)
        if isinstance(hit, SkipRow):
            raise SkipRow(hit.reason)
        return hit

    return predict_once


__all__ = ["MAX_ROWS", "memoised", "row_key"]
