"""The one fitter of efficiency knobs: regularised least squares on log error, pulled toward the defaults.

Given measured rows (../shared/validation/SCHEMA.md dicts), a predictor (row -> predicted value in
the unit of the row's metric, raising `SkipRow` when the row is not expressible) and the names of
registry knobs (`gpuplan.knobs`), find the knob values v that minimise

    C(v) = sum_rows rho(log(pred_i(v) / measured_i)) + lambda sum_knobs (log(v_j / v0_j) / w)^2,
    low_j <= v_j <= high_j,

with the robust soft-L1 loss rho(r) = 2 c^2 (sqrt(1 + (r / c)^2) - 1) (quadratic, r^2, for |r| << c;
linear beyond): a row whose error comes from physics the model lacks (a factor 2 off) must not set
an efficiency that the rows the model does describe agree on. c = `robust_scale` (log units; 0.25
by default, a 28% error); None gives plain least squares. Implemented as least squares on the
transformed residual sign(r) sqrt(rho(r)) (the scaling scipy.optimize.least_squares uses).

v0 = the value in effect when the fit starts (the registry default, or a profile's override; cross-
validation passes each fitted knob's unfitted prior, `Knob.prior`),
w = `prior_width` (log units; the default 1.0 makes a factor e = 2.7 one prior standard deviation).
Every prediction is evaluated inside `knobs.overridden(...)`.

Solver: Gauss-Newton in x = log(v / v0) with Levenberg-Marquardt damping, projected on the bounds
(a knob at a bound whose gradient points outward is held there), Jacobian by forward differences
(step `FD_STEP` in x, i.e. 1%: wide enough to step over the small discontinuities of the serving
simulator). Stops when a proposed step moves every knob by less than `tol` (in x).

Per knob: the fitted value, its 1-sigma uncertainty sigma_v = v sqrt(diag(s^2 H^-1)) with
H = J^T J + lambda / w^2 (J: d residual / d x at the solution) and s^2 = sum r_i^2 / max(1, n - k)
(the residual variance), and `informed`: a knob whose Jacobian column has norm below
`min_sensitivity` on the rows (the rows cannot tell its value) is refused: left at v0 and reported
as not informed. Rows whose prediction moves under none of the knobs at the start are treated as
independent of them afterwards (their prediction is reused, not recomputed).

`KnobFitter.refit_without(full, mask)` is the cheap refit of cross-validation: one Gauss-Newton step
from a full fit's end point x_ref with its Jacobian and exact residuals there (the linearised
problem), iterated with fresh evaluations only when that step is large (> `ONE_STEP_LIMIT` in x).
Cross-validation takes both its in-sample values (mask = every row) and its leave-out values this
way from the same x_ref, so the two differ only by the rows left out (a solver stopped within its
tolerance is not mistaken for an effect of the family).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.interfaces.fitting.knob_catalog import load_all
from gpuplan.interfaces.row_types import SkipRow

#: Forward-difference step in x = log(v / v0) (1%).
FD_STEP = 1e-2
#: Refits of cross-validation take one linearised step when it moves every knob by less than this
#: (25%: log predictions are close to linear in log efficiencies over that range).
ONE_STEP_LIMIT = 0.25
#: Relative cost decrease below which a step is not tried (the noise of event-driven predictors).
FTOL = 1e-4
#: Steps in a row that fail to lower the cost before the solver stops.
MAX_REJECTIONS = 2
#: Evaluations kept in the memo of `RowEvaluator` (keyed on the exact knob values).
MEMO_SIZE = 64

Predictor = Callable[[dict], object]


def _as_float(result) -> float:
    """A predictor returns a `Prediction` (with `.value`) or a plain number."""
    return float(getattr(result, "value", result))


class RowEvaluator:
    """Predictions of a fixed list of rows as a function of knob values.

    `predict(values)` runs the predictor on every active row inside `knobs.overridden(values)` and
    returns an array (NaN where the row was skipped); rows marked constant reuse their first
    prediction. Results are memoised on the exact values (MEMO_SIZE entries). Knob-independent work
    (catalog, model and plan parsing) is the predictor's to cache; the catalog is loaded once.
    """

    def __init__(self, rows: Sequence[Mapping[str, str]], predictor: Predictor):
        self.rows = list(rows)
        self.predictor = predictor
        self.measured = np.array([_measured(r) for r in self.rows], dtype=np.float64)
        self.active = np.ones(len(self.rows), dtype=bool)
        self.reasons: dict[int, str] = {}
        self.evaluations = 0  # passes over all active rows (subset passes are not counted)
        self._memo: dict[tuple, np.ndarray] = {}
        self._constant: np.ndarray | None = None

    def predict(self, values: Mapping[str, float], subset: np.ndarray | None = None) -> np.ndarray:
        """Predictions at `values` of the rows of `subset` (bool mask; default all); NaN for the
        other rows and for skipped ones."""
        todo = self.active if subset is None else self.active & subset
        key = (tuple(sorted((k, float(v)) for k, v in values.items())), None if subset is None else subset.tobytes())
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        out = np.full(len(self.rows), np.nan) if self._constant is None else self._constant.copy()
        with knobs.overridden(values):
            for i in np.flatnonzero(todo):
                out[i] = self._one(i)
        self.evaluations += 1 if subset is None else 0
        if len(self._memo) >= MEMO_SIZE:
            self._memo.pop(next(iter(self._memo)))
        self._memo[key] = out
        return out

    def _one(self, i: int) -> float:
        row = self.rows[i]
        try:
            value = _as_float(self.predictor(row))
        except SkipRow as exc:
            self.reasons.setdefault(i, exc.reason)
            return math.nan
        except InputError as exc:
            raise InputError(f"row {row.get('id', i)}: {exc}", field=exc.field) from None
        except Exception as exc:  # a predictor bug must not hide the other rows; reported
            self.reasons.setdefault(i, f"predictor error {type(exc).__name__}: {exc}")
            return math.nan
        if not (math.isfinite(value) and value > 0):
            self.reasons.setdefault(i, f"predicted value {value} is not a positive finite number")
            return math.nan
        return value

    def freeze(self, constant: np.ndarray, predictions: np.ndarray) -> None:
        """Stop re-evaluating the rows of `constant` (bool mask): reuse `predictions` for them."""
        self._constant = np.where(constant, predictions, np.nan)
        self.active &= ~constant
        self._memo.clear()


def _measured(row: Mapping[str, str]) -> float:
    try:
        v = float(row.get("value", ""))
    except ValueError:
        return math.nan
    return v if math.isfinite(v) and v > 0 else math.nan


@dataclass(frozen=True)
class KnobFit:
    """One knob's fit: start value v0 (prior centre), fitted value, 1-sigma uncertainty (same unit),
    the norm of its Jacobian column (d log pred / d log v over the rows), and whether it was informed."""

    name: str
    unit: str
    start: float
    value: float
    uncertainty: float | None
    sensitivity: float
    informed: bool
    at_bound: bool = False

    def to_dict(self) -> dict:
        return {"name": self.name, "unit": self.unit, "start": self.start, "value": self.value,
                "uncertainty": self.uncertainty, "sensitivity": self.sensitivity, "informed": self.informed,
                "at_bound": self.at_bound}


def error_figures(predicted: np.ndarray, measured: np.ndarray) -> dict:
    """mape_pct (mean |pred/meas - 1| x 100), median_ape_pct and rms_log_error over the finite rows."""
    ok = np.isfinite(predicted) & np.isfinite(measured)
    if not ok.any():
        return {"rows": 0, "mape_pct": None, "median_ape_pct": None, "rms_log_error": None}
    ape = np.abs(predicted[ok] / measured[ok] - 1.0) * 100.0
    log_err = np.log(predicted[ok] / measured[ok])
    return {"rows": int(ok.sum()), "mape_pct": float(ape.mean()), "median_ape_pct": float(np.median(ape)),
            "rms_log_error": float(np.sqrt(np.mean(log_err**2)))}


@dataclass
class FitResult:
    """What `fit_knobs` returns. `values` holds the fitted value of every informed knob."""

    knobs: list[KnobFit]
    rows_used: int
    rows_skipped: list[tuple[str, str]]  # (row id, reason)
    error_before: dict
    error_after: dict
    iterations: int
    evaluations: int
    # solver state, reused by cross-validation's refits
    x: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    residuals: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))
    jacobian: np.ndarray = field(repr=False, default_factory=lambda: np.zeros((0, 0)))
    predictions: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0))

    @property
    def values(self) -> dict[str, float]:
        return {k.name: k.value for k in self.knobs if k.informed}

    @property
    def not_informed(self) -> list[str]:
        return [k.name for k in self.knobs if not k.informed]

    def to_dict(self) -> dict:
        return {"knobs": [k.to_dict() for k in self.knobs], "values": self.values, "not_informed": self.not_informed,
                "rows_used": self.rows_used, "rows_skipped": [{"id": i, "reason": r} for i, r in self.rows_skipped],
                "error_before": self.error_before, "error_after": self.error_after, "iterations": self.iterations,
                "evaluations": self.evaluations}


#: Scale c of the robust soft-L1 loss, in log error (module docstring): 0.25 = a 28% error.
ROBUST_SCALE = 0.25


class KnobFitter:
    """Fits `names` to `rows` with `predictor` (module docstring); keeps its evaluator so that a
    cross-validation can refit on subsets of the rows cheaply."""

    def __init__(self, rows: Sequence[Mapping[str, str]], predictor: Predictor, names: Sequence[str], *,
                 lam: float = 1.0, prior_width: float = 1.0, min_sensitivity: float = 1e-3,
                 robust_scale: float | None = ROBUST_SCALE, start: Mapping[str, float] | None = None):
        load_all()
        if robust_scale is not None and not (robust_scale > 0 and math.isfinite(robust_scale)):
            raise InputError(f"robust_scale: must be a finite number > 0 or None, got {robust_scale}", field="robust_scale")
        self.robust_scale = robust_scale
        unknown = [n for n in names if n not in knobs.REGISTRY]
        if unknown:
            raise InputError(f"knobs: unknown knob(s) {', '.join(unknown)}; see `gpuplan calibrate knobs`", field="knobs")
        if not (lam >= 0 and math.isfinite(lam)):
            raise InputError(f"lambda: must be a finite number >= 0, got {lam}", field="lambda")
        if not (prior_width > 0 and math.isfinite(prior_width)):
            raise InputError(f"prior_width: must be a finite number > 0, got {prior_width}", field="prior_width")
        self.evaluator = RowEvaluator(rows, predictor)
        self.names = list(dict.fromkeys(names))
        #: v0: the value in effect, or `start[name]` where given (cross-validation: the knob's prior)
        start = dict(start or {})
        self.start = np.array([start.get(n, knobs.value(n)) for n in self.names], dtype=np.float64)
        self.lam, self.prior_width, self.min_sensitivity = float(lam), float(prior_width), float(min_sensitivity)
        reg = [knobs.REGISTRY[n] for n in self.names]
        with np.errstate(divide="ignore"):
            self.lo = np.array([math.log(k.low / v) if k.low > 0 else -math.inf for k, v in zip(reg, self.start)])
            self.hi = np.array([math.log(k.high / v) for k, v in zip(reg, self.start)])
        self.loggable = self.start > 0  # a knob at 0 has no log scale: never fitted
        self._base: np.ndarray | None = None
        self._informed: np.ndarray | None = None
        self._sensitivity: np.ndarray | None = None

    # ------------------------------------------------------------------ evaluation
    def unit_of(self, name: str) -> str:
        """The unit of the fitted parameter `name` (here a registry knob's; a subclass may fit
        other parameters: interfaces.calibration.hierarchy)."""
        return knobs.REGISTRY[name].unit

    def parameter_values(self, x: np.ndarray) -> dict[str, float]:
        """The fitted parameters' values at x (here the knob values of `values_at`)."""
        return self.values_at(x)

    def values_at(self, x: np.ndarray) -> dict[str, float]:
        """Knob values for x, clamped into their ranges."""
        out = {}
        for j, name in enumerate(self.names):
            k = knobs.REGISTRY[name]
            out[name] = min(k.high, max(k.low, float(self.start[j] * math.exp(x[j]))))
        return out

    def predictions(self, x: np.ndarray, subset: np.ndarray | None = None) -> np.ndarray:
        """Predictions of the rows of `subset` (default every row) at x (NaN: skipped or outside)."""
        return self.evaluator.predict(self.values_at(x), subset)

    def base_predictions(self) -> np.ndarray:
        """Predictions at the start values (x = 0), all rows."""
        if self._base is None:
            self._base = self.evaluator.predict(self.values_at(np.zeros(len(self.names))))
        return self._base

    def _residuals(self, preds: np.ndarray) -> np.ndarray:
        """sign(r) sqrt(rho(r)) of the log errors r (plain r without a robust scale)."""
        r = np.log(preds / self.evaluator.measured)
        c = self.robust_scale
        if c is None:
            return r
        return np.sign(r) * math.sqrt(2.0) * c * np.sqrt(np.sqrt(1.0 + (r / c) ** 2) - 1.0)

    def _jacobian(self, x: np.ndarray, r: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Forward differences d r / d x_j for the knobs of `cols` (others 0); NaN entries -> 0."""
        jac = np.zeros((len(r), len(self.names)))
        for j in np.flatnonzero(cols):
            h = FD_STEP if x[j] + FD_STEP <= self.hi[j] else -FD_STEP
            xp = x.copy()
            xp[j] += h
            jac[:, j] = (self._residuals(self.predictions(xp)) - r) / h
        return np.nan_to_num(jac, nan=0.0, posinf=0.0, neginf=0.0)

    def _screen(self, usable: np.ndarray) -> None:
        """Decide once which knobs the usable rows inform, and freeze rows no knob moves."""
        if self._informed is not None:
            return
        base = self.base_predictions()
        r0 = self._residuals(base)
        all_cols = self.loggable.copy()
        jac = self._jacobian(np.zeros(len(self.names)), r0, all_cols)
        self._sensitivity = np.sqrt((jac[usable] ** 2).sum(axis=0))
        self._informed = all_cols & (self._sensitivity >= self.min_sensitivity)
        moved = np.any(jac[:, self._informed] != 0.0, axis=1)
        self.evaluator.freeze(~moved, base)
        self._jac0 = jac

    def screened(self, usable: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """After the screen on the `usable` rows: (informed mask over the knobs, transformed
        residuals at the start values, their Jacobian there), for a caller that chooses which
        parameters to fit (interfaces.calibration.hierarchy)."""
        self._screen(usable)
        return self._informed.copy(), self._residuals(self.base_predictions()), self._jac0.copy()

    # ------------------------------------------------------------------ fitting
    def usable_rows(self) -> np.ndarray:
        """Rows with a finite positive measurement that the predictor expresses at the start values."""
        return np.isfinite(self.base_predictions()) & np.isfinite(self.evaluator.measured)

    def fit(self, mask: np.ndarray | None = None, *, max_iter: int = 30, tol: float = 1e-4) -> FitResult:
        """Fit on the usable rows of `mask` (default all rows): full Gauss-Newton with fresh Jacobians."""
        usable = self.usable_rows() & (np.ones(len(self.evaluator.rows), bool) if mask is None else mask)
        self._screen(usable)
        x0 = np.zeros(len(self.names))
        r0 = self._residuals(self.base_predictions())
        x, r, jac, iters = self._solve(usable, x0, r0, self._jac0.copy(), refresh=True, max_iter=max_iter, tol=tol)
        return self._result(usable, x, r, jac, iters)

    def refit_without(self, full: FitResult, mask: np.ndarray, *, max_iter: int = 30, tol: float = 1e-4) -> FitResult:
        """Refit on the usable rows of `mask`, starting from `full`'s solution with its Jacobian
        (module docstring): one linearised step, evaluated; iterated only when the step is large."""
        usable = self.usable_rows() & mask
        step = self._step(usable, full.x, full.residuals, full.jacobian, 0.0)
        if np.max(np.abs(step), initial=0.0) < tol:
            x, r, iters = full.x, full.residuals, 0
        elif np.max(np.abs(step)) <= ONE_STEP_LIMIT:
            x = np.clip(full.x + step, self.lo, self.hi)
            r, iters = full.residuals, 1  # residuals at x are not needed for the fold's figures
        else:
            x, r, _, iters = self._solve(usable, full.x, full.residuals, full.jacobian, refresh=False,
                                         max_iter=max_iter, tol=tol)
        return self._result(usable, x, r, full.jacobian, iters, evaluate=False)

    def _prior_scale(self) -> np.ndarray:
        return np.full(len(self.names), math.sqrt(self.lam) / self.prior_width)

    def _cost(self, r: np.ndarray, usable: np.ndarray, x: np.ndarray) -> float:
        ru = r[usable]
        if not np.all(np.isfinite(ru)):
            return math.inf
        return float(ru @ ru + np.sum((self._prior_scale() * x) ** 2))

    def _step(self, usable: np.ndarray, x: np.ndarray, r: np.ndarray, jac: np.ndarray, mu: float) -> np.ndarray:
        """Projected, damped Gauss-Newton step on the informed knobs (0 for the others)."""
        return self._step_and_gain(usable, x, r, jac, mu)[0]

    def _step_and_gain(self, usable, x, r, jac, mu) -> tuple[np.ndarray, float]:
        """The step and the cost decrease the linearised model predicts for it."""
        cols = self._informed
        step = np.zeros(len(self.names))
        if cols is None or not cols.any():
            return step, 0.0
        # (no usable row: the prior term alone, which returns every knob to its start value v0)
        ps2 = self._prior_scale() ** 2
        ju = jac[usable][:, cols]
        ru = np.nan_to_num(r[usable])
        grad = ju.T @ ru + ps2[cols] * x[cols]
        hess = ju.T @ ju + np.diag(ps2[cols])
        xc, lo, hi = x[cols], self.lo[cols], self.hi[cols]
        free = ~(((xc <= lo) & (grad > 0)) | ((xc >= hi) & (grad < 0)))
        if not free.any():
            return step, 0.0
        h = hess[np.ix_(free, free)]
        h = h + mu * np.diag(np.diag(h))
        sub = np.zeros(len(xc))
        sub[free] = np.linalg.lstsq(h, -grad[free], rcond=None)[0]
        step[cols] = np.clip(xc + sub, lo, hi) - xc
        d = step[cols]
        return step, float(-(grad @ d + 0.5 * d @ hess @ d))

    def _solve(self, usable, x, r, jac, *, refresh: bool, max_iter: int, tol: float):
        """Levenberg-Marquardt iterations (module docstring). Stops when the step is below `tol`,
        when the model predicts a decrease below FTOL x cost (the noise floor of event-driven
        predictors), or after MAX_REJECTIONS steps in a row that did not lower the cost."""
        mu, iters, rejected = 0.0, 0, 0
        cost = self._cost(r, usable, x)
        for iters in range(1, max_iter + 1):
            step, gain = self._step_and_gain(usable, x, r, jac, mu)
            if np.max(np.abs(step), initial=0.0) < tol or gain <= FTOL * cost:
                break
            x_new = x + step
            r_new = self._residuals(self.predictions(x_new))
            cost_new = self._cost(r_new, usable, x_new)
            if cost_new <= cost:
                x, r, cost, rejected = x_new, r_new, cost_new, 0
                mu = 0.0 if mu <= 1e-6 else mu / 10.0
                if refresh:
                    jac = self._jacobian(x, r, self._informed)
            else:
                mu, rejected = max(1.0, mu * 10.0), rejected + 1  # mu = 1 about halves the step
                if rejected >= MAX_REJECTIONS:
                    break
        return x, r, jac, iters

    def _result(self, usable, x, r, jac, iters, *, evaluate: bool = True) -> FitResult:
        cols = self._informed
        ps2 = self._prior_scale() ** 2
        n, k = int(usable.sum()), int(cols.sum())
        unc = np.full(len(self.names), np.nan)
        if k and n:
            ru = np.nan_to_num(r[usable])
            ju = jac[usable][:, cols]
            s2 = float(ru @ ru) / max(1, n - k)
            cov = s2 * np.linalg.pinv(ju.T @ ju + np.diag(ps2[cols]))
            unc[cols] = np.sqrt(np.clip(np.diag(cov), 0.0, None))
        values = self.parameter_values(x)
        fits = []
        for j, name in enumerate(self.names):
            informed = bool(cols[j])
            v = values[name] if informed else float(self.start[j])
            fits.append(KnobFit(
                name=name, unit=self.unit_of(name), start=float(self.start[j]), value=v,
                uncertainty=float(v * unc[j]) if informed and math.isfinite(unc[j]) else None,
                sensitivity=float(self._sensitivity[j]), informed=informed,
                at_bound=informed and bool(x[j] <= self.lo[j] + 1e-12 or x[j] >= self.hi[j] - 1e-12)))
        measured = self.evaluator.measured
        before = self.base_predictions()
        after = self.predictions(x) if evaluate else np.full(len(measured), np.nan)
        skipped = [(str(self.evaluator.rows[i].get("id", f"row {i}")), self.evaluator.reasons.get(i, "no measured value"))
                   for i in np.flatnonzero(~self.usable_rows())]
        return FitResult(
            knobs=fits, rows_used=n, rows_skipped=skipped,
            error_before=error_figures(np.where(usable, before, np.nan), measured),
            error_after=error_figures(np.where(usable, after, np.nan), measured),
            iterations=iters, evaluations=self.evaluator.evaluations,
            x=x.copy(), residuals=r.copy(), jacobian=jac.copy(), predictions=after,
        )


def fit_knobs(rows: Sequence[Mapping[str, str]], predictor: Predictor, names: Sequence[str], *, lam: float = 1.0,
              prior_width: float = 1.0, min_sensitivity: float = 1e-3, max_iter: int = 30,
              tol: float = 1e-4, robust_scale: float | None = ROBUST_SCALE) -> FitResult:
    """Fit the knobs `names` to `rows` (module docstring). Knobs the rows do not inform stay at
    their start values and are listed in `FitResult.not_informed`."""
    fitter = KnobFitter(rows, predictor, names, lam=lam, prior_width=prior_width, min_sensitivity=min_sensitivity,
                        robust_scale=robust_scale)
    return fitter.fit(max_iter=max_iter, tol=tol)


__all__ = ["FD_STEP", "ROBUST_SCALE", "FitResult", "KnobFit", "KnobFitter", "RowEvaluator", "error_figures", "fit_knobs"]
