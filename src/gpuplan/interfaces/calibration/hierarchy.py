"""Hierarchical calibration: a few broad site factors first, finer knobs only on evidence.

Why. A user's cluster differs from the reference mostly in a few site-level factors: the sustained
compute efficiency of their software stack (cuBLAS / FlashAttention builds, clocks, power caps
move every compute ceiling together), the achieved memory bandwidth, the efficiency of their
network (NCCL version, fabric and NIC settings move every link together) and the host overhead per
step (CPU, Python, launch latency: in serving the engine step and kernel launches, in training the
fixed per-layer and per-expert MoE launch and device-to-host sync time). Fitting every knob the
rows read one by one (the flat fit, `interfaces.fitting.least_squares.KnobFitter` over all of them) gives a dozen
weakly informed knobs from a handful of rows: the fit describes the rows it saw, not the next ones
(docs/calibration.md, the odd/even table). So the fit is given a hierarchy:

1. **Site factors** (`SITE_FACTORS`): each is one multiplier s on a group of registry knobs
   (every member v_j -> v0_j * s, clamped to the member's own physical range; only the members
   the rows read: hardware not measured is left alone); the parameter is x = log s, inside the
   factor's physical range.
2. **Fine knobs**: any single knob the rows read, as a further multiplier on top of its group's.

Which parameters are fitted: forward selection by leave-one-out error (PRESS; Allen,
Technometrics 16 (1974) 125) of the estimator that will be used, the regularised fit, linearised
at the start values: with J_S the Jacobian columns of the parameters S (from the flat screen: a
site factor's column is the sum of its members' columns, exact to first order), r the usable rows'
residuals (fitting.py's robust transform of the log errors) and P = diag(lambda / w_p^2) the
fitter's prior (w_p: `calibration.site_prior_width` for a site factor, the fitter's `prior_width`
for a single knob),

    theta = -(J_S^T J_S + P)^-1 J_S^T r,   e = r + J_S theta,
    PRESS(S) = sum_i (e_i / (1 - h_ii))^2,   h = diag of J_S (J_S^T J_S + P)^-1 J_S^T,

exact leave-one-out residuals for this linear smoother: the prior is part of the estimator, so a
weakly informed parameter that could explain the rows only by a step the prior will not allow
does not look useful. The forward path: the site factor with the lowest PRESS (the single knob
when the rows read no site factor's member), then more site factors, then fine knobs, each time
the one that lowers PRESS most, while one lowers it by more than n MEASUREMENT_NOISE_LOG^2 (a gain
below the run-to-run spread of the measurements is no evidence) and fewer than n - 1 parameters
are on it. Which prefix of the path is kept:

- **site factors**: the prefix of the path's site steps with the lowest PRESS. Their prior (ridge
  toward 1 in log space, width `calibration.site_prior_width`) is their regularisation, and the
  width is the method's one hyper-parameter, chosen once for every family (docs/calibration.md:
  by the pooled leave-one-out error of this whole procedure over the public families). Rows of
  two kinds (prefill-bound TTFT and decode-bound TPOT; GEMM-bound and network-bound training
  steps) can so keep two factors where each explains its own rows.
- **single knobs** (a departure from the site model): the *one-standard-error rule* (Breiman,
  Friedman, Olshen & Stone, *Classification and Regression Trees* (1984) sec. 3.4.3; Hastie,
  Tibshirani & Friedman sec. 7.10) on the steps after the site factors: the shortest prefix whose
  PRESS is within one standard error of the lowest (SE = sqrt(n) x the standard deviation of the
  squared leave-one-out residuals): a single knob must predict left-out rows clearly better, not
  just by the luck of a few rows.

The first parameter is always fitted (the rows are the user's measurements; the prior keeps it
at its start when they agree with it); with n < 3 rows it is the only one, chosen by the
in-sample residual of the regularised step (leaving out one of two rows tells nothing). The
selected parameters are then fitted by THE fitter's solver (`KnobFitter`, subclassed here to map
parameters to knob values) with its robust loss, prior (toward the start values, each parameter
with its own width) and bounds.

Each knob's value is v0 * exp(sum of the x of the parameters that move it) and its 1-sigma
uncertainty sigma_v = v sqrt(a^T C a), C the parameters' covariance (fitting.py:
s^2 (J^T J + lambda / w^2)^-1) and a the knob's membership vector.

Not exact: the selection uses the linearisation at the start values, and leave-one-out refits
keep the selected set (selection is not repeated per fold).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from gpuplan import knobs
from gpuplan.interfaces.fitting.least_squares import ROBUST_SCALE, FitResult, KnobFitter, RowEvaluator


@dataclass(frozen=True)
class SiteFactor:
    """A multiplier on a group of knobs: its name, the knob-name prefixes it covers, the physical
    range of the multiplier, and why its members move together."""

    name: str
    prefixes: tuple[str, ...]
    low: float
    high: float
    why: str

    def covers(self, knob: str) -> bool:
        return any(knob == p or (p.endswith(".") and knob.startswith(p)) for p in self.prefixes)


#: The site factors (module docstring). Ranges: what one site's stack can plausibly do relative to
#: the reference values (members are clamped to their own registry ranges besides).
SITE_FACTORS: tuple[SiteFactor, ...] = (
    SiteFactor("site.compute", ("efficiency.matmul_ceiling.", "efficiency.attention_ceiling.",
                                "training.attention_ceiling."), 0.5, 1.5,
               "every GEMM and attention ceiling: the sustained compute efficiency of the site's stack"),
    SiteFactor("site.memory", ("efficiency.hbm",), 0.5, 1.25, "achieved HBM bandwidth of every memory-bound operator"),
    SiteFactor("site.network", ("collectives.nvlink_efficiency", "collectives.nic_efficiency.",
                                "collectives.nvls_efficiency."), 0.3, 1.25,
               "every scale-up and scale-out link's achieved fraction of line rate"),
    SiteFactor("site.host", ("serving.step_overhead_s", "serving.per_kernel_latency_s", "collectives.p2p_per_peer_us",
                             "training.moe_layer_overhead_s", "training.moe_expert_launch_s"),
               0.2, 5.0, "host time per step, per kernel launch and per peer: CPU, runtime and launch latency "
               "(serving engine steps; training MoE layers' fixed launch and device-to-host sync time)"),
)


#: The public families the width was chosen on (benchmarks/calibration_prior_width.py prints them).
FITTED_ON: tuple[str, ...] = (
    "meg21-t1", "tt-a100", "nemo2407", "mpt-h100", "mpt-a100", "vtrain", "megft", "meg21-t2", "meg24",
    "ttbench", "mbridge", "ttmem", "mbr-moe", "mbr-bw", "trtllm017", "lmdeploy", "trtllm10", "trtllm014",
    "trtllm061", "mlperf40", "vllmci", "nim", "trtllm1x-po", "sbook", "mleng",
)
#: The prior width w of every site factor (log units, against the fitter's unit-weight robust log
#: residuals: w = tau / sigma, a site factor's spread between sites over the model's per-row
#: scatter). Chosen once for all families by the pooled leave-one-out error of the whole procedure
#: (selection and regularised fit, linearised, each row of a family left out in turn and predicted
#: from the others) over every public family with 3 rows or more (349 rows of 25 families); grid
#: 0.5, 1, 1.5, 2, 3, 5, 10 -> mean squared robust log error 0.0257, 0.0244, 0.0240, 0.0239,
#: 0.0243, 0.0261, 0.0261 (none fitted: 0.0280): 2, a shallow minimum (docs/calibration.md;
#: benchmarks/calibration_prior_width.py). Prior 1: the fitter's own width, used before.
SITE_PRIOR_WIDTH = knobs.register(
    "calibration.site_prior_width", unit="log", default=2.0, prior=1.0, low=0.1, high=10.0,
    source="fitted: pooled leave-one-out error of the hierarchical calibration over the public families "
           "(benchmarks/calibration_prior_width.py); 1 = the fitter's default prior width before",
    scales="the prior (ridge toward 1, lambda / w^2) of every site factor of `calibrate fit --method hierarchical`",
    fitted_on=FITTED_ON)


def site_factor(name: str) -> SiteFactor | None:
    return next((f for f in SITE_FACTORS if f.name == name), None)


@dataclass(frozen=True)
class Param:
    """A fitted parameter: a site factor (unit 'ratio', start 1) or one knob (its own unit, start
    its value in effect); `members` are the knobs it multiplies."""

    name: str
    members: tuple[str, ...]
    start: float
    low: float
    high: float
    unit: str
    stage: str  # "site" or "fine"
    width: float | None = None  # prior width w in log units (None: the fitter's `prior_width`)


class ParamFitter(KnobFitter):
    """`KnobFitter` over `Param`s: x_p = log(parameter / start); a knob's value is its start times
    exp(sum of x_p over the parameters that move it), clamped to its range."""

    def __init__(self, evaluator: RowEvaluator, params: Sequence[Param], knob_start: Mapping[str, float], *,
                 lam: float = 1.0, prior_width: float = 1.0, min_sensitivity: float = 1e-3,
                 robust_scale: float | None = ROBUST_SCALE):
        self.robust_scale = robust_scale
        self.evaluator = evaluator
        self.params = list(params)
        self.names = [p.name for p in self.params]
        self.start = np.array([p.start for p in self.params], dtype=np.float64)
        self.lam, self.prior_width, self.min_sensitivity = float(lam), float(prior_width), float(min_sensitivity)
        self.lo = np.array([math.log(p.low / p.start) if p.low > 0 else -math.inf for p in self.params])
        self.hi = np.array([math.log(p.high / p.start) for p in self.params])
        self.loggable = self.start > 0
        self.knob_start = dict(knob_start)
        self.members = sorted({m for p in self.params for m in p.members})
        # membership matrix: knobs x params
        self.membership = np.array([[1.0 if m in p.members else 0.0 for p in self.params] for m in self.members])
        self._base = None
        self._informed = None
        self._sensitivity = None

    def unit_of(self, name: str) -> str:
        return next(p.unit for p in self.params if p.name == name)

    def _prior_scale(self) -> np.ndarray:
        """sqrt(lambda) / w per parameter: w = the parameter's own width (a site factor's,
        `site_prior_width`), else `prior_width`."""
        return np.array([math.sqrt(self.lam) / (p.width or self.prior_width) for p in self.params])

    def parameter_values(self, x: np.ndarray) -> dict[str, float]:
        return {p.name: min(p.high, max(p.low, p.start * math.exp(float(xj)))) for p, xj in zip(self.params, x)}

    def values_at(self, x: np.ndarray) -> dict[str, float]:
        out = {}
        xs = np.clip(np.asarray(x, dtype=np.float64), self.lo, self.hi)
        for i, m in enumerate(self.members):
            k = knobs.REGISTRY[m]
            out[m] = min(k.high, max(k.low, float(self.knob_start[m] * math.exp(float(self.membership[i] @ xs)))))
        return out


def candidate_params(informed: Sequence[str], start: Mapping[str, float]) -> tuple[list[Param], list[Param]]:
    """(site factors with at least one informed member, each with the prior width
    `calibration.site_prior_width`; one fine Param per informed knob)."""
    sites = []
    width = knobs.value("calibration.site_prior_width")
    for f in SITE_FACTORS:
        members = tuple(n for n in informed if f.covers(n))
        if members:
            sites.append(Param(f.name, members, 1.0, f.low, f.high, "ratio", "site", width))
    fine = []
    for n in informed:
        k = knobs.REGISTRY[n]
        fine.append(Param(n, (n,), float(start[n]), k.low, k.high, k.unit, "fine"))
    return sites, fine


#: Log error below which a row carries no evidence: the run-to-run spread of a measurement (1%).
#: The forward path grows only while a parameter lowers the leave-one-out sum of squares by more
#: than n times its square: a smaller gain is within what repeating the measurements would change. An
#: assumption about measurements, not chosen on validation rows.
MEASUREMENT_NOISE_LOG = 0.01




def loo_residuals(r: np.ndarray, cols: np.ndarray, prior: float | np.ndarray) -> np.ndarray:
    """Leave-one-out residuals of the regularised linear step (module docstring): with
    A = J^T J + prior I, e = r - J A^-1 J^T r and h_ii the diagonal of the hat matrix J A^-1 J^T,
    the residual of row i when it is left out is e_i / (1 - h_ii) (Allen, Technometrics 16 (1974)
    125; exact for ridge regression: Hastie, Tibshirani & Friedman, *The Elements of Statistical
    Learning*, 2nd ed. (2009), sec. 7.10, eq. 7.52). A row the fit cannot leave out (h_ii = 1) counts
    as a miss of 1000 (log units)."""
    if cols.shape[1] == 0:
        return r.copy()
    ainv = np.linalg.pinv(cols.T @ cols + np.diag(np.broadcast_to(np.asarray(prior, float), cols.shape[1])))
    e = r - cols @ (ainv @ (cols.T @ r))
    h = np.einsum("ij,jk,ik->i", cols, ainv, cols)
    with np.errstate(divide="ignore", invalid="ignore"):
        loo = e / (1.0 - h)
    return np.where(np.isfinite(loo), loo, 1e3)


def press(r: np.ndarray, cols: np.ndarray, prior: float | np.ndarray) -> float:
    """PRESS: the sum of squared leave-one-out residuals (`loo_residuals`)."""
    loo = loo_residuals(r, cols, prior)
    return float(loo @ loo)


@dataclass
class SelectionStep:
    param: str
    stage: str
    press: float  # leave-one-out sum of squares (log units) of the parameters up to this one
    press_se: float  # its standard error: sqrt(n) x the standard deviation of the squared LOO residuals
    selected: bool = False

    def to_dict(self) -> dict:
        return {"parameter": self.param, "stage": self.stage, "loo_sum_squares": self.press,
                "loo_sum_squares_se": self.press_se, "selected": self.selected}


def select_params(r0: np.ndarray, jac: np.ndarray, knob_names: Sequence[str], sites: Sequence[Param],
                  fine: Sequence[Param], prior: float = 1.0,
                  lam: float = 1.0) -> tuple[list[Param], list[SelectionStep]]:
    """The forward path and the choice on it (module docstring). `r0`, `jac`: the usable rows'
    residuals and Jacobian (columns = `knob_names`) at the start values; `prior`: the fitter's
    lambda / w^2, for a parameter with its own `width` `lam` / width^2. Returns the selected
    parameters and every step of the path."""
    index = {n: j for j, n in enumerate(knob_names)}

    def column(p: Param) -> np.ndarray:
        return sum((jac[:, index[m]] for m in p.members), np.zeros(len(r0)))

    def priors(params: list[Param]) -> np.ndarray:
        return np.array([prior if q.width is None else lam / q.width**2 for q in params])

    n = len(r0)
    path: list[Param] = []
    steps: list[SelectionStep] = []

    def score(params: list[Param]) -> tuple[float, float]:
        loo2 = loo_residuals(r0, np.column_stack([column(q) for q in params]), priors(params)) ** 2
        return float(loo2.sum()), float(math.sqrt(n) * loo2.std(ddof=1)) if n > 1 else 0.0

    first = list(sites) or list(fine)
    if not first:
        return [], steps
    if n < 3:
        # leaving one of two rows out (or the only one) tells nothing: the in-sample residual of the
        # regularised step chooses the one parameter
        def in_sample(p: Param) -> float:
            c = column(p)[:, None]
            e = r0 - c @ (np.linalg.pinv(c.T @ c + np.diag(priors([p]))) @ (c.T @ r0))
            return float(e @ e)

        best = min(first, key=in_sample)
        current, se = score([best])
    else:
        (current, se), best = min(((score([p]), p) for p in first), key=lambda t: t[0][0])
    path.append(best)
    steps.append(SelectionStep(best.name, best.stage, current, se))
    if n >= 3:
        gain = n * MEASUREMENT_NOISE_LOG**2
        for stage, pool in (("site", sites), ("fine", fine)):
            while len(path) < n - 1:
                taken = {q.name for q in path}
                options = [(score(path + [p]), p) for p in pool if p.name not in taken]
                options = [o for o in options if o[0][0] < current - gain]
                if not options:
                    break
                (current, se), p = min(options, key=lambda t: t[0][0])
                path.append(p)
                steps.append(SelectionStep(p.name, stage, current, se))
    # site factors: the prefix of the path's site steps with the lowest leave-one-out error (the
    # prior is their regularisation); single knobs: one-standard-error rule on the steps after it
    site_steps = [i for i in range(len(steps)) if steps[i].stage == "site"]
    base = min(site_steps, key=lambda i: steps[i].press) if site_steps else 0
    rest = range(base, len(steps))
    best_i = min(rest, key=lambda i: steps[i].press)
    limit = steps[best_i].press + steps[best_i].press_se
    k = next(i for i in rest if steps[i].press <= limit) + 1
    for s in steps[:k]:
        s.selected = True
    return path[:k], steps


def knob_values_and_sigmas(fitter: ParamFitter, fit: FitResult, usable: np.ndarray) -> dict[str, dict]:
    """Per member knob: value, 1-sigma uncertainty (module docstring), start, the parameters that
    move it, at_bound."""
    values = fitter.values_at(fit.x)
    cols = fitter._informed if fitter._informed is not None else np.ones(len(fitter.names), bool)
    idx = np.flatnonzero(cols)
    cov = np.full((len(fitter.names), len(fitter.names)), np.nan)
    n = int(usable.sum())
    if len(idx) and n:
        ju = fit.jacobian[usable][:, idx]
        ru = np.nan_to_num(fit.residuals[usable])
        s2 = float(ru @ ru) / max(1, n - len(idx))
        ps2 = fitter._prior_scale()[idx] ** 2
        cov[np.ix_(idx, idx)] = s2 * np.linalg.pinv(ju.T @ ju + np.diag(ps2))
    out = {}
    for i, m in enumerate(fitter.members):
        a = fitter.membership[i]
        via = [fitter.names[j] for j in np.flatnonzero(a) if cols[j]]
        if not via:
            continue
        sub = np.flatnonzero(a * cols)
        var = float(a[sub] @ cov[np.ix_(sub, sub)] @ a[sub])
        k = knobs.REGISTRY[m]
        v = values[m]
        out[m] = {"value": v, "uncertainty": v * math.sqrt(var) if math.isfinite(var) and var >= 0 else None,
                  "start": float(fitter.knob_start[m]), "via": via,
                  "at_bound": bool(v <= k.low * (1 + 1e-12) or v >= k.high * (1 - 1e-12))}
    return out


__all__ = ["MEASUREMENT_NOISE_LOG", "Param", "ParamFitter", "SITE_FACTORS", "SelectionStep", "SiteFactor",
           "candidate_params", "knob_values_and_sigmas", "loo_residuals", "press", "select_params",
           "site_factor"]
