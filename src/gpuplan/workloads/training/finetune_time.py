"""Step-time terms of fine-tuning: what a frozen base, adapters, a quantised base, another optimizer
and offload change in `workloads.training.step` (compute, data, optimizer, assembly) (which calls these where a plan's
`fine_tuning` is not ordinary training).

Per layer and micro-batch on one GPU, t tokens (step.inputs.PlanAxes), b activation bytes:
- Frozen base (LoRA / QLoRA): a frozen projection computes no weight gradient, so its backward is
  one GEMM of the forward's shape (the input gradient) instead of two (Narayanan et al. 2021 sec.
  5.1 counts 2 x forward for the two): the layer's backward loses one forward's GEMM time
  (`frozen_weight_gradient_seconds`); the output head likewise.
- Adapters (`adapter_seconds`): per adapted projection (in k, out n on this GPU, rank r) the forward
  runs x A^T (t x r x k) and (x A^T) B^T (t x n x r); the backward runs the input and weight
  gradient of each (2 x those). Elementwise, PEFT `lora.Linear.forward`
  (`result = result + lora_B(lora_A(dropout(x))) * scaling`): forward, the scale (read b, write b)
  and the add (read 2 b, write b) of B's output, 5 b n per token, and with LoRA dropout the dropped
  copy and its mask ((2 b + 1) k); backward, the add passes its gradient to both operands without a
  kernel, the scale's backward multiplies it by the scaling (2 b n), and the input gradient through A
  is added to the base's (autograd sums the gradients of a tensor with two consumers: read 2 b,
  write b, 3 b k), with dropout its backward (read b + the mask, write b: (2 b + 1) k).
  Under `Framework.TRANSFORMERS` (PEFT) the adapters are fp32 over a 16-bit base (`get_peft_model`'s
  `autocast_adapter_dtype=True`, peft/tuners/tuners_utils.py `_cast_adapter_dtype`: bf16 / fp16
  adapter weights upcast to fp32; peft 0.21 on an H200 reported float32), and `lora.Linear.forward`
  casts each adapted input to the adapter's dtype (`x = self._cast_input_dtype(x, lora_A.weight.dtype)`:
  read b, write 4), which autocast casts back for lora_A's matmul (read 4, write b); the backward
  runs both casts' gradients: 2 (4 + b) k forward and again backward (`PEFT_FP32_INPUT_CAST_BYTES`).
  Adapters stated 16-bit (`master_weights` none: no fp32 copy of any trainable weight) have neither
  cast: PEFT before 0.12.0 (2024-07-24; `autocast_adapter_dtype` came with PR #1706, commit ae1ae20b7)
  moved each adapter to its base layer's float dtype (`_move_adapter_to_device_of_base_layer`), as
  `get_peft_model(..., autocast_adapter_dtype=False)` still does (`peft_fp32_adapters`).
- Quantised base (`dequantize_seconds`): every matmul of a quantised projection first dequantises
  it (base_weights.dequantize_bytes: read the stored bytes, write b per element), a memory-bound
  kernel at the achievable HBM bandwidth, once in the forward, once in the backward (the input
  gradient needs the weight) and once more in a recomputed forward.
- Optimizer step (`optimizer_seconds`): `optimizer_states.step_bytes_per_element` per trainable
  element this GPU updates (its ZeRO shard), memory-bound on the GPU; with offload, on the CPU
  (`offload.cpu_optimizer_seconds`, fp32 states and master, the node's host bandwidth shared by its
  GPUs) plus the gradients to the host and the updated 16-bit weights back over the system's host
  link (`offload.host_link_seconds`: PCIe, or NVLink-C2C on Grace superchips).
- Offloaded parameters (`offload_seconds`, FSDP CPUOffload(offload_params=True), ZeRO-3
  offload_param, ZeRO-Infinity): each micro-batch copies this GPU's parameter shard to the GPU before
  the forward and again before the backward (FSDP frees the unsharded parameters after the forward,
  `reshard_after_forward`, and gathers them again for the backward) and its trainable gradients back:
  copies on their own stream, overlapped with the micro-batch's compute (prefetch of the next unit):
  only the excess over the compute is exposed.
"""

from __future__ import annotations

import numpy as np

from gpuplan.layers.operators import Shard
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import BaseDtype, FineTuning, MasterWeights, Offload
from gpuplan.workloads.training.base_weights import dequantize_bytes, linear_storage_bytes
from gpuplan.workloads.training.lora import adapted, head_projection, layer_adapter_params, layer_projections
from gpuplan.workloads.training.offload import cpu_optimizer_seconds, host_link_seconds
from gpuplan.workloads.training.optimizer_states import step_bytes_per_element

#: LoRA's elementwise bytes per token, in units of b (module docstring): forward per output element
#: (scale 2 + add 3), backward per output element (the scale's backward 2) and per input element
#: (the gradient sum 3).
LORA_FORWARD_OUTPUT_BYTES_PER_B = 5.0
LORA_BACKWARD_OUTPUT_BYTES_PER_B = 2.0
LORA_BACKWARD_INPUT_BYTES_PER_B = 3.0


