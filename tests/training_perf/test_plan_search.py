"""Plan search: the vectorised grid agrees with the one-plan model, finds the true best plan of a
small space by brute force, and accepts pipeline splits that are not even."""

from __future__ import annotations

import itertools

import pytest

from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.specs import Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.memory import training_memory
from gpuplan.workloads.training.plan_search import SearchSpace, search_plans
from gpuplan.workloads.training.step.assembly import estimate_step_time


def test_uneven_pipeline_split_is_searched(h100):
    # Llama 3.1 405B has 126 layers: pp 16 does not divide them (Meta trained it on pp 16 with an
    # uneven split). The search must offer such plans and score them as the one-plan model does.
    system, gpu = h100
    model = load_model("llama-3.1-405b")
    space = SearchSpace(seq_len=8192, global_batch=512, tp=[8], pp=[16], cp=[1], vpp=[1], micro_batch=[1],
                        recompute=[Recompute.FULL], sharding=[Sharding.ZERO1], sequence_parallel=[True])
    result = search_plans(model, system, gpu, 1024, space, top=1)
    best = result.best[0]
    assert (best.plan.tp, best.plan.pp, best.plan.dp) == (8, 16, 8)
    one = estimate_step_time(model, system, best.plan, gpu)
    assert best.step.step_time_s == pytest.approx(one.step_time_s, rel=1e-9)


def test_search_finds_the_brute_force_best_plan(h100):
    # Every plan of a small space scored one at a time with estimate_step_time and the exact memory
    # check: the search's first plan must be the fastest that fits.
    system, gpu = h100
    model = load_model("llama-3-8b")
    tps, pps, mbs = [1, 2, 4, 8], [1, 2, 4], [1, 2, 4]
    rcs, shs = [Recompute.NONE, Recompute.FULL], [Sharding.ZERO1, Sharding.ZERO3]
    space = SearchSpace(seq_len=4096, global_batch=256, tp=tps, pp=pps, cp=[1], vpp=[1], micro_batch=mbs,
                        recompute=rcs, sharding=shs, sequence_parallel=[False, True])
    result = search_plans(model, system, gpu, 32, space, top=3)
    best_time, best_plan = float("inf"), None
    for tp, pp, mb, rc, sh, sp in itertools.product(tps, pps, mbs, rcs, shs, [False, True]):
        if sp and tp == 1:
            continue
        dp = 32 // (tp * pp)
        if 256 % (mb * dp):
            continue
        plan = TrainPlan(tp=tp, pp=pp, dp=dp, micro_batch=mb, global_batch=256, seq_len=4096, recompute=rc,
                         sharding=sh, sequence_parallel=sp)
        try:
            if not training_memory(model, plan, gpu).fits:
                continue
        except InputError:
            continue
        t = estimate_step_time(model, system, plan, gpu).step_time_s
        if t < best_time:
            best_time, best_plan = t, plan
    assert best_plan is not None
    assert result.best[0].step.step_time_s == pytest.approx(best_time, rel=1e-9)
    times = [r.step.step_time_s for r in result.best]
    assert times == sorted(times)


def test_rejection_counts_add_up(h100):
    # Every grid point is either valid or rejected for exactly one (the first) reason.
    system, gpu = h100
    result = search_plans(load_model("gpt3-175b"), system, gpu, 1024, SearchSpace(seq_len=2048, global_batch=1536))
    invalid = sum(v for k, v in result.rejected.items() if k != "does not fit in GPU memory")
    assert result.plans_valid + invalid == result.plans_evaluated
    assert result.plans_fitting == result.plans_valid - result.rejected["does not fit in GPU memory"]


def test_moe_parallel_folding_is_searched(h100):
    # Megatron-Bridge's Qwen3-235B-A22B H100 recipe: tp 2, pp 8, ep 32, etp 1 on 256 GPUs, so
    # dp = 16 < ep: experts fold over the tp x dp = 32 ranks of a stage, which needs etp = 1
    # (with etp = tp = 2, ep x etp = 64 does not divide 32).
    system, gpu = h100
    model = load_model("qwen3-235b-a22b")
    space = SearchSpace(seq_len=4096, global_batch=2048, tp=[2], pp=[8], cp=[1], ep=[32], vpp=[1],
                        micro_batch=[1], recompute=[Recompute.FULL], sharding=[Sharding.ZERO1],
                        sequence_parallel=[True])
    result = search_plans(model, system, gpu, 256, space, top=1)
    best = result.best[0]
    assert (best.plan.dp, best.plan.ep, best.plan.expert_tp) == (16, 32, 1)
    one = estimate_step_time(model, system, best.plan, gpu)
    assert best.step.step_time_s == pytest.approx(one.step_time_s, rel=1e-9)
