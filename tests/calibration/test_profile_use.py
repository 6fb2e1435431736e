"""Using a profile: `--calibration FILE` / GPUPLAN_CALIBRATION on any predicting command, the
`calibration` key of every --json, `gpuplan.api.apply`, and refusal of bad profiles."""

from __future__ import annotations

import json

import pytest

from gpuplan import api, knobs
from gpuplan.cli.main import app

SGF = "training.sustained_gemm_fraction"


@pytest.fixture
def profile(tmp_path):
    p = tmp_path / "slow.toml"
    p.write_text(f'[knobs."{SGF}"]\nvalue = 0.6\nuncertainty = 0.02\n')
    return p


def test_calibration_option_applies_to_the_whole_command(runner, profile):
    base = json.loads(runner.invoke(app, ["train", "--json"]).stdout)
    res = runner.invoke(app, ["--calibration", str(profile), "train", "--json"])
    assert res.exit_code == 0, res.output
    cal = json.loads(res.stdout)
    assert "calibration" not in base
    assert cal["calibration"] == {"profile": str(profile), "knobs": {SGF: 0.6}}
    # GEMMs at 0.6 instead of 0.85 of their ceiling: a slower step, so more days (the GEMM share of
    # the step is well above half for GPT-3 175B, so the run is longer by more than 20%)
    assert cal["days"] > base["days"] * 1.2
    assert knobs.value(SGF) == 0.85


def test_environment_variable_and_other_commands(runner, profile):
    res = runner.invoke(app, ["comm", "all_reduce", "--gpus", "8", "--json"], env={"GPUPLAN_CALIBRATION": str(profile)})
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["calibration"]["knobs"] == {SGF: 0.6}


@pytest.mark.parametrize("text, expected", [
    ('[knobs."efficiency.no_such"]\nvalue = 0.5\n', "unknown knob efficiency.no_such"),
    (f'[knobs."{SGF}"]\nvalue = 1.7\n', "allowed 0.5 .. 1.0"),
    (f'[knobs."{SGF}"]\nvalue = "fast"\n', "must be a number"),
    ("[profile]\nformat = 1\n", "no [knobs"),
    ("knobs = [", "not a TOML profile"),
])
def test_bad_profiles_exit_2_with_one_line(tmp_path, runner, text, expected):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    res = runner.invoke(app, ["--calibration", str(p), "train"])
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0]
    # under --json the error is the JSON error object on stdout (the one the HTTP API returns)
    res = runner.invoke(app, ["--calibration", str(p), "train", "--json"])
    assert res.exit_code == 2 and expected in json.loads(res.stdout)["error"]["message"]


def test_api_apply_scopes_the_profile(profile):
    with api.apply(profile):
        inside = api.train("gpt3-175b", "dgx-h100", 1024, tokens="300B").to_dict()
        assert knobs.value(SGF) == 0.6
    outside = api.train("gpt3-175b", "dgx-h100", 1024, tokens="300B").to_dict()
    assert inside["calibration"]["knobs"] == {SGF: 0.6} and "calibration" not in outside
    assert api.load_profile(profile).values == {SGF: 0.6}


def test_fit_then_validate_with_the_profile(validation_dir, tmp_path, runner):
    # torchtitan's H100 table (ttbench, 18 rows, default MAPE 27%): a profile fitted on it, applied
    # to `validate` of the same rows, gives validate's MAPE = the fit's "after" figure.
    from gpuplan.interfaces.calibration.importers import rows_csv
    from gpuplan.interfaces.validation.validate import read_rows

    rows = [r for r in read_rows(validation_dir / "training.csv") if r["id"].startswith("ttbench-")]
    data = tmp_path / "tt.csv"
    data.write_text(rows_csv(rows))
    prof = tmp_path / "tt.toml"
    fit = json.loads(runner.invoke(app, ["calibrate", "fit", str(data), "--out", str(prof), "--json"]).stdout)
    plain = json.loads(runner.invoke(app, ["validate", str(data), "--json"]).stdout)
    res = runner.invoke(app, ["--calibration", str(prof), "validate", str(data), "--json"])
    calibrated = json.loads(res.stdout)
    assert calibrated["summary"]["overall"]["mape_pct"] == pytest.approx(fit["error"]["mape_after_pct"], rel=1e-6)
    assert plain["summary"]["overall"]["mape_pct"] == pytest.approx(fit["error"]["mape_before_pct"], rel=1e-6)
    assert set(calibrated["calibration"]["knobs"]) == set(fit["values"])
