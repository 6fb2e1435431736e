"""Activations of a fine-tuning plan that differ from ordinary training's saved set, per token and
layer: added by `memory.layer_activation_bytes_per_token` to the layer's operators' `saved_bytes`
(layers.operators; Korthikanti et al. 2022 Table 2 term by term), so the one-plan memory model and
the plan search's screen (`memory_grid`) read the same function.

Activations through a frozen base (`adapter_activation_delta_per_token`): a frozen projection needs
no weight gradient, so its input is not kept for it (PyTorch's autograd saves mm's `self` only when
the weight's gradient is computed): the layer's saved set loses the inputs of the frozen projections
no other operator keeps (the attention output stays: FlashAttention keeps `out` for its own
backward). An adapted projection keeps its input for A's gradient (once per input tensor: q, k and v
read the same one), or with LoRA dropout p > 0 each adapter keeps its own dropped copy (b per element)
and mask (1 byte: `native_dropout`'s bool mask) instead; and B keeps A's output, b x r per token and
adapter.

A 4-bit base under bitsandbytes before 0.43.2 (`FineTuning.base_matmul_keeps_input`) is the
exception: its `MatMul4Bit.forward` stored `ctx.tensors = (A, B)` whenever an input needed a gradient
(bitsandbytes/autograd/_functions.py at 0.41.1 and 0.43.1; PR #1270, commit 9e753741 of 2024-07-16,
changed it to `(None, B)` because backward uses only B), so every quantised projection keeps its
input as in ordinary training: nothing is removed, and the adapters add only their own saves.

Eager modules (`eager_activation_delta_per_token`): a fine-tuning step on a plain PyTorch loop
(`finetune_memory.pytorch_loop`) not under `torch.compile` (the plan's
`compiled_model`, `--compile model`) runs the model's
modules op by op. A gated FFN is then `down(silu(gate(x)) * up(x))` (transformers LlamaMLP.forward;
LitGPT lit_gpt/model.py LLaMAMLP.forward at 8641822: `torch.nn.functional.silu(x_fc_1) * x_fc_2`):
silu keeps its input (gate's output), the product keeps both of its operands (silu's output and up's
output) and down keeps the product if it needs it. The inventory's gated activation (layers.operators
.Activation) counts Megatron's fused SwiGLU, which keeps only its input (gate and up, 2 f) and
recomputes the rest (megatron/core/fusions/fused_bias_swiglu.py `ctx.save_for_backward(input)`): eager
keeps silu's output besides, b x f per token and active copy (/ tp, / etp for routed experts).
torch.compile's partitioner (min-cut rematerialisation) recomputes that pointwise output instead.

Fused QKV (`fused_qkv_activation_delta_per_token`, `FineTuning.fused_qkv_views`): LitGPT computes q, k
and v with one projection and splits its output by views (lit_gpt/model.py@8641822
`CausalSelfAttention.forward`: `qkv.view(B, T, g, a/g + 2, d).permute(0, 2, 3, 1, 4)`, `split`, `k.expand` /
`v.expand` to a heads, `reshape(B, -1, T, d)`; RoPE's `torch.cat` makes q and k new tensors). With as many
key/value heads as query heads (a = g) the expand is a no-op and `v.reshape` stays a view, so the value
SDPA (or flash_attn_func) saves keeps the whole fused output alive: its q and k parts, b (a + g) d per
token, beyond the inventory's count. With fewer (GQA) the expanded k and v are reshaped into copies of a
heads each: 2 b (a - g) d more. Its LoRA (lit_gpt/lora.py@8641822 `LoRAQKVLinear.forward`:
`F.linear(self.lora_dropout(x), self.lora_A)` with one A of r x the enabled parts) drops the input once
for all adapted parts: one dropped copy and mask, where separate adapters keep one each. When it adapts
some but not all of q, k and v (its default: q and v, finetune/lora.py@8641822) it places B's output
into the fused width with `zero_pad` (lit_gpt/lora.py@8641822): `result.index_copy(1, lora_ind,
x.reshape(-1, sum(self.qkv_shapes)))` on a copy of B's transposed output, and PyTorch keeps that source
for backward (derivatives.yaml, `index_copy`: the source's gradient is `grad.index_select(dim,
index).expand_as(source)`, so autograd saves `source`): b x the adapted parts' width per token
(`fused_qkv_zero_pad_per_token`; a d for q, g d for each of k and v).
"""

from __future__ import annotations

from gpuplan.layers.inventory import layer_ops
from gpuplan.layers.operators import Activation, Linear, Saved, Shard
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.plan import TrainPlan
from gpuplan.workloads.training.finetune_memory import pytorch_loop
from gpuplan.workloads.training.lora import adapted, layer_projections


def fine_tuning_activation_delta_per_token(model: ModelSpec, plan: TrainPlan, layer: int, saved: Saved) -> float:
    """Bytes per token a fine-tuning plan adds to (negative: removes from) one layer's saved set of
    ordinary training: the frozen base's and the eager modules' deltas (module docstring)."""
    return (adapter_activation_delta_per_token(model, plan.fine_tuning, layer, saved)
            + eager_activation_delta_per_token(model, plan, layer, saved)
            + fused_qkv_activation_delta_per_token(model, plan.fine_tuning, saved)
            + fused_qkv_zero_pad_per_token(model, plan.fine_tuning, saved))


