"""Hierarchical calibration: a few broad site factors first, finer knobs only on evidence.

Why. A user's cluster differs from the reference mostly in a few site-level factors: the sustained
compute efficiency of their software stack (cuBLAS / FlashAttention builds, clocks, power caps
move every compute ceiling together), the achieved memory bandwidth, the efficiency of their
network (NCCL version, fabric and NIC settings move every link together) and the host overhead per
step (CPU, Python, launch latency). Fitting every knob the rows read one by one (the flat fit,
`interfaces.fitting.KnobFitter` over all of them) gives a dozen weakly informed knobs from a handful
of rows: the fit describes the rows it saw, not the next ones (docs/calibration.md, the odd/even
table). So the fit is given a hierarchy:

1. **Site factors** (`SITE_FACTORS`): each is one multiplier s on a group of registry knobs
   (every member v_j -> v0_j * s, clamped to the member's own physical range; only the members
   the rows read: hardware not measured is left alone); the parameter is x = log s, inside the
   factor's physical range.
2. **Fine knobs**: any single knob the rows read, as a further multiplier on top of its group's.

Which parameters are fitted: forward selection by the small-sample Akaike information criterion
(AICc; Hurvich & Tsai, Biometrika 76 (1989) 297; Burnham & Anderson, *Model Selection and
Multimodel Inference*, 2nd ed. 2002, eq. 2.14) on the linearised problem at the start values,

    AICc(S) = n ln(RSS_S / n) + 2k + 2k(k + 1) / (n - k - 1),     k = |S|,

RSS_S = the robust residual sum of squares (fitting.py's transformed log errors; plus n times the
square of MEASUREMENT_NOISE_LOG, the run-to-run spread below which a residual is no evidence) after
the least-squares step on the parameters S (the Jacobian of the flat screen: a site factor's column
is the sum of its members' columns, exact to first order), each parameter held inside its physical
range (`bounded_least_squares`): a factor whose column is small cannot claim a large error by a
step physics does not allow. The step has no prior: AICc compares maximum-likelihood fits (with
the prior, a second parameter collinear with the first, e.g. a fine knob scaling the same
operators as its site factor, would "explain" the prior's shrinkage and look like evidence).
Stage 1 adds site factors, stage 2 fine knobs, each time the one that lowers AICc most, while one
does. The site factor that explains the rows best (lowest RSS; the single knob when the rows read
no site factor's member) is always fitted: the rows are the user's measurements, and the prior
keeps it at its start when they agree with it; with n < 3 rows AICc is undefined and that one
parameter is all that is fitted. The selected parameters are then fitted by THE fitter's solver
(`KnobFitter`, subclassed here to map parameters to knob values) with its robust loss, prior
(toward the start values) and bounds.

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
from gpuplan.interfaces.fitting import ROBUST_SCALE, FitResult, KnobFitter, RowEvaluator


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
    SiteFactor("site.host", ("serving.step_overhead_s", "serving.per_kernel_latency_s", "collectives.p2p_per_peer_us"),
               0.2, 5.0, "host time per step, per kernel launch and per peer: CPU, runtime and launch latency"),
)


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
    """(site factors with at least one informed member, one fine Param per informed knob)."""
    sites = []
    for f in SITE_FACTORS:
        members = tuple(n for n in informed if f.covers(n))
        if members:
            sites.append(Param(f.name, members, 1.0, f.low, f.high, "ratio", "site"))
    fine = []
    for n in informed:
        k = knobs.REGISTRY[n]
        fine.append(Param(n, (n,), float(start[n]), k.low, k.high, k.unit, "fine"))
    return sites, fine


#: Log error below which a row carries no evidence: the run-to-run spread of a measurement (1%),
#: added to the residual variance in `aicc`. Without it, rows the model reproduces exactly would
#: make log(RSS) reward any extra parameter. An assumption about measurements, not chosen on
#: validation rows.
MEASUREMENT_NOISE_LOG = 0.01


def bounded_least_squares(a: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, sweeps: int = 200,
                          tol: float = 1e-10) -> np.ndarray:
    """argmin |a t - b|^2 subject to lo <= t <= hi, by cyclic coordinate descent: each coordinate
    set to its exact 1-D minimiser, clipped to its bounds (a convex quadratic over a box: the sweeps
    converge to a minimiser; a column of zero norm stays at the point of its interval nearest 0)."""
    k = a.shape[1]
    t = np.clip(np.zeros(k), lo, hi)
    norms = (a * a).sum(axis=0)
    res = b - a @ t
    for _ in range(sweeps):
        moved = 0.0
        for j in range(k):
            if norms[j] <= 0.0:
                continue
            new = float(np.clip(t[j] + a[:, j] @ res / norms[j], lo[j], hi[j]))
            d = new - t[j]
            if d:
                res -= a[:, j] * d
                t[j] = new
                moved = max(moved, abs(d))
        if moved < tol:
            break
    return t


def aicc(rss: float, n: int, k: int) -> float:
    """AICc of a least-squares fit of k parameters to n rows (module docstring), RSS plus
    n MEASUREMENT_NOISE_LOG^2; inf where undefined (n - k - 1 <= 0)."""
    if n - k - 1 <= 0:
        return math.inf
    rss = rss + n * MEASUREMENT_NOISE_LOG**2
    return n * math.log(rss / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


@dataclass
class SelectionStep:
    param: str
    stage: str
    aicc: float | None
    rss: float

    def to_dict(self) -> dict:
        return {"parameter": self.param, "stage": self.stage, "aicc": self.aicc, "rss": self.rss}


def select_params(r0: np.ndarray, jac: np.ndarray, knob_names: Sequence[str], sites: Sequence[Param],
                  fine: Sequence[Param]) -> tuple[list[Param], list[SelectionStep]]:
    """Forward selection by AICc on the linearised problem (module docstring). `r0`, `jac`: the
    usable rows' residuals and Jacobian (columns = `knob_names`) at the start values."""
    index = {n: j for j, n in enumerate(knob_names)}

    def column(p: Param) -> np.ndarray:
        return sum((jac[:, index[m]] for m in p.members), np.zeros(len(r0)))

    n = len(r0)
    chosen: list[Param] = []
    steps: list[SelectionStep] = []

    def score(p: Param) -> tuple[float, float]:
        params = chosen + [p]
        cols = np.column_stack([column(q) for q in params])
        lo = np.array([math.log(q.low / q.start) if q.low > 0 else -math.inf for q in params])
        hi = np.array([math.log(q.high / q.start) for q in params])
        theta = bounded_least_squares(cols, -r0, lo, hi)
        res = r0 + cols @ theta
        rss = float(res @ res)
        return aicc(rss, n, len(params)), rss

    # the site factor that explains the rows best (no site factor: the single knob) is always fitted
    first = list(sites) or list(fine)
    if not first:
        return chosen, steps
    (a, rss), best = min(((score(p), p) for p in first), key=lambda t: t[0][1])
    chosen.append(best)
    steps.append(SelectionStep(best.name, best.stage, a if math.isfinite(a) else None, rss))
    current = a
    for stage, pool in (("site", sites), ("fine", fine)):
        while True:
            taken = {q.name for q in chosen}
            options = [(score(p), p) for p in pool if p.name not in taken]
            options = [o for o in options if o[0][0] < current - 1e-9]
            if not options:
                break
            (a, rss), p = min(options, key=lambda t: t[0][0])
            current = a
            chosen.append(p)
            steps.append(SelectionStep(p.name, stage, a, rss))
    return chosen, steps


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
           "aicc", "bounded_least_squares", "candidate_params", "knob_values_and_sigmas", "select_params",
           "site_factor"]
