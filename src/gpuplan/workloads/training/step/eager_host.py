"""The host's issue floor of an eager PyTorch training step (`Framework.TRANSFORMERS`): each phase of a
layer takes the longer of its GPU time and the time the host takes to issue its kernels.

Eager PyTorch issues every kernel from the host: a forward operator is a Python call through the
ATen dispatcher (autocast, autograd recording) to a CUDA launch; a backward operator is a node the
autograd engine (C++) evaluates, its derivative formula dispatching ATen kernels in turn. Kernels
run asynchronously: the host queues them and runs ahead of the GPU until a synchronisation drains
the queue. Where a phase's kernels are shorter on the GPU than on the host, the GPU waits.

Formula (`layer_floor`), per layer and micro-batch (the layer mean, as `step.compute.layer_compute`):

    forward  = max(GPU forward,  forward kernels  x FORWARD_KERNEL_HOST_S)
    backward = max(GPU backward, backward kernels x BACKWARD_KERNEL_HOST_S)

A recomputed forward (gradient checkpointing: the reentrant `torch.utils.checkpoint` re-runs the
module's Python forward inside the backward) is a forward: its floor is the forward's. Per-phase max
is exact when the queue drains between phases; with no sync between forward and backward the chain
bound max(G_f + G_b, H_f + G_b, H_f + H_b) (the host can run ahead by the forward's slack) equals it
whenever the backward's host / GPU ratio is at most the forward's, which holds here (backward: 2 x the
forward's GEMM and elementwise time, fewer than 2 x its kernels).

Synchronisations per step (where the queue drains, so one step's floor does not hide in the next):
the HF Trainer checks each micro-batch's loss on the host (`logging_nan_inf_filter`, default True:
`torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step)` evaluates a GPU tensor as a Python bool,
transformers trainer.py `_inner_training_loop`); fp16 native AMP's GradScaler reads
`found_inf.item()` before the optimizer step (torch/amp/grad_scaler.py `_maybe_opt_step`); loss
logging (`tr_loss.item()`) every `logging_steps`.

Host time per kernel. FORWARD_KERNEL_HOST_S = `optimizer_impl.EAGER_KERNEL_S`, 18.2 us: pytorch/pytorch
PR #45299 times torch.optim.AdamW's per-tensor Python loop on ResNet-101 at 51.38 ms for 314 tensors x
9 kernels, an issue-bound loop of Python calls into ATen (no autograd recording: the optimizer runs
under no_grad, so a forward operator, which also records its autograd node, costs at least as much).
BACKWARD_KERNEL_HOST_S: no published per-kernel figure for the autograd engine was found; it is
DERIVED from the same PR #45299 figure, taken equal to it: the engine skips the Python interpreter
but adds its own per-node work (input buffers, ready queue, AccumulateGrad), and the dispatcher and
launch path of each kernel is the same. Both figures are those of the 2020 host of PR #45299; a
faster CPU issues faster.

Kernels per layer (`layer_kernels`), counted from the modules' operators (hf_eager's per-operator
accounting) and each operator's backward formula (tools/autograd/derivatives.yaml):

Llama-shaped decoder layer (`hf_eager.applies`), r = the residual stream's bytes (4 under autocast over
an fp32 model):
- LlamaRMSNorm forward: `.to(float32)`, `pow`, `mean`, `+ eps`, `rsqrt`, `*`, `.to(input_dtype)`,
  `weight *`: 8 kernels (6 at r = 4: both casts are no-ops). Backward: cast 1, `pow_backward`
  (`grad * (2 * self.pow(1))`) 3, mean's expand-divide 1, `rsqrt` (`-0.5 * grad * result.pow(3)`) 3,
  the product with its broadcast reduction 3, cast 1, the weight product with its reduction 3, the
  accumulation of the fp32 input's two uses 1: 16 (14 at r = 4); a frozen weight drops its gradient
  product and reduction (2).
- Each projection (`lora.layer_projections`): 1 GEMM forward; backward 2 (input and weight gradient),
  1 with a frozen weight; a bias adds its reduction to a trainable weight's backward. Projections
  reading one norm output accumulate their input gradients: (readers - norms) adds.
- Under autocast over fp32 weights (r = 4): each trainable weight (and bias) cast to 16 bits once per
  forward, its gradient cast back to fp32 in backward (1 + 1); each projection reading the fp32 norm
  output casts it (`native_amp.norm_readers`; 1 + 1); rotary embedding with fp32 cos / sin promotes q
  and k to fp32, and SDPA's autocast casts them back (2 + 2); each residual add takes a 16-bit branch
  into the fp32 stream, whose gradient is cast back (0 + 2).
- `apply_rotary_pos_emb` on q and k: `q * cos`, `-x2`, `cat`, `* sin`, `+`: 5 each, 10. Backward per
  q and k: 2 products, the negation, `slice_backward` of x1 and x2 (zeros + copy each: 4), the
  accumulation of three gradients into q (2): 9 each, 18.
- SDPA (fused): 1 kernel forward; backward 4 (FlashAttention-2 / cuDNN: dO . O row sums, the main
  kernel, the dQ conversion from its fp32 accumulator, the accumulator's zeroing). The attention
  output's `transpose(1, 2).contiguous()`: 1 forward, none backward.
- Residual adds: 2 forward; backward each accumulates the stream's two uses: 2.
- SwiGLU `act_fn(gate) * up`: 2 forward; backward silu_backward 1 + the product's two gradients 2: 3.

BERT-style layer (`hf_eager.applies_layernorm_gelu`; transformers BertLayer, eager attention):
- LayerNorm: 1 forward (`native_layer_norm`), 2 backward (input gradient; gamma / beta gradient);
  residual adds 2 / 2; dropouts (hidden dropout > 0) 2 / 2; GELU 1 / 1; projections, casts and
  accumulations as above.
- Unfused attention core (`AttentionKernel.UNFUSED`): forward the q and k reshape copies of
  `torch.matmul` (2), bmm, `/ sqrt(d)`, `+ mask`, softmax, the v copy, bmm, the output copy: 9;
  backward two bmm per bmm (4), the division 1, softmax 1: 6; attention dropout > 0 adds its kernel
  to each (1 + 1).
  Under autocast over fp32 (r = 4): softmax runs in fp32 (its input cast, 1 + 1) and the second bmm
  casts the probabilities back (1 + 1). A fused core counts as SDPA above.

Adapters (LoRA / QLoRA, `FineTuning.adapters`), per adapted projection (PEFT `lora.Linear.forward`):
forward `lora_dropout(x)` (when > 0), `lora_A`, `lora_B`, `* scaling`, `+ result`: 4 (+1); backward
A and B input and weight gradients (4), the scaling 1, the dropout 1 (when > 0), the input's
accumulation with the base path 1: 6 (+1). A 4-bit base (bitsandbytes `MatMul4Bit`) dequantises its
weight in forward and again in backward: `dequantize_4bit` plus the double-quantised absmax's
`dequantize_blockwise`: 2 + 2 per projection.

Check (structural, not fitted): benchmarks/device_h200/prof.json counts 5,122 device operations per
Phi-3-mini step (32 layers, fp32 model under bf16 autocast, fused AdamW: 183 launches). This count gives
49 + 88 = 137 per layer (Phi-3's fused qkv_proj and gate_up_proj are counted as the q, k, v and gate, up
projections `lora.layer_projections` names: 3 GEMMs where 1 runs, 2 where 1 does, and their casts),
32 x 137 + 183 = 4,567, 89 % of the profile's; most of the rest are the cuBLAS / cuDNN memsets (494 in
that profile) and copies this count leaves out. The head, embedding and loss (a few dozen kernels per
step) are not counted.

torchtitan and Composer / FSDP (`Framework.TORCHTITAN`, `Framework.FSDP`) also issue eagerly from
Python, but their layers are not counted here: torchtitan's documented configurations compile their
blocks (`training.compile`) or run micro-batches of 8k+ tokens per GPU where the GEMMs outlast the
issue, and their modules (FSDP2 pre/post hooks, DTensor dispatch) issue a different set of kernels
not counted yet; the floor applies to `Framework.TRANSFORMERS` only.
"""