#: the parts of LitGPT's fused projection and the LoRA target that adapts each
FUSED_QKV_PARTS = (("q_proj", "q"), ("k_proj", "kv"), ("v_proj", "kv"))


def fused_qkv_zero_pad_per_token(model: ModelSpec, ft: FineTuning, saved: Saved) -> float:
    """What LitGPT's fused-QKV LoRA keeps to place its update when it adapts some but not all of q, k
    and v (module docstring, "Fused QKV"): the `index_copy` source, b x (a d if q is adapted + g d for
    each of k and v adapted) / tp per token; 0 when all three or none are adapted, without
    `fused_qkv_views`, or for MLA."""
    if not ft.fused_qkv_views or not ft.adapters or model.mla is not None:
        return 0.0
    widths = {"q": model.heads * model.head_dim, "kv": model.kv_heads * model.head_dim}
    hit = [widths[part] for target, part in FUSED_QKV_PARTS if target in ft.targets]
    if len(hit) in (0, len(FUSED_QKV_PARTS)):
        return 0.0
    return saved.act_bytes * sum(hit) / saved.tp


def fused_qkv_activation_delta_per_token(model: ModelSpec, ft: FineTuning, saved: Saved) -> float:
    """What SDPA's saved key and value hold beyond the inventory's count when q, k and v are split from
    one fused output by views (module docstring, "Fused QKV"): b (a + g) d / tp with a = g (the value
    is a view of the whole output), 2 b (a - g) d / tp with a > g (expanded copies); 0 without
    `fused_qkv_views` or for MLA (its own projections)."""
    if not ft.fused_qkv_views or model.mla is not None:
        return 0.0
    a, g, d = model.heads, model.kv_heads, model.head_dim
    kept = (a + g) * d if a == g else 2 * (a - g) * d
    return saved.act_bytes * kept / saved.tp


def eager_activation_delta_per_token(model: ModelSpec, plan: TrainPlan, layer: int, saved: Saved) -> float:
    """What an eager gated FFN keeps beyond the fused SwiGLU the inventory counts: silu's output,
    half of the gated activation's saved input (b x f per active copy, split like it); 0 for an
    ungated FFN (GELU keeps only its input, as counted), compiled steps and other stacks (module
    docstring, "Eager modules")."""
    if not pytorch_loop(plan) or plan.compiled_model:
        return 0.0
    return sum(op.saved_bytes(saved) / 2.0 for op in layer_ops(model, layer).ops
               if isinstance(op, Activation) and op.gated)


def adapter_activation_delta_per_token(model: ModelSpec, ft: FineTuning, layer: int, saved: Saved) -> float:
    """Bytes per token a frozen base with adapters adds to (or, negative, removes from) one layer's
    saved set of ordinary training (module docstring, "Activations through a frozen base")."""
    if not ft.adapters:
        return 0.0
    b = saved.act_bytes
    by_op: dict[str, list] = {}
    for p in layer_projections(model, layer):
        by_op.setdefault(p.op, []).append(p)
    delta = 0.0
    for op in layer_ops(model, layer).linears:
        projections = by_op.get(op.name, [])
        hit = [p for p in projections if adapted(p, ft.targets)]
        kept_for_weight = _input_saved_bytes(op, saved)
        attention_out = op.name == "out" and saved.fused_attention  # FlashAttention keeps `out` itself
        kept_by_base = ft.base_matmul_keeps_input and bool(projections)  # bitsandbytes < 0.43.2
        if (not hit or ft.lora_dropout > 0) and not attention_out and not kept_by_base:
            delta -= kept_for_weight
        one_dropout = ft.fused_qkv_views and op.name == "qkv"  # LoRAQKVLinear: one dropped input for q, k, v
        for j, p in enumerate(hit):
            per_copy = p.active_instances if p.shard is Shard.EXPERT else 1.0
            if ft.lora_dropout > 0 and not (one_dropout and j > 0):
                in_local = kept_for_weight / saved.linear_input_bytes / per_copy if saved.linear_input_bytes else 0.0
                delta += (b + 1.0) * in_local * per_copy
            delta += b * ft.rank * per_copy
    return delta


def _input_saved_bytes(op: Linear, saved: Saved) -> float:
    """The part of a linear's saved bytes that is its input (kept for the weight gradient): its
    `saved_bytes` less the outputs it keeps for other reasons (the router's fp32 probabilities, a
    routed expert's output kept by the unpermute)."""
    total = op.saved_bytes(saved)
    if op.shard is Shard.EXPERT:
        kept = saved.act_bytes * op.out_features if op.keeps_routed_output else 0.0
        return total - kept * op.active_instances
    return total - op.saved_output_bytes * op.out_features


__all__ = ["FUSED_QKV_PARTS", "adapter_activation_delta_per_token", "fused_qkv_zero_pad_per_token", "eager_activation_delta_per_token", "fused_qkv_activation_delta_per_token",
           "fine_tuning_activation_delta_per_token"]