def peft_fp32_adapters(framework: Framework, fine_tuning: FineTuning, b: float) -> bool:
    """Whether PEFT keeps the adapters in fp32 over a b-byte compute dtype (module docstring):
    `Framework.TRANSFORMERS`, b < 4, and trainable weights not stated 16-bit (`master_weights` not none)."""
    return framework is Framework.TRANSFORMERS and b < 4.0 and fine_tuning.master_weights is not MasterWeights.NONE


def peft_fp32_input_cast_bytes(ctx, b: float) -> float:
    """Bytes per adapted input element of PEFT's cast to the fp32 adapters and autocast's cast back, one
    direction (module docstring): 2 (4 + b) where `peft_fp32_adapters`, else 0."""
    return 2.0 * (4.0 + b) if peft_fp32_adapters(ctx.framework, ctx.fine_tuning, b) else 0.0


def _rows(p, g):
    """(token rows, instances) of one projection's GEMM per micro-batch (step.compute.layer_gemm_calls)."""
    if p.shard is Shard.EXPERT:
        return g.ep * g.t_expert * p.active_instances / p.instances, p.instances / g.ep
    if p.shard is Shard.REPLICATED:
        return g.t_local, 1.0
    return g.t, 1.0


def act_bytes(ctx) -> float:
    return 4.0 if ctx.act_dtype == "fp32" else 2.0


def base_dtype(ctx, ft: FineTuning) -> BaseDtype:
    return ft.base_storage("fp16" if ctx.act_dtype == "fp16" else "bf16")


def adapter_seconds(ctx, g, gemm):
    """(forward, backward) seconds of one layer's adapters per micro-batch (module docstring);
    `gemm(ctx, m, n, k)` is step.compute.gemm_seconds."""
    ft: FineTuning = ctx.fine_tuning
    b, r = act_bytes(ctx), float(ft.rank)
    fwd = bwd = 0.0
    for layer, weight in ctx.layer_mix():
        for p in layer_projections(ctx.model, layer):
            if not adapted(p, ft.targets):
                continue
            k, n = p.local_shape(g.tp, g.etp)
            m, count = _rows(p, g)
            mm = count * (gemm(ctx, m, r, k) + gemm(ctx, m, n, r))
            dropout = (2 * b + 1) * k if ft.lora_dropout > 0 else 0.0
            per_input = dropout + peft_fp32_input_cast_bytes(ctx, b) * k  # each direction, per token
            elem_fwd = count * m * (LORA_FORWARD_OUTPUT_BYTES_PER_B * b * n + per_input)
            elem_bwd = count * m * (LORA_BACKWARD_OUTPUT_BYTES_PER_B * b * n + LORA_BACKWARD_INPUT_BYTES_PER_B * b * k + per_input)
            fwd = fwd + weight * (mm + elem_fwd / ctx.hbm_bytes_s)
            bwd = bwd + weight * (2.0 * mm + elem_bwd / ctx.hbm_bytes_s)
    return fwd, bwd


def dequantize_seconds(ctx, g):
    """Seconds of dequantising one layer's quantised base once (per forward, backward or recompute
    pass; 0 for a float base)."""
    ft: FineTuning = ctx.fine_tuning
    base = base_dtype(ctx, ft)
    if not base.quantized:
        return 0.0
    total = 0.0
    for layer, weight in ctx.layer_mix():
        for p in layer_projections(ctx.model, layer):
            k, n = p.local_shape(g.tp, g.etp)
            count = p.instances / g.ep if p.shard is Shard.EXPERT else 1.0
            total = total + weight * count * dequantize_bytes(k, n, base, act_bytes(ctx), ft.double_quant)
    return total / ctx.hbm_bytes_s


def layer_extra_seconds(ctx, g, gemm, gemm_forward):
    """(forward, backward) seconds a fine-tuning plan adds to one layer per micro-batch (negative:
    removes): adapters and dequantisation, less the frozen base's weight-gradient GEMMs (one forward
    GEMM time, `gemm_forward`)."""
    if not ctx.fine_tuning.adapters:
        return 0.0, 0.0
    a_fwd, a_bwd = adapter_seconds(ctx, g, gemm)
    dq = dequantize_seconds(ctx, g)
    return a_fwd + dq, a_bwd + dq - gemm_forward


def head_gemm_passes(ctx) -> float:
    """GEMMs of the output head's shape per micro-batch: 3 (forward, input and weight gradient), 2
    when the head is frozen (LoRA / QLoRA)."""
    return 2.0 if ctx.fine_tuning.adapters else 3.0


