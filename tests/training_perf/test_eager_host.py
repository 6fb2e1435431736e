"""The host's issue floor of eager HF transformers steps (workloads.training.step.eager_host). Kernel
counts derived by hand from transformers' modeling_llama.py / modeling_bert.py operators and their
backward formulas (the module docstring's table); host time per kernel from PyTorch PR #45299."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.models.arch_row import model_from_arch_row
from gpuplan.specs import Precision
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.specs.finetune import BaseDtype, FineTuneMethod, FineTuning, MasterWeights
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step import eager_host
from gpuplan.workloads.training.step.compute import layer_compute
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

#: PR #45299: torch.optim.AdamW loop on ResNet-101, 51.38 ms / (314 tensors x 9 kernels)
PR45299_KERNEL_S = 51.38e-3 / (314 * 9)
#: bert-large-uncased as the hf1gpu rows state it (24 layers, hidden 1024, 16 heads, ffn 4096, GELU)
BERT_LARGE = {"model": "bert-large", "layers": "24", "hidden": "1024", "heads": "16", "ffn": "4096",
              "vocab": "30522", "seq_len": "512", "ffn_kind": "gelu"}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _ctx(catalog, model, system="dgx-h100", seq=4096, precision=Precision.BF16, fine_tuning=None,
         framework=Framework.TRANSFORMERS, kernel=AttentionKernel.FLASH):
    s = catalog.system(system)
    return StepContext.build(model, s, catalog.gpu(s.gpu), seq, precision=precision, framework=framework,
                             attention_kernel=kernel, fine_tuning=fine_tuning)


def test_host_seconds_per_kernel_from_pr45299():
    # 51.38 ms / 2826 kernels = 18.18 us, forward and (derived, equal) backward
    assert eager_host.FORWARD_KERNEL_HOST_S == pytest.approx(18.18e-6, rel=1e-3)
    assert eager_host.BACKWARD_KERNEL_HOST_S == pytest.approx(PR45299_KERNEL_S)


def test_llama_layer_bf16_model(catalog):
    # model loaded in bf16 (r = 2), every weight trains. Forward: 2 RMSNorms x 8, 7 GEMMs (q k v o gate
    # up down), rotary 10, SDPA 1, output copy 1, 2 residual adds, SwiGLU 2 = 39.
    # Backward: RMSNorm 2 x 16, 7 x 2 GEMMs, q/k/v and gate/up input-gradient sums (5 readers - 2 norms = 3),
    # rotary 18, SDPA 4, residual forks 2, SwiGLU 3 = 76.
    ctx = _ctx(catalog, load_model("llama-2-7b"), fine_tuning=FineTuning(master_weights=MasterWeights.NONE))
    assert eager_host.layer_kernels(ctx) == (39.0, 76.0)


def test_llama_layer_autocast_over_fp32(catalog):
    # HF Trainer bf16=True over an fp32 model (r = 4): RMSNorm 6 / 14; + 7 weight casts (forward) and their
    # gradient casts (backward); + 5 norm-output casts and their backward; + SDPA's q/k casts 2 / 2; residual
    # forks' gradient casts + 2 backward. Forward 7 + 7 + 5 + 2 + 12 + 10 + 2 + 2 + 2 = 49;
    # backward 14 + 7 + 3 + 5 + 4 + 28 + 18 + 3 + 4 + 2 = 88.
    ctx = _ctx(catalog, load_model("llama-2-7b"))
    assert eager_host.layer_kernels(ctx) == (49.0, 88.0)


def test_qlora_layer_as_fsdp_qlora_runs_it(catalog):
    # QLoRA r 64 on q k v gate up down (o not adapted), lora_dropout 0.1, nf4 base, bf16 (r = 2).
    # Forward: 7 GEMMs + 7 x 2 dequantisations + 6 adapters x (4 + dropout 1) = 51; core 2; RMSNorm 16,
    # rotary 10, residual 2, SwiGLU 2 = 30: 83.
    # Backward: 7 input-gradient GEMMs + 14 dequantisations + 6 x (6 + 1) = 63, + 3 input sums = 66; SDPA 4;
    # RMSNorm 2 x (16 - 2 frozen weight) = 28, rotary 18, SwiGLU 3, residual 2 = 51: 121.
    ft = FineTuning(method=FineTuneMethod.QLORA, lora_rank=64, lora_dropout=0.1, base_dtype=BaseDtype.NF4,
                    lora_targets="q_proj+k_proj+v_proj+gate_proj+up_proj+down_proj")
    ctx = _ctx(catalog, load_model("llama-2-7b"), system="rtx-3090", seq=512, fine_tuning=ft)
    assert eager_host.layer_kernels(ctx) == (83.0, 121.0)


def test_bert_layer_unfused_fp16_autocast(catalog):
    # hf1gpu: fp16 AMP over fp32 bert-large, eager attention. 6 Linears with bias: 6 GEMMs + 12 weight/bias
    # casts + 4 norm-output casts (q, k, v, intermediate) = 22 forward; backward 6 x 3 + 12 + 4 + (4 - 2) = 36.
    # Core 9 + attention dropout 1 + fp32 softmax cast and probabilities' cast 2 = 12 / 6 + 1 + 2 = 9.
    # LayerNorm 2 x 1 / 2 x 2, GELU 1 / 1, residual 2 / 2 + 2 casts, hidden dropouts 2 / 2:
    # forward 22 + 12 + 2 + 1 + 2 + 2 = 41; backward 36 + 9 + 4 + 1 + 4 + 2 = 56.
    model = model_from_arch_row(BERT_LARGE)
    ctx = _ctx(catalog, model, system="v100-sxm2-16gb", seq=512, precision=Precision.FP16,
               kernel=AttentionKernel.UNFUSED)
    assert eager_host.layer_kernels(ctx) == (41.0, 56.0)


def test_other_frameworks_and_compiled_blocks_have_no_floor(catalog):
    model = load_model("llama-2-7b")
    for fw in (Framework.MEGATRON, Framework.TORCHTITAN, Framework.FSDP):
        assert eager_host.layer_kernels(_ctx(catalog, model, framework=fw)) == (0.0, 0.0)
    ctx = _ctx(catalog, model)
    compiled = StepContext.build(model, ctx.system, ctx.gpu, 4096, framework=Framework.TRANSFORMERS, compiled_model=True)
    assert eager_host.layer_kernels(compiled) == (0.0, 0.0)


def test_small_batch_step_is_host_bound(catalog):
    # Llama-2-7B autocast over fp32 on an H100, 1 x 128 tokens: the layer's GPU forward is far below
    # 49 kernels x 18.2 us = 0.891 ms, so the floor sets it. Backward (88 x 18.2 us = 1.600 ms) stays
    # GPU-bound: the gradient casts of the 202.4 M fp32 weights alone move (2 + 4 + 12) B each,
    # 3.64 GB at 3.35 TB/s = 1.09 ms, besides the weight-gradient GEMMs that read every weight.
    ctx = _ctx(catalog, load_model("llama-2-7b"), seq=128)
    g = PlanAxes.build(ctx, 1, 1, 1, 1, 1, 1, 1, 1, RecomputeCode.NONE, False, ShardingCode.NONE)
    lc = layer_compute(ctx, g)
    assert float(lc.layer_fwd) == pytest.approx(49 * PR45299_KERNEL_S)
    assert float(lc.layer_bwd) > 88 * PR45299_KERNEL_S


def test_large_batch_step_is_gpu_bound(catalog):
    # 8 x 4096 tokens: a layer's GEMMs alone are 2 x 202.4 M weights x 32,768 tokens = 13.3 TFLOP, over
    # 10 ms on an H100 (989 TFLOP/s peak), far above 0.891 ms of issue: the floor leaves it unchanged.
    ctx = _ctx(catalog, load_model("llama-2-7b"))
    g = PlanAxes.build(ctx, 1, 1, 1, 1, 1, 1, 8, 1, RecomputeCode.NONE, False, ShardingCode.NONE)
    lc = layer_compute(ctx, g)
    assert float(lc.layer_fwd) > 10e-3
    fwd, bwd = eager_host.layer_floor(ctx, lc.layer_fwd, lc.layer_bwd)
    assert float(fwd) == float(lc.layer_fwd) and float(bwd) == float(lc.layer_bwd)


@settings(max_examples=60, deadline=None)
@given(fwd=st.floats(0.0, 1.0), bwd=st.floats(0.0, 1.0))
def test_floor_is_the_larger_of_gpu_and_host(catalog, fwd, bwd):
    ctx = _ctx(catalog, load_model("llama-2-7b"))
    kf, kb = eager_host.layer_kernels(ctx)
    f, b = eager_host.layer_floor(ctx, np.array([fwd]), np.array([bwd]))
    assert float(f[0]) == max(fwd, kf * PR45299_KERNEL_S)
    assert float(b[0]) == max(bwd, kb * PR45299_KERNEL_S)
    assert float(f[0]) >= fwd and float(b[0]) >= bwd
