"""Full activation checkpointing whose recompute stops early (PyTorch's non-reentrant checkpoint).

Non-reentrant `torch.utils.checkpoint` (PyTorch 2.1 on: early stop is its default, pytorch PR
#96866, 2023-03, "Make early stop the default for checkpoint and expose a way to disable") counts the
tensors a checkpointed block saved for backward in its first forward; the recompute in backward
raises `_StopRecomputationError` from the pack hook of the last of them (torch/utils/checkpoint.py,
`_recomputation_hook.pack_hook`: `if target_frame.early_stop and target_frame.recomp_counter[gid] ==
len(target_frame.weak_holders)`), so whatever the block computes after that save is not re-run.
Autograd saves an operator's inputs before the operator runs (tools/autograd/gen_variable_type.py:
`setup_derivative` emits `save_variables(info.all_saved_inputs, ...)` ahead of `emit_call`), so the
operator whose input save is the last one is skipped too.

In a pre-norm transformer layer (x + attn(norm(x)), then x + fc2(act(fc1(norm(x))))) the last save
is the down projection's: `mm` saves its input act(fc1(.)) and its weight, then nothing after it
saves (the residual add keeps nothing; `F.dropout` with p = 0 returns its input, ATen
`_dropout_impl`). The recompute therefore re-runs everything but the down-projection GEMM (and the
residual add, whose few bytes per hidden element are neglected here):

    recompute_layer = layer_forward - dense_share x fc2_forward

It does not apply, and the whole forward is recomputed, where something after fc2 saves a tensor: a
residual dropout mask (`ModelSpec.hidden_dropout` > 0), a norm after the FFN (Gemma 2/3's four norms
per layer), an MoE layer (the combine saves the experts' outputs and the router weights), or adapters
(PEFT's LoRA path runs after the frozen base matmul and saves its own inputs last); nor under stacks
that checkpoint another way (`Framework.checkpoint_stops_early`).
"""

from __future__ import annotations

from gpuplan.layers.inventory import LayerOps
from gpuplan.layers.operators import Linear, ResidualAdd
from gpuplan.workloads.training.step.inputs import StepContext

#: Layers with at most this many norms are pre-norm (one before attention, one before the MLP): no norm
#: reads the down projection's output (`ModelSpec.norms_per_layer`; Gemma 2/3 have 4).
PRE_NORM_NORMS_PER_LAYER = 2


def ends_with_down_projection(layer: LayerOps, norms_per_layer: int) -> bool:
    """Whether the down projection `fc2` holds the layer's last saved tensors: a dense FFN layer whose FFN
    group ends fc2 -> residual add without dropout, fc2 keeping no output, and no norm after the FFN."""
    if layer.moe or len(layer.ffn) < 2 or norms_per_layer > PRE_NORM_NORMS_PER_LAYER:
        return False
    down, add = layer.ffn[-2], layer.ffn[-1]
    return (isinstance(add, ResidualAdd) and not add.dropout and isinstance(down, Linear)
            and down.name == "fc2" and not down.saved_output_bytes)


def stops_before_down_projection(ctx: StepContext) -> bool:
    """Whether a full-recompute plan of this context skips the dense layers' fc2 GEMM in its recompute
    (module docstring): the stack checkpoints with early stop, no adapters, a pre-norm dense FFN."""
    if not ctx.framework.checkpoint_stops_early or ctx.fine_tuning.adapters or not ctx.dense_layers:
        return False
    return ends_with_down_projection(ctx.ops.dense_layer, ctx.model.norms_per_layer)


def skipped_recompute_seconds(ctx: StepContext, dense_down, dense_share: float):
    """Seconds per layer (layer mean) the early-stopped recompute does not re-run: dense_share x the
    dense down projection's forward GEMM seconds where `stops_before_down_projection`, else 0."""
    return dense_share * dense_down if stops_before_down_projection(ctx) else 0.0


__all__ = ["PRE_NORM_NORMS_PER_LAYER", "ends_with_down_projection", "skipped_recompute_seconds",
           "stops_before_down_projection"]
