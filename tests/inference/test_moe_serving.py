"""MoE / MLA serving mechanisms of workloads.inference.cost.operators against hand derivations:
the attention core's math format (MLA before Blackwell computes in bf16) and expert parallelism
without attention DP (no token exchange: the TP all-reduce combines)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.layers.operators import attention_flops
from gpuplan.models import load_model
from gpuplan.primitives.collectives import Collective
from gpuplan.workloads.inference.cost import operators
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.operators import attention_math_precision, step_time_model


def _dep(model, system, **kw):
    cat = load_catalog()
    s = cat.system(system)
    return Deployment(load_model(model), cat.gpu(s.gpu), s, **kw)


def _deepseek(system, tp, **kw):
    return _dep("deepseek-v3", system, tp=tp, ep=tp, attention_dp=tp, kv_dtype="fp8", **kw)


def test_mla_on_hopper_computes_in_bf16():
    # FlashMLA (Hopper) runs both GEMMs of absorbed decode in BF16, an FP8 latent dequantised first:
    # DeepSeek-V3 DEP8 on H200 with an fp8 cache -> H200 bf16 peak 989.4 TFLOP/s x Hopper attention
    # ceiling 0.66 = 653.0 TFLOP/s (the fp8 rate would be 1978.9 x 0.66 = 1306.1), x the head-dim factor at
    # MLA's (192 + 128) / 2 = 160: FlashAttention-3 Fig. 5 (causal, 16k) 616 / 642 TFLOP/s at 128 / 256,
    # linear in d: (616 + 26 x 32 / 128) / 616 = 622.5 / 616 -> 659.9 TFLOP/s.
    dep = _deepseek("dgx-h200", 8, weight_dtype="fp8")
    assert attention_math_precision(dep) == "bf16"
    st = step_time_model(dep, table_tokens=4)
    assert st.attention_flops_per_s == pytest.approx(989.4e12 * 0.66 * 622.5 / 616)


#: FlashAttention-3's fp8 / bf16 fractions of the H100 SXM peaks (arXiv:2407.08608 abstract: FP16 up
#: to 740 of 989 TFLOP/s, FP8 close to 1200 of 1979): 0.6064 / 0.7482 = 0.8104
FA3_FP8_OVER_BF16 = (1200 / 1979) / (740 / 989)


def test_mla_on_blackwell_and_gqa_on_hopper_keep_fp8():
    # TensorRT-LLM tech blog 3 (B200): "both Q and KV are quantized to FP8, and FP8 MQA is used":
    # B200 fp8 4500 TFLOP/s x Blackwell ceiling 0.71 (FlashAttention-4: 1613 / 2250 TFLOP/s, a BF16
    # figure) x FlashAttention-3's fp8 / bf16 ratio 0.8104 = 2589 TFLOP/s.
    assert FA3_FP8_OVER_BF16 == pytest.approx(0.8104, abs=1e-4)
    b200 = _deepseek("aws-p6-b200", 4, weight_dtype="nvfp4")
    assert attention_math_precision(b200) == "fp8"
    assert step_time_model(b200, table_tokens=4).attention_flops_per_s == pytest.approx(2589e12, rel=1e-3)
    # GQA with an fp8 cache on H200 (FP8 context FMHA / XQA): fp8 1978.9 x 0.66 x 0.8104 = 1058.5 TFLOP/s
    llama = _dep("llama-3-70b", "dgx-h200", tp=2, weight_dtype="fp8", kv_dtype="fp8")
    assert attention_math_precision(llama) == "fp8"
    assert step_time_model(llama, table_tokens=4).attention_flops_per_s == pytest.approx(1058.5e12, rel=1e-3)
    # a 16-bit cache computes at the activation format on either part
    bf16_cache = _dep("deepseek-v3", "aws-p6-b200", tp=4, ep=4, attention_dp=4, weight_dtype="nvfp4", kv_dtype="bf16")
    assert attention_math_precision(bf16_cache) == "bf16"


def test_mla_decode_time_on_h200_hand_derived():
    # DeepSeek-V3 DEP8 on H200, fp8 latent, 128 sequences x 2048 tokens of context, 61 MLA layers:
    # FLOPs per (query, key) pair = 2 x 128 heads x (576 + 512) = 278,528;
    # pairs = 61 x 128 x 2048 = 15,990,784 -> 4.4539e15 FLOP / (653.0e12 x 622.5 / 616 = 659.9e12) = 6.75 ms
    # (compute-bound; the head-dim factor at MLA's (192 + 128) / 2 = 160, test_mla_on_hopper_computes_in_bf16);
    # bytes = 15,990,784 x 576 x 1 B = 9.21e9 / (4.8e12 x 0.8) = 2.40 ms.
    st = step_time_model(_deepseek("dgx-h200", 8, weight_dtype="fp8"), table_tokens=4)
    assert st.decode_pair_flops == pytest.approx(attention_flops(1, 128, 576, 512, 1)) == pytest.approx(278_528)
    pairs = 61 * 128 * 2048
    t = float(st.attention_decode_time(128 * 2048, 128 * 2048))
    assert t == pytest.approx(pairs * 278_528 / (989.4e12 * 0.66 * 622.5 / 616), rel=1e-9)
    assert t == pytest.approx(6.75e-3, rel=2e-3)
    assert t > pairs * 576 / (4.8e12 * 0.8)  # compute-bound, not memory-bound


def test_expert_parallel_without_attention_dp_moves_no_tokens(monkeypatch):
    # Mixtral-8x7B on 2 GPUs, tp=2 ep=2 without attention DP: every rank holds every token, runs its
    # 4 experts on the tokens routed to them, and the layer's all-reduce sums the outputs -- the only
    # collective is the TP all-reduce of n x hidden 4096 x 2 B (n = 100: 819,200 B), no all-to-all.
    # With attention DP (DEP2) the dispatch / combine all-to-all is there (test_attention_dp.py).
    calls = []

    def record(op, sizes, system, num_gpus, gpu):
        calls.append((op, float(np.asarray(sizes).ravel()[0]), num_gpus))
        return np.zeros_like(np.asarray(sizes, dtype=float))

    def record_tp(sizes, num_gpus, system, gpu, impl, hidden=None):  # the engine's TP all-reduce (tp_allreduce)
        return record(Collective.ALL_REDUCE, sizes, system, num_gpus, gpu)

    monkeypatch.setattr(operators, "collective_seconds", record)
    monkeypatch.setattr(operators, "tp_allreduce_seconds", record_tp)
    st = step_time_model(_dep("mixtral-8x7b", "dgx-h100", tp=2, ep=2), table_tokens=4)
    calls.clear()
    st.linear_time(np.array([100.0]))
    assert [c[0] for c in calls] == [Collective.ALL_REDUCE]
    assert calls[0][1] == pytest.approx(100 * 4096 * 2) and calls[0][2] == 2
    dep2 = step_time_model(_dep("mixtral-8x7b", "dgx-h100", tp=2, ep=2, attention_dp=2), table_tokens=4)
    calls.clear()
    dep2.linear_time(np.array([100.0]))
    assert Collective.ALL_TO_ALL in [c[0] for c in calls]


def test_expert_tp_splits_experts_shared_by_tp_ranks():
    # Mixtral-8x7B on tp=4: ep=1 -> every expert split 4 ways; ep=2 -> 4 experts per GPU, each split
    # tp/ep = 2 ways (TensorRT-LLM moe_tp_size = tp / ep); ep=4 -> 2 whole experts per GPU.
    # In every layout a GPU holds 1/4 of the routed-expert weights:
    # 8 experts x 3 x 4096 x 14336 x 32 layers / 4 = 11,274,289,152 weights.
    from gpuplan.workloads.inference.cost.weights import weights_bytes_per_gpu

    deps = {ep: _dep("mixtral-8x7b", "dgx-h100", tp=4, ep=ep) for ep in (1, 2, 4)}
    assert [deps[ep].expert_tp for ep in (1, 2, 4)] == [4, 2, 1]
    w = {ep: weights_bytes_per_gpu(d) for ep, d in deps.items()}
    assert w[2] == pytest.approx(w[4]) and w[1] == pytest.approx(w[4])
    # whole experts on E/ep GPUs would give ep=2 GPUs 4 whole experts: 2 more than ep=4, i.e.
    # + 2 x 3 x 4096 x 14336 x 32 layers x 2 B = 22,548,578,304 B -- not what the engines load
    assert w[2] < w[4] + 22_548_578_304 / 2


def test_expert_step_time_independent_of_the_ep_x_expert_tp_split(monkeypatch):
    # Without attention DP, tp=4 with ep=2 (4 experts / GPU, each halved) and ep=4 (2 whole experts)
    # read the same expert bytes (touched/2 x P/2 = touched/4 x P) and do the same expert FLOPs
    # (tokens x top_k / 4 x P) per GPU: the linear part of a step is the same.
    # (the mean rank: busiest_ep_rank's spread over ranks, which grows with ep, is tested on its own)
    monkeypatch.setattr(operators, "collective_seconds",
                        lambda op, sizes, system, n, gpu: np.zeros_like(np.asarray(sizes, dtype=float)))
    monkeypatch.setattr(operators, "busiest_ep_rank", lambda e, k, ep, b: (
        operators.expected_distinct_experts(e, k, b) / ep, np.asarray(b, dtype=float) * k / ep))
    n = np.array([1.0, 16.0, 512.0, 4096.0])
    ep2 = step_time_model(_dep("mixtral-8x7b", "dgx-h100", tp=4, ep=2), table_tokens=4).linear_time(n)
    ep4 = step_time_model(_dep("mixtral-8x7b", "dgx-h100", tp=4, ep=4), table_tokens=4).linear_time(n)
    np.testing.assert_allclose(ep2, ep4, rtol=1e-12)


def test_kernels_per_layer_from_the_inventory():
    # Llama layer: qkv, core, out, fc1, act, fc2, 2 norms (residual adds fused) + RoPE/KV write = 9;
    # DeepSeek-V3 MoE layer: q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b, core, out, router, expert fc1,
    # act, fc2, shared fc1, act, fc2, 2 norms + RoPE + 3 routing kernels (top-k, permute, finalize) = 21;
    # its 3 dense layers: the 9 attention-side launches + fc1, act, fc2 + 2 norms = 14.
    # Whole model: 3 x 14 + 58 x 21 = 1260 launches per step (the former 9 per layer gave 549).
    from gpuplan.layers.inventory import model_ops
    from gpuplan.workloads.inference.cost.operators import kernels_per_layer

    llama = model_ops(load_model("llama-3-8b")).layers
    assert {kernels_per_layer(layer) for layer in llama} == {operators.KERNELS_PER_LAYER} == {9}
    ds = model_ops(load_model("deepseek-v3"))
    assert kernels_per_layer(ds.moe_layer) == 21 and kernels_per_layer(ds.dense_layer) == 14
    st = step_time_model(_deepseek("dgx-h200", 8, weight_dtype="fp8"), table_tokens=4)
    assert st.kernels_per_step == 3 * 14 + 58 * 21 == 1260


def test_expected_max_standard_normal_blom():
    # exact expected maxima of n standard normals (Harter 1961 tables): 0.5642 (2), 1.0294 (4), 1.4236 (8)
    from gpuplan.workloads.inference.cost.operators import expected_max_standard_normal

    assert expected_max_standard_normal(1) == 0.0
    for n, exact in ((2, 0.5642), (4, 1.0294), (8, 1.4236)):
        assert expected_max_standard_normal(n) == pytest.approx(exact, abs=2e-4)


def test_busiest_ep_rank_hand_derived():
    # DeepSeek-V3 routing (E = 256, k = 8) over ep = 8 ranks (32 experts each), z_8 = 1.4236:
    # B = 8 tokens: p = 1 - (248/256)^8 = 0.2249; experts mean 32 p = 7.197, sd sqrt(32 p (1 - p)) = 2.362
    #   -> busiest rank 7.197 + 1.42 x 2.362 = 10.56 experts (+47% over the mean: low-batch EP decode
    #   reads the busiest rank's weights);
    #   copies mean 8 x 8 / 8 = 8, sd sqrt(64 x 1/8 x 7/8 x 248/255) = 2.609 -> 11.71.
    # B = 4096 tokens: p = 1 -> 32 experts (capped), copies 4096 + 1.4236 x sqrt(4096 x 8 x 1/8 x 7/8 x 248/255)
    #   = 4096 + 1.4236 x 59.04 = 4180.
    from gpuplan.workloads.inference.cost.operators import busiest_ep_rank

    experts, copies = busiest_ep_rank(256, 8, 8, np.array([8.0, 4096.0]))
    assert experts[0] == pytest.approx(10.56, abs=0.03) and copies[0] == pytest.approx(11.71, abs=0.03)
    assert experts[1] == pytest.approx(32.0) and copies[1] == pytest.approx(4180.0, abs=1.0)
    one_e, one_c = busiest_ep_rank(256, 8, 1, np.array([8.0]))  # one rank: the means
    assert one_e[0] == pytest.approx(256 * (1 - (248 / 256) ** 8)) and one_c[0] == pytest.approx(64.0)


@given(experts_log2=st.integers(min_value=2, max_value=9), top_k=st.integers(min_value=1, max_value=8),
       ep_log2=st.integers(min_value=0, max_value=5), tokens=st.floats(min_value=0.0, max_value=1e6))
@settings(max_examples=200, deadline=None)
def test_busiest_ep_rank_invariants(experts_log2, top_k, ep_log2, tokens):
    # the busiest rank carries at least the mean rank's load and at most all its E/ep experts; one
    # rank is the mean
    from gpuplan.workloads.inference.cost.operators import busiest_ep_rank, expected_distinct_experts

    e = 2 ** experts_log2
    ep = min(2 ** ep_log2, e)
    k = min(top_k, e)
    experts, copies = busiest_ep_rank(e, k, ep, np.array([tokens, tokens + 1.0]))
    mean_experts = expected_distinct_experts(e, k, np.array([tokens, tokens + 1.0])) / ep
    assert np.all(experts >= mean_experts - 1e-9) and np.all(experts <= e / ep + 1e-9)
    assert np.all(copies >= np.array([tokens, tokens + 1.0]) * k / ep - 1e-9)
    if ep == 1:
        np.testing.assert_allclose(experts, mean_experts, rtol=1e-12)
