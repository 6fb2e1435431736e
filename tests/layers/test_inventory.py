"""The operator inventory: each operator's params / FLOPs / KV against hand derivations, and every
consumer (parameter counts, FLOPs per token, KV bytes, training step time, `model show`, `train`,
`serve`) reading the same sums."""

from __future__ import annotations

import json

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.layers import (
    flops_per_token, kv_cache_bytes_per_token, layer_ops, local_gemm_shape, model_ops, parameter_counts,
)
from gpuplan.layers.operators import AttentionCore, Linear, Shard, mean_keys_per_query
from gpuplan.models import bundled_model_names, load_model
from gpuplan.workloads.training.step.inputs import StepContext
from gpuplan.workloads.training.step.compute import charged_layer_forward_flops


def _shapes(lo):
    return {op.name: (op.in_features, op.out_features, op.shard) for op in lo.linears}


def test_llama3_8b_layer_operators_by_hand():
    # config.json (meta-llama/Meta-Llama-3-8B): hidden 4096, 32 heads, 8 kv heads, head_dim 128,
    # intermediate 14336, SwiGLU, RMSNorm, no biases.
    lo = layer_ops(load_model("llama-3-8b"), 0)
    assert _shapes(lo) == {
        "qkv": (4096, (32 + 2 * 8) * 128, Shard.COLUMN),  # 6144 outputs: q 4096 + k 1024 + v 1024
        "out": (4096, 4096, Shard.ROW),
        "fc1": (4096, 2 * 14336, Shard.COLUMN),  # gate + up fused (Megatron linear_fc1)
        "fc2": (14336, 4096, Shard.ROW),
    }
    # params: 4096 x 6144 + 4096 x 4096 + 4096 x 28672 + 14336 x 4096 + 2 RMSNorms x 4096
    # = 25,165,824 + 16,777,216 + 117,440,512 + 58,720,256 + 8,192 = 218,112,000
    assert lo.params == 218_112_000
    # 32 layers x 218,112,000 + embedding and untied head 2 x 128,256 x 4096 + final norm 4096
    # = 8,030,261,248 (HF meta-llama/Meta-Llama-3-8B safetensors total)
    assert parameter_counts(load_model("llama-3-8b")).total == 32 * 218_112_000 + 2 * 128_256 * 4096 + 4096
    # KV per token per layer: K and V of 8 heads x 128 = 2048 elements
    assert lo.core.kv_cache_elements == 2048


def test_deepseek_v3_mla_operators_by_hand():
    # config.json (deepseek-ai/DeepSeek-V3): hidden 7168, 128 heads, q_lora_rank 1536,
    # kv_lora_rank 512, qk_nope 128, qk_rope 64, v_head_dim 128 (DeepSeek-V2 paper sec. 2.1).
    m = load_model("deepseek-v3")
    lo = layer_ops(m, 0)
    assert _shapes(lo) == {
        "q_a": (7168, 1536, Shard.REPLICATED),
        "q_b": (1536, 128 * (128 + 64), Shard.COLUMN),
        "kv_a": (7168, 512 + 64, Shard.REPLICATED),
        "kv_b": (512, 128 * (128 + 128), Shard.COLUMN),
        "out": (128 * 128, 7168, Shard.ROW),
        "fc1": (7168, 2 * 18432, Shard.COLUMN),  # layers 0-2 are dense (first_k_dense_replace = 3)
        "fc2": (18432, 7168, Shard.ROW),
    }
    # attention weights a token multiplies: 7168 x 1536 + 1536 x 24576 + 7168 x 576 + 512 x 32768
    # + 16384 x 7168 = 11,010,048 + 37,748,736 + 4,128,768 + 16,777,216 + 117,440,512 = 187,105,280
    # (the step-time model used to charge 360.6 M here: 7168 x (24576 + 2 x 576) + 7168 x 24576)
    attn_linears = [op for op in lo.attention if isinstance(op, Linear)]
    assert sum(op.active_params for op in attn_linears) == 187_105_280
    # + the two latent RMSNorms 1536 + 512 = attention params 187,107,328 per layer
    assert sum(op.params for op in lo.attention) == 187_107_328
    # the MLA cache holds the latent and the shared rope key: 512 + 64 = 576 per token per layer
    assert lo.core.kv_cache_elements == 576
    # a MoE layer: router 7168 x 256 (+ 256 bias), 256 routed experts of 3 x 7168 x 2048, one shared
    moe = layer_ops(m, 3)
    assert moe.moe and moe.linear("router").params == 7168 * 256 + 256
    assert moe.linear("expert_fc1").params == 256 * 7168 * 2 * 2048
    # a token multiplies 8 routed experts + the shared one: 9 x 3 x 7168 x 2048 + router 7168 x 256
    ffn_active = sum(op.active_params for op in moe.ffn)
    assert ffn_active == 9 * 3 * 7168 * 2048 + 7168 * 256


