"""Megatron's unfused attention core without attention dropout (workloads.training.step.unfused_attention).

Per score element in bf16 with a 1-byte mask, Megatron-core DotProductAttention moves: forward QK^T
write 2 + softmax read 2 / write 2 + dropout read 2 / mask 1 / write 2 + AV read 2 = 13 B; backward
about twice (26 B). torch.nn.Dropout(p=0) returns its input (aten Dropout.cpp `_dropout_impl`), so
without attention dropout the 5 B of the dropout kernel go each way: 8 B forward, 21 B backward."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import Precision
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step.compute import attention_core_seconds
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext
from gpuplan.workloads.training.step.unfused_attention import megatron_unfused_score_bytes


def test_score_bytes_with_and_without_dropout():
    # with dropout: 2 + (2 + 2) + (2 + 1 + 2) + 2 = 13 forward, 26 backward
    assert megatron_unfused_score_bytes(0.1) == (13.0, 26.0)
    # p = 0: no dropout kernel, 13 - 5 = 8 forward, 26 - 5 = 21 backward
    assert megatron_unfused_score_bytes(0.0) == (8.0, 21.0)


@given(st.floats(min_value=1e-6, max_value=0.99, allow_nan=False))
def test_any_positive_dropout_pays_the_dropout_kernel(p):
    assert megatron_unfused_score_bytes(p) == (13.0, 26.0)


def _core(model, seq=2048, mb=2):
    c = load_catalog()
    system = c.system("dgx-h100")
    ctx = StepContext.build(model, system, c.gpu(system.gpu), seq, precision=Precision.BF16,
                            framework=Framework.MEGATRON, attention_kernel=AttentionKernel.UNFUSED)
    g = PlanAxes.build(ctx, 1, 1, 1, 1, 1, 1, mb, 1, RecomputeCode.NONE, False, ShardingCode.NONE)
    return ctx, attention_core_seconds(ctx, g)


def test_attention_core_drops_exactly_the_dropout_bytes():
    # Llama-2-7B (32 heads), mb 2, s 2048 on one H100: scores = 2 x 32 x 2048^2 = 268,435,456 elements;
    # removing the dropout takes 5 B per score off the forward and 5 B off the backward, nothing else
    base = load_model("llama-2-7b")
    ctx, (fwd_p, bwd_p) = _core(base.model_copy(update={"attention_dropout": 0.1}))
    _, (fwd_0, bwd_0) = _core(base.model_copy(update={"attention_dropout": 0.0}))
    scores = 2 * 32 * 2048**2
    assert float(fwd_p - fwd_0) == pytest.approx(scores * 5.0 / ctx.hbm_bytes_s, rel=1e-9)
    assert float(bwd_p - bwd_0) == pytest.approx(scores * 5.0 / ctx.hbm_bytes_s, rel=1e-9)
