"""LitGPT's fused QKV split by views (`FineTuning.fused_qkv_views`; lit_gpt/model.py and lit_gpt/lora.py at
8641822): what SDPA's saved key and value hold beyond the inventory's count, and the one LoRA dropout
shared by the adapted q / k / v parts, each against a hand derivation; and the validation rule.

Llama 2 7B (32 heads, 32 kv heads, head_dim 128, h 4096) and Llama 3 8B (32 heads, 8 kv heads,
head_dim 128) come from the catalog.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.interfaces.validation.fine_tuning_row import fine_tuning_from_row
from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.plan import TrainPlan
from gpuplan.workloads.training.finetune_activations import (
    adapter_activation_delta_per_token, fused_qkv_activation_delta_per_token, fused_qkv_zero_pad_per_token,
)
from gpuplan.workloads.training.memory import saved_context, training_memory


def _plan(fused: bool, tp: int = 1, dropout: float = 0.0) -> TrainPlan:
    ft = FineTuning(method="lora", lora_rank=8, lora_targets="qv", lora_dropout=dropout, master_weights="none",
                    fused_qkv_views=fused)
    return TrainPlan(framework=Framework.OTHER, seq_len=1024, micro_batch=1, global_batch=1, tp=tp, fine_tuning=ft)


def test_mha_value_view_keeps_the_q_and_k_parts():
    # a = g = 32, d = 128, bf16: the value's view holds the fused output, whose q and k parts are
    # 2 B x (32 + 32) x 128 = 16,384 B per token beyond the inventory's q, k, v; / tp = 2 -> 8,192
    model = load_model("llama-2-7b")
    plan = _plan(True)
    assert fused_qkv_activation_delta_per_token(model, plan.fine_tuning, saved_context(model, plan)) == 16384.0
    plan2 = _plan(True, tp=2)
    assert fused_qkv_activation_delta_per_token(model, plan2.fine_tuning, saved_context(model, plan2)) == 8192.0
    plain = _plan(False)
    assert fused_qkv_activation_delta_per_token(model, plain.fine_tuning, saved_context(model, plain)) == 0.0


def test_gqa_keys_and_values_are_expanded_copies():
    # a = 32, g = 8, d = 128: k and v expanded to 32 heads and reshaped into copies,
    # 2 x 2 B x (32 - 8) x 128 = 12,288 B per token more than g heads each
    model = load_model("llama-3-8b")
    plan = _plan(True)
    assert fused_qkv_activation_delta_per_token(model, plan.fine_tuning, saved_context(model, plan)) == 12288.0


def test_one_dropout_for_the_adapted_q_and_v():
    # LoRA on q and v with dropout 0.05: separate adapters keep a dropped copy (2 B) and a mask (1 B)
    # of the 4,096-wide input each, 2 x 3 x 4096; LoRAQKVLinear keeps one: 3 x 4096 = 12,288 B fewer
    model = load_model("llama-2-7b")
    separate, fused = (_plan(f, dropout=0.05) for f in (False, True))
    delta = (adapter_activation_delta_per_token(model, separate.fine_tuning, 0, saved_context(model, separate))
             - adapter_activation_delta_per_token(model, fused.fine_tuning, 0, saved_context(model, fused)))
    assert delta == 3 * 4096


def test_whole_model_difference():
    # Llama 2 7B, 1,024 tokens, no recompute, dropout 0: the stored layers grow by 32 layers x 1,024 tokens
    # x (16,384 B of the value's view + 16,384 B of zero_pad's index_copy source: B's output for q and v,
    # 2 B x (4096 + 4096))
    model = load_model("llama-2-7b")
    plain, fused = (training_memory(model, _plan(f)) for f in (False, True))
    grow = fused.activations_bytes_detail["layers"] - plain.activations_bytes_detail["layers"]
    assert grow == pytest.approx(32 * 1024 * (16384 + 16384), rel=1e-12)


def test_zero_pad_keeps_the_index_copy_source():
    # lit_gpt/lora.py@8641822 zero_pad: index_copy(1, lora_ind, x.reshape(-1, sum(qkv_shapes))) keeps its
    # source for backward (derivatives.yaml: expand_as(source)). Llama 2 7B q + v: 2 B x (32 x 128 + 32 x 128)
    # = 16,384 B per token; Llama 3 8B (g = 8) q + v: 2 B x (4096 + 1024) = 10,240; k alone: 2 B x 1024 = 2,048
    llama2, llama3 = load_model("llama-2-7b"), load_model("llama-3-8b")
    plan = _plan(True)
    assert fused_qkv_zero_pad_per_token(llama2, plan.fine_tuning, saved_context(llama2, plan)) == 16384.0
    assert fused_qkv_zero_pad_per_token(llama3, plan.fine_tuning, saved_context(llama3, plan)) == 10240.0
    k_only = FineTuning(method="lora", lora_targets="k_proj", fused_qkv_views=True)
    assert fused_qkv_zero_pad_per_token(llama3, k_only, saved_context(llama3, plan)) == 2048.0
    # tp = 2 splits the fused output: half per GPU
    plan2 = _plan(True, tp=2)
    assert fused_qkv_zero_pad_per_token(llama2, plan2.fine_tuning, saved_context(llama2, plan2)) == 8192.0
    # all of q, k and v adapted: zero_pad returns B's output as it is; none adapted: no LoRA on it
    for targets in ("q_proj+k_proj+v_proj", "gate_proj"):
        ft = FineTuning(method="lora", lora_targets=targets, fused_qkv_views=True)
        assert fused_qkv_zero_pad_per_token(llama2, ft, saved_context(llama2, plan)) == 0.0
    assert fused_qkv_zero_pad_per_token(llama2, _plan(False).fine_tuning, saved_context(llama2, plan)) == 0.0


def test_litgpt_source_rows_split_qkv_by_views():
    row = {"finetune": "lora", "precision": "bf16",
           "source": "Lightning-AI/litgpt@0cc02afa:tutorials/resource-tables.md (measured at lit-gpt commit 8641822)"}
    ft, notes = fine_tuning_from_row(row)
    assert ft.fused_qkv_views and any("fused qkv" in n for n in notes)
    # an architecture cited from LitGPT's config in the notes of another stack's row does not count
    ft, _ = fine_tuning_from_row({**row, "source": "pytorch/torchtune@1814feb17:README.md",
                                 "notes": "Arch: Llama 3.2 3B (litgpt config.py Llama-3.2-3B)"})
    assert not ft.fused_qkv_views


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(["llama-2-7b", "llama-3-8b", "gpt3-1.3b"]), tp=st.sampled_from([1, 2, 4]))
def test_views_never_lower_the_saved_set_without_dropout(name, tp):
    model = load_model(name)
    plan = _plan(True, tp=tp)
    assert fused_qkv_activation_delta_per_token(model, plan.fine_tuning, saved_context(model, plan)) >= 0.0