def head_adapter_seconds(ctx, g, gemm):
    """Forward + backward seconds of an adapted output head (lm_head among the targets), else 0."""
    ft: FineTuning = ctx.fine_tuning
    if not ft.adapters or "lm_head" not in ft.targets:
        return 0.0
    k, n = head_projection(ctx.model).local_shape(g.tp)
    r = float(ft.rank)
    return 3.0 * (gemm(ctx, g.t, r, k) + gemm(ctx, g.t, n, r))


def trainable_elements(ctx, g, sc, local_dense, local_experts):
    """Trainable elements one GPU of the busiest stage holds before ZeRO sharding: every local
    parameter under full fine-tuning; the adapters of its layers (and of the head) under LoRA."""
    ft: FineTuning = ctx.fine_tuning
    if not ft.adapters:
        return local_dense + local_experts
    per_layer = 0.0
    for layer, weight in ctx.layer_mix():
        per_layer = per_layer + weight * layer_adapter_params(ctx.model, layer, ft.targets, ft.rank, g.tp, g.etp, g.ep)
    head = head_projection(ctx.model).adapter_params(ft.rank, g.tp) if "lm_head" in ft.targets else 0.0
    return per_layer * sc.layers_per_stage + head


def _bytes(ctx):
    """(weight, gradient, state element) bytes of the trainable parameters (finetune_memory)."""
    b = act_bytes(ctx)
    pure = ctx.fine_tuning.master_weights is MasterWeights.NONE
    grad = b if pure else (4.0 if ctx.grad_fp32 else 2.0)
    return b, grad, (b if pure else 4.0)


def optimizer_seconds(ctx, g, elements, last_backward):
    """Optimizer step per step of one GPU updating `elements` trainable elements (its ZeRO shard):
    on the GPU, memory-bound; with offload, on the CPU plus the PCIe traffic of gradients out (behind
    the last backward) and 16-bit weights back (module docstring)."""
    ft: FineTuning = ctx.fine_tuning
    w, grad, s = _bytes(ctx)
    master = ft.master_weights is MasterWeights.FP32
    if not ft.offload.moves_optimizer:
        return elements * step_bytes_per_element(ft.optimizer, w, grad, s, master) / ctx.hbm_bytes_s
    nvme = ft.offload is Offload.NVME
    cpu = cpu_optimizer_seconds(elements, step_bytes_per_element(ft.optimizer, w, 4.0, 4.0, True),
                                np.minimum(g.tp * g.pp * g.dp * g.cp, ctx.system.gpus_per_node), ctx.system)
    grads_out = host_link_seconds(elements * grad, ctx.system, nvme)
    weights_in = host_link_seconds(elements * w, ctx.system, nvme)
    return cpu + np.maximum(0.0, grads_out - last_backward) + weights_in


def stage_storage_bytes(ctx, g, sc, local_dense, local_experts):
    """Bytes of the busiest stage's parameters on one GPU in their storage dtype (frozen base
    quantised, adapters and unquantised tensors in the activation dtype)."""
    ft: FineTuning = ctx.fine_tuning
    b = act_bytes(ctx)
    if not ft.adapters:
        return (local_dense + local_experts) * b
    base = base_dtype(ctx, ft)
    per_layer = 0.0
    linear_params = 0.0
    for layer, weight in ctx.layer_mix():
        for p in layer_projections(ctx.model, layer):
            k, n = p.local_shape(g.tp, g.etp)
            count = p.instances / g.ep if p.shard is Shard.EXPERT else 1.0
            per_layer = per_layer + weight * count * linear_storage_bytes(k, n, base, ft.double_quant)
            linear_params = linear_params + weight * count * k * n
    stage_linear = linear_params * sc.layers_per_stage
    rest = np.maximum(0.0, local_dense + local_experts - stage_linear)  # embeddings, norms, head, biases
    return per_layer * sc.layers_per_stage + rest * b + trainable_elements(ctx, g, sc, local_dense, local_experts) * b


def offload_seconds(ctx, g, sc, local_dense, local_experts):
    """Exposed host-link time of offloaded parameters per step (module docstring); 0 without."""
    ft: FineTuning = ctx.fine_tuning
    if not ft.offload.moves_params:
        return 0.0
    shard = g.dp * g.cp
    nvme = ft.offload is Offload.NVME
    params_in = host_link_seconds(2.0 * stage_storage_bytes(ctx, g, sc, local_dense, local_experts) / shard, ctx.system, nvme)
    _, grad, _ = _bytes(ctx)
    grads_out = host_link_seconds(trainable_elements(ctx, g, sc, local_dense, local_experts) * grad / shard, ctx.system, nvme)
    per_mb = np.maximum(0.0, params_in + grads_out - (sc.compute_mb + sc.recompute_mb))
    return g.m * per_mb


__all__ = ["adapter_seconds", "dequantize_seconds", "peft_fp32_adapters", "head_adapter_seconds", "head_gemm_passes", "layer_extra_seconds",
           "offload_seconds", "optimizer_seconds", "stage_storage_bytes", "trainable_elements"]
