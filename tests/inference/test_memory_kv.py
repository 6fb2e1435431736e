"""KV-cache sizes with hand derivations, dtype bytes, memory plan invariants."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.layers import kv_cache_bytes_per_token
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.specs.dtypes import bytes_per_element
from gpuplan.workloads.inference.cost.memory import memory_plan


def _dep(name, gpu="h100-sxm5-80gb", tp=1, wdt="bf16", kvdt="bf16", system=None):
    cat = load_catalog()
    g = cat.gpu(gpu)
    return Deployment(load_model(name), g, cat.system(system or g.id), tp=tp, weight_dtype=wdt, kv_dtype=kvdt)


def test_dtype_bytes_include_block_scales():
    # mxfp4: 4 bits + 8-bit E8M0 scale / 32 = 4.25 bits (OCP MX v1.0); nvfp4: 4 + 8/16 = 4.5 bits
    assert bytes_per_element("mxfp4") == pytest.approx(4.25 / 8)
    assert bytes_per_element("nvfp4") == pytest.approx(4.5 / 8)
    assert bytes_per_element("fp8") == 1.0 and bytes_per_element("bf16") == 2.0


def test_gqa_llama3_70b_kv_bytes():
    # 2 (K,V) x 80 layers x 8 kv heads x 128 head_dim x 2 bytes = 327,680 B/token
    plan = memory_plan(_dep("llama-3-70b", tp=8, system="dgx-h100"))
    assert plan.kv_cache_bytes_per_token == 327_680
    assert kv_cache_bytes_per_token(load_model("llama-3-70b"), 2) == 327_680
    # tp=8 with 8 kv heads: one head per GPU -> 327,680 / 8 = 40,960 B per GPU per token
    assert plan.kv_bytes_per_token_per_gpu == pytest.approx(40_960)


def test_mla_deepseek_v3_latent_kv_bytes():
    # 61 layers x (kv_lora_rank 512 + rope 64) x 2 bytes = 70,272 B/token; replicated on every TP rank
    dep = _dep("deepseek-v3", gpu="h200-sxm-141gb", tp=8, wdt="fp8", system="dgx-h200")
    plan = memory_plan(dep)
    assert plan.kv_cache_bytes_per_token == 70_272
    assert plan.kv_bytes_per_token_per_gpu == pytest.approx(70_272)


def test_sliding_window_mistral_caps_kv():
    # Mistral-7B: 32 layers x 8 kv heads x 128 x 2 (K,V) x 2 B = 131,072 B/token, window 4096 on every layer
    model = load_model("mistral-7b")
    assert kv_cache_bytes_per_token(model, 2) == 131_072
    plan = memory_plan(_dep("mistral-7b"))
    # a 32k-token sequence holds at most ceil(4096/16)+1 = 257 blocks of 16 tokens per layer
    assert plan.sequence_kv_bytes(32_768) == pytest.approx(257 * 16 * 131_072)
    # and averaged over 32k tokens that is the models engineer's window-aware figure (+1 block)
    avg = kv_cache_bytes_per_token(model, 2, context_len=32_768)
    assert plan.sequence_kv_bytes(32_768) == pytest.approx(avg * 32_768 + 16 * 131_072)


def test_gemma2_hybrid_pattern_half_windowed():
    # gemma-2-9b: 42 layers alternating 4096-window / global; 8 kv heads x head_dim 256 x 2 x 2 B = 8,192 B per layer
    model = load_model("gemma-2-9b")
    plan = memory_plan(_dep("gemma-2-9b"))
    assert plan.kv_bytes_per_token_per_gpu == pytest.approx(21 * 8_192)
    assert plan.window_kv_bytes_per_token_per_gpu == pytest.approx(21 * 8_192)
    assert kv_cache_bytes_per_token(model, 2) == 42 * 8_192


def test_memory_breakdown_sums_and_fit():
    plan = memory_plan(_dep("llama-3-8b"))
    parts = plan.weights_bytes + plan.activation_workspace_bytes + plan.runtime_reserve_bytes + plan.unused_bytes + plan.kv_budget_bytes
    assert parts == pytest.approx(plan.total_bytes)
    # Llama-3-8B: 8.03e9 params x 2 B = 16.06 GB = 14.96 GiB of weights
    assert plan.weights_bytes / 2**30 == pytest.approx(14.96, rel=0.01)
    n = plan.max_concurrent_sequences(4096)
    assert n * plan.sequence_kv_bytes(4096) <= plan.kv_budget_bytes < (n + 1) * plan.sequence_kv_bytes(4096)
    assert plan.max_context(n) >= 4096 > plan.max_context(n + 1)
