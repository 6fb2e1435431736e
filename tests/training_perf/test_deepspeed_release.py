"""The DeepSpeed release as an input (TrainPlan.deepspeed_release): the current engine by default
(the coalesced ZeRO-3 model main had, unchanged), the 2021 engine (`step.deepspeed_zero3`) when the
plan, the CLI option or a validation row's own facts say so."""

from __future__ import annotations

import csv
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.interfaces.validation.deepspeed_row import (dated_before_current_engine, deepspeed_release_from_row,
                                                         source_date, stated_deepspeed_version)
from gpuplan.interfaces.validation.training import plan_from_row
from gpuplan.models import load_model
from gpuplan.specs import Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import DeepSpeedRelease, Framework, assumed_defaults_of, deepspeed_release_of
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.data import zero3_collective_calls
from gpuplan.workloads.training.step.inputs import StepContext


@pytest.fixture(scope="module")
def dgx():
    c = load_catalog()
    system = c.system("dgx-a100-80gb")
    return system, c.gpu(system.gpu)


def _zero3_plan(**kw) -> TrainPlan:
    return TrainPlan(dp=64, micro_batch=1, global_batch=256, seq_len=2048, recompute=Recompute.FULL,
                     sharding=Sharding.ZERO3, framework=Framework.DEEPSPEED, **kw)


# ---- the release value ---------------------------------------------------------------------------
@pytest.mark.parametrize("raw, release", [
    ("current", DeepSpeedRelease.CURRENT), ("0.5", DeepSpeedRelease.V0_5), ("v0.5.10", DeepSpeedRelease.V0_5),
    ("0.3.13", DeepSpeedRelease.V0_5), ("0.6.0", DeepSpeedRelease.CURRENT), ("0.14", DeepSpeedRelease.CURRENT),
    ("1.0", DeepSpeedRelease.CURRENT),
])
def test_release_of_a_version(raw, release):
    # v0.6.0 is the first release of the coalesced engine (tag v0.6.0, 2022-03-07)
    assert deepspeed_release_of(raw) is release


@given(st.text(max_size=12).filter(lambda s: s.strip().lower() != "current"
                                   and not __import__("re").fullmatch(r"v?\d+\.\d+(\.\d+)?", s.strip().lower())))
def test_anything_else_is_refused(raw):
    with pytest.raises(ValueError, match="not current or a DeepSpeed version"):
        deepspeed_release_of(raw)


@given(st.integers(0, 5), st.integers(0, 99))
def test_every_version_below_0_6_is_the_2021_engine(minor, patch):
    assert deepspeed_release_of(f"0.{minor}.{patch}") is DeepSpeedRelease.V0_5
    assert deepspeed_release_of(f"0.{minor + 6}.{patch}") is DeepSpeedRelease.CURRENT


def test_plan_dump_omits_the_default_and_round_trips():
    # a default plan dumps as before the field existed (hashes of stored plans unchanged)
    assert "deepspeed_release" not in TrainPlan().model_dump()
    legacy = _zero3_plan(deepspeed_release="0.5.8")
    assert legacy.model_dump()["deepspeed_release"] is DeepSpeedRelease.V0_5
    assert TrainPlan(**legacy.model_dump()) == legacy
    assert TrainPlan.model_validate_json(legacy.model_dump_json()) == legacy


# ---- the step model ------------------------------------------------------------------------------
def test_gather_calls_by_release(dgx):
    # GPT-3 125M: 12 layers of h = 768, 12 h^2 = 7.08e6 weights in 4 matrices (qkv, out, fc1, fc2).
    # Current engine: the layer is under the 5e7-element prefetch bucket, one coalesced call per layer:
    # 12 + 1 (embedding) = 13 calls per pass. 2021 engine: one call per matrix, 12 x 4 + 1 = 49.
    system, gpu = dgx
    model = load_model("gpt3-125m")
    sc = type("SC", (), {"layers_per_stage": 12.0})()
    calls = {}
    for release in DeepSpeedRelease:
        ctx = StepContext.build(model, system, gpu, 2048, framework=Framework.DEEPSPEED, deepspeed_release=release)
        calls[release] = float(zero3_collective_calls(ctx, sc, 1.25e8, 0)[0])
    assert calls == {DeepSpeedRelease.CURRENT: 13.0, DeepSpeedRelease.V0_5: 49.0}


