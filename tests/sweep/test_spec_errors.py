"""A malformed spec or option: one line naming the field, exit code 2, nothing written."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.interfaces.sweep.spec import parse_spec

GOOD = """goal = "train"
[axes]
models = ["llama-3-8b"]
hardware = ["dgx-h100"]
gpus = [8]
"""


@pytest.mark.parametrize("text,field", [
    (GOOD.replace("gpus = [8]", "gpu = [8]"), "axes.gpu: unknown key"),
    (GOOD.replace("gpus = [8]", "gpus = [0]"), "axes.gpus: each GPU count must be in 1..1000000"),
    (GOOD.replace("gpus = [8]", 'gpus = ["eight"]'), "axes.gpus.0"),
    (GOOD.replace('goal = "train"', 'goal = "infer"'), "goal"),
    (GOOD + "[[variants]]\nname = \"x\"\nbase = \"dgx-h100\"\nhbm_bandwidth_scale = -1\n", "variants.0.hbm_bandwidth_scale"),
    (GOOD + "[[variants]]\nname = \"x\"\nbase = \"dgx-h100\"\ndense_flops_scale = {bf17 = 2}\n", "variants.0.dense_flops_scale"),
    (GOOD + "[[variants]]\nname = \"x\"\nbase = \"no-such-box\"\n", "variants.base"),
    (GOOD.replace('"llama-3-8b"', '"no-such-model"'), "axes.models"),
    (GOOD + "rate = [1.0]\n", "axes.rate: only for goal"),
    (GOOD + "[sampling]\nmethod = \"random\"\n", "sampling: random sampling needs points"),
    (GOOD + "[axes.extra]\n", "axes.extra: unknown key"),
    ("goal = \n", "not valid TOML"),
])
def test_malformed_spec_is_one_line_exit_2(runner, tmp_path, text, field):
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    out = tmp_path / "out.csv"
    result = runner.invoke(app, ["sweep", "run", str(spec), "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0], result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == [spec]  # nothing written: no parts folder, no output


@pytest.mark.parametrize("args,field", [
    (["--out", "x.xlsx"], "--out"), (["--workers", "0"], "--workers"), (["--backend", "spark"], "--backend"),
    (["--address", "10.0.0.1:6379"], "--address"),
])
def test_bad_options_exit_2(runner, tmp_path, args, field):
    spec = tmp_path / "ok.toml"
    spec.write_text(GOOD)
    result = runner.invoke(app, ["sweep", "run", str(spec), *[a if a != "x.xlsx" else str(tmp_path / a) for a in args]])
    assert result.exit_code == 2 and field in result.output, result.output


def test_report_of_a_missing_file_exit_2(runner, tmp_path):
    result = runner.invoke(app, ["sweep", "report", str(tmp_path / "none.parquet")])
    assert result.exit_code == 2 and "results" in result.output


values = st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9), st.floats(allow_nan=True),
                   st.text(max_size=8), st.lists(st.integers(-5, 5), max_size=3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["gpus", "seq_len", "tokens", "rate", "hardware", "models", "output_len"]), value=values,
       section=st.sampled_from(["axes", "sampling", "train", "serve", "constraints"]))
def test_fuzzed_specs_validate_or_name_a_field(key, value, section):
    # any value anywhere: either a valid spec or an InputError naming a field (never another exception)
    data = {"goal": "train", "axes": {"models": ["llama-3-8b"], "hardware": ["dgx-h100"], "gpus": [8]}}
    data.setdefault(section, {})[key] = value
    try:
        parse_spec(data)
    except InputError as exc:
        assert exc.field and ":" in str(exc)


def test_dry_run_counts_points_and_writes_nothing(runner, tmp_path):
    import json

    spec = tmp_path / "ok.toml"
    spec.write_text(GOOD.replace("gpus = [8]", "gpus = [8, 16, 32]"))
    result = runner.invoke(app, ["sweep", "run", str(spec), "--out", str(tmp_path / "o.csv"), "--dry-run", "--json",
                                 "--workers", "3"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.output)
    # 1 model x 1 hardware x 3 GPU counts; ETA = pending x seconds per point / workers
    assert (d["points"], d["finished"], d["pending"]) == (3, 0, 3)
    assert d["eta_s"] == pytest.approx(3 * d["seconds_per_point"] / 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.toml"]
