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
   (every member v_j -> v0_j * s, clamped to the member's own physical range); the parameter is
   x = log s, prior and bounds as for a knob (the factor's physical range below).
2. **Fine knobs**: any single knob the rows read, as a further multiplier on top of its group's.

Which parameters are fitted: forward selection by the small-sample Akaike information criterion
(AICc; Hurvich & Tsai, Biometrika 76 (1989) 297; Burnham & Anderson, *Model Selection and
Multimodel Inference*, 2nd ed. 2002, eq. 2.14) on the linearised problem at the start values,

    AICc(S) = n ln(RSS_S / n) + 2k + 2k(k + 1) / (n - k - 1),     k = |S|,

RSS_S = the robust residual sum of squares (fitting.py's transformed residuals) after the
regularised linear least-squares step on the parameters S (the Jacobian of the flat screen: a
site factor's column is the sum of its members' columns, exact to first order). Stage 1 adds site
factors, stage 2 fine knobs, each time the one that lowers AICc most, while one does. The site
factor the rows inform best (by AICc; the single knob when the rows read no site factor's
member) is always fitted (the rows are the user's measurements; the prior keeps it at its start
when they agree with it); with n < 3 rows AICc is undefined and that one parameter is all that is
fitted. The selected parameters are then fitted by THE fitter's solver
(`KnobFitter`, subclassed here to map parameters to knob values) with its prior and uncertainty.

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


def _linear_rss(r: np.ndarray, cols: np.ndarray, prior: float) -> float:
    """RSS of r + J theta at the minimiser of |r + J theta|^2 + prior |theta|^2 (data part only)."""
    if cols.shape[1] == 0:
        return float(r @ r)
    h = cols.T @ cols + prior * np.eye(cols.shape[1])
    theta = np.linalg.solve(h, -cols.T @ r)
    res = r + cols @ theta
    return float(res @ res)


def aicc(rss: float, n: int, k: int) -> float:
    """AICc of a least-squares fit with k parameters to n rows (module docstring); inf where undefined
    (n - k - 1 <= 0)."""
    if n - k - 1 <= 0:
        return math.inf
    return n * math.log(max(rss, 1e-300) / n) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


@dataclass
class SelectionStep:
    param: str
    stage: str
    aicc: float | None
    rss: float

    def to_dict(self) -> dict:
        return {"parameter": self.param, "stage": self.stage, "aicc": self.aicc, "rss": self.rss}


def select_params(r0: np.ndarray, jac: np.ndarray, knob_names: Sequence[str], sites: Sequence[Param],
                  fine: Sequence[Param], prior: float) -> tuple[list[Param], list[SelectionStep]]:
    """Forward selection by AICc on the linearised problem (module docstring). `r0`, `jac`: the
    usable rows' residuals and Jacobian (columns = `knob_names`) at the start values."""
    index = {n: j for j, n in enumerate(knob_names)}

    def column(p: Param) -> np.ndarray:
        return sum((jac[:, index[m]] for m in p.members), np.zeros(len(r0)))

    n = len(r0)
    chosen: list[Param] = []
    steps: list[SelectionStep] = []
    current = aicc(float(r0 @ r0), n, 0)

    def score(p: Param) -> tuple[float, float]:
        cols = np.column_stack([column(q) for q in chosen + [p]])
        rss = _linear_rss(r0, cols, prior)
        return aicc(rss, n, len(chosen) + 1), rss

    # the site factor the rows inform best (no site factor: the single knob) is always fitted
    first = list(sites) or list(fine)
    if first:
        scored = [(score(p), float(np.linalg.norm(column(p))), p) for p in first]
        (a, rss), _, best = min(scored, key=lambda t: (t[0][0], -t[1]) if math.isfinite(t[0][0]) else (math.inf, -t[1]))
        chosen.append(best)
        steps.append(SelectionStep(best.name, best.stage, a if math.isfinite(a) else None, rss))
        current = a
    if n < 3:
        return chosen, steps
    for stage, pool in (("site", sites), ("fine", fine)):
        while True:
            options = [p for p in pool if p.name not in {q.name for q in chosen}]
            best = None
            for p in options:
                a, rss = score(p)
                if a < current - 1e-9 and (best is None or a < best[0]):
                    best = (a, rss, p)
            if best is None:
                break
            current = best[0]
            chosen.append(best[2])
            steps.append(SelectionStep(best[2].name, stage, best[0], best[1]))
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


__all__ = ["Param", "ParamFitter", "SITE_FACTORS", "SelectionStep", "SiteFactor", "aicc", "candidate_params",
           "knob_values_and_sigmas", "select_params", "site_factor"]
