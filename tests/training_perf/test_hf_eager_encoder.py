"""transformers' eager BERT-style layers (LayerNorm, GELU, learned positions; `hf_eager.applies_layernorm_gelu`).
Expected values derived by hand from bert-large-uncased's shapes as the hf1gpu rows state them (24 layers,
hidden 1024, 16 heads of 64, ffn 4096, vocab 30522, dropout 0.1: the `gelu` arch-row defaults) and the
operators of transformers models/bert/modeling_bert.py (BertSelfAttention, BertSelfOutput, BertIntermediate,
BertOutput)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import model_from_arch_row
from gpuplan.specs import Precision
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuning, MasterWeights
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step import hf_eager, native_amp
from gpuplan.workloads.training.step.compute import elementwise_seconds
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

H, F = 1024, 4096
BERT_LARGE = {"id": "t-1", "layers": "24", "hidden": "1024", "heads": "16", "ffn": "4096", "vocab": "30522",
              "seq_len": "512", "ffn_kind": "gelu"}


@pytest.fixture(scope="module")
def v100():
    c = load_catalog()
    system = c.system("v100-sxm2-16gb")
    return system, c.gpu(system.gpu)


def _ctx(v100, framework=Framework.TRANSFORMERS, precision=Precision.FP16, fine_tuning=None, row=None):
    system, gpu = v100
    return StepContext.build(model_from_arch_row(row or BERT_LARGE), system, gpu, 512, precision=precision,
                             framework=framework, fine_tuning=fine_tuning)


def test_applies_to_layernorm_gelu_under_transformers_only(v100):
    assert hf_eager.applies_layernorm_gelu(_ctx(v100)) and not hf_eager.applies(_ctx(v100))
    assert not hf_eager.applies_layernorm_gelu(_ctx(v100, framework=Framework.OTHER))
    llama = {**BERT_LARGE, "ffn_kind": "swiglu", "ffn": "2816"}
    assert not hf_eager.applies_layernorm_gelu(_ctx(v100, row=llama))


def test_bytes_per_token_fp16_autocast_over_fp32(v100):
    # HF Trainer fp16=True over bert-large in fp32: residual stream fp32 (LayerNorm is on autocast's fp32 list)
    ctx = _ctx(v100)
    assert native_amp.autocast_over_fp32(ctx) and hf_eager.residual_bytes(ctx) == 4
    # q, k, v and BertIntermediate.dense read a LayerNorm output: four casts
    assert native_amp.norm_readers(ctx) == 4.0
    # per hidden element: 2 LayerNorms (4 + 4) = 16, 2 residual adds fp16 + fp32 -> fp32 (2 + 4 + 4) = 20,
    # 2 dropouts (2 + 2 + mask 1) = 10, 4 casts (4 + 2) = 24: 70; per q / k / v element the matmul's reshape
    # copy 2 + 2 = 4 (x 3 x 1024) and the context permute().contiguous() 2 + 2 (x 1024): 16 x 1024
    assert hf_eager.layernorm_gelu_bytes_per_token(ctx) == pytest.approx((70 + 16) * H)


def test_bytes_per_token_16bit_model(v100):
    # a model loaded in fp16 (master_weights none): r = 2, no casts
    ctx = _ctx(v100, fine_tuning=FineTuning(master_weights=MasterWeights.NONE))
    assert hf_eager.residual_bytes(ctx) == 2
    # 2 x (2 + 2) + 2 x (2 + 2 + 2) + 2 x 5 = 30 per hidden element, + 16 per hidden element of head copies
    assert hf_eager.layernorm_gelu_bytes_per_token(ctx) == pytest.approx((30 + 16) * H)


def test_elementwise_seconds_by_hand(v100):
    ctx = _ctx(v100)
    g = PlanAxes.build(ctx, 1, 1, 1, 1, 1, 1, 4, 1, RecomputeCode.NONE, False, ShardingCode.NONE)
    attn, dense, _ = elementwise_seconds(ctx, g)
    t = 4 * 512  # tokens per micro-batch
    assert float(attn) == pytest.approx(t * 86 * H / ctx.hbm_bytes_s, rel=1e-12)
    # F.gelu (erf) on the fp16 intermediate: read 2, write 2 per FFN element
    assert float(dense) == pytest.approx(t * F * 4 / ctx.hbm_bytes_s, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([256, 512, 768, 1024, 2048]), st.integers(2, 32))
def test_bytes_scale_with_width(v100, hidden, heads):
    """Every term is per hidden / per head element: doubling the width doubles the bytes."""
    if hidden % heads:
        return
    row = {**BERT_LARGE, "hidden": str(hidden), "heads": str(heads), "ffn": str(4 * hidden)}
    wide = {**row, "hidden": str(2 * hidden), "ffn": str(8 * hidden)}
    one, two = (hf_eager.layernorm_gelu_bytes_per_token(_ctx(v100, row=r)) for r in (row, wide))
    assert two == pytest.approx(2 * one)
    assert one > 0
