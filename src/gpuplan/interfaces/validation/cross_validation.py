"""Leave-one-family-out cross-validation of the fitted knobs: `gpuplan validate FILE.csv --cv family`.

The accuracy of record (DESIGN.md) is the error on rows the model was not tuned on. A *family* is a
row id without its final `-N` (../shared/validation/SCHEMA.md: one source table read one way). The
knobs refit are the registry's fitted knobs (`fitted_on` non-empty) whose `fitted_on` names a
family of the file: those were tuned on these rows. (A knob fitted on another file's families is
not refit: this file is already unseen data for it. Nor are the `calibration.*` knobs: settings of
the `calibrate fit` method, which no prediction reads, so no fold could move them.)

For each family F:
1. fit the knobs on the scored rows of every other family, starting from and pulled toward each
   knob's unfitted prior (`Knob.prior`; a knob only F informs stays at its prior) (`gpuplan.interfaces.fitting.least_squares`: the
   leave-out refit is one linearised step from the fit on all rows, with its Jacobian, see
   `KnobFitter.refit_without`; the in-sample values are the same step on every row);
2. predict F's rows with those values: F's *CV* error.

Figures per family and overall: CV MAPE and median absolute % error; in-sample MAPE (the knobs
fitted on every family, F included); default MAPE (the registry values, as `gpuplan validate`
prints). Scoring (SCHEMA.md): rows of confidence `low` are predicted and listed but not scored; a
high/medium row the model cannot predict counts as a miss: `predicted_fraction` = predicted /
scored rows. With no knob to refit, CV = in-sample = default.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.interfaces.fitting.least_squares import KnobFitter, error_figures
from gpuplan.interfaces.fitting.knob_catalog import load_all
from gpuplan.interfaces.validation.validate import row_kind, schema_family
from gpuplan.interfaces.row_types import Prediction, SkipRow

CV_MODES = ("family",)

#: Row kind -> module of its predictor (`predict_row`).
_PREDICTOR_MODULES = {
    "training": "gpuplan.interfaces.validation.training",
    "inference": "gpuplan.interfaces.validation.inference",
    "collectives": "gpuplan.interfaces.validation.collectives",
    "matmul": "gpuplan.interfaces.validation.matmul",
}


def _resolve(kind: str) -> Callable[[dict], Prediction]:
    return importlib.import_module(_PREDICTOR_MODULES[kind]).predict_row


def row_predictor() -> Callable[[dict], Prediction]:
    """A predictor for rows of any kind: routed by `validate.row_kind` to the workload's `predict_row`."""
    resolved: dict[str, Callable[[dict], Prediction]] = {}

    def predict(row: dict) -> Prediction:
        kind = row_kind(row)
        if kind not in _PREDICTOR_MODULES:
            raise SkipRow("cannot tell the row kind (no collective, transformer-shape or inference columns)")
        if kind not in resolved:
            resolved[kind] = _resolve(kind)
        return resolved[kind](row)

    return predict


