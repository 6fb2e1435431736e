"""`gpuplan calibrate fit`: fit the registry's knobs to a user's measurements and write a profile.

Input: one or more CSV files of ../shared/validation/SCHEMA.md rows (training, inference and
collectives rows, mixed freely; plus the `matmul` rows the importers and `gpuplan bench` write,
docs/calibration.md). The rows are predicted by the validation predictors
(`cross_validation.row_predictor`) and fitted by THE fitter (`interfaces.fitting.least_squares.KnobFitter`:
robust soft-L1 least squares on log error, pulled toward the values in effect).

Which knobs. Default: every registered knob the rows' predictions read (recorded once with
`knobs.recording_reads`, under an explicit override of every knob so that no cache skips a read),
of which the fitter keeps the ones whose Jacobian column moves (the others are refused: not
informed). No informed knob at all -> InputError (exit 2).

Method. `hierarchical` (the default when no knob is named): a few site factors first, then
single knobs only where they lower the leave-one-out error (interfaces.calibration.hierarchy);
the profile holds the resulting knob values. `flat` (the default when `knob_names` is given, and
on request): every informed knob of the set is a free parameter (interfaces.fitting.least_squares).

Figures.
- in-sample error before / after: the rows used, predicted with the start values and with the fit;
- leave-one-out error before / after: each group left out in turn (per family, SCHEMA.md, when the
  rows span two families or more, else per row), refit on the others (`KnobFitter.refit_without`:
  a linearised step from the full fit) and predicted; "before" is the start values (nothing is
  fitted, so leaving out changes nothing);
- per row, the 1-sigma band of its calibrated prediction, in log units,
      u_i = sqrt(s^2 + sum_j (d log pred_i / d log v_j)^2 (sigma_j / v_j)^2),
  with s^2 = sum log-residual^2 / max(1, n - k) after the fit and sigma_j the knob's uncertainty
  (fitting.py): the reported uncertainty of that row's prediction.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from gpuplan import __version__, knobs
from gpuplan.errors import InputError
from gpuplan.interfaces.calibration.hierarchy import (ParamFitter, candidate_params, knob_values_and_sigmas,
                                                      select_params)
from gpuplan.interfaces.calibration.profile import profile_toml
from gpuplan.interfaces.validation.cross_validation import row_predictor, schema_family
from gpuplan.interfaces.fitting.least_squares import FD_STEP, FitResult, KnobFitter, error_figures
from gpuplan.interfaces.fitting.knob_catalog import load_all
from gpuplan.input_files import MAX_DATA_BYTES, read_input_bytes
from gpuplan.interfaces.validation.validate import parse_rows

#: Relative step of the log-prediction Jacobian used for the row bands.
BAND_STEP = FD_STEP
#: Fitting methods (module docstring); "auto": hierarchical unless knobs are named.
METHODS = ("auto", "hierarchical", "flat")


@dataclass(frozen=True)
class SourceFile:
    path: str
    sha256: str
    rows: int

    def to_dict(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "rows": self.rows}


def read_measurements(paths: Sequence[str | Path]) -> tuple[list[dict[str, str]], list[SourceFile]]:
    """Rows of every file (read_rows: SCHEMA.md CSV) and each file's sha256. InputError for no
    file, an empty file, or an id used twice."""
    if not paths:
        raise InputError("measurements: give at least one CSV file", field="measurements")
    rows: list[dict[str, str]] = []
    sources = []
    seen: dict[str, str] = {}
    for path in paths:
        p = Path(path)
        raw = read_input_bytes(p, "file", max_bytes=MAX_DATA_BYTES, what="CSV file")  # once: a pipe reads once
        file_rows = parse_rows(raw, p.name)
        if not file_rows:
            raise InputError(f"{p.name}: no rows (a header and at least one measured row are needed)", field="file")
        for r in file_rows:
            rid = r.get("id", "")
            if rid in seen:
                raise InputError(f"{p.name}: row id '{rid}' also appears in {seen[rid]}; ids must be unique", field="id")
            seen[rid] = p.name
        rows.extend(file_rows)
        sources.append(SourceFile(str(p), hashlib.sha256(raw).hexdigest(), len(file_rows)))
    return rows, sources


_SCREENS = itertools.count(1)


def _nudged(k: knobs.Knob, v: float, step: float) -> float:
    """`v` moved by `step` x the knob's range, inward from a bound."""
    d = step * (k.high - k.low)
    return v + d if v + d <= k.high else v - d


