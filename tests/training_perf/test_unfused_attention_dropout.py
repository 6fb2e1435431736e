"""Megatron's unfused attention core without attention dropout (workloads.training.step.unfused_attention).

Per score element in bf16 with a 1-byte mask at s = 2048 (causal share c = 2049 / 4096), Megatron's chain
moves: forward QK^T write 2 + causal softmax load 2c / store 2 + dropout read 2 / mask 1 / write 2 + AV read
2 = 11 + 2c = 12.0005 B; backward dP' write 2 + P' read 2 + dropout backward 5 + softmax backward 4c + 2 +
dS read twice 4 = 15 + 4c = 17.001 B. torch.nn.Dropout(p=0) returns its input (aten Dropout.cpp
`_dropout_impl`), so without attention dropout the 5 B of the dropout kernel go each way."""

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


C_2048 = 2049 / 4096  # causal share of a 2048 x 2048 score matrix: (s + 1) / 2s


def test_score_bytes_with_and_without_dropout():
    # with dropout: 2 + (2c + 2) + (2 + 1 + 2) + 2 = 11 + 2c forward, (2 + 2) + 5 + (4c + 2) + 4 = 15 + 4c backward
    assert megatron_unfused_score_bytes(0.1, 2048) == pytest.approx((11.0 + 2 * C_2048, 15.0 + 4 * C_2048), rel=1e-12)
    # p = 0: no dropout kernel, 5 B less each way: 6 + 2c forward, 10 + 4c backward
    assert megatron_unfused_score_bytes(0.0, 2048) == pytest.approx((6.0 + 2 * C_2048, 10.0 + 4 * C_2048), rel=1e-12)


@given(st.floats(min_value=1e-6, max_value=0.99, allow_nan=False))
def test_any_positive_dropout_pays_the_dropout_kernel(p):
    fwd, bwd = megatron_unfused_score_bytes(p, 2048)
    no_fwd, no_bwd = megatron_unfused_score_bytes(0.0, 2048)
    assert (fwd - no_fwd, bwd - no_bwd) == pytest.approx((5.0, 5.0), rel=1e-12)


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
