"""PyTorch-native fp16 mixed precision (torch.autocast + GradScaler) in an eager framework: the HBM
traffic it adds to a step beyond Megatron's fp16 path (fp16 parameters with fp32 main copies and
fused kernels).

When: precision fp16 under a framework that is not Megatron / DeepSpeed / torchtitan / MaxText (HF
Trainer's `fp16=True`, Composer's `amp_fp16`, a plain PyTorch loop). Native fp16 AMP keeps the
parameters in fp32: `torch.cuda.amp.GradScaler.unscale_` refuses fp16 gradients ("Attempting to
unscale FP16 gradients."), and HF Trainer's `fp16=True` is `torch.autocast(dtype=float16)` +
GradScaler over an fp32 model. The same autocast over fp32 parameters runs in bf16 under
`Framework.TRANSFORMERS` with fp32 master weights (HF Trainer `bf16=True` over a model loaded in its
default fp32: `autocast_over_fp32`): its weight casts are counted here, its fp32 residual stream by
`step.hf_eager`, and it has no GradScaler. Hence, per layer and micro-batch (bytes per element):

- Weight casts (`weight_cast_seconds`): autocast casts each fp32 weight to fp16 at its first matmul
  in an autocast region (aten/src/ATen/autocast_mode.cpp `cached_cast`: read 4, write 2), once per
  forward and again in a recomputed forward (checkpointing re-enters autocast with a fresh cache);
  in the backward the cast's gradient turns the fp16 weight gradient into fp32 (read 2, write 4)
  and AccumulateGrad adds it to the fp32 `.grad` (read 4 + 4, write 4): 6 B forward, 6 B recompute,
  18 B backward per linear weight element of the layer. Frozen weights (LoRA / QLoRA) have no
  weight gradient: their casts are the fine-tuning model's (finetune_time), not counted here.
- The fp32 residual stream (`elementwise_bytes_per_token`): autocast runs layer_norm in fp32
  (autocast's fp32 op list), so every norm output, and every residual add that meets it, is fp32:
  the norm and residual bytes of `LayerOps.hidden_elementwise_bytes` move at 4 B instead of 2, and
  each projection that reads the norm output (`Projection.reads_layer_input`: q, k, v, gate, up
  as modules of their own, as HF models build them) casts it to fp16 first (read 4, write 2 per
  hidden element). Backward: 2 x forward, as every elementwise term (step.compute).
- Unfused attention (`UNFUSED_AMP_SCORE_BYTES_FWD` / `_BWD`): eager attention (HF
  BertSelfAttention / LlamaAttention "eager") runs the score chain op by op, and the additive mask is
  in the model's dtype (fp32), so softmax and dropout run in fp32.
- GradScaler (`grad_scaler_seconds`): `_amp_foreach_non_finite_check_and_unscale_` reads and writes
  every fp32 gradient once per step (4 + 4 B per trainable element).
"""

from __future__ import annotations

from gpuplan.layers.operators import Shard
from gpuplan.specs import Precision
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.finetune_memory import autocast_over_fp32_model
from gpuplan.workloads.training.lora import layer_projections

#: Frameworks whose fp16 path is their own (fp16 parameters, fp32 main copies in the optimizer,
#: fused kernels) or that have none: native AMP does not apply.
NOT_NATIVE_AMP = (Framework.MEGATRON, Framework.DEEPSPEED, Framework.TORCHTITAN, Framework.MAXTEXT)
#: Bytes per linear weight element and micro-batch (module docstring): the forward cast (read 4,
#: write 2), the same in a recomputed forward, and the backward cast of the gradient (read 2, write
#: 4) plus its accumulation into the fp32 `.grad` (read 4 + 4, write 4).
WEIGHT_CAST_BYTES_FWD = 6.0
WEIGHT_CAST_BYTES_BWD = 6.0 + 12.0
#: Bytes per hidden element of casting a norm output to fp16 for one projection (read 4, write 2).
INPUT_CAST_BYTES = 6.0
#: Per score element, forward, eager attention under fp16 autocast: QK^T written (2), scaled by
#: 1/sqrt(d) (read 2, write 2), the fp32 mask added (read 2, write 4), fp32 softmax (read 4, write 4),
#: dropout (read 4, write 4, mask 1), cast to fp16 for the AV matmul (read 4, write 2), read by it (2):
#: 37 B (Megatron's fused causal scale-mask-softmax path: 12 at s = 2048, step.unfused_attention.score_bytes).
UNFUSED_AMP_SCORE_BYTES_FWD = 37.0
#: Backward: dP written by the dO V^T GEMM (2), P read by dV = P^T dO (2), the cast's backward to fp32
#: (read 2, write 4), dropout's backward (read 4 + mask 1, write 4), softmax's (read 4 + its saved
#: fp32 output 4, write 4), the mask add's back to fp16 (read 4, write 2), the scale's (read 2, write
#: 2), dS read by the dQ and dK GEMMs (2 x 2): 45 B.
UNFUSED_AMP_SCORE_BYTES_BWD = 45.0
#: GradScaler's unscale and inf check, per trainable element and step: read 4, write 4.
GRAD_SCALER_BYTES = 8.0


