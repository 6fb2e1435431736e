"""Hierarchical calibration (interfaces/calibration_hierarchy.py): site factors first, single knobs
only when they lower the leave-one-out error (one-standard-error rule); the factor a site differs
by is recovered; few rows fit one parameter; the profile and its uncertainty guarantee; --method."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gpuplan import knobs
from gpuplan.cli.main import app
from gpuplan.interfaces.calibration.fit import calibrate_rows, knobs_read_by
from gpuplan.interfaces.calibration.hierarchy import (MEASUREMENT_NOISE_LOG, SITE_FACTORS, Param, loo_residuals,
                                                      press, select_params, site_factor)
from gpuplan.interfaces.calibration.profile import load_profile

from .conftest import measured_at, synthetic_training_rows
from .test_calibrate_fit import one_line_error, write_csv


def test_leave_one_out_residuals_by_hand():
    # one parameter moving every row alike (a column of ones), r = (0.1, 0.2, 0.3):
    # no prior: the fit is the mean; leaving row 1 out, the mean of rows 2, 3 is 0.25 -> -0.15
    r, ones = np.array([0.1, 0.2, 0.3]), np.ones((3, 1))
    assert loo_residuals(r, ones, 0.0) == pytest.approx([-0.15, 0.0, 0.15])
    # prior 1: theta = -sum / (n + 1); leaving row 3 out, theta = -0.3 / 3 = -0.1 -> 0.3 - 0.1 = 0.2,
    # row 1: -0.5 / 3 -> 0.1 - 0.1667 = -0.0667
    assert loo_residuals(r, ones, 1.0) == pytest.approx([-1 / 15, 1 / 15, 0.2])
    assert press(r, ones, 0.0) == pytest.approx(2 * 0.15**2)
    assert press(r, np.zeros((3, 0)), 1.0) == pytest.approx(0.01 + 0.04 + 0.09)  # no parameter: r itself
    assert MEASUREMENT_NOISE_LOG == 0.01


def test_site_factors_cover_their_knobs():
    compute = site_factor("site.compute")
    assert compute.covers("efficiency.matmul_ceiling.h100-sxm5-80gb.bf16")
    assert compute.covers("training.attention_ceiling.hopper")
    assert not compute.covers("training.sustained_gemm_fraction")  # a finer knob of its own
    assert site_factor("site.network").covers("collectives.nic_efficiency.infiniband")
    assert site_factor("site.host").covers("serving.step_overhead_s")
    assert site_factor("site.memory").covers("efficiency.hbm") and not site_factor("site.memory").covers("efficiency.hbmx")
    assert site_factor("site.nothing") is None
    # every site factor covers at least one registered knob (a renamed knob would orphan it)
    from gpuplan.interfaces.fitting.knob_catalog import load_all

    names = list(load_all())
    for f in SITE_FACTORS:
        assert any(f.covers(n) for n in names), f.name
        assert f.low < 1.0 < f.high


def _param(name, members, stage):
    return Param(name, tuple(members), 1.0, 0.5, 2.0, "ratio", stage)


def test_selection_adds_a_fine_knob_only_on_evidence():
    # Three knobs a, b (one site factor S) and c, twelve rows with independent Jacobian columns.
    rng = np.random.default_rng(0)
    jac = rng.normal(size=(12, 3))
    names = ["a", "b", "c"]
    site = [_param("S", ["a", "b"], "site")]
    fine = [_param(n, [n], "fine") for n in names]
    # rows off by exactly the site factor (x_S = 0.2), a negligible prior: S, nothing else
    r0 = -0.2 * (jac[:, 0] + jac[:, 1])
    chosen, steps = select_params(r0, jac, names, site, fine, prior=1e-9)
    assert [p.name for p in chosen] == ["S"] and steps[0].stage == "site" and steps[0].selected
    # plus a real deviation of c (x_c = 0.3): c is added in the fine stage, a and b are not
    r1 = r0 - 0.3 * jac[:, 2]
    chosen, steps = select_params(r1, jac, names, site, fine, prior=1e-9)
    assert [p.name for p in chosen] == ["S", "c"] and [s.stage for s in steps[:2]] == ["site", "fine"]
    assert steps[1].press < steps[0].press
    # rows off by the site factor plus 10% scatter: the scatter is not chased (one-standard-error rule)
    r2 = r0 + 0.1 * rng.normal(size=12)
    chosen, steps = select_params(r2, jac, names, site, fine, prior=1.0)
    assert [p.name for p in chosen] == ["S"]
    assert all(s.press >= steps[0].press - steps[0].press_se - 1e-12 or not s.selected for s in steps)


def test_rows_of_two_kinds_keep_two_site_factors():
    # Twelve rows: six compute-bound (d log pred / d log compute = -0.9, memory -0.1: prefill / TTFT)
    # and six memory-bound (the reverse: decode / TPOT), measured on a site whose compute is 0.8x and
    # memory 1.1x the reference, so r = -(J_C log 0.8 + J_M log 1.1) (prediction / measured in log).
    # One factor can explain only one kind; leaving a row out of the other kind costs a miss of
    # |0.9 log 1.1| or |0.9 log 0.8| = 0.086 / 0.20: PRESS keeps both site factors (each with the
    # site prior, width 2: lambda / w^2 = 0.25), the one-standard-error rule of single knobs has no
    # say over them.
    col_c = np.array([-0.9] * 6 + [-0.1] * 6)
    col_m = np.array([-0.1] * 6 + [-0.9] * 6)
    jac = np.column_stack([col_c, col_m])
    r0 = -(col_c * math.log(0.8) + col_m * math.log(1.1))
    site = [Param("C", ("a",), 1.0, 0.5, 1.5, "ratio", "site", 2.0),
            Param("M", ("b",), 1.0, 0.5, 1.25, "ratio", "site", 2.0)]
    chosen, steps = select_params(r0, jac, ["a", "b"], site, [], prior=1.0)
    assert [p.name for p in chosen] == ["C", "M"] and all(s.selected for s in steps)
    assert steps[1].press < steps[0].press
    # rows of one kind only (the memory-bound half off by nothing): the second factor does not lower
    # PRESS by the measurement-noise margin and is not on the path
    r1 = -col_c * math.log(0.8)
    chosen, _ = select_params(r1[:6], jac[:6], ["a", "b"], site, [], prior=1.0)
    assert [p.name for p in chosen] == ["C"]


def test_a_site_factor_is_regularised_with_its_own_width():
    # One parameter, three rows of sensitivity 1 and residual 0.3: the ridge step is
    # theta = -3 x 0.3 / (3 + lambda / w^2); the leave-one-out residual of each row is
    # e / (1 - h) with h = 1 / (3 + p) (Allen's PRESS). Width 2 (p = 0.25) against the fitter's
    # prior 1: the LOO residual is 0.3 (1 - 3/3.25) / (1 - 1/3.25) = 0.0333 vs 0.3 (1 - 3/4) / (3/4) = 0.1.
    jac = np.ones((3, 1))
    r0 = np.full(3, 0.3)
    wide = [Param("S", ("a",), 1.0, 0.5, 2.0, "ratio", "site", 2.0)]
    narrow = [Param("S", ("a",), 1.0, 0.5, 2.0, "ratio", "site")]  # width None: the fitter's prior
    _, steps_wide = select_params(r0, jac, ["a"], wide, [], prior=1.0)
    _, steps_narrow = select_params(r0, jac, ["a"], narrow, [], prior=1.0)
    assert steps_wide[0].press == pytest.approx(3 * 0.0333333**2, rel=1e-4)
    assert steps_narrow[0].press == pytest.approx(3 * 0.1**2, rel=1e-9)


def test_with_two_rows_one_parameter_is_fitted():
    rng = np.random.default_rng(1)
    jac = rng.normal(size=(2, 3))
    site = [_param("S", ["a", "b"], "site"), _param("T", ["c"], "site")]
    chosen, _ = select_params(-0.3 * jac[:, 2], jac, ["a", "b", "c"], site, [], prior=1.0)
    assert len(chosen) == 1  # n < 3: leaving one row out leaves too few to fit two parameters


@pytest.fixture(scope="module")
def compute_site_rows():
    # The twelve synthetic Megatron rows measured on a "site" whose every GEMM and attention
    # ceiling is 0.8 x the reference (site.compute = 0.8): the value to recover by construction.
    rows = synthetic_training_rows()
    members = [n for n in knobs_read_by(rows) if site_factor("site.compute").covers(n)]
    assert any(n.startswith("efficiency.matmul_ceiling.") for n in members)
    return members, measured_at(rows, {n: 0.8 * knobs.REGISTRY[n].default for n in members})


def test_the_site_factor_is_recovered(compute_site_rows):
    members, rows = compute_site_rows
    res = calibrate_rows(rows)
    assert res.method == "hierarchical"
    params = {k.name: k for k in res.fit.knobs if k.informed}
    sgf = "training.sustained_gemm_fraction"
    # the site factor comes first; the only other parameter worth its leave-one-out gain is the
    # training GEMM rate (it scales the same GEMMs: with rows the model reproduces exactly, it
    # relieves the prior's pull on the factor, so the pair, not each, is what the rows determine)
    assert res.selection[0].param == "site.compute" and set(params) <= {"site.compute", sgf}
    # what the rows fix: every GEMM 0.8 x the reference -> factor x (SGF / 0.85) = 0.8, within the
    # prior's remaining pull (each parameter's Jacobian norm ~2, lambda = 1: a few %)
    gemm_scale = params["site.compute"].value * (params[sgf].value / 0.85 if sgf in params else 1.0)
    assert gemm_scale == pytest.approx(0.8, rel=0.03)
    for n in members:  # every member read by the rows moves by the same factor
        assert res.values[n] == pytest.approx(params["site.compute"].value * knobs.REGISTRY[n].default)
    # before: 0.8 x every ceiling is a 10-20% error per row; after: what the prior leaves (< 3%)
    assert res.error_block()["mape_after_pct"] < 3.0 < 10.0 < res.error_block()["mape_before_pct"]


def test_hierarchical_profile_round_trip(tmp_path, runner, compute_site_rows):
    _, rows = compute_site_rows
    data = write_csv(tmp_path / "rows.csv", rows)
    out = tmp_path / "p.toml"
    res = runner.invoke(app, ["calibrate", "fit", str(data), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["method"] == "hierarchical" and d["selection"][0]["parameter"] == "site.compute"
    prof = load_profile(out)
    assert prof.values == d["values"]
    entry = next(k for k in d["knobs"] if k["name"] == "efficiency.matmul_ceiling.a100-sxm4-80gb.bf16")
    assert entry["via"] == ["site.compute"] and prof.uncertainties[entry["name"]] == entry["uncertainty"]
    assert any("site.compute" in p for p in prof.meta["profile"]["parameters"])
    text = runner.invoke(app, ["calibrate", "fit", str(data)])
    assert "site.compute" in text.stdout and "via site.compute" in text.stdout


def test_flat_method_on_request(tmp_path, runner, compute_site_rows):
    _, rows = compute_site_rows
    data = write_csv(tmp_path / "rows.csv", rows[:4])
    d = json.loads(runner.invoke(app, ["calibrate", "fit", str(data), "--method", "flat", "--json"]).stdout)
    assert d["method"] == "flat" and not any(p["name"].startswith("site.") for p in d["parameters"])


def test_bad_method_exits_2_and_writes_nothing(tmp_path, runner, compute_site_rows):
    _, rows = compute_site_rows
    data = write_csv(tmp_path / "rows.csv", rows[:3])
    out = tmp_path / "p.toml"
    line = one_line_error(runner.invoke(app, ["calibrate", "fit", str(data), "--out", str(out), "--method", "bayes"]))
    assert "method" in line and "hierarchical" in line and not out.exists()


@pytest.mark.parametrize("family, file", [("trtllm061", "inference"), ("meg24", "training"),
                                          ("lmdeploy", "inference")])
def test_the_guarantee_holds_on_public_families(validation_dir, family, file):
    # "A profile never makes a row it was fitted on worse by more than its reported uncertainty",
    # with the default (hierarchical) method, on families whose parameters move (docs/calibration.md).
    from gpuplan.interfaces.validation.validate import read_rows

    rows = [r for r in read_rows(validation_dir / f"{file}.csv")
            if r["id"].rsplit("-", 1)[0] == family and r.get("confidence") != "low"]
    res = calibrate_rows(rows)
    assert res.method == "hierarchical" and res.values
    for r in res.rows:
        if r["used"]:
            worse = abs(math.log(r["predicted_after"] / r["measured"])) - abs(math.log(r["predicted_before"] / r["measured"]))
            assert worse <= math.log1p(r["band_pct"] / 100), r["id"]