def test_attention_core_flops_by_hand():
    # causal, no window, s = 4: queries see 1, 2, 3, 4 keys -> mean 2.5 = (s + 1) / 2
    assert mean_keys_per_query(4, None, True) == 2.5
    # window 2 over s = 4: 1, 2, 2, 2 -> 7 / 4
    assert mean_keys_per_query(4, 2, True) == 1.75
    core = AttentionCore("core", heads=2, qk_head_dim=3, v_head_dim=5, kv_cache_elements=0)
    # 2 a (d_qk + d_v) n_keys = 2 x 2 x 8 x 2.5 = 80; full scores: 2 x 2 x 8 x 4 = 128
    assert core.forward_flops(4, True) == 80.0
    assert core.forward_flops(4, False) == 128.0
    assert core.backward_flops(4, True) == 160.0


def test_local_gemm_shapes_follow_the_shard():
    op = Linear("x", 100, 60, Shard.COLUMN)
    assert local_gemm_shape(op, 4) == (15.0, 100)
    assert local_gemm_shape(Linear("y", 60, 100, Shard.ROW), 4) == (100, 15.0)
    assert local_gemm_shape(Linear("z", 100, 60, Shard.REPLICATED), 4) == (60, 100)
    up = Linear("expert_fc1", 100, 40, Shard.EXPERT, instances=8, active_instances=2, expert_shard=Shard.COLUMN)
    assert local_gemm_shape(up, 4, etp=2) == (20.0, 100)
    # shared experts (all instances active) run as one fused GEMM: 3 x 40 outputs
    shared = Linear("shared_fc1", 100, 40, Shard.COLUMN, instances=3, active_instances=3)
    assert local_gemm_shape(shared, 2) == (60.0, 100)


@pytest.mark.parametrize("name", bundled_model_names())
def test_step_time_charges_the_inventory_flops(name):
    """The FLOPs the step-time model charges for every layer (forward) are the inventory's, and
    with the head they add up to the forward FLOPs `model show` reports (layers.flops)."""
    model = load_model(name)
    cat = load_catalog()
    system = cat.system("dgx-h100")
    seq = min(model.max_position_embeddings or 2048, 2048)
    ctx = StepContext.build(model, system, cat.gpu(system.gpu), seq)
    ops = model_ops(model)
    total = 0.0
    tp = max(d for d in (1, 2, 4, 8) if model.heads % d == 0 and model.kv_heads % d == 0
             and (model.moe is None or model.moe.num_experts % d == 0))
    for i, lo in enumerate(ops.layers):
        tokens = seq  # micro_batch 1, cp 1
        expected = lo.forward_flops(seq, True) * tokens
        one_gpu = charged_layer_forward_flops(ctx, i)
        assert one_gpu == pytest.approx(expected, rel=1e-12)
        # tensor parallel tp (dividing heads and kv heads) with sequence parallelism, experts over
        # ep = tp (etp 1): the tp ranks together compute the layer once (replicated down-projections
        # and the router run on sequence shards)
        assert tp * charged_layer_forward_flops(ctx, i, tp=tp, ep=tp, etp=1) == pytest.approx(expected, rel=1e-12)
        total += one_gpu
    head = ops.head.forward_flops() * seq
    assert (total + head) / seq == pytest.approx(flops_per_token(model, seq).forward, rel=1e-12)


def test_model_show_and_train_name_their_attention_convention(runner):
    show = json.loads(runner.invoke(app, ["model", "show", "llama-3-8b", "--seq-len", "8192", "--json"]).stdout)
    assert show["flops_per_token"]["attention_convention"] == "causal"
    full = show["flops_per_token_full_scores"]
    assert full["attention_convention"] == "megatron_full_scores"
    out = runner.invoke(app, ["train", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--tokens", "1T",
                              "--seq-len", "8192", "--json"])
    assert out.exit_code == 0, out.output
    train = json.loads(out.stdout)
    assert train["model_flops_attention_convention"] == "megatron_full_scores"
    assert train["model_flops_per_token"] == pytest.approx(full["training_flops"], rel=0.005)
    # the FLOPs per token implied by train's throughput figures: TFLOP/s per GPU x GPUs / tokens/s
    implied = train["tflops_per_gpu_model"] * 1e12 * train["num_gpus"] / train["tokens_per_s"]
    assert implied == pytest.approx(full["training_flops"], rel=0.005)