def test_default_plan_runs_the_current_engine(dgx):
    system, gpu = dgx
    model = load_model("gpt3-1.3b")
    default = estimate_step_time(model, system, _zero3_plan(), gpu)
    for raw in ("current", "0.6.0", "0.14.2"):
        same = estimate_step_time(model, system, _zero3_plan(deepspeed_release=raw), gpu)
        assert same.breakdown_s == default.breakdown_s and same.step_time_s == default.step_time_s
    legacy = estimate_step_time(model, system, _zero3_plan(deepspeed_release="0.5"), gpu)
    # only the data-parallel term differs: the 2021 engine gathers per matrix and all-reduces
    assert legacy.breakdown_s["dp_comm_s"] != default.breakdown_s["dp_comm_s"]
    assert {k: v for k, v in legacy.breakdown_s.items() if k != "dp_comm_s"} == \
        {k: v for k, v in default.breakdown_s.items() if k != "dp_comm_s"}


def test_release_is_read_only_by_deepspeed_plans(dgx):
    system, gpu = dgx
    model = load_model("gpt3-1.3b")
    plan = _zero3_plan().model_copy(update={"framework": Framework.TORCHTITAN})
    a = estimate_step_time(model, system, plan, gpu)
    b = estimate_step_time(model, system, plan.model_copy(update={"deepspeed_release": DeepSpeedRelease.V0_5}), gpu)
    assert a.breakdown_s == b.breakdown_s


def test_assumed_defaults_name_the_release():
    cur = assumed_defaults_of(Framework.DEEPSPEED)
    old = assumed_defaults_of(Framework.DEEPSPEED, DeepSpeedRelease.V0_5)
    assert cur[0].startswith("DeepSpeed release v0.6.0 and later") and cur[1:] == Framework.DEEPSPEED.assumed_defaults
    assert old[0].startswith("DeepSpeed release v0.3.13 .. v0.5.10")
    assert any("one all-gather per weight matrix" in line for line in old)
    assert assumed_defaults_of(Framework.MEGATRON, DeepSpeedRelease.V0_5) == Framework.MEGATRON.assumed_defaults


# ---- validation rows -----------------------------------------------------------------------------
@pytest.mark.parametrize("source, date", [
    ("Narayanan et al. 2021 (SC21), Table 2", (2021, None)),
    ("Smith et al. 2022, 'MT-NLG' (arXiv 2201.11990)", (2022, 1)),  # arXiv YYMM: January 2022
    ("Bang et al. MICRO'24, data/ground_truth_multi.csv (data row 2)", None),  # no four-digit year
    ("benchmarks/llama3_h100_202412_torchtitan.md", (2024, 12)),  # a year-month in a document name
    ("commit 5d602fdbff04, figure megatron-lm-2nd-table-2.png", None),  # digits inside a word are no date
])
def test_source_date(source, date):
    assert source_date({"source": source}) == date


@pytest.mark.parametrize("date, before", [
    ((2021, None), True), ((2022, 2), True), ((2022, 3), False), ((2022, None), False), ((2023, 1), False),
    (None, False),
])
def test_dated_before_v0_6_0(date, before):
    # v0.6.0: 2022-03-07; a year alone of 2022 may postdate it
    assert dated_before_current_engine(date) is before


@pytest.mark.parametrize("notes, version", [
    ("ran DeepSpeed v0.5.8 with ZeRO-3", "v0.5.8"), ("deepspeed==0.14.2", "0.14.2"),
    ("DeepSpeed version 0.4.0", "0.4.0"), ("deepspeedai/DeepSpeed@74213e282050 tutorial", None),
    ("DeepSpeed ZeRO-3 without model parallelism", None),
])
def test_stated_version(notes, version):
    assert stated_deepspeed_version({"notes": notes}) == version


