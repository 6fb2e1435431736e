"""Leave-one-family-out, leave-one-regime-out and leave-one-row-out cross-validation of the fitted
knobs: `gpuplan validate FILE.csv --cv family|regime|row`.

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

`--cv regime` adds the same procedure with other groups than families (interfaces.validation.regimes):
every row of one regime tuple (hardware generation, engine, architecture) left out together, and every
row of one value of each single axis (one hardware generation, one engine or framework, one
architecture class, one weight precision). Each row then has one held-out prediction per grouping
(`CvRow.predicted_held_out`: "regime", "hardware", "engine", "architecture", "precision"), and the
report gives the figures per held-out value (`CvReport.regimes`): the error the model makes on a
regime, a GPU generation or an engine the rest of the rows never showed it. The error bands
(interfaces.validation.error_bands) are fit on these residuals.

`--cv row` is the *interpolation* figure (issue 32): a new row of a family whose other rows are
known. Each row is predicted with the knobs refit without that row alone (the same linearised
refit, one fold per row, `held_out_predictions` with a group per row); its CV columns, and the
figures per family and overall, are those leave-one-row-out predictions. A fold per row costs one
linear solve and one prediction of the row, so the whole file costs about one `validate` pass
after the fit on every row. There is no per-family fold (`knob_values` is null per family).
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
from gpuplan.interfaces.validation.regimes import AXES, Regime, row_regime
from gpuplan.interfaces.validation.validate import row_kind, schema_family
from gpuplan.interfaces.row_types import Prediction, SkipRow

CV_MODES = ("family", "regime", "row")
#: groupings of `--cv regime`: the regime tuple, then each single axis (interfaces.validation.regimes)
HELD_OUT_GROUPINGS = ("regime", *AXES)

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

    from gpuplan.interfaces.validation.row_memo import memoised

    return memoised(predict)  # a row repeating an earlier one but for its id is predicted once per knob values


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
    regime: Regime | None = None  # the row's regime (interfaces.validation.regimes.row_regime)
    #: `--cv regime`: {grouping: prediction with the row's group of that grouping left out}
    predicted_held_out: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        return self.predicted_cv is None

    def to_dict(self) -> dict:
        def err(p):
            return None if p is None else (p - self.measured) / self.measured * 100.0

        out = {"id": self.id, "family": self.family, "kind": self.kind, "confidence": self.confidence,
               "scored": self.scored, "measured": self.measured, "predicted_default": self.predicted_default,
               "predicted_in_sample": self.predicted_in_sample, "predicted_cv": self.predicted_cv,
               "error_cv_pct": err(self.predicted_cv), "error_in_sample_pct": err(self.predicted_in_sample),
               "error_default_pct": err(self.predicted_default), "skipped": self.skipped, "reason": self.reason}
        if self.regime is not None:
            out["regime"] = self.regime.to_dict()
        if self.predicted_held_out:
            out["predicted_held_out"] = dict(self.predicted_held_out)
            out["error_held_out_pct"] = {g: err(p) for g, p in self.predicted_held_out.items()}
        return out


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
    mode: str = "family"
    #: `--cv regime`: {grouping: {held-out value: figures of its rows predicted without it}, with
    #: "overall" per grouping}; empty for `--cv family`
    regimes: dict[str, dict[str, dict]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The stable JSON shape of `validate --cv family|regime --json`."""
        cv = {"mode": self.mode, "families": self.families, "overall": self.overall,
              "knobs_refit": self.knobs_refit, "lambda": self.lam, "prior_width": self.prior_width,
              "run_time_s": self.seconds, "evaluations": self.evaluations, "notes": self.notes}
        if self.regimes:
            cv["regimes"] = self.regimes
        return {"cv": cv, "rows": [r.to_dict() for r in self.rows]}


def _figures(rows: list[CvRow], held_out: str | None = None) -> dict:
    """Scored rows only: n, predicted, predicted_fraction, CV / in-sample / default MAPE and median APE.
    `held_out`: score the predictions of that `--cv regime` grouping as the CV figures."""
    scored = [r for r in rows if r.scored]
    measured = np.array([r.measured for r in scored], dtype=np.float64)

    def col(attr: str) -> np.ndarray:
        return np.array([np.nan if getattr(r, attr) is None else getattr(r, attr) for r in scored], dtype=np.float64)

    if held_out is None:
        cv = error_figures(col("predicted_cv"), measured)
    else:
        cv = error_figures(np.array([np.nan if r.predicted_held_out.get(held_out) is None
                                     else r.predicted_held_out[held_out] for r in scored], dtype=np.float64), measured)
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


def held_out_predictions(fitter: KnobFitter, full, ins, in_sample: np.ndarray, scored: np.ndarray,
                         groups: np.ndarray, progress: Callable[[str, float], None] | None = None
                         ) -> tuple[np.ndarray, dict[str, dict[str, float]]]:
    """(prediction of every row with the knobs refit without its group, {group: knob values of its
    fold}): one linearised refit per distinct value of `groups` (`KnobFitter.refit_without`), the
    group's rows predicted with it. A fold that changes nothing (a group without scored rows) keeps
    the in-sample predictions. `progress(group, share of the folds done)` before each fold."""
    out = np.full(len(groups), np.nan)
    values: dict[str, dict[str, float]] = {}
    folds = list(dict.fromkeys(groups))
    for i_fold, g in enumerate(folds):
        if progress:
            progress(str(g), i_fold / len(folds))
        in_group = groups == g
        fold = fitter.refit_without(full, scored & ~in_group)
        same = np.array_equal(fold.x, ins.x)  # e.g. a family without scored rows: nothing left out
        out[in_group] = in_sample[in_group] if same else fitter.predictions(fold.x, subset=in_group)[in_group]
        values[str(g)] = fold.values
    return out, values


