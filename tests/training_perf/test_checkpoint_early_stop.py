"""Full activation checkpointing under PyTorch's non-reentrant checkpoint with early stop
(`workloads.training.step.checkpoint_early_stop`, `Framework.checkpoint_stops_early`).

Shapes: MPT-7B as llm-foundry's scripts/train/yamls/pretrain/mpt-7b.yaml (d_model 4096, 32 heads, 32 layers,
expansion_ratio 4 -> ffn 16384, vocab 50368), GELU MLP, no dropout (MPTConfig defaults resid_pdrop =
attn_pdrop = emb_pdrop = 0.0). Per layer the forward weight GEMMs are QKV 3 h^2, out h^2, up 4 h^2, down
4 h^2 = 12 h^2 per token; the recompute stops before the down projection: 4 h^2 of 12 h^2 = 1/3 of the
forward GEMM FLOPs is not re-run.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.interfaces.validation.training import llm_foundry_dropout_free
from gpuplan.models import load_model, model_from_arch_row
from gpuplan.specs import Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.specs.finetune import FineTuneMethod, FineTuning
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step import checkpoint_early_stop
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.compute import gemm_seconds, layer_compute
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

H, F, LAYERS = 4096, 16384, 32
MPT_7B_ROW = {"model": "MPT-7b", "layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "32", "ffn": "16384",
              "vocab": "50368", "seq_len": "1024", "ffn_kind": "gelu"}


@pytest.fixture(scope="module")
def a100():
    c = load_catalog()
    system = c.system("hgx-a100-80gb-roce")
    return system, c.gpu(system.gpu)


def _mpt(dropout_free=True):
    model = model_from_arch_row(MPT_7B_ROW)
    return llm_foundry_dropout_free(model, Framework.FSDP) if dropout_free else model


def _ctx(a100, framework=Framework.FSDP, model=None, fine_tuning=None, seq=1024):
    system, gpu = a100
    return StepContext.build(model or _mpt(), system, gpu, seq, precision=Precision.BF16, framework=framework,
                             attention_kernel=AttentionKernel.FLASH_V1, fine_tuning=fine_tuning)


def _layer(ctx, mb, rc=RecomputeCode.FULL):
    g = PlanAxes.build(ctx, 1, 1, 8, 1, 1, 1, mb, 2, rc, False, ShardingCode.ZERO3)
    return g, layer_compute(ctx, g)


def test_llm_foundry_stops_early_others_do_not():
    # Composer NO_REENTRANT checkpoint_wrapper + torch 2.1 early stop; torchtitan early_stop=False (PR #1580);
    # Megatron / DeepSpeed reentrant checkpoint functions; transformers use_reentrant=True by default
    assert Framework.FSDP.checkpoint_stops_early
    for other in (Framework.MEGATRON, Framework.DEEPSPEED, Framework.TORCHTITAN, Framework.TRANSFORMERS,
                  Framework.MAXTEXT, Framework.OTHER):
        assert not other.checkpoint_stops_early


def test_recompute_skips_exactly_the_down_projection(a100):
    # MPT-7B, micro-batch 64 x 1024 tokens (llm-foundry's A100 row: 7b, seq 1024, micro-batch 64): the
    # full recompute is the layer forward less one GEMM of t x h x f = 65,536 x 4096 x 16384 (the down
    # projection: m = tokens, n = h outputs, k = f inputs)
    ctx = _ctx(a100)
    assert checkpoint_early_stop.stops_before_down_projection(ctx)
    _, lc = _layer(ctx, 64)
    down = gemm_seconds(ctx, 64 * 1024, H, F)
    assert float(lc.layer_fwd - lc.layer_recompute) == pytest.approx(float(down), rel=1e-12)
    assert float(lc.dense_down) == pytest.approx(float(down), rel=1e-12)


def test_skipped_share_of_forward_gemms_is_a_third(a100):
    # down 4 h^2 of QKV 3 h^2 + out h^2 + up 4 h^2 + down 4 h^2 = 12 h^2 per token: 1/3 of the forward
    # GEMM FLOPs; at 65,536 tokens every GEMM runs near the same rate, so about 1/3 of their time
    ctx = _ctx(a100)
    _, lc = _layer(ctx, 64)
    gemm_fwd = lc.qkv + lc.out + lc.dense_up + lc.dense_down
    assert float(lc.dense_down / gemm_fwd) == pytest.approx(1.0 / 3.0, rel=0.03)


def test_step_recompute_term(a100):
    # mpt-a100-90's plan: 8 GPUs FSDP, micro-batch 64 x 1024, global batch 1024 -> 2 micro-batches of 32
    # layers; recompute_s = 2 x 32 x (layer forward - down projection)
    system, gpu = a100
    plan = TrainPlan(tp=1, pp=1, dp=8, micro_batch=64, global_batch=1024, seq_len=1024, recompute=Recompute.FULL,
                     sharding=Sharding.FSDP, framework=Framework.FSDP, attention_kernel=AttentionKernel.FLASH_V1)
    st = estimate_step_time(_mpt(), system, plan, gpu)
    _, lc = _layer(_ctx(a100), 64)
    expected = 2 * LAYERS * (float(lc.layer_fwd) - float(gemm_seconds(_ctx(a100), 64 * 1024, H, F)))
    assert st.breakdown_s["recompute_s"] == pytest.approx(expected, rel=1e-9)
    assert sum(st.breakdown_s.values()) == pytest.approx(st.step_time_s)


def test_whole_forward_where_something_after_the_down_projection_saves(a100):
    # residual dropout saves its mask after fc2 (GPT-3 style, hidden_dropout 0.1): the whole forward re-runs
    ctx = _ctx(a100, model=_mpt(dropout_free=False))
    assert ctx.model.hidden_dropout > 0 and not checkpoint_early_stop.stops_before_down_projection(ctx)
    _, lc = _layer(ctx, 8)
    assert float(lc.layer_recompute) == pytest.approx(float(lc.layer_fwd))
    # Gemma 2: a norm after the FFN (4 norms per layer) reads the down projection's output
    gemma = load_model("gemma-2-9b")
    assert gemma.norms_per_layer == 4
    assert not checkpoint_early_stop.ends_with_down_projection(_ctx(a100, model=gemma).ops.dense_layer, 4)
    # an MoE layer combines the experts' outputs with saved router weights
    mixtral = _ctx(a100, model=load_model("mixtral-8x7b"))
    assert not checkpoint_early_stop.stops_before_down_projection(mixtral)
    # LoRA: the adapters' path runs after the frozen base matmul and saves last
    lora = _ctx(a100, fine_tuning=FineTuning(method=FineTuneMethod.LORA))
    assert not checkpoint_early_stop.stops_before_down_projection(lora)


def test_reentrant_stacks_recompute_the_whole_forward(a100):
    for framework in (Framework.MEGATRON, Framework.TORCHTITAN, Framework.TRANSFORMERS):
        ctx = _ctx(a100, framework=framework)
        _, lc = _layer(ctx, 8)
        assert float(lc.layer_recompute) == pytest.approx(float(lc.layer_fwd))


def test_dropout_cleared_only_on_llm_foundry_rows():
    # MPTConfig: resid_pdrop = emb_pdrop = attn_pdrop = 0.0; a Megatron gelu row keeps GPT's 0.1
    model = model_from_arch_row(MPT_7B_ROW)
    assert model.hidden_dropout == pytest.approx(0.1)
    cleared = llm_foundry_dropout_free(model, Framework.FSDP)
    assert cleared.hidden_dropout == 0.0 and cleared.attention_dropout == 0.0
    assert llm_foundry_dropout_free(model, Framework.MEGATRON) is model


@settings(max_examples=25, deadline=None)
@given(mb=st.integers(1, 64), seq=st.sampled_from([512, 1024, 2048, 4096]),
       framework=st.sampled_from([Framework.FSDP, Framework.MEGATRON, Framework.TORCHTITAN]))
def test_recompute_between_nothing_and_one_forward(a100, mb, seq, framework):
    ctx = _ctx(a100, framework=framework, seq=seq)
    _, lc = _layer(ctx, mb)
    assert 0.0 < float(lc.layer_recompute) <= float(lc.layer_fwd)
    skipped = float(lc.layer_fwd - lc.layer_recompute)
    assert skipped == pytest.approx(float(lc.dense_down) if framework is Framework.FSDP else 0.0, abs=1e-15)
    # no recompute without checkpointing
    _, none = _layer(ctx, mb, RecomputeCode.NONE)
    assert float(none.layer_recompute) == 0.0