from __future__ import annotations

import numpy as np

from gpuplan.layers.operators import Shard
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.lora import adapted, layer_projections
from gpuplan.workloads.training.step import hf_eager, native_amp
from gpuplan.workloads.training.step.optimizer_impl import EAGER_KERNEL_S

#: Host seconds to issue one forward kernel from Python (module docstring: PR #45299).
FORWARD_KERNEL_HOST_S = EAGER_KERNEL_S
#: Host seconds per backward kernel issued by the autograd engine (module docstring: DERIVED, = the forward's).
BACKWARD_KERNEL_HOST_S = EAGER_KERNEL_S
#: LlamaRMSNorm kernels (forward, backward with a trainable weight) by the residual stream's bytes.
RMSNORM_KERNELS = {2: (8, 16), 4: (6, 14)}
#: kernels a frozen norm weight saves in backward (its gradient product and broadcast reduction)
FROZEN_NORM_WEIGHT_KERNELS = 2
#: nn.LayerNorm: forward, backward
LAYERNORM_KERNELS = (1, 2)
#: rotary embedding on q and k: forward, backward
ROPE_KERNELS = (10, 18)
#: fused SDPA: forward, backward (FlashAttention-2 / cuDNN)
SDPA_KERNELS = (1, 4)
#: the eager (unfused) BERT attention core: forward, backward; + (1, 1) for attention dropout and each
#: for the fp32 softmax's input cast and the probabilities' cast back under autocast over fp32
UNFUSED_ATTENTION_KERNELS = (9, 6)
#: SwiGLU, GELU: forward, backward
SWIGLU_KERNELS = (2, 3)
GELU_KERNELS = (1, 1)
#: PEFT LoRA per adapted projection without dropout: forward, backward; dropout adds 1 + 1
LORA_KERNELS = (4, 6)
#: bitsandbytes 4-bit base per projection, each pass: dequantize_4bit + the absmax's dequantize_blockwise
DEQUANTIZE_4BIT_KERNELS = 2


