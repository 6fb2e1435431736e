"""Properties (hypothesis) of the hierarchy's pure pieces and of nccl-tests' bus factor."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
from gpuplan.interfaces.calibration.bench.collectives import bus_factor
from gpuplan.interfaces.calibration.hierarchy import Param, ParamFitter, loo_residuals, select_params
from gpuplan.interfaces.fitting.least_squares import RowEvaluator
from gpuplan.interfaces.fitting.knob_catalog import load_all

finite = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False)


@given(st.lists(finite, min_size=3, max_size=12))
def test_loo_residuals_are_leave_one_out_means(values):
    # one column of ones and no prior: the fit is the mean, and row i's left-out residual is
    # r_i - mean(others), computed here directly
    r = np.array(values)
    got = loo_residuals(r, np.ones((len(r), 1)), 0.0)
    direct = np.array([r[i] - np.delete(r, i).mean() for i in range(len(r))])
    assert np.allclose(got, direct, atol=1e-9)


@given(st.integers(min_value=1, max_value=4096), st.sampled_from(["all_reduce", "all_gather", "reduce_scatter",
                                                                 "all_to_all"]))
def test_bus_factor_bounds_and_monotone(n, collective):
    f = bus_factor(collective, n)
    top = 2.0 if collective == "all_reduce" else 1.0
    assert 0.0 <= f < top and bus_factor(collective, n + 1) >= f


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=-20.0, max_value=20.0, allow_nan=False), min_size=2, max_size=2))
def test_parameter_steps_never_leave_a_knobs_range(xs):
    # whatever the solver proposes, the knob values it evaluates stay inside the registry ranges
    load_all()
    members = ("efficiency.matmul_ceiling.h100-sxm5-80gb.bf16", "efficiency.hbm")
    start = {m: knobs.REGISTRY[m].default for m in members}
    params = [Param("site.compute", members[:1], 1.0, 0.5, 1.5, "ratio", "site"),
              Param("efficiency.hbm", members[1:], start[members[1]], 0.3, 1.0, "fraction", "fine")]
    fitter = ParamFitter(RowEvaluator([], lambda r: 1.0), params, start)
    values = fitter.values_at(np.array(xs))
    for m, v in values.items():
        assert knobs.REGISTRY[m].low <= v <= knobs.REGISTRY[m].high
    for p, v in fitter.parameter_values(np.array(xs)).items():
        prm = next(q for q in params if q.name == p)
        assert prm.low <= v <= prm.high


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=3, max_value=10), st.integers(min_value=0, max_value=2**31 - 1),
       st.floats(min_value=0.5, max_value=5.0))
def test_selection_keeps_the_best_site_prefix_and_one_se_for_single_knobs(n, seed, width):
    # Any rows and Jacobian: the kept site factors are the prefix of the path's site steps with the
    # lowest leave-one-out sum of squares, and the single knobs kept after them the shortest prefix
    # within one standard error of the lowest PRESS from there on (calibration_hierarchy docstring).
    rng = np.random.default_rng(seed)
    jac = rng.normal(size=(n, 4))
    r0 = rng.normal(scale=0.3, size=n)
    names = ["a", "b", "c", "d"]
    sites = [Param("S", ("a", "b"), 1.0, 0.5, 1.5, "ratio", "site", width),
             Param("T", ("c",), 1.0, 0.5, 1.5, "ratio", "site", width)]
    fine = [Param(m, (m,), 1.0, 0.5, 2.0, "ratio", "fine") for m in names]
    chosen, steps = select_params(r0, jac, names, sites, fine, prior=1.0)
    assert 1 <= len(chosen) <= max(1, n - 1) and [s.param for s in steps[:len(chosen)]] == [p.name for p in chosen]
    assert all(s.selected == (i < len(chosen)) for i, s in enumerate(steps))
    site_idx = [i for i, s in enumerate(steps) if s.stage == "site"]
    if n >= 3 and site_idx:
        base = min(site_idx, key=lambda i: steps[i].press)
        assert len(chosen) >= base + 1
        best = min(steps[base:], key=lambda s: s.press)
        k = len(chosen) - 1
        assert steps[k].press <= best.press + best.press_se
        assert all(steps[i].press > best.press + best.press_se for i in range(base, k))
