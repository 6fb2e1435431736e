"""The memory savings a plan switches on (`TrainPlan.memory_savings`, specs.memory_savings), as
changes to the training memory model's terms. Sources: DeepSeek-V3 technical report (DeepSeek-AI 2024,
arXiv 2412.19437), sec. 3.2.3 and 3.3.2, quoted per term.

Activations (`memory_saving_delta_per_token`, bytes per token and layer, <= 0; added by
`memory.layer_activation_bytes_per_token`, so `training_memory` and the plan search's screen read it).
b: activation bytes, li: bytes of a saved linear input (1 under FP8), tp / sp / etp as in `layers.operators.Saved`.

- norm_recompute. Sec. 3.2.3: "we recompute all RMSNorm operations and MLA up-projections during
  back-propagation, thereby eliminating the need to persistently store their output activations".
  A norm's output is the input of the linear(s) it feeds; re-running the norm from its kept input
  (the `layer_norms` / latent-norm operators keep it) means those linears keep nothing: the linears
  reading the layer's normed input (li h / sp: QKV or MLA q_a, fc1, the router's input but not its
  fp32 probabilities) and those right after a norm in the inventory (MLA q_b, kv_b: li x latent).
  Routed experts' fc1 inputs are the dispatched tokens, not a norm output: unchanged.
- up_projection_recompute. Same sentence. MLA's Q, K, V (b a (d_nope + d_rope) + b a (d_nope + d_rope)
  + b a d_v per token, / tp) are re-made from the latents in backward: the core keeps its fp32 LSE and
  the decoupled RoPE key b d_rope, which the down-projection makes (shared by the heads, not TP-split;
  DeepSeek-V2 sec. 2.1.3). Models without MLA: no change.
- expert_activation_recompute. Sec. 3.3.2 (2): "we cache the inputs of the SwiGLU operator and
  recompute its output in the backward pass. These activations are also stored in FP8". A routed
  expert's activation keeps its input in li instead of b bytes (li x 2 f per routed copy for a gated
  one) and the down projection keeps no input (li f / etp per routed copy less).

Optimizer (`optimizer_bytes_per_param`): bf16_optimizer_states. Sec. 3.3.2: "we adopt the BF16 data
format instead of FP32 to track the first and second moments in the AdamW optimizer ... the master
weights (stored by the optimizer) and gradients (used for batch size accumulation) are still retained
in FP32": the moments take 2 + 2 instead of 4 + 4 bytes per parameter, 4 fewer (12 -> 8 B with an fp32
master copy). AdamW only.

Already counted elsewhere, so no term here: FP8 caching of linear inputs and of the dispatched tokens
(`memory.linear_input_bytes`: li = 1 under fp8; sec. 3.3.2 "cache the activations in FP8"), DualPipe's
two parameter copies and pp + 1 micro-batches (`memory_terms.dualpipe_*`), the MTP module sharing the
embedding and output head (`memory.rank_params` counts the MTP's layer, projection and norms only),
the parameter EMA in host memory (sec. 3.2.3; no EMA is counted on the GPU).
"""

from __future__ import annotations

from functools import lru_cache

from gpuplan.layers.inventory import layer_ops
from gpuplan.layers.operators import Activation, AttentionCore, Linear, Norm, Saved, Shard
from gpuplan.specs.memory_savings import MemorySaving
from gpuplan.specs.model import ModelSpec

#: AdamW moment bytes per parameter saved by keeping m and v in BF16 instead of FP32: 2 x (4 - 2).
BF16_MOMENTS_SAVED_BYTES = 4.0


def optimizer_bytes_per_param(plan, optimizer_bytes: float) -> float:
    """Optimizer bytes per parameter with the plan's savings: less `BF16_MOMENTS_SAVED_BYTES` under
    bf16_optimizer_states (module docstring)."""
    if MemorySaving.BF16_OPTIMIZER_STATES in plan.memory_savings:
        return float(optimizer_bytes) - BF16_MOMENTS_SAVED_BYTES
    return float(optimizer_bytes)


def memory_saving_delta_per_token(model: ModelSpec, plan, layer: int, saved: Saved) -> float:
    """Change (<= 0) of the bytes one token keeps for one layer under the plan's activation savings
    (module docstring); 0 without any."""
    if not plan.memory_savings:
        return 0.0
    return _delta(model, layer, saved, plan.memory_savings)


@lru_cache(maxsize=65536)
def _delta(model: ModelSpec, layer: int, saved: Saved, savings: tuple[MemorySaving, ...]) -> float:
    ops = layer_ops(model, layer).ops
    delta = 0.0
    for i, op in enumerate(ops):
        previous = ops[i - 1] if i else None
        if (MemorySaving.NORM_RECOMPUTE in savings and isinstance(op, Linear) and op.shard is not Shard.EXPERT
                and (op.reads_layer_input or isinstance(previous, Norm))):
            delta -= op.saved_bytes(saved) - op.saved_output_bytes * op.out_features  # its input only
        if MemorySaving.UP_PROJECTION_RECOMPUTE in savings and isinstance(op, AttentionCore) and model.mla:
            delta -= saved.act_bytes * (op.qkv_elements / saved.tp - model.mla.qk_rope_head_dim)
        if MemorySaving.EXPERT_ACTIVATION_RECOMPUTE in savings and getattr(op, "shard", None) is Shard.EXPERT:
            if isinstance(op, Activation):
                delta -= (saved.act_bytes - saved.linear_input_bytes) / saved.act_bytes * op.saved_bytes(saved)
            elif isinstance(op, Linear) and isinstance(previous, Activation):  # the down projection's input
                delta -= saved.linear_input_bytes * op.in_features / saved.etp * op.active_instances
    return delta


__all__ = ["BF16_MOMENTS_SAVED_BYTES", "memory_saving_delta_per_token",
           "optimizer_bytes_per_param"]
