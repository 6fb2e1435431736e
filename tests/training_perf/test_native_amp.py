"""PyTorch-native fp16 AMP (autocast + GradScaler) in eager frameworks (workloads.training.step.native_amp).
Expected values derived by hand from Llama-2-7B's shapes (hidden 4096, ffn 11008, SwiGLU: per layer
q, k, v, o 4 x 4096^2 = 67,108,864 and gate, up, down 3 x 4096 x 11008 = 135,266,304 weight elements,
202,375,168 in all; five projections read the norm output: q, k, v, gate, up)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import Precision
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.specs.finetune import FineTuneMethod, FineTuning
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step import native_amp
from gpuplan.workloads.training.step import unfused_attention
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

LAYER_WEIGHTS = 4 * 4096**2 + 3 * 4096 * 11008  # 202,375,168


@pytest.fixture(scope="module")
def a100():
    c = load_catalog()
    system = c.system("a100-sxm4-80gb")
    return system, c.gpu(system.gpu)


def _ctx(a100, precision=Precision.FP16, framework=Framework.OTHER, fine_tuning=None):
    system, gpu = a100
    return StepContext.build(load_model("llama-2-7b"), system, gpu, 2048, precision=precision, framework=framework,
                             attention_kernel=AttentionKernel.UNFUSED, fine_tuning=fine_tuning)


def _axes(ctx, tp=1):
    return PlanAxes.build(ctx, tp, 1, 1, 1, 1, 1, 1, 1, RecomputeCode.NONE, False, ShardingCode.NONE)


def test_which_stacks_run_native_amp(a100):
    assert native_amp.native_amp(_ctx(a100))  # HF Trainer fp16=True: autocast + GradScaler over fp32 params
    assert native_amp.native_amp(_ctx(a100, framework=Framework.FSDP))  # Composer amp_fp16
    assert not native_amp.native_amp(_ctx(a100, precision=Precision.BF16))  # no GradScaler rule for bf16
    for fw in (Framework.MEGATRON, Framework.DEEPSPEED, Framework.TORCHTITAN, Framework.MAXTEXT):
        assert not native_amp.native_amp(_ctx(a100, framework=fw))  # own fp16 path (fp16 params + fp32 main)


def test_weight_casts_by_hand(a100):
    ctx = _ctx(a100)
    fwd, bwd = native_amp.weight_cast_seconds(ctx, _axes(ctx))
    # forward: read fp32 4 + write fp16 2 = 6 B per weight element; backward: the gradient cast
    # (read 2, write 4) + accumulation into the fp32 .grad (read 4 + 4, write 4) = 18 B
    assert float(fwd) == pytest.approx(6 * LAYER_WEIGHTS / ctx.hbm_bytes_s, rel=1e-12)
    assert float(bwd) == pytest.approx(18 * LAYER_WEIGHTS / ctx.hbm_bytes_s, rel=1e-12)
    # tp 2: each rank casts half of every projection
    fwd2, _ = native_amp.weight_cast_seconds(ctx, _axes(ctx, tp=2))
    assert float(fwd2) == pytest.approx(float(fwd) / 2, rel=1e-12)
    # a frozen base (LoRA) has no weight gradient: not counted here; nor outside native AMP
    lora = _ctx(a100, fine_tuning=FineTuning(method=FineTuneMethod.LORA))
    assert native_amp.weight_cast_seconds(lora, _axes(lora)) == (0.0, 0.0)
    mega = _ctx(a100, framework=Framework.MEGATRON)
    assert native_amp.weight_cast_seconds(mega, _axes(mega)) == (0.0, 0.0)


def test_fp32_residual_stream_and_input_casts(a100):
    ctx = _ctx(a100)
    # norm / residual bytes at fp32 (x 2) + five projections casting the fp32 norm output (6 B x 4096 each)
    assert native_amp.elementwise_bytes_per_token(ctx, _axes(ctx), 100.0) == pytest.approx(200.0 + 5 * 6 * 4096)
    bf16 = _ctx(a100, precision=Precision.BF16)
    assert native_amp.elementwise_bytes_per_token(bf16, _axes(bf16), 100.0) == 100.0


def test_unfused_attention_chain_and_grad_scaler(a100):
    ctx = _ctx(a100)
    # forward 2 + 4 + 6 + 8 + 9 + 6 + 2 = 37 B per score; backward 2 + 2 + 6 + 9 + 12 + 6 + 4 + 4 = 45
    megatron_path = unfused_attention.megatron_unfused_score_bytes(0.1, 2048)
    assert native_amp.unfused_score_bytes(ctx, megatron_path) == (37.0, 45.0)
    mega = _ctx(a100, framework=Framework.MEGATRON)
    assert native_amp.unfused_score_bytes(mega, megatron_path) == megatron_path
    # GradScaler unscale: read + write 4 B per fp32 gradient
    assert native_amp.grad_scaler_seconds(ctx, 1e9) == pytest.approx(8e9 / ctx.hbm_bytes_s, rel=1e-12)
    assert native_amp.grad_scaler_seconds(mega, 1e9) == 0.0


@settings(max_examples=20, deadline=None)
@given(mb=st.integers(1, 8), tp=st.sampled_from([1, 2, 4]))
def test_native_amp_only_adds_time(mb, tp):
    # the same fp16 plan under HF-style native AMP is never faster than with native AMP's terms off
    from gpuplan.workloads.training.step.assembly import step_time_arrays

    c = load_catalog()
    system = c.system("a100-sxm4-80gb")
    ctx = StepContext.build(load_model("llama-2-7b"), system, c.gpu(system.gpu), 2048, precision=Precision.FP16,
                            framework=Framework.OTHER, attention_kernel=AttentionKernel.UNFUSED)
    args = (ctx, tp, 1, 1, 1, 1, 1, mb, 4, RecomputeCode.FULL, False, ShardingCode.NONE)
    with_amp = step_time_arrays(*args).parts()
    import unittest.mock as mock
    with mock.patch.object(native_amp, "NOT_NATIVE_AMP", tuple(Framework)):
        without = step_time_arrays(*args).parts()
    total = lambda parts: float(np.sum([np.asarray(v) for v in parts.values()]))  # noqa: E731
    assert total(with_amp) > total(without)