def _regime_figures(out_rows: list[CvRow]) -> dict[str, dict[str, dict]]:
    """{grouping: {held-out value: _figures of its rows with that value held out, ..., "overall"}}."""
    blocks: dict[str, dict[str, dict]] = {}
    for grouping in HELD_OUT_GROUPINGS:
        by_value: dict[str, list[CvRow]] = {}
        for r in out_rows:
            if r.regime is not None:
                key = r.regime.key if grouping == "regime" else r.regime.value(grouping)
                by_value.setdefault(key, []).append(r)
        block = {v: _figures(rs, grouping) for v, rs in sorted(by_value.items())}
        block["overall"] = _figures(out_rows, grouping)
        blocks[grouping] = block
    return blocks


def cross_validate(rows: Sequence[Mapping[str, str]], *, predictor: Callable[[dict], object] | None = None,
                   knob_names: Sequence[str] | None = None, lam: float = 1.0, prior_width: float = 1.0,
                   progress: Callable[[str, float], None] | None = None, mode: str = "family") -> CvReport:
    """Leave-one-family-out cross-validation of `rows` (module docstring); `mode="regime"` adds the
    leave-one-regime-out groupings; `mode="row"` leaves out one row at a time instead of a family.
    `predictor` defaults to `row_predictor()`; `knob_names` to
    `knobs_to_refit(rows)`; `progress(stage, fraction)` per fold."""
    if mode not in CV_MODES:
        raise InputError(f"cv: unknown mode '{mode}'; allowed: {', '.join(CV_MODES)}", field="cv")
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
    kinds = [row_kind(r) for r in rows]
    regimes = [row_regime(r, k) if k in ("training", "inference") else None for r, k in zip(rows, kinds)] \
        if mode == "regime" else [None] * len(rows)

    if progress:
        progress("fit on every family", 0.0)
    full = fitter.fit(scored)
    default_pred = fitter.base_predictions()
    if any(v != knobs.value(n) for n, v in start.items()):  # the registry values, as `gpuplan validate`
        default_pred = fitter.evaluator.predict({n: knobs.value(n) for n in names})
    ins = fitter.refit_without(full, scored)  # the same linearised step as the folds, on every row
    in_sample = full.predictions if np.array_equal(ins.x, full.x) else fitter.predictions(ins.x)
    stages = 1 + (len(HELD_OUT_GROUPINGS) if mode == "regime" else 0)

    def stage_progress(i_stage: int, label: str):
        if not progress:
            return None
        return lambda g, done: progress(f"{label} {g}", 0.2 + 0.8 * (i_stage + done) / stages)

    if mode == "row":  # one fold per row (module docstring): its group is its position
        cv, _ = held_out_predictions(fitter, full, ins, in_sample, scored, np.arange(len(rows)).astype(str),
                                     stage_progress(0, "leave out row"))
        fold_values: dict[str, dict[str, float] | None] = {}
    else:
        cv, fold_values = held_out_predictions(fitter, full, ins, in_sample, scored, families,
                                               stage_progress(0, "leave out"))
    held: dict[str, np.ndarray] = {}
    if mode == "regime":
        for i, grouping in enumerate(HELD_OUT_GROUPINGS, start=1):
            groups = np.array(["?" if g is None else (g.key if grouping == "regime" else g.value(grouping))
                               for g in regimes])
            held[grouping], _ = held_out_predictions(fitter, full, ins, in_sample, scored, groups,
                                                     stage_progress(i, f"leave out {grouping}"))

    reasons = fitter.evaluator.reasons
    out_rows = []
    for i, r in enumerate(rows):
        out_rows.append(CvRow(
            id=r.get("id", ""), family=str(families[i]), kind=kinds[i], confidence=r.get("confidence", ""),
            scored=bool(scored[i]), measured=float(fitter.evaluator.measured[i]),
            predicted_default=_opt(default_pred[i]), predicted_in_sample=_opt(in_sample[i]),
            predicted_cv=_opt(cv[i]), reason="" if np.isfinite(cv[i]) else reasons.get(i, "not predicted"),
            regime=regimes[i], predicted_held_out={g: _opt(p[i]) for g, p in held.items()}))
    fam_blocks = {}
    for fam in dict.fromkeys(families):
        block = _figures([r for r in out_rows if r.family == fam])
        block["knob_values"] = fold_values.get(str(fam))  # None under --cv row: no fold per family
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
                    prior_width=prior_width, notes=notes, mode=mode,
                    regimes=_regime_figures(out_rows) if mode == "regime" else {})


def cross_validate_file(path: str, mode: str = "family", **kwargs) -> CvReport:
    """Read a SCHEMA.md CSV and cross-validate it (`mode`: "family", "regime" or "row")."""
    from gpuplan.interfaces.validation.validate import read_rows

    if mode not in CV_MODES:
        raise InputError(f"cv: unknown mode '{mode}'; allowed: {', '.join(CV_MODES)}", field="cv")
    return cross_validate(read_rows(path), mode=mode, **kwargs)


__all__ = ["CV_MODES", "CvReport", "CvRow", "HELD_OUT_GROUPINGS", "cross_validate", "cross_validate_file",
           "held_out_predictions", "knobs_to_refit", "row_predictor", "schema_family"]
