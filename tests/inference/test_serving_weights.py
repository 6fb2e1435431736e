"""Serving weight bytes from the operator inventory (workloads.inference.cost.weights): exact against
`model show`'s parameter counts and hand-derived per GPU under tensor, expert and pipeline
parallelism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.layers.params import parameter_counts
from gpuplan.models import load_model
from gpuplan.specs import ModelSpec, MoeSpec
from gpuplan.specs.model import FfnKind
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.weights import stage_weights, weights_bytes_per_gpu

CAT = load_catalog()


def _dep(model, tp=1, pp=1, ep=1, weight_dtype="bf16", gpu="h100-sxm5-80gb", system="dgx-h100", **kw):
    model = load_model(model) if isinstance(model, str) else model
    return Deployment(model, CAT.gpu(gpu), CAT.system(system), tp=tp, pp=pp, ep=ep, weight_dtype=weight_dtype, **kw)


def _all_gpus(dep):
    """Bytes summed over every GPU of the replica: each stage's tp GPUs hold its per-GPU bytes."""
    return sum(s.total_bytes for s in stage_weights(dep)) * dep.tp


def test_gpt3_125m_exact():
    # GPT-3 125M (Brown et al. 2020 Table 2.1; GPT-2 layout, tied embeddings, learned positions):
    # token table 50,257 x 768 = 38,597,376; positions 2,048 x 768 = 1,572,864;
    # per layer qkv 768 x 2,304 + 2,304 bias = 1,771,776, out 768 x 768 + 768 = 590,592,
    # fc1 768 x 3,072 + 3,072 = 2,362,368, fc2 3,072 x 768 + 768 = 2,360,064, two LayerNorms 2 x 1,536
    # -> 7,087,872 x 12 layers = 85,054,464; final LayerNorm 1,536.
    # Total 125,226,240 (= `gpuplan model show gpt3-125m`), x 2 B = 250,452,480 B. The old re-derivation
    # dropped the positions, biases and LayerNorm biases: 123,551,232 x 2 B (1.34% short).
    dep = _dep("gpt3-125m")
    assert parameter_counts(dep.model).total == 125_226_240
    assert weights_bytes_per_gpu(dep) == _all_gpus(dep) == 250_452_480


def test_gpt_oss_120b_exact_and_mxfp4():
    # gpt-oss-120b (config.json: h 2,880, 64 heads x 64, 8 kv heads, 128 experts of 2,880, 36 layers,
    # vocab 201,088, untied, biases on qkv / out / router / experts, one sink per head):
    # embedding = head = 201,088 x 2,880 = 579,133,440
    # attention / layer: qkv 2,880 x 5,120 + 5,120 = 14,750,720; out 4,096 x 2,880 + 2,880 = 11,799,360; sinks 64
    # router / layer: 2,880 x 128 + 128 = 368,768
    # experts / layer: 128 x (2,880 x 5,760 + 5,760 + 2,880 x 2,880 + 2,880) = 3,186,155,520
    # norms: 36 x 2 x 2,880 + 2,880 = 210,240
    # total 2 x 579,133,440 + 36 x (26,550,144 + 368,768 + 3,186,155,520) + 210,240 = 116,829,156,672
    # (= `model show`; the old re-derivation dropped 40,108,032 bias parameters), x 2 B:
    dep = _dep("gpt-oss-120b", gpu="h200-sxm-141gb", system="dgx-h200")
    assert parameter_counts(dep.model).total == 116_829_156_672
    assert weights_bytes_per_gpu(dep) == _all_gpus(dep) == 233_658_313_344
    # mxfp4: the GEMM matrices at 4.25 bits (OCP MX: 4 + 8/32), the rest 16-bit:
    # matrices 36 x (14,745,600 + 11,796,480 + 128 x (16,588,800 + 8,294,400)) = 115,617,300,480 x 0.53125 B
    #   = 61,421,690,880 B; the other 116,829,156,672 - 115,617,300,480 = 1,211,856,192 x 2 B = 2,423,712,384 B
    mx = _dep("gpt-oss-120b", gpu="h200-sxm-141gb", system="dgx-h200", weight_dtype="mxfp4")
    assert weights_bytes_per_gpu(mx) == pytest.approx(61_421_690_880 + 2_423_712_384, rel=1e-15)


def _tiny_moe(tied=False):
    # h 64, 4 heads x 16, 2 kv heads, SwiGLU, layer 0 dense (ffn 128), layers 1-2 MoE (4 experts of 32,
    # top 2), biases everywhere, gpt-oss sinks, vocab 1,000
    return ModelSpec(name="tiny-moe", layers=3, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128,
                     ffn_kind=FfnKind.SWIGLU, vocab=1000, tied_embeddings=tied, qkv_bias=True, attn_out_bias=True,
                     mlp_bias=True, attention_sinks=True,
                     moe=MoeSpec(num_experts=4, top_k=2, expert_ffn=32, dense_layers=1, router_bias=True))