def native_amp(ctx) -> bool:
    """Whether the step runs under PyTorch-native fp16 AMP (module docstring)."""
    return ctx.precision is Precision.FP16 and ctx.framework not in NOT_NATIVE_AMP


def autocast_over_fp32(ctx) -> bool:
    """Whether the model's parameters are fp32 under torch.autocast: `transformers` with fp32 master
    weights (HF Trainer `bf16=True` / `fp16=True` over a model loaded in fp32, its default dtype)
    that trains every weight; a frozen base is loaded in its 16-bit or quantised storage. The one rule
    is `finetune_memory.autocast_over_fp32_model`, which reads the same three fields of a plan."""
    return autocast_over_fp32_model(ctx)


def _weight_elements(ctx, g) -> float:
    """Linear weight elements of one layer on one GPU (layer mean of the dense and MoE layers;
    routed experts divided over ep)."""
    total = 0.0
    for layer, weight in ctx.layer_mix():
        for p in layer_projections(ctx.model, layer):
            k, n = p.local_shape(g.tp, g.etp)
            count = p.instances / g.ep if p.shard is Shard.EXPERT else 1.0
            total = total + weight * count * k * n
    return total


def weight_cast_seconds(ctx, g):
    """(forward, backward) seconds of autocast's weight casts of one layer per micro-batch; a
    recomputed forward casts again (its forward figure). 0 outside native AMP and for frozen bases."""
    if not (native_amp(ctx) or autocast_over_fp32(ctx)) or ctx.fine_tuning.adapters:
        return 0.0, 0.0
    w = _weight_elements(ctx, g)
    return w * WEIGHT_CAST_BYTES_FWD / ctx.hbm_bytes_s, w * WEIGHT_CAST_BYTES_BWD / ctx.hbm_bytes_s


def elementwise_bytes_per_token(ctx, g, hidden_bytes):
    """Forward elementwise bytes per token of one layer's attention block under native AMP, given
    the 16-bit figure `hidden_bytes` (norms and residual adds per token, already divided over tp
    where sequence parallel): those at fp32 (x 2) plus the fp16 casts of the norm output for each
    projection that reads it; `hidden_bytes` unchanged outside native AMP."""
    if not native_amp(ctx):
        return hidden_bytes
    return 2.0 * hidden_bytes + norm_readers(ctx) * INPUT_CAST_BYTES * float(ctx.hidden)


def norm_readers(ctx) -> float:
    """Linear modules per layer that read a norm output, each casting it under autocast (q, k, v,
    gate, up as HF builds them; a fused module counts once), layer mean of the dense and MoE layers."""
    readers = 0.0
    for layer, weight in ctx.layer_mix():
        readers += weight * sum(1.0 for p in layer_projections(ctx.model, layer)
                                if p.reads_layer_input and p.shard is not Shard.EXPERT)
    return readers


def unfused_score_bytes(ctx, fused_path: tuple[float, float]) -> tuple[float, float]:
    """(forward, backward) HBM bytes per attention score element of unfused attention: the eager
    chain under native AMP (UNFUSED_AMP_SCORE_BYTES_*), else `fused_path` (Megatron's)."""
    return (UNFUSED_AMP_SCORE_BYTES_FWD, UNFUSED_AMP_SCORE_BYTES_BWD) if native_amp(ctx) else fused_path


def grad_scaler_seconds(ctx, trainable_elements):
    """GradScaler's unscale of `trainable_elements` fp32 gradients per step (0 outside native AMP)."""
    if not native_amp(ctx):
        return 0.0
    return trainable_elements * GRAD_SCALER_BYTES / ctx.hbm_bytes_s


__all__ = ["GRAD_SCALER_BYTES", "INPUT_CAST_BYTES", "NOT_NATIVE_AMP", "UNFUSED_AMP_SCORE_BYTES_BWD",
           "UNFUSED_AMP_SCORE_BYTES_FWD", "WEIGHT_CAST_BYTES_BWD", "WEIGHT_CAST_BYTES_FWD", "elementwise_bytes_per_token",
           "autocast_over_fp32", "grad_scaler_seconds", "native_amp", "norm_readers", "unfused_score_bytes", "weight_cast_seconds"]
