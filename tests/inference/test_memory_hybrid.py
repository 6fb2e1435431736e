"""Serving memory of hybrid models: KV per token of the attention layers only, plus the constant
recurrent state of each sequence; the step-time models refuse hybrid layers by name."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
from hybrid_configs import NEMOTRON_H_8B, RECURRENTGEMMA_2B  # noqa: E402

from gpuplan.catalog import load_catalog  # noqa: E402
from gpuplan.errors import InputError  # noqa: E402
from gpuplan.models import load_model, model_from_hf_config  # noqa: E402
from gpuplan.workloads.inference.cost.deployment import Deployment  # noqa: E402
from gpuplan.workloads.inference.cost.memory import memory_plan, weights_bytes_per_gpu  # noqa: E402
from gpuplan.workloads.inference.cost.operators import step_time_model  # noqa: E402


def _dep(model, tp=1):
    cat = load_catalog()
    gpu = cat.gpu("h100-sxm5-80gb")
    return Deployment(model, gpu, cat.system("dgx-h100"), tp=tp)


def test_nemotron_h_memory_plan_kv_and_state():
    m = model_from_hf_config(NEMOTRON_H_8B, "nemotron-h-8b")
    plan = memory_plan(_dep(m))
    # KV of the 4 attention layers: 4 x 2 x 8 x 128 x 2 B = 16,384 B/token (not 52 layers' 212,992)
    assert plan.kv_cache_bytes_per_token == 16_384 and plan.kv_bytes_per_token_per_gpu == 16_384
    # Mamba-2 state, bf16: 24 x (3 x 10240 + 128 x 64 x 128) x 2 B = 51,806,208 B per sequence
    assert plan.state_bytes_per_sequence_per_gpu == 51_806_208
    # one sequence of 1,000 tokens: ceil(1000 / 16) x 16 tokens of KV + its state
    assert plan.sequence_kv_bytes(1000) == math.ceil(1000 / 16) * 16 * 16_384 + 51_806_208
    assert plan.max_concurrent_sequences(1000) == int(plan.kv_budget_bytes // (1008 * 16_384 + 51_806_208))
    tp2 = memory_plan(_dep(m, tp=2))
    # tp = 2: 4 of 8 KV heads and half the Mamba heads per GPU
    assert tp2.kv_bytes_per_token_per_gpu == 8_192 and tp2.state_bytes_per_sequence_per_gpu == 51_806_208 / 2


def test_hybrid_weights_follow_each_layer_type():
    m = model_from_hf_config(NEMOTRON_H_8B, "nemotron-h-8b")
    # serving weights are the operator inventory's tensors (cost/weights.py), each layer by its own type
    # (not layer 0's shapes x 52): at tp 1 in bf16, every parameter x 2 B. GEMMs alone: Mamba in_proj
    # 4096 x 18560 + out_proj 8192 x 4096 (x 24), attention 4096 x 6144 + 4096 x 4096 (x 4), MLP
    # 2 x 4096 x 21504 (x 24), + 2 untied 131072 x 4096 tables + (2 x 52 + 1) norms of 4096; the rest is
    # the Mamba cores' conv weights and biases, A_log, D, dt_bias and gated norms
    gemm = 24 * (4096 * 18560 + 8192 * 4096) + 4 * (4096 * 6144 + 4096 * 4096) + 24 * 2 * 4096 * 21504
    tables_norms = 2 * 131072 * 4096 + (2 * 52 + 1) * 4096
    total = weights_bytes_per_gpu(_dep(m))
    assert total == 8_100_852_736 * 2  # the exact parameter count (tests/models: Nemotron-H-8B enumeration)
    assert 0 < total - (gemm + tables_norms) * 2 < 0.01 * total  # recurrent-core extras: under 1%


def test_windowed_hybrid_caps_the_attention_layers():
    m = model_from_hf_config(RECURRENTGEMMA_2B, "recurrentgemma-2b")
    plan = memory_plan(_dep(m))
    # 8 local-attention layers (window 2048) hold 2 x 1 x 256 x 2 B per token each; no global layer
    assert plan.kv_bytes_per_token_per_gpu == 0 and plan.window_kv_bytes_per_token_per_gpu == 8 * 1024
    # a 10,000-token sequence keeps at most ceil(2048 / 16) + 1 blocks of 16 tokens, plus the RG-LRU
    # state of 18 layers x (3 x 2560 + 2560) x 2 B
    assert plan.sequence_kv_bytes(10_000) == (2048 // 16 + 1) * 16 * 8 * 1024 + 18 * 4 * 2560 * 2


def test_plain_transformer_plan_has_no_state():
    plan = memory_plan(_dep(load_model("llama-3-8b")))
    assert plan.state_bytes_per_sequence_per_gpu == 0
    assert plan.sequence_kv_bytes(1000) == 1008 * 131_072  # 2 x 8 x 128 x 2 B x 32 layers per token


def test_step_time_refuses_hybrid_layers_by_name():
    m = model_from_hf_config(NEMOTRON_H_8B, "nemotron-h-8b")
    with pytest.raises(InputError) as exc:
        step_time_model(_dep(m))
    assert "mamba2" in str(exc.value) and "nemotron_h" in str(exc.value) and exc.value.field == "model"