def knobs_read_by(rows: Sequence[Mapping[str, str]], predictor=None) -> list[str]:
    """The knobs the predictions of `rows` read (module docstring), sorted."""
    registry = load_all()
    predictor = predictor or row_predictor()
    # A cached result skips the reads of the computation it stands for, and caches are keyed on the
    # knob values in effect (primitives.collectives: the `collectives.*` overrides): every screen
    # overrides every knob with values no earlier call used (each moved by a new 1e-12 of its range,
    # far below any effect), so no cache filled by an earlier screen or fit answers for it.
    step = next(_SCREENS) * 1e-12
    explicit = {name: _nudged(k, knobs.value(name), step) for name, k in registry.items()}
    with knobs.overridden(explicit), knobs.recording_reads() as reads:
        for row in rows:
            try:
                predictor(dict(row))
            except Exception:  # noqa: BLE001 - a row that cannot be predicted reads what it read
                continue
    return sorted(reads)


def _groups(rows: Sequence[Mapping[str, str]]) -> tuple[str, np.ndarray]:
    fams = np.array([schema_family(r.get("id", "")) for r in rows])
    if len(set(fams.tolist())) >= 2:
        return "family", fams
    return "row", np.array([str(i) for i in range(len(rows))])


@dataclass
class CalibrationResult:
    """What `calibrate_rows` returns; `to_dict()` is `calibrate fit --json`."""

    fit: FitResult
    candidates: list[str]
    loo_mode: str
    loo_before: dict
    loo_after: dict
    rows: list[dict]  # per row: id, family, metric, measured, before, after, loo_after, band_pct, used
    sources: list[SourceFile]
    created: str
    method: str = "flat"
    knob_fits: dict | None = None  # hierarchical: knob -> {value, uncertainty, start, via, at_bound}
    selection: list = field(default_factory=list)  # hierarchical: calibration_hierarchy.SelectionStep
    not_selected: list = field(default_factory=list)  # hierarchical: informed knobs no evidence selected

    @property
    def values(self) -> dict[str, float]:
        """Knob name -> fitted value: what a profile applies."""
        if self.knob_fits is not None:
            return {n: e["value"] for n, e in self.knob_fits.items()}
        return self.fit.values

    def knob_entries(self) -> dict[str, dict]:
        """Knob name -> {value, uncertainty, start, unit, default, at_bound[, via]} of every fitted knob."""
        registry = knobs.REGISTRY
        if self.knob_fits is not None:
            return {n: {"value": e["value"], "uncertainty": e["uncertainty"], "default": registry[n].default,
                        "start": e["start"], "unit": registry[n].unit, "at_bound": e["at_bound"], "via": list(e["via"])}
                    for n, e in self.knob_fits.items()}
        return {k.name: {"value": k.value, "uncertainty": k.uncertainty, "default": registry[k.name].default,
                         "start": k.start, "unit": registry[k.name].unit, "at_bound": k.at_bound}
                for k in self.fit.knobs if k.informed}

    def error_block(self) -> dict:
        f = self.fit
        return {"rows_used": f.rows_used, "mape_before_pct": f.error_before["mape_pct"],
                "mape_after_pct": f.error_after["mape_pct"], "median_ape_before_pct": f.error_before["median_ape_pct"],
                "median_ape_after_pct": f.error_after["median_ape_pct"], "loo_mode": self.loo_mode,
                "loo_mape_before_pct": self.loo_before["mape_pct"], "loo_mape_after_pct": self.loo_after["mape_pct"]}

    def to_dict(self) -> dict:
        registry = knobs.REGISTRY
        fitted = []
        if self.knob_fits is None:
            for k in self.fit.knobs:
                fitted.append({**k.to_dict(), "default": registry[k.name].default, "low": registry[k.name].low,
                               "high": registry[k.name].high})
        else:
            for name, e in self.knob_entries().items():
                fitted.append({"name": name, **e, "informed": True, "low": registry[name].low,
                               "high": registry[name].high})
        return {"method": self.method, "knobs": fitted, "values": self.values,
                "parameters": [k.to_dict() for k in self.fit.knobs if k.informed],
                "selection": [s.to_dict() for s in self.selection], "not_selected": list(self.not_selected),
                "not_informed": self.fit.not_informed if self.knob_fits is None else
                [n for n in self.candidates if n not in self.knob_fits and n not in self.not_selected],
                "candidates": self.candidates, "error": self.error_block(),
                "rows_skipped": [{"id": i, "reason": r} for i, r in self.fit.rows_skipped],
                "rows": self.rows, "sources": [s.to_dict() for s in self.sources], "created": self.created,
                "gpuplan_version": __version__}

    def profile_text(self) -> str:
        """The profile TOML (calibration_profile.profile_toml) of the informed knobs."""
        entries = self.knob_entries()
        how = ("hierarchical: site factors, then single knobs selected by leave-one-out error (gpuplan.interfaces."
               "calibration_hierarchy); " if self.knob_fits is not None else "flat: ")
        meta = {"created": self.created, "gpuplan_version": __version__,
                "method": "gpuplan calibrate fit, " + how + "robust soft-L1 least squares on log error, prior toward "
                          "the start values (gpuplan.interfaces.fitting.least_squares)"}
        if self.knob_fits is not None:
            meta["parameters"] = [f"{k.name} = {k.value:.6g} +- {k.uncertainty or 0:.3g} {k.unit}"
                                  for k in self.fit.knobs if k.informed]
        err = {key: v for key, v in self.error_block().items() if v is not None}
        used = [r["id"] for r in self.rows if r["used"]]
        return profile_toml(meta, err, [s.to_dict() for s in self.sources], used, entries)

    def write_profile(self, path: str | Path, field: str = "out") -> None:
        """The profile as TOML at `path` (gpuplan.output_files: atomic; `field` names the option)."""
        from gpuplan.output_files import write_atomic

        write_atomic(path, self.profile_text(), field)


