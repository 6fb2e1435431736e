"""The memory headroom (gpuplan.workloads.memory_headroom): plans use at most `memory.usable_fraction`
(default 0.90) of GPU memory; `--memory-headroom`, `--set usable_memory_fraction=` and
`api.memory_headroom` change it; validation figures do not depend on it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuplan import api, knobs
from gpuplan.catalog import get_gpu, load_catalog
from gpuplan.cli.main import app
from gpuplan.models import load_model
from gpuplan.specs import Recompute, Sharding, TrainPlan
from gpuplan.workloads.memory_headroom import KNOB, usable_fraction
from gpuplan.workloads.training.memory import training_memory

runner = CliRunner()
GIB = 2**30
# llama-3-8b, 8 GPUs, tp1 dp8, zero1, sequence 4096, micro-batch 1: about 77 GiB per GPU -- between the
# 72 GiB usable at the default 10% headroom and the 80 GiB of an H100 (so the headroom decides)
# every searched axis named (tp 1 / pp 1 imply sequence parallelism off and vpp 1): one plan, evaluated
PLAN_ARGS = ["llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--tp", "1", "--pp", "1", "--cp", "1", "--sharding", "zero1",
             "--seq-len", "4096", "--micro-batch", "1", "--recompute", "none", "--tokens", "1B"]


def _plan():
    return TrainPlan(tp=1, pp=1, dp=8, micro_batch=1, seq_len=4096, sharding=Sharding.ZERO1, recompute=Recompute.NONE)


def test_default_is_90_percent():
    # vLLM gpu_memory_utilization default 0.9 (the knob's source)
    assert usable_fraction() == 0.90 and knobs.REGISTRY[KNOB].default == 0.90


def test_fits_against_the_usable_part():
    h100 = get_gpu("h100-sxm5-80gb")
    mem = training_memory(load_model("llama-3-8b"), _plan(), h100)
    total = mem.per_gpu_bytes["total"]
    assert 72 * GIB < total < 80 * GIB  # the case sits between the two limits
    # definition: headroom = 0.9 x 80 GiB - total, fits iff headroom >= 0
    assert mem.fits is False and mem.headroom_bytes == pytest.approx(0.9 * 80 * GIB - total)
    with api.memory_headroom(0.0):
        mem0 = training_memory(load_model("llama-3-8b"), _plan(), h100)
    assert mem0.fits is True and mem0.headroom_bytes == pytest.approx(80 * GIB - total)


def test_train_with_a_plan_past_the_headroom_exits_2_with_the_reason():
    r = runner.invoke(app, ["train", *PLAN_ARGS])
    assert r.exit_code == 2
    assert "72.0 GiB usable of 80 GiB (memory headroom 10%" in r.output and "\n" not in r.output.strip()
    for extra in (["--memory-headroom", "0"], ["--set", "usable_memory_fraction=1.0"]):
        ok = runner.invoke(app, ["train", *PLAN_ARGS, *extra, "--json"])
        assert ok.exit_code == 0, ok.output
        assert 72 < json.loads(ok.stdout)["memory_per_gpu_gib"] < 80


@pytest.mark.parametrize("value", ["0.95", "-0.1", "nan", "inf"])
def test_bad_headroom_exits_2(value):
    r = runner.invoke(app, ["fit", "max-batch", "gpt3-125m", "--gpu", "h100-sxm5-80gb", "--memory-headroom", value])
    assert r.exit_code == 2 and "--memory-headroom" in r.output


def test_bad_usable_fraction_exits_2():
    r = runner.invoke(app, ["train", *PLAN_ARGS, "--set", "usable_memory_fraction=2"])
    assert r.exit_code == 2 and "usable_memory_fraction: must be a finite number >= 0.1 and <= 1" in r.output


def test_plan_search_screens_against_the_usable_part():
    # every plan the search returns fits in 0.9 x 80 GiB; a larger headroom (30%: 56 GiB usable)
    # leaves strictly fewer plans. (With no headroom at all the other limit binds first: the reserved
    # peak, allocated x training.memory.reserved_over_allocated, within the 80 GiB.)
    res = api.train("llama-3-8b", "dgx-h100", 8, tokens="1B", seq_len=4096, top=5).to_dict()
    assert all(p["memory_per_gpu_gib"] <= 0.9 * 80 for p in res["search"]["top_plans"])
    with api.memory_headroom(0.3):
        strict = api.train("llama-3-8b", "dgx-h100", 8, tokens="1B", seq_len=4096, top=5).to_dict()
    assert all(p["memory_per_gpu_gib"] <= 0.7 * 80 for p in strict["search"]["top_plans"])
    assert strict["search"]["plans_fitting"] < res["search"]["plans_fitting"]


def test_fit_min_gpus_honours_the_headroom():
    base = ["fit", "min-gpus", "llama-3-70b", "--gpu", "h100-sxm5-80gb", "--sharding", "zero1", "--seq-len", "4096", "--json"]
    default = json.loads(runner.invoke(app, base).stdout)
    loose = json.loads(runner.invoke(app, [*base, "--memory-headroom", "0"]).stdout)
    assert default["memory"]["per_gpu_gib"]["total"] <= 72.0
    assert loose["min_gpus"] <= default["min_gpus"]


def test_serving_kv_budget_moves_by_the_fraction_of_total():
    # vLLM's rule: kv_budget = fraction x total - weights - workspace - reserve, so 0.8 instead of 0.9
    # takes exactly 0.1 x 80 GiB from the KV budget
    from gpuplan.workloads.inference.cost.deployment import Deployment
    from gpuplan.workloads.inference.cost.memory import memory_plan

    cat = load_catalog()
    dep = Deployment(load_model("llama-3-8b"), cat.gpu("h100-sxm5-80gb"), cat.system("dgx-h100"), tp=1)
    a = memory_plan(dep)
    with knobs.overridden({KNOB: 0.8}):
        b = memory_plan(dep)
    assert a.kv_budget_bytes - b.kv_budget_bytes == pytest.approx(0.1 * 80 * GIB)


def test_dc_assumptions_lists_it():
    rows = json.loads(runner.invoke(app, ["dc", "assumptions", "--json"]).stdout)
    text = json.dumps(rows)
    assert "usable_memory_fraction" in text


@pytest.mark.parametrize("headroom,usable_gib", [([], 72.0), (["--memory-headroom", "0.05"], 76.0)])
def test_fit_train_json_names_the_usable_memory(headroom, usable_gib):
    # usable = (1 - headroom) x 80 GiB: 0.90 x 80 = 72 GiB by default, 0.95 x 80 = 76 GiB with 5% headroom;
    # what the web app's memory bars mark beside the GPU's 80 GiB
    args = ["fit", "train", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--sharding", "zero1",
            "--seq-len", "4096", *headroom, "--json"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["capacity_gib"] == 80.0
    assert d["usable_gib"] == pytest.approx(usable_gib, rel=1e-12)
    assert d["usable_bytes"] == pytest.approx(usable_gib * GIB, rel=1e-12)
    assert d["usable_gib"] - d["per_gpu_gib"]["total"] == pytest.approx(d["headroom_gib"], rel=1e-12)
