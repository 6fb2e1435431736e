"""`gpuplan.api.validate`: predict every row of a ../shared/validation/SCHEMA.md CSV and compare
with the measurement (gpuplan.interfaces.validation.validate). The CSV is a file of the user's, or
one of the public sets shipped with gpuplan (`builtin="training" | "inference" | "collectives"`,
gpuplan.catalog.validation_sets): `gpuplan validate FILE` and `gpuplan validate --builtin NAME`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplan.catalog.validation_sets import VALIDATION_SETS, validation_set_path
from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import Result


def validation_source(file: str | Path | None, builtin: str | None) -> Path:
    """The CSV to read: `file`, or the shipped set `builtin`; exactly one of them (InputError else)."""
    sets = "|".join(VALIDATION_SETS)
    given_file = file is not None and str(file).strip() != ""
    given_builtin = builtin is not None and str(builtin).strip() != ""
    if given_file and given_builtin:
        raise InputError(f"--builtin: give a FILE or --builtin {sets}, not both", field="builtin",
                         allowed=", ".join(VALIDATION_SETS))
    if given_builtin:
        return validation_set_path(str(builtin))
    if not given_file:
        raise InputError(f"file: give a CSV FILE of SCHEMA.md rows, or --builtin {sets}", field="file",
                         allowed=f"a CSV file, or --builtin {sets}")
    return Path(file)


@dataclass(frozen=True)
class ValidationResult(Result):
    """`validate`: `report` is interfaces.validation.validate.ValidationReport (rows + per-family summary)."""

    report: Any

    def json_data(self) -> dict:
        from gpuplan.interfaces.validation.validate import report_json

        return report_json(self.report)


def validate(file: str | Path | None = None, progress=None, *, builtin: str | None = None) -> ValidationResult:
    """Predicted vs measured for every row of `file` (or of the shipped set `builtin`: training,
    inference, collectives), with error statistics per source family; `progress(rows done, rows)`
    before each row."""
    from gpuplan.interfaces.validation.validate import validate_file

    return ValidationResult(validate_file(validation_source(file, builtin), progress))


@dataclass(frozen=True)
class CrossValidationResult(Result):
    """`validate(..., cv="family"|"regime"|"row")`: the leave-one-family-out report, with `cv="regime"`
    also leave-one-regime-out, with `cv="row"` leave-one-row-out instead (interfaces.validation.cross_validation)."""

    report: Any

    def json_data(self) -> dict:
        return self.report.to_dict()


def validate_cv(file: str | Path | None = None, cv: str = "family", progress=None, *,
                builtin: str | None = None) -> CrossValidationResult:
    """Leave-one-family-out cross-validation of `file` (or of the shipped set `builtin`): the fitted
    knobs refit without each family, that family predicted with the refit values; CV, in-sample and
    default errors per family. `cv="regime"`: also each regime tuple and each single axis value
    (hardware generation, engine, architecture, precision) left out as a whole; figures per
    held-out value. `cv="row"`: each row predicted with the knobs refit without that row alone
    (the interpolation error: a new row of a family whose other rows are known)."""
    from gpuplan.interfaces.validation.cross_validation import cross_validate_file

    return CrossValidationResult(cross_validate_file(str(validation_source(file, builtin)), cv, progress=progress))