def knobs_to_refit(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """Fitted knobs whose `fitted_on` names a family present in `rows`, less the `calibrate fit`
    method's own (`calibration.*`; module docstring)."""
    load_all()
    families = {schema_family(r.get("id", "")) for r in rows}
    return sorted(k.name for k in knobs.fitted_knobs()
                  if families & set(k.fitted_on) and not k.name.startswith("calibration."))


@dataclass(frozen=True)
class CvRow:
    id: str
    family: str
    kind: str
    confidence: str
    scored: bool
    measured: float
    predicted_default: float | None
    predicted_in_sample: float | None
    predicted_cv: float | None
    reason: str = ""  # why it was not predicted

    @property
    def skipped(self) -> bool:
        return self.predicted_cv is None

    def to_dict(self) -> dict:
        def err(p):
            return None if p is None else (p - self.measured) / self.measured * 100.0

        return {"id": self.id, "family": self.family, "kind": self.kind, "confidence": self.confidence,
                "scored": self.scored, "measured": self.measured, "predicted_default": self.predicted_default,
                "predicted_in_sample": self.predicted_in_sample, "predicted_cv": self.predicted_cv,
                "error_cv_pct": err(self.predicted_cv), "error_in_sample_pct": err(self.predicted_in_sample),
                "error_default_pct": err(self.predicted_default), "skipped": self.skipped, "reason": self.reason}


@dataclass
class CvReport:
    rows: list[CvRow]
    families: dict[str, dict]
    overall: dict
    knobs_refit: list[dict]
    seconds: float
    evaluations: int
    lam: float
    prior_width: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """The stable JSON shape of `validate --cv family --json` (see `cv_json`)."""
        return {"cv": {"mode": "family", "families": self.families, "overall": self.overall,
                       "knobs_refit": self.knobs_refit, "lambda": self.lam, "prior_width": self.prior_width,
                       "run_time_s": self.seconds, "evaluations": self.evaluations, "notes": self.notes},
                "rows": [r.to_dict() for r in self.rows]}


def _figures(rows: list[CvRow]) -> dict:
    """Scored rows only: n, predicted, predicted_fraction, CV / in-sample / default MAPE and median APE."""
    scored = [r for r in rows if r.scored]
    measured = np.array([r.measured for r in scored], dtype=np.float64)

    def col(attr: str) -> np.ndarray:
        return np.array([np.nan if getattr(r, attr) is None else getattr(r, attr) for r in scored], dtype=np.float64)

    cv = error_figures(col("predicted_cv"), measured)
    ins = error_figures(col("predicted_in_sample"), measured)
    default = error_figures(col("predicted_default"), measured)
    n = len(scored)
    return {
        "n": n, "predicted": cv["rows"], "predicted_fraction": (cv["rows"] / n) if n else None,
        "low_confidence_rows": len(rows) - n,
        "mape_pct": cv["mape_pct"], "median_ape_pct": cv["median_ape_pct"],
        "in_sample_mape_pct": ins["mape_pct"], "in_sample_median_ape_pct": ins["median_ape_pct"],
        "default_mape_pct": default["mape_pct"], "default_median_ape_pct": default["median_ape_pct"],
    }


def _opt(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def cross_validate(rows: Sequence[Mapping[str, str]], *, predictor: Callable[[dict], object] | None = None,
                   knob_names: Sequence[str] | None = None, lam: float = 1.0, prior_width: float = 1.0,
                   progress: Callable[[str, float], None] | None = None) -> CvReport:
    """Leave-one-family-out cross-validation of `rows` (module docstring). `predictor` defaults to
    `row_predictor()`; `knob_names` to `knobs_to_refit(rows)`; `progress(stage, fraction)` per fold."""
    t0 = time.perf_counter()
    rows = [dict(r) for r in rows]
    if not rows:
        raise InputError("file: no rows to cross-validate", field="file")
    predictor = predictor or row_predictor()
    names = list(knob_names) if knob_names is not None else knobs_to_refit(rows)
    # every refit starts from (and is pulled toward) the knob's unfitted prior, unless a profile
    # overrides it: a fold whose remaining rows do not inform a knob is predicted with the prior
    start = {n: knobs.REGISTRY[n].prior_value for n in names
             if n in knobs.REGISTRY and knobs.value(n) == knobs.REGISTRY[n].default}
    fitter = KnobFitter(rows, predictor, names, lam=lam, prior_width=prior_width, start=start)
    families = np.array([schema_family(r.get("id", "")) for r in rows])
    scored = np.array([(r.get("confidence") or "").strip().lower() != "low" for r in rows])

    if progress:
        progress("fit on every family", 0.0)
    full = fitter.fit(scored)
    default_pred = fitter.base_predictions()
    if any(v != knobs.value(n) for n, v in start.items()):  # the registry values, as `gpuplan validate`
        default_pred = fitter.evaluator.predict({n: knobs.value(n) for n in names})
    ins = fitter.refit_without(full, scored)  # the same linearised step as the folds, on every row
    in_sample = full.predictions if np.array_equal(ins.x, full.x) else fitter.predictions(ins.x)
    cv = np.full(len(rows), np.nan)
    fold_values: dict[str, dict[str, float]] = {}
    folds = list(dict.fromkeys(families))
    for i_fold, fam in enumerate(folds):
        if progress:
            progress(f"leave out {fam}", 0.2 + 0.8 * i_fold / len(folds))
        in_fam = families == fam
        fold = fitter.refit_without(full, scored & ~in_fam)
        same = np.array_equal(fold.x, ins.x)  # e.g. a family without scored rows: nothing left out
        cv[in_fam] = in_sample[in_fam] if same else fitter.predictions(fold.x, subset=in_fam)[in_fam]
        fold_values[str(fam)] = fold.values

    reasons = fitter.evaluator.reasons
    out_rows = []
    for i, r in enumerate(rows):
        out_rows.append(CvRow(
            id=r.get("id", ""), family=str(families[i]), kind=row_kind(r), confidence=r.get("confidence", ""),
            scored=bool(scored[i]), measured=float(fitter.evaluator.measured[i]),
            predicted_default=_opt(default_pred[i]), predicted_in_sample=_opt(in_sample[i]),
            predicted_cv=_opt(cv[i]), reason="" if np.isfinite(cv[i]) else reasons.get(i, "not predicted")))
    fam_blocks = {}
    for fam in dict.fromkeys(families):
        block = _figures([r for r in out_rows if r.family == fam])
        block["knob_values"] = fold_values[str(fam)]
        fam_blocks[str(fam)] = block
    registry = knobs.REGISTRY
    # value = in_sample_value: the knob fitted on every family; uncertainty (1 sigma, the knob's unit)
    # from the full fit's Jacobian and residual variance
    knobs_refit = [{**k.to_dict(), "value": v.value, "in_sample_value": v.value, "default": registry[k.name].default,
                    "fitted_on": list(registry[k.name].fitted_on)} for k, v in zip(full.knobs, ins.knobs)]
    notes = []
    if not names:
        notes.append("no fitted knob was tuned on these families: CV = in-sample = default")
    elif full.not_informed:
        notes.append(f"not informed by these rows (left at their values): {', '.join(full.not_informed)}")
    return CvReport(rows=out_rows, families=fam_blocks, overall=_figures(out_rows), knobs_refit=knobs_refit,
                    seconds=time.perf_counter() - t0, evaluations=fitter.evaluator.evaluations, lam=lam,
                    prior_width=prior_width, notes=notes)


def cross_validate_file(path: str, mode: str = "family", **kwargs) -> CvReport:
    """Read a SCHEMA.md CSV and cross-validate it (`mode`: only "family")."""
    from gpuplan.interfaces.validation.validate import read_rows

    if mode not in CV_MODES:
        raise InputError(f"cv: unknown mode '{mode}'; allowed: {', '.join(CV_MODES)}", field="cv")
    return cross_validate(read_rows(path), **kwargs)


__all__ = ["CV_MODES", "CvReport", "CvRow", "cross_validate", "cross_validate_file", "knobs_to_refit",
           "row_predictor", "schema_family"]
