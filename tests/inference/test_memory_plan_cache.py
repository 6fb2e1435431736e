"""The remembered knob-free parts of a serving replica (layout_cache: weights.stage_weights,
memory.kv_layout, operators.dense_linear_ops):
equal to a fresh computation, keyed on every field they read, reading no knob, and a memory plan
built from them still follows the knobs it reads (memory fraction, runtime reserve)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.workloads.inference.cost import memory, operators, weights
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import KvBudgetRule, compute_kv_layout, kv_layout, memory_plan
from gpuplan.workloads.inference.cost.operators import compute_dense_linear_ops, dense_linear_ops
from gpuplan.workloads.inference.cost.weights import compute_stage_weights, stage_weights

CAT = load_catalog()
# dense GQA, MLA + MoE, MoE with sinks and biases, sliding-window, half-windowed hybrid pattern, tied GPT
MODELS = ("llama-3-8b", "deepseek-v3", "gpt-oss-120b", "mistral-7b", "gemma-2-9b", "gpt3-125m")
SYSTEMS = (("h100-sxm5-80gb", "dgx-h100"), ("h200-sxm-141gb", "dgx-h200"))


def _clear_caches():
    weights._STAGE_WEIGHTS.clear()
    memory._KV_LAYOUT.clear()
    operators._DENSE_LINEAR_OPS.clear()


@st.composite
def deployments(draw):
    model = load_model(draw(st.sampled_from(MODELS)))
    tp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if model.heads % d == 0]))
    attention_dp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if tp % d == 0]))
    pp = draw(st.sampled_from((1, 2, 3, 4)))
    ep = 1
    if model.moe is not None:
        ep = draw(st.sampled_from([e for e in (1, 2, 4, 8) if e <= tp * pp and model.moe.num_experts % e == 0]))
    gpu, system = draw(st.sampled_from(SYSTEMS))
    return Deployment(model, CAT.gpu(gpu), CAT.system(system), tp=tp, pp=pp, ep=ep, attention_dp=attention_dp,
                      weight_dtype=draw(st.sampled_from(("bf16", "fp8", "mxfp4", "fp16", "int4"))),
                      kv_dtype=draw(st.sampled_from(("bf16", "fp8"))),
                      activation_dtype=draw(st.sampled_from((None, "bf16", "fp16"))),
                      grouped_decode_attention=draw(st.booleans()), python_step_loop=draw(st.booleans()))


def _variant(dep: Deployment) -> Deployment:
    """`dep` with every field outside both cache keys changed (GPU and system, engine options)."""
    gpu, system = next(s for s in SYSTEMS if s[0] != dep.gpu.id)
    return dataclasses.replace(dep, gpu=CAT.gpu(gpu), system=CAT.system(system),
                               grouped_decode_attention=not dep.grouped_decode_attention,
                               python_step_loop=not dep.python_step_loop, attention_dp_balance=not dep.attention_dp_balance)


@settings(max_examples=60, deadline=None)
@given(deployments())
def test_cached_equals_fresh_and_key_covers_every_read_field(dep):
    # the cache is filled by a deployment that differs only outside the keys: the answer for `dep`
    # must still be its own fresh computation (a field missing from a key would show here)
    _clear_caches()
    other = _variant(dep)
    assert stage_weights(other) == compute_stage_weights(other)
    assert kv_layout(other) == compute_kv_layout(other)
    assert dense_linear_ops(other) == compute_dense_linear_ops(other)
    assert stage_weights(dep) == compute_stage_weights(dep)
    assert kv_layout(dep) == compute_kv_layout(dep)
    assert dense_linear_ops(dep) == compute_dense_linear_ops(dep)
    # a hit returns the remembered object itself
    assert stage_weights(dep) is stage_weights(dep)


@settings(max_examples=30, deadline=None)
@given(deployments())
def test_cached_parts_read_no_knob(dep):
    with knobs.recording_reads(prefix_marks=True) as reads:
        compute_stage_weights(dep)
        compute_kv_layout(dep)
        compute_dense_linear_ops(dep)
    assert reads == set()


@pytest.mark.parametrize("rule", list(KvBudgetRule))
def test_memory_plan_follows_knob_changes_after_the_cache_is_warm(rule):
    dep = Deployment(load_model("llama-3-8b"), CAT.gpu("h100-sxm5-80gb"), CAT.system("dgx-h100"), tp=2)
    base = memory_plan(dep, rule=rule)  # warms both caches
    changes = {"serving.memory.runtime_reserve_bytes": 3 * 2**30, "memory.usable_fraction": 0.8,
               "serving.memory.trtllm_free_gpu_memory_fraction": 0.7}
    with knobs.overridden(changes):
        warm = memory_plan(dep, rule=rule)
        _clear_caches()
        fresh = memory_plan(dep, rule=rule)
    assert warm == fresh
    # the knobs moved the plan: reserve = 3 GiB (the override) + the same NCCL buffers as before
    # (base reserve = 1 GiB default + NCCL), so 2 GiB more
    assert warm.runtime_reserve_bytes == base.runtime_reserve_bytes + 2 * 2**30
    assert warm.kv_budget_bytes < base.kv_budget_bytes
    # and the knob reads are still recorded on a cache hit (validation's row memo relies on them)
    with knobs.recording_reads() as reads:
        memory_plan(dep, rule=rule)
    fraction_knob = "memory.usable_fraction" if rule == KvBudgetRule.TOTAL else "serving.memory.trtllm_free_gpu_memory_fraction"
    assert {"serving.memory.runtime_reserve_bytes", fraction_knob} <= reads


def test_cache_is_bounded():
    from gpuplan.workloads.inference.cost.layout_cache import LayoutCache

    calls = []
    cache = LayoutCache(lambda d: (d,), lambda d: calls.append(d) or d * 2, max_entries=2)
    assert [cache(1), cache(2), cache(1)] == [2, 4, 2] and calls == [1, 2]  # 1 remembered
    cache(3)  # a third key drops the first remembered (1)
    assert len(cache) == 2
    cache(1)
    assert calls == [1, 2, 3, 1]
