"""Memory of Hugging Face transformers training in eager PyTorch (`Framework.TRANSFORMERS`,
workloads.training.hf_memory and finetune_memory's autocast-over-fp32 states), against numbers derived
by hand from the model shapes (configs: Llama-3-8B h 4,096, 32 layers; Phi-3-mini h 3,072, f 8,192,
fused qkv_proj 3,072 -> 9,216 and gate_up_proj 3,072 -> 16,384, vocab 32,064, untied head, 32 layers)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.plan import TrainPlan
from gpuplan.workloads.training.finetune_memory import autocast_over_fp32_model, fine_tuning_rules
from gpuplan.workloads.training.hf_memory import (
    hf_activation_delta_per_token, norm_activation_delta_per_token, peft_adapter_activation_delta_per_token)
from gpuplan.workloads.training.memory import saved_context, training_memory

TOKENS = 2 * 4096  # micro-batch 2 x 4,096 tokens, as the H200 check
LORA = dict(method="lora", lora_rank=16, lora_targets="attn", base_dtype="bf16")


def _plan(framework=Framework.TRANSFORMERS, **kw) -> TrainPlan:
    return TrainPlan(seq_len=4096, micro_batch=2, framework=framework, **kw)


def test_lora_over_bf16_base_layer_delta():
    model = load_model("llama-3-8b")
    plan = _plan(fine_tuning=LORA)
    saved = saved_context(model, plan)
    # two pre-norms keep their fp32 input: 2 x (4 - 2) x 4,096 = 16,384 B per token
    assert norm_activation_delta_per_token(model, plan, 0, saved) == 16_384
    # q, k, v keep a bf16 cast each where one shared input was counted: 2 x 2 x 4,096 = 16,384;
    # o's adapter its own copy of the attention output: 2 x 32 x 128 = 8,192
    assert peft_adapter_activation_delta_per_token(model, plan, 0, saved) == 24_576
    assert hf_activation_delta_per_token(model, plan, 0, saved) == 40_960


def test_lora_over_bf16_base_against_the_fused_accounting():
    # the same plan on `other` (Megatron's fused saved set, the same PyTorch-loop states) differs by
    # the layers' delta only: 40,960 B x 8,192 tokens x 32 layers = 10,737,418,240 B (10.0 GiB)
    model = load_model("llama-3-8b")
    hf = training_memory(model, _plan(fine_tuning=LORA))
    fused = training_memory(model, _plan(Framework.OTHER, fine_tuning=LORA))
    assert hf.allocated_bytes - fused.allocated_bytes == pytest.approx(40_960 * TOKENS * 32, rel=1e-12)
    assert hf.other_bytes_detail.get("autocast_weight_copies", 0.0) == 0.0  # a frozen 16-bit base is not cast


def test_full_training_over_an_fp32_model():
    model = load_model("phi-3-mini")
    plan = _plan(global_batch=2)  # one micro-batch per step (HF Trainer gradient_accumulation_steps=1)
    assert autocast_over_fp32_model(plan) and fine_tuning_rules(plan)
    saved = saved_context(model, plan)
    # per pre-norm: fp32 input (4 - 2) x 3,072 plus the fp32 `weight * y` operand 4 x 3,072; two norms
    assert norm_activation_delta_per_token(model, plan, 0, saved) == 2 * (2 + 4) * 3072
    mem = training_memory(model, plan)
    params = 3_821_079_552  # 2 x 32,064 x 3,072 tables + 32 x 113,246,208 projections + 65 x 3,072 norms
    assert mem.per_gpu_bytes["weights"] == 4 * params  # fp32 parameters are the master copy
    assert mem.per_gpu_bytes["optimizer"] == 8 * params  # Adam m + v, no separate master
    assert mem.per_gpu_bytes["gradients"] == 0.0  # set_to_none: no .grad at the end of the forward
    # bf16 weight casts: 32 x (28,311,552 + 9,437,184 + 50,331,648 + 25,165,824) + the 98,500,608 head, 2 B each
    assert mem.other_bytes_detail["autocast_weight_copies"] == 2 * 3_722_379_264
    assert mem.bytes_per_param == {"weights": 4.0, "gradients": 4.0, "optimizer": 8.0}
    # with gradient accumulation (no global batch: unbounded micro-batches) the fp32 gradients persist
    assert training_memory(model, _plan()).per_gpu_bytes["gradients"] == 4 * params


def test_other_frameworks_and_compiled_models_unchanged():
    model = load_model("llama-3-8b")
    for plan in (_plan(Framework.OTHER, fine_tuning=LORA), _plan(Framework.MEGATRON),
                 _plan(compiled_model=True, fine_tuning=LORA)):
        assert hf_activation_delta_per_token(model, plan, 0, saved_context(model, plan)) == 0.0
    assert not autocast_over_fp32_model(_plan(fine_tuning=LORA))  # a frozen base keeps its storage dtype
    assert not fine_tuning_rules(_plan(Framework.MEGATRON))


@settings(max_examples=40, deadline=None)
@given(rank=st.sampled_from([8, 16, 64]), targets=st.sampled_from(["attn", "all_linear", "qv", "gate_proj+up_proj"]),
       dropout=st.sampled_from([0.0, 0.05]), name=st.sampled_from(["llama-3-8b", "phi-3-mini", "mixtral-8x7b"]))
def test_adapter_delta_is_never_negative_and_dropout_keeps_the_fused_count(rank, targets, dropout, name):
    model = load_model(name)
    plan = _plan(fine_tuning=dict(method="lora", lora_rank=rank, lora_targets=targets, lora_dropout=dropout))
    saved = saved_context(model, plan)
    delta = peft_adapter_activation_delta_per_token(model, plan, 0, saved)
    assert delta >= 0.0
    if dropout > 0:  # each adapter already keeps its own dropped copy (finetune_activations)
        assert delta == 0.0
