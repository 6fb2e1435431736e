"""The public validation data shipped with gpuplan (catalog/data/validation).

`training.csv`, `inference.csv` and `collectives.csv` are byte copies of the project's public
measurements (../shared/validation, beside the repository in development), with the SCHEMA.md that
defines their columns and the SYSTEMS.md that names their systems; tests/validate/test_builtin_data.py
fails when the copies drift from the originals. `gpuplan validate --builtin NAME` (api.validate(builtin=NAME))
reads them, so the accuracy of record can be reproduced from an installed package alone.
They are test data: nothing in gpuplan is fitted to them except the knobs the registry declares
fitted (gpuplan.knobs), and `--cv family` scores each family with those knobs refit without it.
"""

from __future__ import annotations

from pathlib import Path

from gpuplan.catalog import DATA_DIR
from gpuplan.errors import InputError

#: the shipped sets, in the order `--builtin` lists them (one CSV each)
VALIDATION_SETS: tuple[str, ...] = ("training", "inference", "collectives")

#: every file shipped in the folder (the CSVs, their schema and the systems they name)
VALIDATION_FILES: tuple[str, ...] = (*(f"{name}.csv" for name in VALIDATION_SETS), "SCHEMA.md", "SYSTEMS.md")


def validation_dir() -> Path:
    """The folder of the shipped validation files (VALIDATION_FILES)."""
    return DATA_DIR / "validation"


def validation_set_path(name: str) -> Path:
    """The CSV of the shipped set `name` (one of VALIDATION_SETS); InputError naming `--builtin` otherwise."""
    key = str(name).strip().lower()
    if key not in VALIDATION_SETS:
        allowed = ", ".join(VALIDATION_SETS)
        raise InputError(f"--builtin: must be one of {allowed}, got {name!r}", field="builtin", allowed=allowed)
    return validation_dir() / f"{key}.csv"


__all__ = ["VALIDATION_FILES", "VALIDATION_SETS", "validation_dir", "validation_set_path"]
