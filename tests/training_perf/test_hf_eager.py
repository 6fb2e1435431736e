"""Hugging Face transformers decoder layers run eagerly (`Framework.TRANSFORMERS`,
workloads.training.step.hf_eager). Expected values derived by hand from Llama-2-7B's shapes (hidden 4096,
32 heads of 128 = q 4096, MHA so kv 4096, ffn 11008, SwiGLU, 2 RMSNorms per layer; per layer q, k, v, o
4 x 4096^2 + gate, up, down 3 x 4096 x 11008 = 202,375,168 weight elements; five Linear modules read a
norm output: q, k, v, gate, up) and the operator counts of transformers' modeling_llama.py."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import Precision
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuneMethod, FineTuning, MasterWeights
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step import hf_eager, native_amp
from gpuplan.workloads.training.step.compute import elementwise_seconds, loss_bytes_per_logit
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

H = 4096
LAYER_WEIGHTS = 4 * 4096**2 + 3 * 4096 * 11008  # 202,375,168


@pytest.fixture(scope="module")
def h100():
    c = load_catalog()
    system = c.system("dgx-h100")
    return system, c.gpu(system.gpu)


def _ctx(h100, framework=Framework.TRANSFORMERS, precision=Precision.BF16, fine_tuning=None, model="llama-2-7b"):
    system, gpu = h100
    return StepContext.build(load_model(model), system, gpu, 4096, precision=precision, framework=framework,
                             fine_tuning=fine_tuning)


def _axes(ctx, mb=1):
    return PlanAxes.build(ctx, 1, 1, 1, 1, 1, 1, mb, 1, RecomputeCode.NONE, False, ShardingCode.NONE)


def test_bytes_per_token_bf16_model(h100):
    # a model loaded in bf16 (master_weights none): residual stream bf16, r = 2
    ctx = _ctx(h100, fine_tuning=FineTuning(master_weights=MasterWeights.NONE))
    assert hf_eager.residual_bytes(ctx) == 2 and not native_amp.autocast_over_fp32(ctx)
    # RMSNorm: to(fp32) 2+4, pow 4+4, mean 4, x*rsqrt 4+4, to(bf16) 4+2, *weight 2+2 = 36; two norms and
    # two residual adds (2+2 read, 2 write = 6): (2 x 36 + 2 x 6) x 4096 = 344,064
    assert hf_eager.hidden_bytes_per_token(ctx) == pytest.approx(84 * H)
    # rotary 20 B per q and k element (q 4096, k 4096) + the output copy 4 x 4096 = 180,224
    assert hf_eager.head_bytes_per_token(ctx) == pytest.approx(20 * (4096 + 4096) + 4 * 4096)


def test_bytes_per_token_autocast_over_fp32(h100):
    # HF Trainer bf16=True over a model in fp32 (master weights fp32, every weight trains): r = 4
    ctx = _ctx(h100)
    assert native_amp.autocast_over_fp32(ctx) and hf_eager.residual_bytes(ctx) == 4
    # RMSNorm at r = 4: pow 8 + mean 4 + mul 8 + weight mul 8 = 28 (the two casts are no-ops); residual
    # add fp32 + bf16 -> fp32: 4 + 2 + 4 = 10; five Linear modules cast the fp32 norm output (4 + 2):
    # (2 x 28 + 2 x 10 + 5 x 6) x 4096 = 106 x 4096
    assert native_amp.norm_readers(ctx) == 5.0
    assert hf_eager.hidden_bytes_per_token(ctx) == pytest.approx(106 * H)


def test_elementwise_seconds_by_hand(h100):
    ctx = _ctx(h100, fine_tuning=FineTuning(master_weights=MasterWeights.NONE))
    g = _axes(ctx, mb=2)
    attn, dense, _ = elementwise_seconds(ctx, g)
    t = 2 * 4096  # tokens per micro-batch
    assert float(attn) == pytest.approx(t * (84 * H + 20 * 8192 + 4 * 4096) / ctx.hbm_bytes_s, rel=1e-12)
    # SwiGLU: silu 2+2, product 2+2+2 = 10 B per FFN element
    assert float(dense) == pytest.approx(t * 11008 * 10 / ctx.hbm_bytes_s, rel=1e-12)


def test_weight_casts_only_over_an_fp32_model(h100):
    ctx = _ctx(h100)
    fwd, bwd = native_amp.weight_cast_seconds(ctx, _axes(ctx))
    # autocast's cast of each fp32 weight: read 4 write 2 forward; backward cast (2 + 4) + accumulate (4 + 4 + 4)
    assert float(fwd) == pytest.approx(6 * LAYER_WEIGHTS / ctx.hbm_bytes_s, rel=1e-12)
    assert float(bwd) == pytest.approx(18 * LAYER_WEIGHTS / ctx.hbm_bytes_s, rel=1e-12)
    for other in (_ctx(h100, framework=Framework.OTHER), _ctx(h100, fine_tuning=FineTuning(master_weights=MasterWeights.NONE)),
                  _ctx(h100, fine_tuning=FineTuning(method=FineTuneMethod.LORA))):
        assert native_amp.weight_cast_seconds(other, _axes(other)) == (0.0, 0.0)


def test_loss_bytes_and_non_llama_models(h100):
    # ForCausalLMLoss: float() 6 + log_softmax 8 forward; nll grad 4 + log_softmax bwd 12 + cast back 6 = 36
    assert loss_bytes_per_logit(Framework.TRANSFORMERS) == 36.0
    # GPT-2 (LayerNorm, GELU, learned positions) has no per-operator count: fused bytes x the eager factor
    gpt = _ctx(h100, model="gpt2")
    assert not hf_eager.applies(gpt)
    assert hf_eager.applies(_ctx(h100))


@settings(max_examples=15, deadline=None)
@given(mb=st.integers(1, 8), model=st.sampled_from(["llama-2-7b", "llama-3-8b", "qwen2.5-7b", "phi-3-mini"]))
def test_eager_modules_never_faster_than_fused(mb, model):
    # HF's op-by-op modules move at least the bytes of Megatron's fused kernels, layer by layer
    c = load_catalog()
    system = c.system("dgx-h100")
    gpu = c.gpu(system.gpu)
    ft = FineTuning(master_weights=MasterWeights.NONE)
    hf = StepContext.build(load_model(model), system, gpu, 2048, framework=Framework.TRANSFORMERS, fine_tuning=ft)
    mg = StepContext.build(load_model(model), system, gpu, 2048, framework=Framework.MEGATRON, fine_tuning=ft)
    a = np.array(elementwise_seconds(hf, _axes(hf, mb))[:2], dtype=float)
    b = np.array(elementwise_seconds(mg, _axes(mg, mb))[:2], dtype=float)
    assert (a >= b).all()


def test_sliding_window_runs_a_masked_dense_attention():
    # Phi-3-mini-4k: 32 heads of 96, sliding_window 2047 (its config.json). transformers'
    # _ignore_causal_mask_sdpa drops the mask only when kv_length < local_attention_size, so at 4,096
    # tokens SDPA gets a dense mask and visits all 4,096 keys per query:
    # forward FLOPs per token = 2 a d n (QK^T) + 2 a d n (PV) = 4 x 32 x 96 x 4096 = 50,331,648
    from gpuplan.layers.inventory import model_ops
    layers = model_ops(load_model("phi-3-mini")).layers
    assert hf_eager.masked_attention_flops_per_token(layers, 4096) / len(layers) == pytest.approx(4 * 32 * 96 * 4096)
    # 2,047 tokens: kv_length 2047 is not < 2047 either: still masked, all 2,047 keys
    assert hf_eager.masked_attention_flops_per_token(layers, 2047) / len(layers) == pytest.approx(4 * 32 * 96 * 2047)
    # 1,024 tokens: the window is longer than the sequence, is_causal=True: (s + 1) / 2 = 512.5 keys per query
    assert hf_eager.masked_attention_flops_per_token(layers, 1024) / len(layers) == pytest.approx(4 * 32 * 96 * 512.5)
    # a global-attention model is unchanged: Llama-2-7B causal at 4,096 tokens, (4096 + 1) / 2 keys
    llama = model_ops(load_model("llama-2-7b")).layers
    assert hf_eager.masked_attention_flops_per_token(llama, 4096) / len(llama) == pytest.approx(4 * 32 * 128 * 2048.5)


def test_peft_fp32_adapter_input_casts(h100):
    # PEFT keeps adapters fp32 over a bf16 base and casts each adapted input to fp32 (read 2, write 4), autocast
    # casts it back for lora_A (read 4, write 2): 12 B per input element forward, 12 again backward
    from gpuplan.workloads.training import finetune_time
    from gpuplan.workloads.training.step.compute import gemm_seconds
    lora = FineTuning(method=FineTuneMethod.LORA, lora_rank=16, lora_targets="q_proj+k_proj+v_proj+o_proj")
    hf, other = _ctx(h100, fine_tuning=lora), _ctx(h100, framework=Framework.OTHER, fine_tuning=lora)
    assert finetune_time.peft_fp32_input_cast_bytes(hf, 2.0) == 12.0
    assert finetune_time.peft_fp32_input_cast_bytes(other, 2.0) == 0.0
    g = _axes(hf, mb=2)
    (f1, b1), (f0, b0) = finetune_time.adapter_seconds(hf, g, gemm_seconds), finetune_time.adapter_seconds(other, g, gemm_seconds)
    # four adapted projections of Llama-2-7B read 4,096-wide inputs; 8,192 tokens per micro-batch
    extra = 8192 * 4 * 4096 * 12 / hf.hbm_bytes_s
    assert float(f1 - f0) == pytest.approx(extra, rel=1e-9)
    assert float(b1 - b0) == pytest.approx(extra, rel=1e-9)


def test_lora_model_flops_count_no_weight_gradients():
    # Llama-2-7B at 4,096 tokens. N (weights a token multiplies) = 32 layers x 202,375,168 + the untied head
    # 32,000 x 4,096 = 6,607,077,376; attention (full scores) = 32 x 4 x 4096 (a d) x 4096 keys = 2,147,483,648.
    # Ordinary training: 3 (2 N + A). LoRA r8 on q, v: 32 x 2 x 8 (4096 + 4096) = 4,194,304 adapter parameters;
    # frozen base: 2 x 2 N + 3 A + 6 x adapters = 32,895,926,272
    from gpuplan.workloads.training.step.inputs import model_flops_per_token
    model = load_model("llama-2-7b")
    n, a = 6_607_077_376, 2_147_483_648
    assert model_flops_per_token(model, 4096, FineTuning()) == pytest.approx(3 * (2 * n + a), rel=1e-12)
    lora = FineTuning(method=FineTuneMethod.LORA, lora_rank=8, lora_targets="q_proj+v_proj")
    assert model_flops_per_token(model, 4096, lora) == pytest.approx(4 * n + 3 * a + 6 * 4_194_304, rel=1e-12)
