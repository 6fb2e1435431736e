"""Shared by the training-log importers: the median of a per-step series after the warm-up steps,
and the training rows of a run (SCHEMA.md training.csv) from the figures a log gave.

Warm-up: the first `skip_steps` logged steps (config; default 1: the first logged step includes
compilation, allocator growth and data-loader start) are dropped when more than that many were
logged. Rates and times: the median over the remaining steps; memory: the maximum.
"""

from __future__ import annotations

import statistics
from typing import Mapping, Sequence

from gpuplan.errors import InputError
from gpuplan.interfaces.calibration.importers import TRAINING, base_row, check_config, number_text

REQUIRED = ["system", "num_gpus", ("hf_config", "layers+hidden")]
DEFAULT_SKIP_STEPS = 1


def skip_steps(config: Mapping[str, str]) -> int:
    raw = config.get("skip_steps", "")
    if not raw:
        return DEFAULT_SKIP_STEPS
    try:
        n = int(raw)
    except ValueError:
        raise InputError(f"config: skip_steps: '{raw}' is not a whole number >= 0", field="skip_steps") from None
    if n < 0:
        raise InputError(f"config: skip_steps: must be >= 0, got {n}", field="skip_steps")
    return n


def steady(values: Sequence[float], skip: int) -> list[float]:
    return list(values[skip:]) if len(values) > skip else list(values)


def median_after_warmup(values: Sequence[float], skip: int) -> float | None:
    kept = steady(values, skip)
    return statistics.median(kept) if kept else None


def check(config: Mapping[str, str], tool: str) -> None:
    check_config(config, TRAINING, REQUIRED, tool)


def run_rows(figures: Mapping[str, float | None], config: Mapping[str, str], tool: str, framework: str,
             filename: str, prefix: str) -> list[dict[str, str]]:
    """One row per metric of `figures` (metric -> value; None skipped), ids PREFIX-1, PREFIX-2, ..."""
    rows = []
    for metric, value in figures.items():
        if value is None or not value > 0:
            continue
        row = base_row(f"{prefix}-{len(rows) + 1}", tool, filename, config, TRAINING)
        row.setdefault("framework", framework)
        row["metric"] = metric
        row["value"] = number_text(round(value, 6))
        rows.append(row)
    return rows
