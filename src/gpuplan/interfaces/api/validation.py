"""`gpuplan.api.validate`: predict every row of a ../shared/validation/SCHEMA.md CSV and compare
with the measurement (gpuplan.interfaces.validation.validate)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplan.interfaces.api._common import Result


@dataclass(frozen=True)
class ValidationResult(Result):
    """`validate`: `report` is interfaces.validation.validate.ValidationReport (rows + per-family summary)."""

    report: Any

    def json_data(self) -> dict:
        from gpuplan.interfaces.validation.validate import report_json

        return report_json(self.report)


def validate(file: str | Path, progress=None) -> ValidationResult:
    """Predicted vs measured for every row of `file`, with error statistics per source family;
    `progress(rows done, rows)` before each row."""
    from gpuplan.interfaces.validation.validate import validate_file

    return ValidationResult(validate_file(file, progress))


@dataclass(frozen=True)
class CrossValidationResult(Result):
    """`validate(..., cv="family"|"regime")`: the leave-one-family-out report, with `cv="regime"` also
    leave-one-regime-out (interfaces.validation.cross_validation)."""

    report: Any

    def json_data(self) -> dict:
        return self.report.to_dict()


def validate_cv(file: str | Path, cv: str = "family", progress=None) -> CrossValidationResult:
    """Leave-one-family-out cross-validation of `file`: the fitted knobs refit without each family,
    that family predicted with the refit values; CV, in-sample and default errors per family.
    `cv="regime"`: also each regime tuple and each single axis value (hardware generation, engine,
    architecture, precision) left out as a whole; figures per held-out value."""
    from gpuplan.interfaces.validation.cross_validation import cross_validate_file

    return CrossValidationResult(cross_validate_file(file, cv, progress=progress))
