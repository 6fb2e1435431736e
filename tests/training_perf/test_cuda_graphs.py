"""Megatron training CUDA graphs (`plan.cuda_graph_scope`, `workloads/training/step/cuda_graphs.py`):
what a scope removes from the MoE layer's fixed time, the plan's own rules, the Megatron-Bridge recipe
table and its validation rule, and `train --cuda-graph-scope`. Expected values are derived by hand
in the comments."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.interfaces.validation.megatron_bridge_row import graph_scope_from_row
from gpuplan.models import load_model
from gpuplan.specs import TrainPlan
from gpuplan.specs.execution import CudaGraphScope, cuda_graph_scope_of
from gpuplan.workloads.training.megatron_bridge_graphs import model_family, recipe_graph_scope
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.cuda_graphs import moe_fixed_time_captured

PARTIAL = "attn,moe_router,moe_preprocess"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _mixtral_ep_seconds(catalog, scope) -> float:
    """ep_comm_s of Mixtral 8x7B (32 MoE layers, 8 experts) on one H100, ep 1, one micro-batch, Megatron
    BF16: no all-to-all, so the EP term is the fixed time alone, o = 1 ms per layer, o_e = 0.5 ms per
    local expert launch (TE GroupedLinear runs one GEMM per expert in BF16)."""
    system = catalog.system("dgx-h100")
    with knobs.overridden({"training.moe_layer_overhead_s": 0.001, "training.moe_expert_launch_s": 0.0005}):
        p = TrainPlan(tp=1, dp=1, ep=1, micro_batch=1, global_batch=1, seq_len=4096, cuda_graph_scope=scope)
        return estimate_step_time(load_model("mixtral-8x7b"), system, p, catalog.gpu(system.gpu)).breakdown_s["ep_comm_s"]


@pytest.mark.parametrize(("scope", "expected_s"), [
    # no graphs: 32 x (o + 8 o_e) = 32 x (1 + 8 x 0.5) ms = 0.160 s
    ("", 0.160),
    # per-layer scopes: router / preprocess launches captured, the tokens_per_expert sync and the expert
    # launches stay outside the graph (token_dispatcher.py cuda_dtoh_point; moe_layer.py early return)
    (PARTIAL, 0.160),
    ("attn", 0.160),
    # one graph for the whole forward-backward: no launch or sync left, 0
    ("full_iteration", 0.0),
])
def test_only_a_full_iteration_graph_removes_the_fixed_moe_time(catalog, scope, expected_s):
    assert _mixtral_ep_seconds(catalog, scope) == pytest.approx(expected_s, abs=1e-12)


def test_full_iteration_on_the_qwen3_235b_gb200_layout(catalog):
    # Qwen3-235B-A22B (94 MoE layers) on 256 GB200, tp 1 pp 8 vpp 3 ep 32, GBS 8192, MBS 1, MXFP8 (the
    # 26.08 Megatron-Bridge layout). Busiest stage: ceil(94 / 24) = 4 layers per virtual stage x 3 = 12
    # layers; micro-batches 8192 / 32 = 256; MXFP8 on Blackwell runs grouped expert kernels, so only o
    # is charged: removed time = 12 x 256 x 1.5 ms = 4.608 s of ep_comm_s.
    system = catalog.system("gb200-nvl72")
    model = load_model("qwen3-235b-a22b")
    out = {}
    with knobs.overridden({"training.moe_layer_overhead_s": 0.0015}):
        for scope in ("", "full_iteration"):
            plan = TrainPlan(tp=1, pp=8, dp=32, ep=32, vpp=3, micro_batch=1, global_batch=8192, seq_len=4096,
                             precision="mxfp8", sharding="zero1", cuda_graph_scope=scope)
            out[scope] = estimate_step_time(model, system, plan, catalog.gpu(system.gpu)).breakdown_s["ep_comm_s"]
    assert out[""] - out["full_iteration"] == pytest.approx(12 * 256 * 0.0015, rel=1e-9)


@pytest.mark.parametrize(("scope", "message"), [
    # Megatron-core transformer_config.py __post_init__
    ("moe_preprocess", "moe_preprocess needs moe_router"),
    ("moe,moe_router", "moe and moe_router exclude each other"),
    ("full_iteration,attn", "full_iteration captures the whole step"),
    ("attn,bogus", "unknown scope 'bogus'"),
])
def test_the_plan_refuses_what_megatron_refuses(scope, message):
    with pytest.raises(ValueError, match=message):
        TrainPlan(cuda_graph_scope=scope)


def test_plan_dump_round_trips_and_omits_no_graphs():
    plan = TrainPlan(cuda_graph_scope=PARTIAL)
    assert plan.model_dump()["cuda_graph_scope"] == ["attn", "moe_preprocess", "moe_router"]
    assert TrainPlan.model_validate(plan.model_dump()) == plan
    assert "cuda_graph_scope" not in TrainPlan().model_dump()  # older plan dumps (and hashes) unchanged
    assert TrainPlan(cuda_graph_scope="none").cuda_graph_scope == frozenset()


_VALID_SCOPES = [s for s in (frozenset(c) for c in (
    (), ("attn",), ("mlp",), ("moe",), ("moe_router",), ("moe_router", "moe_preprocess"),
    ("attn", "moe_router", "moe_preprocess"), ("attn", "moe"), ("full_iteration",)))]


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(_VALID_SCOPES), st.sampled_from([1, 2, 4]))
def test_graphs_never_add_time(scope, ep):
    # a graph only removes host work: the step with any scope is at most the step without
    cat = load_catalog()
    system = cat.system("dgx-h100")
    model = load_model("mixtral-8x7b")
    base = TrainPlan(tp=1, dp=8, ep=ep, micro_batch=1, global_batch=16, seq_len=4096, sharding="zero1")
    with_graphs = base.model_copy(update={"cuda_graph_scope": cuda_graph_scope_of(scope)})
    t0 = estimate_step_time(model, system, base, cat.gpu(system.gpu)).step_time_s
    t1 = estimate_step_time(model, system, with_graphs, cat.gpu(system.gpu)).step_time_s
    assert t1 <= t0 + 1e-12
    assert (t1 < t0) == moe_fixed_time_captured(scope)


def test_recipe_table_entries():
    # Megatron-Bridge@4ab94dfad qwen/gb200: _enable_hybridep_full_iteration_mxfp8
    assert recipe_graph_scope("26.08", "Qwen3-235B-A22B", "gb200-nvl72", "MXFP8").scope == {CudaGraphScope.FULL_ITERATION}
    # v0.4.2 DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2: transformer_engine attn / moe_router / moe_preprocess
    assert recipe_graph_scope("26.04.01", "DeepSeek-V3 671B", "dgx-b200", "mxfp8").scope == cuda_graph_scope_of(PARTIAL)
    # v0.4.2 GPT_OSS_120B_PRETRAIN_CONFIG_GB200_BF16_V2: none
    assert recipe_graph_scope("26.04.01", "gpt-oss-120b", "gb200-nvl72", "bf16").scope == frozenset()
    assert recipe_graph_scope("25.11", "DeepSeek-V3 671B", "gb200-nvl72", "mxfp8") is None  # not read: unknown
    assert model_family("Qwen3_30B_a3B") == "qwen3-30b-a3b" and model_family("LLAMA3_70B") is None


def test_validation_rule_reads_the_cited_release():
    row = {"source": "NVIDIA-NeMo/Megatron-Bridge@067f987df03b:docs/performance-summary.md (26.08 NeMo container, "
                     "Pre-Training Performance, Model: Qwen3_235B_a22B)",
           "model": "Qwen3-235B-A22B", "system": "gb200-nvl72", "precision": "mxfp8"}
    scope, note = graph_scope_from_row(row)
    assert scope == {CudaGraphScope.FULL_ITERATION} and note.startswith("cuda_graph_scope=full_iteration")
    assert graph_scope_from_row({**row, "source": row["source"].replace("26.08", "26.04.01")}) == (frozenset(), None)
    assert graph_scope_from_row({**row, "source": "some other benchmark (26.08 NeMo container)"}) == (frozenset(), None)


def test_train_option_and_json(runner):
    one = ["train", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8",
           "--ep", "8", "--micro-batch", "1", "--seq-len", "4096", "--global-batch", "64", "--sharding", "zero1",
           "--recompute", "none", "--precision", "mxfp8", "--json"]
    plain = json.loads(runner.invoke(app, one).stdout)
    assert plain["best_plan"]["cuda_graph_scope"] == []
    res = runner.invoke(app, [*one, "--cuda-graph-scope", "full_iteration"])
    assert res.exit_code == 0, res.output
    graphed = json.loads(res.stdout)
    assert graphed["best_plan"]["cuda_graph_scope"] == ["full_iteration"]
    # 48 MoE layers x 8 micro-batches x o (MXFP8 on Blackwell: grouped expert kernels, no o_e) removed
    removed = 48 * 8 * knobs.value("training.moe_layer_overhead_s")
    assert plain["step_time_s"] - graphed["step_time_s"] == pytest.approx(removed, rel=1e-6)


@pytest.mark.parametrize(("args", "message"), [
    (["--cuda-graph-scope", "moe_preprocess"], "--cuda-graph-scope: moe_preprocess needs moe_router"),
    (["--cuda-graph-scope", "warp"], "--cuda-graph-scope: unknown scope 'warp'"),
    (["--framework", "fsdp", "--cuda-graph-scope", "attn"], "--cuda-graph-scope: a Megatron-LM option"),
])
def test_bad_scope_is_one_line_exit_2(runner, args, message):
    res = runner.invoke(app, ["train", "gpt3-125m", "--gpus", "8", *args])
    assert res.exit_code == 2
    assert message in res.output and "Traceback" not in res.output


def test_defaults_assumed_say_no_graphs_unless_given(runner):
    from gpuplan.interfaces.api.framework_choice import MEGATRON_NO_GRAPHS

    one = ["train", "qwen3-30b-a3b", "--system", "gb200-nvl72", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8",
           "--ep", "8", "--micro-batch", "1", "--seq-len", "4096", "--global-batch", "64", "--sharding", "zero1",
           "--recompute", "none", "--precision", "mxfp8", "--json"]
    assert MEGATRON_NO_GRAPHS in json.loads(runner.invoke(app, one).stdout)["framework_defaults_assumed"]
    given = json.loads(runner.invoke(app, [*one, "--cuda-graph-scope", "full_iteration"]).stdout)
    assert MEGATRON_NO_GRAPHS not in given["framework_defaults_assumed"]