def test_row_release_rule():
    dated_2021 = {"source": "Someone et al. 2021", "notes": ""}
    assert deepspeed_release_from_row(dated_2021, Framework.DEEPSPEED)[0] is DeepSpeedRelease.V0_5
    # a stated version outranks the date
    stated = {**dated_2021, "notes": "DeepSpeed 0.9.2"}
    assert deepspeed_release_from_row(stated, Framework.DEEPSPEED)[0] is DeepSpeedRelease.CURRENT
    undated = {"source": "a blog post", "notes": ""}
    assert deepspeed_release_from_row(undated, Framework.DEEPSPEED) == (DeepSpeedRelease.CURRENT, None)
    assert deepspeed_release_from_row(dated_2021, Framework.MEGATRON) == (DeepSpeedRelease.CURRENT, None)


def test_sc21_zero3_rows_run_the_2021_engine(validation_dir):
    # Narayanan et al. 2021 (SC21) Table 2 compares against ZeRO-3 of that year: the source is dated
    # 2021, before DeepSpeed v0.6.0, so the row's plan runs the 2021 engine
    rows = [r for r in csv.DictReader(open(validation_dir / "training.csv", encoding="utf-8"))
            if r["framework"] == "deepspeed" and r["sharding"] == "zero3" and "2021" in r["source"]]
    assert rows
    for row in rows:
        plan, notes = plan_from_row(row, "ampere")
        assert plan.deepspeed_release is DeepSpeedRelease.V0_5
        assert any("before DeepSpeed v0.6.0" in n for n in notes)


# ---- CLI ---------------------------------------------------------------------------------------
_ONE = ["train", "gpt3-1.3b", "--system", "dgx-a100-80gb", "--gpus", "64", "--tokens", "1B", "--framework", "deepspeed",
        "--tp", "1", "--pp", "1", "--cp", "1", "--micro-batch", "1", "--recompute", "full", "--sharding", "zero3"]


def test_cli_option_selects_the_release(runner):
    default = json.loads(runner.invoke(app, [*_ONE, "--json"]).stdout)
    current = json.loads(runner.invoke(app, [*_ONE, "--deepspeed-release", "current", "--json"]).stdout)
    legacy = json.loads(runner.invoke(app, [*_ONE, "--deepspeed-release", "0.5", "--json"]).stdout)
    assert default["deepspeed_release"] == current["deepspeed_release"] == "current"
    assert legacy["deepspeed_release"] == "0.5"
    assert default["step_time_s"] == current["step_time_s"] != legacy["step_time_s"]
    assert default["framework_defaults_assumed"][0].startswith("DeepSpeed release v0.6.0")
    assert legacy["framework_defaults_assumed"][0].startswith("DeepSpeed release v0.3.13 .. v0.5.10")
    text = runner.invoke(app, [*_ONE, "--deepspeed-release", "0.5"]).stdout
    assert "DeepSpeed release v0.3.13 .. v0.5.10 (2021 engine)" in text
    other = json.loads(runner.invoke(app, ["train", "gpt3-125m", "--gpus", "8", "--tp", "1", "--json"]).stdout)
    assert other["deepspeed_release"] is None


@pytest.mark.parametrize("extra, says", [
    (["--deepspeed-release", "0.x"], "--deepspeed-release: '0.x' is not current, or a DeepSpeed version"),
    (["--deepspeed-release", "latest"], "--deepspeed-release: 'latest' is not current"),
])
def test_cli_bad_release_exits_2_with_one_line(runner, extra, says):
    res = runner.invoke(app, [*_ONE, *extra])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in res.output


def test_cli_release_needs_deepspeed(runner):
    res = runner.invoke(app, ["train", "gpt3-125m", "--gpus", "8", "--tp", "1", "--deepspeed-release", "0.5"])
    assert res.exit_code == 2
    assert res.output.strip() == "error: --deepspeed-release: applies to --framework deepspeed, not megatron"