@pytest.mark.parametrize("name,extra", [
    ("llama-3-8b", []), ("gemma-2-9b", []), ("gpt-oss-20b", []),
    ("deepseek-v3", ["--tp", "8", "--weight-dtype", "fp8"]),  # 671B fits 8 x 141 GiB in fp8
])
def test_kv_bytes_per_token_agree_between_model_show_and_serve(runner, name, extra):
    show = json.loads(runner.invoke(app, ["model", "show", name, "--kv-bytes", "2", "--json"]).stdout)
    out = runner.invoke(app, ["serve", name, "--gpu", "h200-sxm-141gb", "--input-len", "128", "--output-len", "16",
                              "--rate", "1", *extra, "--json"])
    assert out.exit_code == 0, out.output
    serve = json.loads(out.stdout)
    # serve reports the cache of a global-context token (bf16 KV: 2 bytes per element); DeepSeek-V3:
    # 61 layers x 576 latent elements x 2 B = 70,272 B (the MLA latent, not 128 heads' K and V)
    assert serve["kv_cache_bytes_per_token"] == pytest.approx(show["kv_cache"]["bytes_per_token"], rel=1e-9)
    assert show["kv_cache"]["bytes_per_token"] == kv_cache_bytes_per_token(load_model(name), 2.0)
    if name == "deepseek-v3":
        assert serve["kv_cache_bytes_per_token"] == 61 * 576 * 2


def test_saved_activation_bytes_of_a_moe_layer_by_hand():
    # Mixtral 8x7B layer (h 4096, 32 heads, 8 kv heads, d 128, 8 experts top-2 of 14336, SwiGLU),
    # bf16 (b = li = 2), tp 1, FlashAttention, no dropout. Per token (Korthikanti Table 2 terms):
    #   two norm inputs 2 x 2 x 4096 = 16,384; QKV input 2 x 4096 = 8,192;
    #   Q, K, V 2 x (32 + 16) x 128 = 12,288; FlashAttention LSE 4 x 32 = 128; out-proj input 8,192;
    #   router input 2 x 4096 + fp32 probabilities 4 x 8 = 8,224;
    #   per routed copy (x 2): expert input 2 x 4096, gate+up output 2 x 2 x 14336, down input 2 x 14336,
    #   down output 2 x 4096 (kept by Megatron's unpermute for the probabilities' gradient)
    #   = 2 x (8,192 + 57,344 + 28,672 + 8,192) = 204,800
    # total 258,208 bytes
    from gpuplan.layers.operators import Saved
    from gpuplan.specs.plan import TrainPlan
    from gpuplan.workloads.training.memory import layer_activation_bytes_per_token

    m = load_model("mixtral-8x7b")
    assert layer_ops(m, 0).saved_activation_bytes(Saved()) == 258_208
    assert layer_activation_bytes_per_token(m, TrainPlan(seq_len=4096), 0) == 258_208
    # tp 2 with sequence parallelism, ep 1 (etp defaults to tp = 2): the norm, QKV-input and router-
    # input terms halve (sequence shards), Q/K/V, LSE and out-proj input halve (heads), the routed
    # copies' intermediates halve over etp, their inputs and the kept down outputs (reduced over etp
    # before the unpermute) do not, the router probabilities do not:
    # 8,192 + 4,096 + 6,144 + 64 + 4,096 + (4,096 + 32) + 2 x (8,192 + 28,672 + 14,336 + 8,192) = 145,504
    assert layer_ops(m, 0).saved_activation_bytes(Saved(tp=2, sp=2, etp=2)) == 145_504


def test_elementwise_bytes_of_a_layer_by_hand():
    # bf16, fused kernels: RMSNorm reads and writes h (4 B per element), two per layer; a residual
    # add reads two and writes one (6 B), two per layer; a GPT-3 layer adds a 1-byte dropout mask to
    # each residual add (hidden_dropout 0.1) in training only.
    llama = layer_ops(load_model("llama-3-8b"), 0)
    assert llama.hidden_elementwise_bytes() == (2 * 4 + 2 * 6) * 4096
    assert llama.activation_bytes_per_ffn_element() == 6.0  # SwiGLU reads gate and up, writes one
    gpt3 = layer_ops(load_model("gpt3-175b"), 0)
    assert gpt3.hidden_elementwise_bytes() == (2 * 4 + 2 * 7) * 12288  # LayerNorm also 4 B per element (bf16)
    assert gpt3.hidden_elementwise_bytes(training=False) == (2 * 4 + 2 * 6) * 12288
    assert gpt3.activation_bytes_per_ffn_element() == 4.0  # GELU reads f, writes f
