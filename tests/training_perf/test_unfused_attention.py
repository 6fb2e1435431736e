"""Megatron's unfused attention core: HBM bytes per score element (step.unfused_attention)."""

import pytest
from hypothesis import given, settings, strategies as st

from gpuplan.workloads.training.step import unfused_attention


def test_causal_read_fraction_by_hand():
    # row i of an s x s causal softmax loads i + 1 elements (scaled_upper_triang_masked_softmax.h
    # local_seq = blockIdx.x + 1): s = 4 loads 1 + 2 + 3 + 4 = 10 of 16 = 0.625 = (4 + 1) / 8
    assert unfused_attention.causal_read_fraction(4) == pytest.approx(10 / 16)
    assert unfused_attention.causal_read_fraction(1) == 1.0


def test_score_bytes_at_2048_by_hand():  # with attention dropout
    # c = 2049 / 4096 = 0.500244; forward: baddbmm write 2, softmax load 2c + store 2, dropout 2 + 2 + mask 1,
    # AV bmm read 2 = 11 + 1.000488 = 12.000488; backward: dP write 2 + P read 2, dropout back 2 + 1 + 2,
    # softmax back 4c + 2, dS read twice 4 = 15 + 2.000977 = 17.000977
    fwd, bwd = unfused_attention.megatron_unfused_score_bytes(0.1, 2048)
    assert fwd == pytest.approx(11.0 + 2.0 * 2049 / 4096, rel=1e-12)
    assert bwd == pytest.approx(15.0 + 4.0 * 2049 / 4096, rel=1e-12)
    assert (round(fwd, 3), round(bwd, 3)) == (12.0, 17.001)


@settings(max_examples=50, deadline=None)
@given(s=st.integers(1, 1 << 20))
def test_score_bytes_bounds(s):
    # with dropout, between the half-triangle limit (s -> inf: 12, 17) and a full-row load (s = 1: 13, 19)
    fwd, bwd = unfused_attention.megatron_unfused_score_bytes(0.1, s)
    assert 12.0 - 1e-9 <= fwd <= 13.0 + 1e-9
    assert 17.0 - 1e-9 <= bwd <= 19.0 + 1e-9
    assert bwd > fwd
    # without dropout 5 B less each way: 7 .. 8 forward, 12 .. 14 backward
    fwd0, bwd0 = unfused_attention.megatron_unfused_score_bytes(0.0, s)
    assert (fwd - fwd0, bwd - bwd0) == pytest.approx((5.0, 5.0), rel=1e-12)


def test_megatron_unfused_core_moves_the_counted_bytes():
    # Llama-2-7B (32 heads, head_dim 128, attention dropout set to 0.1) at s = 2048, mb 1, tp 2 under Megatron fp16: the core's memory
    # time is 16 heads x 2048^2 scores x (12.000488 forward, 17.000977 backward) B over the achievable HBM
    # rate; taking away the two batched GEMMs (forward 2 bmm, backward 4) leaves exactly that
    from gpuplan.catalog import load_catalog
    from gpuplan.models import load_model
    from gpuplan.primitives.op_cost import gemm_time_array
    from gpuplan.specs import Precision
    from gpuplan.specs.execution import AttentionKernel, Framework
    from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
    from gpuplan.workloads.training.step.compute import attention_core_seconds
    from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

    c = load_catalog()
    system = c.system("a100-sxm4-80gb")
    model = load_model("llama-2-7b").model_copy(update={"attention_dropout": 0.1})
    ctx = StepContext.build(model, system, c.gpu(system.gpu), 2048, precision=Precision.FP16,
                            framework=Framework.MEGATRON, attention_kernel=AttentionKernel.UNFUSED)
    g = PlanAxes.build(ctx, 2, 1, 1, 1, 1, 1, 1, 1, RecomputeCode.NONE, False, ShardingCode.NONE)
    fwd, bwd = attention_core_seconds(ctx, g)
    bmm = 2.0 * float(gemm_time_array(ctx.gpu, 2048, 2048, 128, "fp16", batch=16))
    scores = 16 * 2048 * 2048
    assert float(fwd) - bmm == pytest.approx(scores * (11.0 + 2.0 * 2049 / 4096) / ctx.hbm_bytes_s, rel=1e-9)
    assert float(bwd) - 2.0 * bmm == pytest.approx(scores * (15.0 + 4.0 * 2049 / 4096) / ctx.hbm_bytes_s, rel=1e-9)
