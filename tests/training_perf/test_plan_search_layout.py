"""The plan search's speed work leaves every answer as it was (issue #35): a block scored with its
axes in COMPUTE_ORDER is the block scored in AXES order, value for value; the memory screen's two
ranks in one call are the two calls; the leaders and the fastest plan per explained value read from
a block's fitting plans are those of a whole-block argsort in flat order (ties to the first)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import TrainPlan
from gpuplan.specs.execution import AttentionKernel
from gpuplan.workloads.training import memory_grid
from gpuplan.workloads.training.finetune_search import FineTuning, fine_tuning_proto
from gpuplan.workloads.training.plan_grid import AXES, COMPUTE_ORDER, _Block, _expert_tp, _grid, _score_block, grid_validity
from gpuplan.workloads.training.plan_ranking import EXPLAINED, _FastestPerValue, _Fitting, _Leaders
from gpuplan.workloads.training.plan_search import SearchSpace, default_axes, default_framework, framework_axes
from gpuplan.workloads.training.step.inputs import StepContext

CASES = [
    ("gpt3-175b", 1024, SearchSpace(seq_len=2048, global_batch=2048)),  # benchmarks/plan_search.py's first case
    ("mixtral-8x7b", 64, SearchSpace(seq_len=4096)),  # MoE (ep, etp axes), a default batch per plan
    ("llama-3-8b", 8, SearchSpace(seq_len=4096, global_batch=64, fine_tuning=FineTuning(method="lora", lora_rank=16))),
]


def _setup(model_id, num_gpus, space):
    c = load_catalog()
    system = c.system("dgx-h100")
    gpu = c.gpu(system.gpu)
    model = load_model(model_id)
    framework = default_framework(system)
    axes = framework_axes(default_axes(model, system, num_gpus, space), framework, space)
    ctx = StepContext.build(model, system, gpu, space.seq_len, space.precision, framework, AttentionKernel.FLASH,
                            space.tp_comm_overlap, fine_tuning=FineTuning(optimizer_impl=space.optimizer_impl))
    proto = fine_tuning_proto(TrainPlan(seq_len=space.seq_len, precision=space.precision, framework=ctx.framework,
                                        attention_kernel=ctx.attention_kernel), space.fine_tuning)
    return model, gpu, ctx, proto, axes


@pytest.mark.parametrize("model_id,num_gpus,space", CASES)
def test_compute_order_scores_the_block_of_axes_order(model_id, num_gpus, space):
    # The same block scored with its axes in AXES order and in COMPUTE_ORDER: every key, step-time
    # part, dp, m and batch equal to the bit (inf where a plan is dropped), the same counts
    model, gpu, ctx, proto, axes = _setup(model_id, num_gpus, space)
    plain = _score_block(model, gpu, ctx, proto, axes, num_gpus, space.global_batch, order=AXES)
    fast = _score_block(model, gpu, ctx, proto, axes, num_gpus, space.global_batch, order=COMPUTE_ORDER)
    assert fast.shape == plain.shape == tuple(len(axes[a]) for a in AXES)
    assert (fast.rejected, fast.valid, fast.fitting) == (plain.rejected, plain.valid, plain.fitting)
    assert 0 < fast.fitting < fast.valid  # the screen drops some valid plans and keeps others
    for name in ("key", "dp", "m", "gb"):
        assert np.array_equal(np.broadcast_to(getattr(fast, name), fast.shape),
                              np.broadcast_to(getattr(plain, name), plain.shape)), name
    for part in plain.parts:
        assert np.array_equal(np.broadcast_to(fast.parts[part], fast.shape),
                              np.broadcast_to(plain.parts[part], plain.shape)), part


@pytest.mark.parametrize("model_id,num_gpus,space", CASES)
def test_screen_of_both_ranks_is_the_larger_of_two_calls(model_id, num_gpus, space):
    # screen_bytes scores the first and the last pipeline rank in one call (BOTH_RANKS): its total is
    # the larger of rank_memory_arrays(last=False) and (last=True), to the bit
    model, _, ctx, proto, axes = _setup(model_id, num_gpus, space)
    g = _grid(axes, COMPUTE_ORDER)
    dp, m, _, _ = grid_validity(model, ctx.framework, space.seq_len, g, num_gpus, space.global_batch)
    grid = dict(tp=g["tp"], pp=g["pp"], dp=dp, cp=g["cp"], ep=g["ep"], etp=_expert_tp(g["tp"], g["et"]), vpp=g["vpp"],
                micro_batch=g["mb"], m=m, recompute=g["rc"], sequence_parallel=g["sp"], sharding=g["sh"],
                num_gpus=num_gpus)
    total, outside = memory_grid.screen_bytes(model, proto, **grid)
    first = memory_grid.rank_memory_arrays(model, proto, **grid)
    last = memory_grid.rank_memory_arrays(model, proto, last=True, **grid)
    assert np.array_equal(total, np.maximum(first["total"], last["total"]))
    assert np.array_equal(outside, first["cuda_context"] + first["nccl_buffers"])


def _reference(key: np.ndarray, parts: dict[str, np.ndarray], values: dict[str, np.ndarray], k: int):
    """The leaders (flat indices) and the fastest plan per explained value of one whole block, the plain
    way: a stable argsort of the flat keys; per value, np.argmin over its row in flat order."""
    flat = key.ravel()
    order = np.argsort(flat, kind="stable")
    leaders = [int(i) for i in order[:k] if np.isfinite(flat[i])]
    fastest = {}
    for name, _ in EXPLAINED:
        axis = AXES.index(name)
        rows = np.moveaxis(key, axis, 0).reshape(key.shape[axis], -1)
        for v, j in enumerate(np.argmin(rows, axis=1)):
            if np.isfinite(rows[v, j]):
                rest = np.unravel_index(int(j), key.shape[:axis] + key.shape[axis + 1:])
                where = rest[:axis] + (v,) + rest[axis:]
                fastest[(name, int(values[name][v]))] = (float(rows[v, j]), {p: float(a[where]) for p, a in parts.items()})
    return leaders, fastest


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 3), min_size=len(AXES), max_size=len(AXES)),
       seed=st.integers(0, 2**32 - 1), k=st.integers(1, 12))
def test_ranking_from_fitting_plans_is_the_whole_block_argsort(sizes, seed, k):
    # A block's keys drawn from a few values (ties everywhere) and inf (dropped plans), laid out in
    # COMPUTE_ORDER memory as _score_block leaves them: the leaders and the fastest plan per value
    # read from its fitting plans are the stable argsort's first k and each row's first argmin
    rng = np.random.default_rng(seed)
    shape = tuple(sizes)
    memory = rng.choice([1.0, 2.0, 3.0, np.inf], size=tuple(shape[AXES.index(a)] for a in COMPUTE_ORDER))
    key = np.transpose(memory, tuple(COMPUTE_ORDER.index(a) for a in AXES))  # the AXES-order view
    parts = {"compute_s": rng.random(shape), "dp_comm_s": rng.random(shape)}
    values = {a: np.arange(n) * 2 + 1 for a, n in zip(AXES, shape)}
    block = _Block(_grid(values), shape, np.ones(shape), np.ones(shape), np.asarray(8.0), parts, key, {}, 0, 0)
    fit = _Fitting(block, 0)
    leaders, fastest = _Leaders(k), _FastestPerValue()
    leaders.add(block, fit)
    fastest.add(block, fit)
    want_leaders, want_fastest = _reference(key, parts, values, k)
    assert [int(row["index"]) for row in leaders.rows()] == want_leaders
    assert {key: (step, parts) for key, (step, parts, _) in fastest.best.items()} == want_fastest
    assert all(batch == 8.0 for _, _, batch in fastest.best.values())


def test_per_distinct_by_dict_equals_by_sort(monkeypatch):
    # _per_distinct's two ways of finding the distinct combinations give the same arrays
    calls = []

    def fn(a, b):
        calls.append((a, b))
        return (a * 10 + b, a - b)

    arrays = (np.array([[1.0], [2.0], [2.0]]), np.array([[0.0, 1.0, 0.0, 1.0]]))
    by_dict = memory_grid._per_distinct(fn, *arrays)
    monkeypatch.setattr(memory_grid, "_DISTINCT_BY_DICT", 0)
    by_sort = memory_grid._per_distinct(fn, *arrays)
    assert len(calls) == 2 * 4  # 2 distinct first values x 2 distinct second values, each way
    for x, y in zip(by_dict, by_sort):
        assert x.shape == (3, 4) and np.array_equal(x, y)
    assert by_dict[0][2].tolist() == [20.0, 21.0, 20.0, 21.0]  # a = 2: 2 x 10 + b