def _row_bands(fitter: KnobFitter, fit: FitResult, usable: np.ndarray) -> np.ndarray:
    """u_i of the module docstring (log units) for every row (NaN where not used)."""
    cols = [j for j, k in enumerate(fit.knobs) if k.informed]
    after = fit.predictions
    meas = fitter.evaluator.measured
    with np.errstate(invalid="ignore", divide="ignore"):
        log_res = np.log(after / meas)
    n, k = int(usable.sum()), len(cols)
    s2 = float(np.nansum(log_res[usable] ** 2)) / max(1, n - k)
    var = np.full(len(meas), s2)
    for j in cols:
        kf = fit.knobs[j]
        if not kf.uncertainty or kf.value <= 0:
            continue
        x = fit.x.copy()
        h = BAND_STEP if x[j] + BAND_STEP <= fitter.hi[j] else -BAND_STEP
        x[j] += h
        with np.errstate(invalid="ignore", divide="ignore"):
            d = (np.log(fitter.predictions(x)) - np.log(after)) / h
        var += np.nan_to_num(d) ** 2 * (kf.uncertainty / kf.value) ** 2
    return np.where(usable, np.sqrt(var), np.nan)


def calibrate_rows(rows: Sequence[Mapping[str, str]], *, knob_names: Sequence[str] | None = None,
                   sources: Sequence[SourceFile] = (), lam: float = 1.0, prior_width: float = 1.0,
                   predictor=None, method: str = "auto", progress=None) -> CalibrationResult:
    """Fit the knobs the rows inform (module docstring). InputError when none is informed.
    `progress(stage, fraction)` at each stage and leave-one-out fold."""
    def report(stage: str, fraction: float) -> None:
        if progress is not None:
            progress(stage, fraction)

    rows = [dict(r) for r in rows]
    if method not in METHODS:
        raise InputError(f"method: '{method}' is not one of {', '.join(METHODS)}", field="method")
    if not rows:
        raise InputError("measurements: no rows to fit", field="measurements")
    predictor = predictor or row_predictor()
    load_all()
    if knob_names:
        unknown = [n for n in knob_names if n not in knobs.REGISTRY]
        if unknown:
            raise InputError(f"knobs: unknown knob(s) {', '.join(unknown)}; see `gpuplan calibrate knobs`", field="knobs")
        candidates = list(dict.fromkeys(knob_names))
    else:
        candidates = knobs_read_by(rows, predictor)
    if not candidates:
        raise InputError("measurements: the rows inform no knob (no row could be predicted; see `gpuplan validate`)",
                         field="measurements")
    if method == "auto":
        method = "flat" if knob_names else "hierarchical"
    report("screening knobs", 0.0)
    fitter = KnobFitter(rows, predictor, candidates, lam=lam, prior_width=prior_width)
    usable = fitter.usable_rows()
    informed_mask, r0, jac0 = fitter.screened(usable)
    report("fitting", 0.3)
    informed = [n for n, ok in zip(fitter.names, informed_mask) if ok]
    if not informed:
        skipped = int((~usable).sum())
        why = f"{int(usable.sum())} usable row(s)" + (f", {skipped} skipped" if skipped else "")
        raise InputError(f"measurements: the rows inform none of the knobs {', '.join(candidates[:6])}"
                         f"{' ...' if len(candidates) > 6 else ''} ({why})", field="knobs")
    knob_fits, selection, not_selected = None, [], []
    if method == "flat":
        fit = fitter.fit()
    else:
        start = {n: float(v) for n, v in zip(fitter.names, fitter.start)}
        sites, fine = candidate_params(informed, start)
        chosen, selection = select_params(np.nan_to_num(r0[usable]), jac0[usable], fitter.names, sites, fine,
                                          lam / prior_width**2, lam=lam)
        fitter = ParamFitter(fitter.evaluator, chosen, start, lam=lam, prior_width=prior_width,
                             robust_scale=fitter.robust_scale)
        fit = fitter.fit()
        knob_fits = knob_values_and_sigmas(fitter, fit, usable)
        not_selected = [n for n in informed if n not in knob_fits]
        if not knob_fits:
            raise InputError("measurements: the rows inform no knob the fit could move", field="knobs")
    mode, groups = _groups(rows)
    loo = np.full(len(rows), np.nan)
    folds = list(dict.fromkeys(groups[usable].tolist()))
    for i_fold, g in enumerate(folds):
        report(f"leave out {g}", 0.6 + 0.4 * i_fold / len(folds))
        in_g = groups == g
        fold = fitter.refit_without(fit, usable & ~in_g)
        loo[in_g] = fitter.predictions(fold.x, subset=in_g & usable)[in_g]
    before = fitter.base_predictions()
    meas = fitter.evaluator.measured
    bands = _row_bands(fitter, fit, usable)
    reasons = dict(fit.rows_skipped)
    out_rows = []
    for i, r in enumerate(rows):
        def opt(a, i=i):
            return float(a[i]) if usable[i] and math.isfinite(a[i]) else None

        out_rows.append({"id": r.get("id", ""), "family": schema_family(r.get("id", "")), "metric": r.get("metric", ""),
                         "measured": float(meas[i]), "predicted_before": opt(before), "predicted_after": opt(fit.predictions),
                         "predicted_loo": opt(loo), "band_pct": None if not usable[i] else 100.0 * math.expm1(bands[i]),
                         "used": bool(usable[i]), "reason": "" if usable[i] else reasons.get(r.get("id", ""), "")})
    created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return CalibrationResult(fit=fit, candidates=candidates, loo_mode=mode,
                             loo_before=error_figures(np.where(usable, before, np.nan), meas),
                             loo_after=error_figures(np.where(usable, loo, np.nan), meas),
                             rows=out_rows, sources=list(sources), created=created, method=method,
                             knob_fits=knob_fits, selection=selection, not_selected=not_selected)


