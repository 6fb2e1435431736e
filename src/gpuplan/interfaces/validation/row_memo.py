"""One prediction per distinct row: `validate` and `--cv` predict a row that repeats an earlier one
(every cell the same but its `id`) once, under the same knob values.

A predictor is a pure function of the row's cells and of the knob values in effect
(gpuplan.knobs: `generation()` changes whenever the overrides change), never of the row's id (the
predictors read `id` only in error messages, and errors are not memoised). So the key is the row's
cells without its id, and the knob generation; a SkipRow is memoised as such (the same reason again).
Any other exception (InputError of a malformed cell, a pydantic ValidationError, a predictor bug)
is raised again at each call, with that row's own id.
"""

from __future__ import annotations

from typing import Callable, Mapping

from gpuplan import knobs
from gpuplan.interfaces.row_types import Prediction, SkipRow

#: predictions remembered per predictor (bounded memory; the oldest goes first)
MAX_ROWS = 1 << 16

Predictor = Callable[[dict], Prediction]


def row_key(row: Mapping[str, str]) -> tuple:
    """The row's cells without its id, in a fixed order."""
    return tuple(sorted((k, v) for k, v in row.items() if k != "id"))


def memoised(predict: Predictor, max_rows: int = MAX_ROWS) -> Predictor:
    """`predict` with one evaluation per (row without id, knob generation) (module docstring)."""
    memo: dict[tuple, Prediction | SkipRow] = {}

    def predict_once(row: dict, cells: tuple | None = None) -> Prediction:
        """`cells`: row_key(row), when the caller has it already."""
        key = (knobs.generation(), row_key(row) if cells is None else cells)
        hit = memo.get(key)
        if hit is None:
            try:
                hit = predict(row)
            except SkipRow as exc:
                hit = exc
            if len(memo) >= max_rows:
                memo.pop(next(iter(memo)))  # the oldest entry
            memo[key] = hit
        if isinstance(hit, SkipRow):
            raise SkipRow(hit.reason)
        return hit

    return predict_once


__all__ = ["MAX_ROWS", "memoised", "row_key"]
