"""Activations Hugging Face transformers modules keep in eager PyTorch (`Framework.TRANSFORMERS`, not
under `--compile model`) beyond the saved set the operator inventory counts (layers.operators; the
Korthikanti accounting of Megatron's fused kernels), per token and layer. Added by
`memory.layer_activation_bytes_per_token`, so `training_memory` and the plan search's screen
(`memory_grid`) read the same function. b: activation bytes (2 under bf16 / fp16 autocast).

Eager RMSNorm (`norm_activation_delta_per_token`; transformers modeling_llama.py LlamaRMSNorm.forward:
`hidden_states.to(torch.float32)`, `variance = hidden_states.pow(2).mean(-1, keepdim=True)`,
`hidden_states * torch.rsqrt(variance + eps)`, `self.weight * hidden_states.to(input_dtype)`). Autograd
(torch/csrc/autograd/FunctionsManual + derivatives.yaml): PowBackward0 saves `self`, the fp32 input;
MulBackward0 saves an operand only when the other operand needs a gradient. So the norm keeps its
input in fp32, 4 B per hidden element where the fused norm keeps b: (4 - b) h / sp more per norm.
When the norm's weight trains and the model is fp32 under autocast (finetune_memory.
autocast_over_fp32_model: mul is not an autocast op, `weight * y` runs in fp32) the product also
keeps its fp32 operand y for the weight's gradient: 4 h / sp more. A frozen weight (LoRA) keeps
nothing for it. A LayerNorm under autocast (`layer_norm` is on autocast's fp32 list) also keeps an
fp32 copy of its input; it has no separate `weight * y`. Only the layers' pre-norms
("layer_norms") are counted here; per-head q/k norms and MLA's latent norms keep the inventory's count.

PEFT's fp32 adapters (`peft_adapter_activation_delta_per_token`; peft tuners/lora/layer.py
`Linear.forward`: `x = self._cast_input_dtype(x, lora_A.weight.dtype)` then `lora_B(lora_A(dropout(x)))`,
adapters kept in fp32 by `get_peft_model(..., autocast_adapter_dtype=True)`): over a 16-bit base each
adapted projection casts its input to fp32 and autocast casts that back to b for lora_A's matmul
(`cached_cast` caches only leaves that require grad, never an activation), and lora_A saves its own
cast for its weight gradient. `finetune_activations` counts one saved input per adapted linear
(q, k and v reading one tensor); here each adapted projection keeps its own: (adapted - 1) x the
input more, and for the attention output projection, whose input `finetune_activations` leaves to
FlashAttention's saved `out`, every adapter's copy (adapted x the input). With LoRA dropout > 0 each
adapter already keeps its own dropped copy and mask in that count (dropout runs on the fp32 cast,
whose bool mask is saved; lora_A saves the b-byte cast of the dropped tensor): no change. Adapters
stated 16-bit (`master_weights` none: PEFT before 0.12.0, or `autocast_adapter_dtype=False`;
`finetune_time.peft_fp32_adapters`) are cast nowhere: no change either.
"""

from __future__ import annotations

from gpuplan.layers.inventory import layer_ops
from gpuplan.layers.operators import Norm, Saved
from gpuplan.specs.execution import Framework
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.plan import TrainPlan
from gpuplan.workloads.training.finetune_activations import _input_saved_bytes
from gpuplan.workloads.training.finetune_memory import autocast_over_fp32_model
from gpuplan.workloads.training.finetune_time import peft_fp32_adapters
from gpuplan.workloads.training.lora import adapted, layer_projections

#: bytes per element of the fp32 tensors eager modules save
FP32_BYTES = 4.0


def eager_transformers(plan: TrainPlan) -> bool:
    """A plan whose layers run transformers' modules op by op: `Framework.TRANSFORMERS`, no torch.compile."""
    return plan.framework is Framework.TRANSFORMERS and not plan.compiled_model


def hf_activation_delta_per_token(model: ModelSpec, plan: TrainPlan, layer: int, saved: Saved) -> float:
    """Bytes per token one layer keeps in eager transformers beyond the inventory's (and
    `finetune_activations`') count: the eager norms' and PEFT's fp32 adapters' (module docstring);
    0 for any other framework or a compiled model."""
    if not eager_transformers(plan):
        return 0.0
    return (norm_activation_delta_per_token(model, plan, layer, saved)
            + peft_adapter_activation_delta_per_token(model, plan, layer, saved))


def norm_activation_delta_per_token(model: ModelSpec, plan: TrainPlan, layer: int, saved: Saved) -> float:
    """(4 - b) h / sp per pre-norm (its fp32 input), plus 4 h / sp per RMSNorm whose weight trains
    over an fp32 model under autocast (the fp32 `weight * y` operand; module docstring)."""
    trains_fp32_weight = autocast_over_fp32_model(plan)
    delta = 0.0
    for op in layer_ops(model, layer).ops:
        if not isinstance(op, Norm) or op.name != "layer_norms":
            continue
        elements = op.instances * op.width / saved.sp
        delta += max(FP32_BYTES - saved.act_bytes, 0.0) * elements
        if trains_fp32_weight and not op.with_bias:
            delta += FP32_BYTES * elements
    return delta


def peft_adapter_activation_delta_per_token(model: ModelSpec, plan: TrainPlan, layer: int, saved: Saved) -> float:
    """One saved b-byte input per adapted projection instead of one per linear (module docstring):
    (adapted - 1) x the linear's saved input, adapted x for the attention output over fused attention;
    0 without adapters, with LoRA dropout, or without fp32 adapters (`peft_fp32_adapters`: the compute
    dtype is already fp32, or the adapters are stated 16-bit)."""
    ft = plan.fine_tuning
    if not ft.adapters or ft.lora_dropout > 0 or not peft_fp32_adapters(plan.framework, ft, saved.act_bytes):
        return 0.0
    hits: dict[str, int] = {}
    for p in layer_projections(model, layer):
        if adapted(p, ft.targets):
            hits[p.op] = hits.get(p.op, 0) + 1
    delta = 0.0
    for op in layer_ops(model, layer).linears:
        n = hits.get(op.name, 0)
        if not n:
            continue
        attention_out = op.name == "out" and saved.fused_attention  # finetune_activations left it to FlashAttention
        copies = n if attention_out else n - 1
        delta += copies * _input_saved_bytes(op, saved) * saved.act_bytes / saved.linear_input_bytes
    return delta


__all__ = ["FP32_BYTES", "eager_transformers", "hf_activation_delta_per_token", "norm_activation_delta_per_token",
           "peft_adapter_activation_delta_per_token"]