def test_tiny_moe_tp2_ep2_by_hand():
    # tp = 2, ep = 2 (expert_tp = tp / ep = 1), one GPU's elements:
    # qkv COLUMN: (4/2 + 2 x max(1, 2/2)) heads x 16 = 64 out -> 64 x 64 + 64 bias = 4,160
    # sinks 4 / 2 = 2; out ROW: 64 x 32 + 64 (bias whole) = 2,112; two RMSNorms 128 (replicated)
    #   -> attention + norms 6,402 per layer
    # dense FFN (layer 0): fc1 COLUMN 128 x 64 + 128 = 8,320; fc2 ROW 64 x 64 + 64 = 4,160 -> 12,480
    # MoE FFN (layers 1, 2): router 64 x 4 + 4 = 260 (replicated); 4 / 2 = 2 experts:
    #   fc1 2 x (64 x 64 + 64) = 8,320, fc2 2 x (32 x 64 + 64) = 4,224 -> 12,804
    # embedding 1,000 / 2 x 64 = 32,000; head 32,000; final norm 64
    # total 6,402 x 3 + 12,480 + 2 x 12,804 + 32,000 + 32,000 + 64 = 121,358 elements
    dep = _dep(_tiny_moe(), tp=2, ep=2)
    assert dep.expert_tp == 1
    assert weights_bytes_per_gpu(dep) == 121_358 * 2
    # the model holds 241,492 parameters (64,000 x 2 tables + 37,508 + 2 x 37,960 + 64); two GPUs hold
    # 1,224 more: norms 3 x 128, out biases 3 x 64, the dense fc2 bias 64, the router 2 x 260, the final norm 64
    assert parameter_counts(dep.model).total == 241_492
    assert _all_gpus(dep) == (241_492 + 1_224) * 2
    # fp8 weights: the GEMM matrices at 1 B (qkv 4,096 + out 2,048 per layer, dense 8,192 + 4,096,
    # experts 8,192 + 4,096 per MoE layer: 55,296 elements), router, biases, norms, tables at 2 B
    fp8 = _dep(_tiny_moe(), tp=2, ep=2, weight_dtype="fp8")
    assert weights_bytes_per_gpu(fp8) == 55_296 * 1 + (121_358 - 55_296) * 2


def test_tiny_moe_tp2_without_ep_splits_every_expert():
    # tp = 2, ep = 1: all 4 experts on each GPU, each split 2 ways (expert_tp = tp):
    # fc1 4 x (32 x 64 + 32) = 8,320, fc2 4 x (16 x 64 + 64) = 4,352 -> MoE FFN 260 + 12,672 = 12,932
    # (fc2's bias whole on both GPUs); per GPU 121,358 + 2 x (12,932 - 12,804) = 121,614 elements
    assert weights_bytes_per_gpu(_dep(_tiny_moe(), tp=2)) == 121_614 * 2


def test_pipeline_stages_and_the_tied_table_copy():
    # 3 layers on pp = 2: vLLM get_pp_indices gives [2, 1] (the remainder to the stage before the last).
    # Tied embeddings: the first stage holds the table, the last its own copy for the head.
    # tp = 1 layer totals: layer 0 37,508, layers 1-2 37,960 each (test above);
    # stage 0 = 37,508 + 37,960 + 64,000 = 139,468; stage 1 = 37,960 + 64,000 + 64 = 102,024
    dep = _dep(_tiny_moe(tied=True), pp=2)
    assert [tuple(s.layers) for s in stage_weights(dep)] == [(0, 1), (2,)]
    assert [s.total_bytes for s in stage_weights(dep)] == [139_468 * 2, 102_024 * 2]
    assert weights_bytes_per_gpu(dep) == 139_468 * 2
    # the memory plan is its tightest stage's: stage 0 holds more weights and 2 of the 3 layers' KV
    plan = memory_plan(dep)
    assert plan.weights_bytes == 139_468 * 2
    # KV per token per layer: 2 (K, V) x 2 kv heads x 16 x 2 B = 128 B; stage 0 holds 2 layers
    assert plan.kv_bytes_per_token_per_gpu == 2 * 128


def test_vllm_pipeline_split():
    # vllm/distributed/utils.py get_pp_indices: 61 layers on 4 stages -> 15 each + 1 to stage 2: [15, 15, 16, 15];
    # 80 on 3 -> 26 each + 2 to stages 0, 1 (partitions[-2], [-3]): [27, 27, 26]
    deep = _dep("deepseek-v3", tp=8, pp=4, weight_dtype="fp8", gpu="h200-sxm-141gb", system="dgx-h200")
    assert [len(r) for r in deep.stage_layers] == [15, 15, 16, 15]
    llama = _dep("llama-3-70b", tp=8, pp=3)
    assert [len(r) for r in llama.stage_layers] == [27, 27, 26]


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 3]),
       tied=st.booleans(), dtype=st.sampled_from(["bf16", "fp8", "mxfp4", "nvfp4", "int4"]))
def test_layout_loses_no_parameter(tp, ep, pp, tied, dtype):
    # every GPU of the replica together hold at least the model's parameter bytes, exactly them for one GPU
    # in 16-bit with untied tables; a GPU holds at least its 1 / (tp x pp) share
    if ep > tp:  # expert parallelism inside a stage's tp GPUs (each stage needs all its layers' experts)
        return
    dep = _dep(_tiny_moe(tied=tied), tp=tp, pp=pp, ep=ep, weight_dtype=dtype)
    floor = sum(s.total_bytes for s in stage_weights(_dep(_tiny_moe(tied=tied), weight_dtype=dtype)))
    assert _all_gpus(dep) >= floor - 1e-6
    assert weights_bytes_per_gpu(dep) >= floor / (tp * pp) - 1e-6
    if (tp, pp, dtype) == (1, 1, "bf16"):
        assert _all_gpus(dep) == parameter_counts(dep.model).total * 2
