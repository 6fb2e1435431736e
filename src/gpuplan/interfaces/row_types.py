"""Types shared by the validation harness and the per-workload predictors.

A predictor is a function `predict_row(row: dict[str, str]) -> Prediction` that turns one CSV row
of ../shared/validation/SCHEMA.md (all cells as strings, empty = not stated) into a predicted
value in the unit of the row's `metric`. When the model cannot express the row yet, the predictor
raises `SkipRow("reason")`; the harness lists the row as skipped with that reason (never drops it).

This module imports nothing from gpuplan: the harness (validate.py) and every predictor
(validation_training.py, validation_inference.py, validation_collectives.py) import it without cycles.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prediction:
    """A predicted figure for one validation row, in the unit of the row's `metric`.

    `notes` says which documented defaults were used for empty cells (e.g. "kv_heads=heads").
    """

    value: float
    notes: str = ""


class SkipRow(Exception):
    """Raised by a predictor for a row the model cannot express yet; `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


__all__ = ["Prediction", "SkipRow"]