def applies(ctx) -> bool:
    """Whether the step's layers are HF transformers modules run eagerly and counted here (module docstring)."""
    return (ctx.framework is Framework.TRANSFORMERS and not ctx.compiled_model
            and (hf_eager.applies(ctx) or hf_eager.applies_layernorm_gelu(ctx)))


def _projection_kernels(ctx, r: int) -> tuple[float, float]:
    """(forward, backward) kernels of one layer's projections, their autocast casts, input-gradient
    accumulations, adapters and 4-bit dequantisation (module docstring), layer mean."""
    ft = ctx.fine_tuning
    frozen = ft.adapters
    four_bit = frozen and ft.base_storage("fp16" if ctx.act_dtype == "fp16" else "bf16").four_bit
    bias = any(getattr(op, "bias", False) for op in ctx.ops.layers[0].linears)
    fwd = bwd = 0.0
    for layer, weight in ctx.layer_mix():
        f = b = 0.0
        for p in layer_projections(ctx.model, layer):
            n = p.instances if p.shard is not Shard.EXPERT else p.active_instances
            f += n
            b += n * (1 if frozen else 2 + (1 if bias else 0))
            if r == 4 and not frozen:
                casts = n * (2 if bias else 1)
                f, b = f + casts, b + casts
            if four_bit:
                f, b = f + n * DEQUANTIZE_4BIT_KERNELS, b + n * DEQUANTIZE_4BIT_KERNELS
            if ft.adapters and adapted(p, ft.targets):
                drop = 1 if ft.lora_dropout > 0 else 0
                f, b = f + n * (LORA_KERNELS[0] + drop), b + n * (LORA_KERNELS[1] + drop)
        fwd, bwd = fwd + weight * f, bwd + weight * b
    readers = native_amp.norm_readers(ctx)
    bwd += max(readers - ctx.model.norms_per_layer, 0.0)
    if r == 4:
        fwd, bwd = fwd + readers, bwd + readers
    return fwd, bwd


def layer_kernels(ctx) -> tuple[float, float]:
    """(forward, backward) kernels one layer issues per micro-batch (module docstring); (0, 0) where
    `applies` does not hold."""
    if not applies(ctx):
        return 0.0, 0.0
    r = hf_eager.residual_bytes(ctx)
    model = ctx.model
    frozen_norms = model.norms_per_layer * FROZEN_NORM_WEIGHT_KERNELS if ctx.fine_tuning.adapters else 0
    fwd, bwd = _projection_kernels(ctx, r)
    fused = ctx.attention_kernel.fused
    core = SDPA_KERNELS if fused else UNFUSED_ATTENTION_KERNELS
    fwd, bwd = fwd + core[0] + (1 if fused else 0), bwd + core[1]
    if not fused and model.attention_dropout > 0:
        fwd, bwd = fwd + 1, bwd + 1
    residual = (2, 2 + (2 if r == 4 else 0))
    if hf_eager.applies(ctx):
        norm = RMSNORM_KERNELS[r]
        fwd += model.norms_per_layer * norm[0] + ROPE_KERNELS[0] + SWIGLU_KERNELS[0] + residual[0]
        bwd += model.norms_per_layer * norm[1] - frozen_norms + ROPE_KERNELS[1] + SWIGLU_KERNELS[1] + residual[1]
        if r == 4:  # SDPA's autocast casts q and k, promoted to fp32 by the fp32 cos / sin
            fwd, bwd = fwd + 2, bwd + 2
        return float(fwd), float(bwd)
    fwd += model.norms_per_layer * LAYERNORM_KERNELS[0] + GELU_KERNELS[0] + residual[0]
    bwd += model.norms_per_layer * LAYERNORM_KERNELS[1] + GELU_KERNELS[1] + residual[1]
    if model.hidden_dropout > 0:
        fwd, bwd = fwd + 2, bwd + 2
    if not fused and r == 4:  # fp32 softmax input cast, probabilities cast back
        fwd, bwd = fwd + 2, bwd + 2
    return float(fwd), float(bwd)


def layer_floor(ctx, layer_fwd, layer_bwd):
    """(forward, backward) seconds of one layer per micro-batch with the host's issue floor:
    max(GPU seconds, kernels x host seconds per kernel) per phase (module docstring); unchanged where
    `applies` does not hold. Works on numpy arrays."""
    kf, kb = layer_kernels(ctx)
    if not kf:
        return layer_fwd, layer_bwd
    return (np.maximum(layer_fwd, kf * FORWARD_KERNEL_HOST_S), np.maximum(layer_bwd, kb * BACKWARD_KERNEL_HOST_S))


__all__ = ["BACKWARD_KERNEL_HOST_S", "DEQUANTIZE_4BIT_KERNELS", "FORWARD_KERNEL_HOST_S", "GELU_KERNELS",
           "LAYERNORM_KERNELS", "LORA_KERNELS", "RMSNORM_KERNELS", "ROPE_KERNELS", "SDPA_KERNELS", "SWIGLU_KERNELS",
           "UNFUSED_ATTENTION_KERNELS", "applies", "layer_floor", "layer_kernels"]