def split_odd_even(rows: Sequence[Mapping[str, str]]) -> tuple[list[dict], list[dict]]:
    """(odd, even): rows whose id ends in an odd / even number N (`family-N`, SCHEMA.md). When one
    side would be empty (a family numbered only 2, 4, 6, ...), alternate rows in id-number order."""
    def number(r) -> int:
        tail = str(r.get("id", "")).rsplit("-", 1)[-1]
        return int(tail) if tail.isascii() and tail.isdigit() else -1  # "²".isdigit() is True

    ordered = sorted((dict(r) for r in rows), key=number)
    odd = [r for r in ordered if number(r) % 2 == 1]
    even = [r for r in ordered if number(r) % 2 == 0]
    if not odd or not even:
        odd, even = ordered[0::2], ordered[1::2]
    return odd, even


def holdout_errors(train: Sequence[Mapping[str, str]], test: Sequence[Mapping[str, str]], *,
                   knob_names: Sequence[str] | None = None, method: str = "auto") -> dict:
    """Calibrate on `train`, predict `test`: its MAPE with the values in effect (before) and with
    the fitted profile (after), and the fitted values."""
    result = calibrate_rows(train, knob_names=knob_names, method=method)
    predictor = row_predictor()
    measured = np.array([float(r["value"]) for r in test], dtype=np.float64)

    def predict(values: Mapping[str, float]) -> np.ndarray:
        out = np.full(len(test), np.nan)
        with knobs.overridden(values):
            for i, r in enumerate(test):
                try:
                    out[i] = float(getattr(predictor(dict(r)), "value"))
                except Exception:  # noqa: BLE001 - skipped rows count as not predicted
                    pass
        return out

    before, after = predict({}), predict(result.values)
    both = np.isfinite(before) & np.isfinite(after)
    return {"train_rows": result.fit.rows_used, "test_rows": int(both.sum()),
            "mape_before_pct": error_figures(np.where(both, before, np.nan), measured)["mape_pct"],
            "mape_after_pct": error_figures(np.where(both, after, np.nan), measured)["mape_pct"],
            "values": result.values, "method": result.method,
            "parameters": {k.name: k.value for k in result.fit.knobs if k.informed}}


def calibrate_files(paths: Sequence[str | Path], *, knob_names: Sequence[str] | None = None, lam: float = 1.0,
                    prior_width: float = 1.0, method: str = "auto", progress=None) -> CalibrationResult:
    """`calibrate_rows` over the rows of CSV files (read_measurements)."""
    if method not in METHODS:
        raise InputError(f"method: '{method}' is not one of {', '.join(METHODS)}", field="method")
    rows, sources = read_measurements(paths)
    return calibrate_rows(rows, knob_names=knob_names, sources=sources, lam=lam, prior_width=prior_width,
                          method=method, progress=progress)


__all__ = ["CalibrationResult", "SourceFile", "calibrate_files", "calibrate_rows", "holdout_errors", "knobs_read_by",
           "read_measurements", "split_odd_even"]
