"""Training compute per layer and micro-batch on one GPU, and the busiest pipeline stage's.

Per layer and micro-batch, on one GPU, with t = micro_batch x seq_len / cp tokens, h hidden,
q = heads x head_dim, k = kv_heads x head_dim, f the FFN size:

- GEMMs (forward): QKV (t x (q+2k)/tp x h), output projection (t x h x q/tp), MLP up/gate
  (t x n_up f/tp x h) and down (t x h x f/tp); MoE layers run E/ep local experts, each on
  ep x t x top_k / E tokens (balanced routing), plus shared experts and the router GEMM. Each is
  `primitives.op_cost.gemm_time_array` (roofline, MAMF-measured ceiling x shape factor).
  Backward = 2 x forward (input gradient + weight gradient GEMMs of the same shapes).
- Attention core: FlashAttention FLOPs 4 b (a/tp) d s(s+1)/2 / cp forward (causal), backward
  2.5 x forward (FlashAttention-2, Dao 2023: 5 GEMMs in backward vs 2 forward), forward + backward at
  TRAINING_ATTENTION_CEILING (x FLASH_V1_OVER_V2 with `AttentionKernel.FLASH_V1`; with `AttentionKernel.FLASH2`
  FLASH2_TRAINING_ATTENTION where the generation's ceiling is another kernel's, Blackwell's cuDNN), split
  into forward and backward by the kernel's measured rate ratio (`attention_passes`: the forward, and so a
  recomputed forward, takes 1 / (1 + 2.5 rho) of it, rho = forward / backward rate, 1.25-1.68). With `AttentionKernel.UNFUSED` (pre-FlashAttention Megatron /
  DeepSpeed: scores materialised, fused scale-mask-softmax + dropout), the two batched GEMMs are
  full s x s and every score element moves `unfused_attention.megatron_unfused_score_bytes` through HBM
  (Megatron's causal softmax loads the lower triangle only; counted kernel by kernel there: 12 / 17 B at
  s = 2048, 7 / 12 B where the attention dropout is 0 and PyTorch skips the dropout kernel).
- Elementwise (norms, residual adds, dropout, activation): the inventory's per-operator bytes
  (`LayerOps.hidden_elementwise_bytes`, divided by tp with sequence parallelism, replicated
  otherwise) plus the activation's bytes per FFN element x f/tp; backward moves 2 x forward; at
  achievable HBM bandwidth.
  Megatron's fused kernels move those bytes; Composer's separate kernels EAGER_ELEMENTWISE_FACTOR x
  them; PyTorch-native fp16 AMP (`native_amp`) adds its fp32 residual stream, input and weight casts
  and an op-by-op unfused attention chain; torchtitan's eager Llama is counted operator by operator (TORCHTITAN_* constants: fp32
  RMSNorm, complex-multiply rotary on q and k, GQA `repeat_kv` copies, SwiGLU in two kernels).
- Recompute: full = one more layer forward (less the down-projection GEMM where the stack's checkpoint
  stops early: `checkpoint_early_stop`); selective = one more attention-core forward
  (Korthikanti et al. 2022 sec. 4). Under `Framework.TORCHTITAN`, "selective" is torchtitan's own
  selective activation checkpointing, which recomputes about half of each layer's forward
  (TORCHTITAN_SELECTIVE_RECOMPUTE_FRACTION): layer mode checkpoints every 2nd block, op mode saves
  the outputs of every other matmul and recomputes the rest.
- Output head + cross-entropy on the last stage: one GEMM t x V/tp x h (x3 for fwd+bwd) plus
  `loss_bytes_per_logit` bytes per logit (Megatron's op-by-op cross entropy: 52 B; llm-foundry's
  fused one: 6 B; PyTorch's under torch.compile: 8 B). The head GEMM runs in bf16/fp16 also in FP8 runs: FP8
  recipes convert only the transformer layers' linears (TransformerEngine modules in Megatron-core,
  whose output layer is a plain ColumnParallelLinear; torchtitan's float8 converter skips `output`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan import knobs
from gpuplan.layers.inventory import LayerOps, local_gemm_shape
from gpuplan.layers.operators import Shard
from gpuplan.primitives.attention_head_dim import REFERENCE_HEAD_DIM, AttentionPass, attention_head_dim, head_dim_efficiency
from gpuplan.primitives.op_cost import gemm_time_array
from gpuplan.specs import Gpu
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.specs.model import FfnKind
from gpuplan.workloads.training.plan_codes import RecomputeCode
from gpuplan.workloads.training import finetune_time
from gpuplan.workloads.training.finetune_memory import runs_pytorch_loop
from gpuplan.workloads.training.step import (blackwell_attention_length, checkpoint_early_stop, eager_host, expert, hf_eager,
                                              native_amp, unfused_attention)
from gpuplan.workloads.training.step.cdna3_attention import CDNA3_TRAINING_ATTENTION_SOURCE, cdna3_training_attention
from gpuplan.workloads.training.step.attention_passes import (B200_CUDNN_SDPA_TFLOPS, B200_FLASH2_TFLOPS, FLASH_BACKWARD_RATIO,
                                                              forward_backward_rate, split_forward_backward)
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

#: Cross-entropy over the logits, HBM bytes per logit (forward + backward), counted from Megatron-core's
#: vocab-parallel cross entropy (megatron/core/tensor_parallel/cross_entropy.py, unfused): forward
#: `.float()` of the bf16 logits (read 2, write 4), max over the vocabulary (read 4), in-place
#: subtraction of the max (4 + 4), in-place exp (4 + 4), sum (4), in-place division into the softmax it
#: saves (4 + 4) = 38 B; backward `grad_input.mul_(grad_output)` (4 + 4) and the cast of the fp32
#: gradient back to bf16 for the output layer (read 4, write 2) = 14 B; 52 B in all. PyTorch's
#: `cross_entropy(logits.float(), ...)` (torchtitan, HF) moves about as much (cast, log-softmax with
#: its max / sum passes, its backward, the cast back).
LOSS_BYTES_PER_LOGIT = 52.0
#: llm-foundry's MPT (`Framework.FSDP`, Composer) takes flash-attn's fused cross entropy by default
#: (ComposerMPTCausalLM: `om_model_config.get('loss_fn', 'fused_crossentropy')`, flash_attn.losses.
#: cross_entropy): one forward kernel reads the bf16 logits (2 B), one backward kernel reads them
#: again and writes their gradient (2 + 2): 6 B per logit.
FUSED_LOSS_BYTES_PER_LOGIT = 6.0
#: PyTorch's `cross_entropy(logits.float(), labels)` under torch.compile (`StepContext.compiled_loss`;
#: torchtitan with `training.compile` since PR #1033, 2025-04-02): Inductor fuses the cast, log-softmax and
#: NLL into row reductions over the bf16 logits, a max pass and a sum-of-exponentials pass (2 + 2), and
#: the backward into one pointwise kernel that reads them and writes their bf16 gradient (2 + 2): 8 B.
COMPILED_LOSS_BYTES_PER_LOGIT = 8.0
#: Training attention (forward + backward, causal, head_dim 128) as a fraction of dense peak:
#: FlashAttention-2 (Dao 2023, sec. 4.1 / Fig. 4-7): about 180 of 312 TFLOP/s on A100 at 2k-16k
#: tokens (225 at its best shape); "up to 335 TFLOP/s" on H100 = 0.34 of 989 (no Hopper-specific
#: instructions; training stacks of 2023-24 ran FA2 or cuDNN attention at similar rates).
#: `efficiency.attention_ceiling` is the inference (forward, FA3) ceiling and is not used here.
#: Blackwell: measured directly. The stacks of 2025 run TransformerEngine's cuDNN fused attention on
#: Blackwell (TE 2.x `get_attention_backend`: "Disabling FlashAttention to give FusedAttention
#: preference on Hopper+"; FlashAttention-2 has no Blackwell kernels and runs at 0.19 of peak there).
#: cuDNN 9.13 on one B200, causal, head_dim 128, 128 query / 8 KV heads, batch 1, through PyTorch SDPA
#: (NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/artifacts/
#: sdpa_bf16_benchmark_results_NVIDIA_B200.csv @bb37575d, `attention_passes.B200_CUDNN_SDPA_TFLOPS`; its
#: `flops()` counts causal FLOPs as half and backward as 2.5 x forward, as this module does), at 16k / 32k /
#: 64k / 128k tokens (the plateau): forward 1332.4 / 1419.0 / 1382.3 / 1355.4, backward 1074.8 / 1108.7 /
#: 1073.1 / 1047.8 TFLOP/s. Forward + backward at the FLOP ratio 1 : 2.5: 1137.6 / 1182.6 / 1146.3 / 1120.5,
#: mean 1146.8 of 2250 = 0.510. (It replaces 0.311, a chain of ratios through FlashAttention-2 on H100 and
#: FlashAttention-4's "up to 1.3x cuDNN 9.13", whose "up to" is the best case, not the typical one.)
B200_DENSE_BF16_TFLOPS = 2250.0


BLACKWELL_TRAINING_ATTENTION = (sum(forward_backward_rate(f, b) for f, b in B200_CUDNN_SDPA_TFLOPS)
                                / len(B200_CUDNN_SDPA_TFLOPS) / B200_DENSE_BF16_TFLOPS)
BLACKWELL_TRAINING_ATTENTION_SOURCE = (
    "NVIDIA/cudnn-frontend sdpa_benchmark_training B200 artifact (cuDNN 9.13, causal, head_dim 128, GQA 128/8): "
    "forward 1332-1419, backward 1048-1109 TFLOP/s at 16k-128k tokens -> forward + backward 1147 of 2250 = 0.510")
#: CDNA3 (MI300X, MI325X): PyTorch SDPA's default ROCm kernel (AOTriton), bounded by the stock ROCm
#: FlashAttention-2 measured on MI300X: 228.4 of 1307.4 TFLOP/s forward + backward (`step.cdna3_attention`).
CDNA3_TRAINING_ATTENTION = cdna3_training_attention()
TRAINING_ATTENTION_CEILING = {
    family: knobs.register(
        f"training.attention_ceiling.{family}", unit="fraction of dense peak", default=v, low=0.05, high=1.0,
        source=src, scales="training attention core (FlashAttention-2 forward + backward)")
    for family, v, src in (
        ("ampere", 180.0 / 312.0, "Dao 2023 (FlashAttention-2) Fig. 4-7: about 180 of 312 TFLOP/s on A100"),
        ("hopper", 335.0 / 989.0, "Dao 2023 (FlashAttention-2): up to 335 TFLOP/s on H100 = 0.34 of 989"),
        ("blackwell", BLACKWELL_TRAINING_ATTENTION, BLACKWELL_TRAINING_ATTENTION_SOURCE),
        ("cdna3", CDNA3_TRAINING_ATTENTION, CDNA3_TRAINING_ATTENTION_SOURCE),
    )
}
#: FlashAttention-2 itself (the flash-attn library) on Blackwell, for `AttentionKernel.FLASH2`: the same
#: cudnn-frontend B200 artifact as above times flash-attn's own kernels (backend `flash_attention`, causal,
#: head_dim 128, GQA 128/8): forward 425.1 / 435.8 / 441.3 / 443.7, backward 336.6 / 345.6 / 349.0 / 348.3
#: TFLOP/s at 16k / 32k / 64k / 128k tokens (8k: 399.9 / 318.0), forward + backward (1 : 2.5) 357.9 / 367.3 /
#: 371.2 / 371.1, mean 366.9 of 2250 = 0.163 (FlashAttention-2 has no Blackwell-specific kernels: about a
#: third of cuDNN's 0.510). Ampere, Hopper and CDNA3 ceilings above are FlashAttention-2's already.
#: The B200 plateau rates (16k-128k mean, TFLOP/s) the Blackwell ceilings are, by kernel (cuDNN, FlashAttention-2)
B200_PLATEAU_TFLOPS = {AttentionKernel.FLASH: BLACKWELL_TRAINING_ATTENTION * B200_DENSE_BF16_TFLOPS, AttentionKernel.FLASH2:
                       sum(forward_backward_rate(f, b) for f, b in B200_FLASH2_TFLOPS) / len(B200_FLASH2_TFLOPS)}
FLASH2_TRAINING_ATTENTION = {
    "blackwell": knobs.register(
        "training.flash2_attention_ceiling.blackwell", unit="fraction of dense peak",
        default=sum(forward_backward_rate(f, b) for f, b in B200_FLASH2_TFLOPS) / len(B200_FLASH2_TFLOPS)
        / B200_DENSE_BF16_TFLOPS, low=0.05, high=1.0,
        source="NVIDIA/cudnn-frontend sdpa_benchmark_training B200 artifact @bb37575d, backend flash_attention "
               "(flash-attn FlashAttention-2, causal, head_dim 128, GQA 128/8): forward + backward 358-371 TFLOP/s "
               "at 16k-128k tokens, mean 366.9 of 2250 = 0.163",
        scales="training attention core under AttentionKernel.FLASH2 (flash-attn's FlashAttention-2) on Blackwell"),
}
DEFAULT_TRAINING_ATTENTION_CEILING = knobs.register(
    "training.attention_ceiling.default", unit="fraction of dense peak", default=0.34, low=0.05, high=1.0,
    source="the Hopper value (FlashAttention-2 on H100) for architectures without a measurement",
    scales="training attention core on other architectures")
#: FlashAttention (v1) / FlashAttention-2 throughput: Dao 2023 (FlashAttention-2, abstract and
#: sec. 4.1, Fig. 4-7): "around 2x faster than FlashAttention" forward + backward on A100 across
#: sequence lengths and head dims 64/128 -> 0.5. Applies to stacks of 2022 to mid-2023 (e.g.
#: llm-foundry's `gpu` extra pinned flash-attn==1.0.3.post0 until FA2 support landed).
FLASH_V1_OVER_V2 = knobs.register(
    "training.flash_v1_over_v2", unit="ratio", default=0.5, low=0.2, high=1.0,
    source="Dao 2023 (FlashAttention-2) abstract and sec. 4.1: about 2x FlashAttention v1 forward + backward on A100",
    scales="training attention-core rate under AttentionKernel.FLASH_V1")
#: Sustained fraction of the best-shape GEMM rate inside a training step (clocks fall under the
#: sustained power draw of a full step; kernels of one layer do not reach mamf-finder's best
#: tile sizes). Modelling assumption, one value for every GPU, set from the Megatron A100 rows.
SUSTAINED_GEMM_FRACTION = knobs.register(
    "training.sustained_gemm_fraction", unit="fraction", default=0.85, low=0.5, high=1.0,
    source="fitted: one value for every GPU, set from the Megatron A100 rows (Narayanan et al. 2021, Korthikanti et al. 2022)",
    scales="every training GEMM (divides the mamf-finder-sourced GEMM rate)",
    fitted_on=("meg21-t1", "korth-t5", "korth-abs"))
#: The share of its short-run (mamf-finder) GEMM rate a part keeps inside a full training step, relative
#: to an A100's, is a property of the part (how far its clock falls under the sustained power draw of a
#: step; the dense peaks are quoted at boost clock):
#: - measured (`measured_sustained_ratio`): the part's generation's best GEMM rate after 10,000 warm-up
#:   iterations over its short-run best, over the A100's (catalog/data/ceilings.toml [[gemm_sustained]],
#:   knobs `efficiency.sustained_gemm.family.<family>` / `efficiency.sustained_gemm.reference`): Azure's
#:   cuBLASLt sweeps give GB200 FP8 2906.9 of 3615.6 (0.804), H100 SXM FP8 1382.2 of 1402.6 (0.985),
#:   A100 SXM 256.5 of 271.2 (0.946): Blackwell 0.850, Hopper 1.042 of the A100's;
#: - on Hopper, x a fitted residual `training.sustained_gemm_ratio.hopper`: the H100 training families
#:   fitted 0.89 for the product (0.891 +- 0.040 with the base refit on every family, `validate --cv
#:   family`, 2026-11-24) = 1.042 measured x 0.854: the measurement does not explain Hopper's (a step
#:   also draws HBM and NVLink power; a layer's kernels sit off the best tile shapes). The knob keeps no
#:   prior of its own, as before: a held-out fold starts from its default.
#: Blackwell has no residual: its fitted ratio (0.797, prior 1, on nemo-lseq, mbr-bw, mbr-moe, megft)
#: is replaced by the measured 0.850, which predicts held-out Blackwell rows as well or better
#: (leave-hardware-out Blackwell 23.2% with the fitted knob at its prior; docs/accuracy.md).
SUSTAINED_GEMM_RATIO_HOPPER = knobs.register(
    "training.sustained_gemm_ratio.hopper", unit="ratio", default=0.8542, low=0.5, high=1.25,
    source="fitted residual over the measured sustained share (efficiency.sustained_gemm.family.hopper / .reference = "
           "1.042): the H100 families' steady-state throughput (Megatron-core 2024 weak / strong scaling, NeMo 24.07, "
           "Megatron-Bridge, MosaicML llm-foundry, torchtitan) fitted 0.89 for the product",
    scales="every training GEMM on Hopper parts (x training.sustained_gemm_fraction) and their attention core",
    fitted_on=("meg24", "meg24-ss", "nemo2407", "mbridge", "mpt-h100", "ttbench", "megft"))
#: Extra HBM bytes per GEMM-input element with FP8 (TransformerEngine): cast + transpose of the
#: bf16 input (read 2 B, write 1 B twice) and of the output gradient in backward.
FP8_CAST_BYTES = 4.0
#: Fraction of a layer's forward that torchtitan's selective activation checkpointing recomputes.
#: torchtitan `activation_checkpoint.mode = "selective"`: `selective_ac_option = "2"` (its default,
#: "layer" SAC) wraps every 2nd transformer block in full checkpointing -> half the layers re-run
#: their forward; "op" SAC saves the outputs of every other matmul (its `_save_list` policy) and
#: recomputes the rest -> about half the forward GEMM FLOPs. torchtitan docs/performance.md reports
#: near-identical throughput for the two (Llama 3 8B: 2904 vs 2973 tokens/s/GPU on 64 A100).
TORCHTITAN_SELECTIVE_RECOMPUTE_FRACTION = knobs.register(
    "training.torchtitan_selective_recompute_fraction", unit="fraction", default=0.5, low=0.0, high=1.0,
    source="torchtitan selective_ac_option='2' checkpoints every 2nd block; op SAC saves every other matmul (docs/performance.md)",
    scales="recompute time of torchtitan selective activation checkpointing")
#: Composer / llm-foundry (`Framework.FSDP`) runs norms, activations and residuals as separate
#: PyTorch kernels, each reading and writing its tensors: about twice the bytes of Megatron's fused
#: kernels (apex/TE fused layer norm, bias-gelu, bias-dropout-add).
EAGER_ELEMENTWISE_FACTOR = knobs.register(
    "training.eager_elementwise_factor", unit="ratio", default=2.0, low=1.0, high=4.0,
    source="assumption: separate PyTorch kernels read and write each tensor, about twice Megatron's fused kernels",
    scales="elementwise HBM traffic under Framework.FSDP (Composer / llm-foundry)")
#: torchtitan's Llama (eager PyTorch, no torch.compile, its 2024 model code), forward bytes per
#: element, counted from the operators (bf16 = 2 B, fp32 = 4 B, read + write):
#: RMSNorm `(x.float() * rsqrt(x.pow(2).mean(-1) + eps)).type_as(x) * weight`: float() 2+4, pow 4+4,
#: mean 4, x*rsqrt 4+4, type_as 4+2, *weight 2+2 = 36 per hidden element, two per layer;
#: residual adds 2+2+2 = 6, two per layer;
TORCHTITAN_NORM_RESIDUAL_BYTES_PER_HIDDEN = 2 * 36.0 + 2 * 6.0
#: rotary embedding on q and k via complex multiply: float() 2+4, complex mul 4+4, type_as 4+2 = 20
#: per q and k element; the attention output's transpose().contiguous() 2+2 per q element;
#: `repeat_kv` (GQA) materialises k and v at n_heads: read kv 2, write q 2 per element.
TORCHTITAN_ROPE_BYTES = 20.0
TORCHTITAN_ATTN_OUT_COPY_BYTES = 4.0
#: SwiGLU `w2(silu(w1 x) * w3 x)`: silu 2+2, multiply 2+2+2 = 10 per FFN element.
TORCHTITAN_SWIGLU_BYTES_PER_FFN = 10.0
#: torchtitan with `training.compile` (`StepContext.compiled_model`): `apply_compile` wraps every
#: TransformerBlock in `torch.compile(fullgraph=True)` (torchtitan models/llama3/parallelize_llama.py), so
#: Inductor fuses each chain of pointwise ops between the GEMMs and SDPA into one kernel that reads its
#: inputs and writes its outputs once: RMSNorm and the residual adds as Megatron's fused kernels (the
#: inventory's `hidden_elementwise_bytes`, 20 B per hidden element), SwiGLU read 2 + 2, write 2 (the
#: inventory's gated activation, 6 B per FFN element), rotary embedding read 2 + write 2 per q and k
#: element; the GQA `repeat_kv` copies and the attention output's copy for `wo` stay (SDPA and the GEMM
#: are extern kernels that take materialised inputs): TORCHTITAN_ATTN_OUT_COPY_BYTES and the eager count.
TORCHTITAN_COMPILED_ROPE_BYTES = 4.0


#: Clock of a power-capped part relative to the part its peaks are quoted for: f ~ P^exponent. CMOS
#: dynamic power P = a C V^2 f, and over the DVFS range the supply voltage scales about linearly with the
#: clock (V ~ f), so P ~ f^3 and f ~ P^(1/3) (Kaxiras & Martonosi 2008, 'Computer Architecture Techniques
#: for Power-Efficiency', ch. 2, DVFS); static power, neglected here, would make the clock fall faster.
POWER_LIMIT_CLOCK_EXPONENT = knobs.register(
    "training.power_limit_clock_exponent", unit="exponent", default=1.0 / 3.0, low=0.0, high=1.0,
    source="CMOS dynamic power P = a C V^2 f with V ~ f over the DVFS range: f ~ P^(1/3) (Kaxiras & Martonosi 2008, ch. 2)",
    scales="sustained tensor-core clock of a part capped below the power its peaks are quoted at")


def power_limit_clock_ratio(gpu: Gpu) -> float:
    """(tdp_w / peak_rated_power_w) ^ `training.power_limit_clock_exponent` for a part capped below the
    power at which its peaks are quoted (`Gpu.peak_rated_power_w`, e.g. the 500 W H100 SXM 96GB of
    Meta's Grand Teton hosts with the 700 W H100 SXM's peaks: (500 / 700)^(1/3) = 0.894), else 1."""
    if gpu.peak_rated_power_w is None or gpu.tdp_w is None or gpu.tdp_w >= gpu.peak_rated_power_w:
        return 1.0
    return (gpu.tdp_w / gpu.peak_rated_power_w) ** knobs.value("training.power_limit_clock_exponent")


def measured_sustained_ratio(gpu: Gpu) -> float:
    """sustained_share(family) / sustained_share(A100): the knobs `efficiency.sustained_gemm.family.<family>`
    and `efficiency.sustained_gemm.reference` (each = best GEMM TFLOP/s after a 10,000-iteration warm-up /
    the part's short-run mamf-finder best; catalog/data/ceilings.toml [[gemm_sustained]]); 1 for a
    generation without a measurement (or without the catalog loaded)."""
    name = f"efficiency.sustained_gemm.family.{gpu.family}"
    if name not in knobs.REGISTRY or "efficiency.sustained_gemm.reference" not in knobs.REGISTRY:
        return 1.0
    return knobs.value(name) / knobs.value("efficiency.sustained_gemm.reference")


def sustained_clock_ratio(gpu: Gpu) -> float:
    """The part's sustained tensor-core rate in a training step relative to an A100's:
    `measured_sustained_ratio` x the fitted residual `training.sustained_gemm_ratio.<family>` (Hopper;
    else 1) x `power_limit_clock_ratio` for a power-capped variant. It scales every tensor-core
    kernel of the step (GEMMs and the attention core): clocks fall for both alike."""
    name = f"training.sustained_gemm_ratio.{gpu.family}"
    residual = knobs.value(name) if name in knobs.REGISTRY else 1.0
    return measured_sustained_ratio(gpu) * residual * power_limit_clock_ratio(gpu)


#: CDNA3 (MI300X) GEMMs as a training stack runs them: the catalog's MI300X ceiling (mamf-finder 668.4
#: TFLOP/s, stas00/ml-engineering) was measured with PyTorch TunableOp on, which benchmarks every
#: hipBLASLt / rocBLAS solution per shape; PyTorch leaves it off (`PYTORCH_TUNABLEOP_ENABLED` default 0,
#: torch.cuda.tunable docs) and torchtitan does not set it, so its GEMMs take hipBLASLt's heuristic
#: pick. Measured without tuning: torch.mm 4096 x 4096 x 4096 BF16 on MI300X, PyTorch 2.8.0+rocm6.4,
#: 548.09 TFLOP/s (gau-nernst/learn-cuda 02c_matmul_hip/README.md @9127f7d, triton do_bench). The tuned
#: ceiling at that shape is 668.4 x k_pipeline(4096) / k_pipeline(8192) (the mamf best shape has k =
#: 8192; tiles fill the 304 CUs at both) = 668.4 x 0.98462 / 0.99225 = 663.3, so the heuristic reaches
#: 548.09 / 663.3 = 0.826 of the tuned rate (DERIVED). Serving engines ship tuned GEMM tables (vLLM
#: ROCm), so this is a training knob.
UNTUNED_GEMM_RATIO_CDNA3 = knobs.register(
    "training.untuned_gemm_ratio.cdna3", unit="ratio", default=548.09 / (668.4 * (4096 / 4160) / (8192 / 8256)),
    low=0.3, high=1.0,
    source="torch.mm 4096^3 BF16 on MI300X without TunableOp, PyTorch 2.8.0+rocm6.4: 548.09 TFLOP/s "
           "(gau-nernst/learn-cuda 02c_matmul_hip/README.md) over the TunableOp-on mamf-finder 668.4 at that "
           "shape (663.3) = 0.826",
    scales="every training GEMM on CDNA3 parts (their catalog ceiling was measured with TunableOp on)")


def untuned_gemm_ratio(gpu: Gpu) -> float:
    """Rate of a training GEMM under the library's default kernel choice over the catalog's tuned
    ceiling: `training.untuned_gemm_ratio.<family>` where the family's ceiling was measured tuned
    (CDNA3), else 1."""
    name = f"training.untuned_gemm_ratio.{gpu.family}"
    return knobs.value(name) if name in knobs.REGISTRY else 1.0


def sustained_gemm_fraction(gpu: Gpu) -> float:
    """Sustained fraction of the mamf-finder GEMM rate in a training step: `training.sustained_gemm_fraction`
    x `sustained_clock_ratio` x `untuned_gemm_ratio` (CDNA3)."""
    return knobs.value("training.sustained_gemm_fraction") * sustained_clock_ratio(gpu) * untuned_gemm_ratio(gpu)


def gemm_seconds(ctx: StepContext, m, n, k, dtype: str | None = None):
    return gemm_time_array(ctx.gpu, m, n, k, dtype or ctx.gemm_dtype) / sustained_gemm_fraction(ctx.gpu)


def training_attention_ceiling(gpu: Gpu, kernel: AttentionKernel = AttentionKernel.FLASH,
                               head_dim: float = REFERENCE_HEAD_DIM) -> float:
    """Forward+backward FlashAttention efficiency for training (TRAINING_ATTENTION_CEILING, at head_dim
    128); under `AttentionKernel.FLASH2` the flash-attn FlashAttention-2 rate (FLASH2_TRAINING_ATTENTION)
    where the generation's ceiling is another kernel's (Blackwell: cuDNN); x head_dim_efficiency(family,
    head_dim, FORWARD_BACKWARD) (primitives.attention_head_dim; FlashAttention v1's table under FLASH_V1)."""
    if kernel is AttentionKernel.FLASH2 and gpu.family in FLASH2_TRAINING_ATTENTION:
        ceiling = knobs.value(f"training.flash2_attention_ceiling.{gpu.family}")
    elif gpu.family in TRAINING_ATTENTION_CEILING:
        ceiling = knobs.value(f"training.attention_ceiling.{gpu.family}")
    else:
        ceiling = knobs.value("training.attention_ceiling.default")
    return ceiling * head_dim_efficiency(gpu.family, head_dim, AttentionPass.FORWARD_BACKWARD,
                                         flash_v1=kernel is AttentionKernel.FLASH_V1)


def _peak_flops(ctx: StepContext, dtype: str) -> float:
    return ctx.gpu.matmul_peak_tflops(dtype) * 1e12


@dataclass(frozen=True)
class GemmCall:
    """One weight GEMM of a layer as one GPU runs it per micro-batch: `count` GEMMs of m x n x k
    (m token rows, n output and k input features on this GPU). `group`: attn_in (projections that
    read the layer input), attn_out, router, fc1, fc2 (FFN or expert up / down)."""

    op: str
    group: str
    m: object
    n: object
    k: object
    count: object

    def flops(self):
        return 2.0 * self.count * self.m * self.n * self.k


def layer_gemm_calls(layer: LayerOps, t, t_local, t_expert, tp, etp, ep) -> list[GemmCall]:
    """The layer's weight GEMMs (layers.inventory) on one GPU for one micro-batch of t tokens.

    Shapes: `layers.inventory.local_gemm_shape` (COLUMN n/tp, ROW k/tp, REPLICATED whole, experts
    over etp). Rows: TP-split GEMMs see all t tokens (after the sequence-parallel all-gather);
    REPLICATED ones (MLA down-projections, the router) run on the rank's sequence shard t_local
    (Megatron-core MLA gathers the compressed latents after them); routed experts run E/ep local
    experts, each on ep x t_expert x top_k / E tokens (balanced routing). Works on numpy arrays."""
    calls = []
    attention = {id(op) for op in layer.attention}
    for op in layer.linears:
        n, k = local_gemm_shape(op, tp, etp)
        if op.shard is Shard.EXPERT:
            m, count = ep * t_expert * op.active_instances / op.instances, op.instances / ep
        elif op.shard is Shard.REPLICATED:
            m, count = t_local, 1.0
        else:
            m, count = t, 1.0
        if id(op) in attention:
            group = "attn_out" if op.shard is Shard.ROW else "attn_in"
        elif op.name == "router":
            group = "router"
        else:
            group = "fc1" if op.name.endswith("fc1") else "fc2"
        calls.append(GemmCall(op.name, group, m, n, k, count))
    return calls


def charged_layer_forward_flops(ctx: "StepContext", layer: int, tp=1, etp=1, ep=1, sequence_parallel=True,
                                micro_batch=1, cp=1) -> float:
    """Forward weight-GEMM + attention-core FLOPs the step-time model charges one GPU for `layer`
    and one micro-batch: the FLOPs of `layer_gemm_calls` plus the attention core's (flash path).
    With sequence parallelism (or tp = 1) and ep x etp = tp, multiplying by tp x cp gives the whole
    layer's forward FLOPs for micro_batch x seq_len tokens (tests check it against the inventory)."""
    lo = ctx.ops.layers[layer]
    t = micro_batch * ctx.seq_len / cp
    t_local = t / tp if sequence_parallel else t
    t_expert = t_local * etp if sequence_parallel else t
    gemm = sum(c.flops() for c in layer_gemm_calls(lo, t, t_local, t_expert, tp, etp, ep))
    return float(gemm + micro_batch * ctx.seq_len * lo.core.forward_flops(ctx.seq_len, True) / tp / cp)


@dataclass(frozen=True)
class LayerCompute:
    """Per layer and micro-batch on one GPU (seconds): the GEMM groups, the attention core, the
    elementwise traffic, and the layer's forward / backward / recompute times (layer mean over the
    dense and MoE layers of the model)."""

    qkv: object  # projections that read the layer input (attn_in GEMMs)
    out: object  # attention output projection
    dense_up: object
    dense_down: object
    moe_mlp: object  # router + routed experts + shared experts
    attn_fwd: object
    attn_bwd: object
    dense_frac: float
    moe_frac: float
    layer_fwd: object
    layer_bwd: object
    layer_recompute: object
    #: forward GEMMs of the layer (layer mean): also the time of its weight-gradient GEMMs (same FLOPs)
    gemm_fwd: object = 0.0


@dataclass(frozen=True)
class StageCompute:
    """The busiest pipeline rank's compute per micro-batch (seconds) and its share of the layers."""

    layers_per_stage: object
    stage_share: object
    head: object  # output head + loss (last stage)
    stage_fwd: object
    stage_bwd: object
    compute_mb: object  # forward + backward + head, no recompute
    recompute_mb: object


def attention_core_seconds(ctx: StepContext, g: PlanAxes):
    """(forward, backward) seconds of one layer's attention core per micro-batch on one GPU.

    Fused (FlashAttention): the inventory's causal core FLOPs (layer mean: windows differ by layer)
    on this rank's heads (a / tp) and query shard (s / cp), at the training attention ceiling
    (`training.attention_ceiling.*`; `training.flash2_attention_ceiling.*` under FLASH2; x the head-dim factor at
    `attention_head_dim(model)`, primitives.attention_head_dim) x SM fill min(1, mb (a / tp) ceil(s / cp / 128) / SMs) x the
    part's `sustained_clock_ratio` (the ceilings are short-run kernel benchmarks), x
    `training.flash_v1_over_v2` for FlashAttention v1, x on Blackwell the measured rate at s / cp tokens over
    the ceiling's 16k-128k plateau (`blackwell_attention_length`): the forward + backward time at
    FLASH_BACKWARD_RATIO x the forward FLOPs in backward (Dao 2023: 5 GEMMs in backward vs 2 forward), split
    into the two passes by the kernel's measured forward / backward rate ratio
    (`attention_passes.split_forward_backward`: a recomputed forward costs the forward's share). Unfused: two
    batched GEMMs over the full s x s scores (x 2 in backward) plus `megatron_unfused_score_bytes` per score through HBM (no dropout
    bytes where the model's attention dropout is 0)."""
    s = float(ctx.seq_len)
    heads_local = ctx.heads / g.tp
    if ctx.attention_kernel.fused:
        sms = ctx.gpu.sm_count_or_default
        fill = np.minimum(1.0, g.mb * heads_local * np.ceil(s / g.cp / 128.0) / sms)
        eff = (training_attention_ceiling(ctx.gpu, ctx.attention_kernel, attention_head_dim(ctx.model)) * fill
               * sustained_clock_ratio(ctx.gpu))
        if ctx.attention_kernel is AttentionKernel.FLASH_V1:
            eff = eff * knobs.value("training.flash_v1_over_v2")
        if blackwell_attention_length.applies(ctx.gpu, ctx.attention_kernel):  # below the plateau's 16k tokens
            plateau = B200_PLATEAU_TFLOPS[ctx.attention_kernel]
            eff = eff * blackwell_attention_length.length_factor(ctx.attention_kernel, s / g.cp, plateau)
        flops = g.mb * s * ctx.attention_flops_per_token / g.tp / g.cp
        fwd_bwd = (1.0 + FLASH_BACKWARD_RATIO) * flops / (_peak_flops(ctx, ctx.act_dtype) * eff)
        return split_forward_backward(fwd_bwd, ctx.gpu.family, ctx.attention_kernel)
    scores = g.mb * heads_local * s * s / g.cp
    bmm = 2.0 * gemm_time_array(ctx.gpu, s / g.cp, s, ctx.head_dim, ctx.act_dtype, batch=g.mb * heads_local)
    fwd_bytes, bwd_bytes = native_amp.unfused_score_bytes(
        ctx, unfused_attention.megatron_unfused_score_bytes(ctx.model.attention_dropout, s))
    return (bmm + scores * fwd_bytes / ctx.hbm_bytes_s, 2.0 * bmm + scores * bwd_bytes / ctx.hbm_bytes_s)


def eager_native_modules(ctx: StepContext) -> bool:
    """A fine-tuning step of `Framework.OTHER` on a plain PyTorch loop (`finetune_memory.runs_pytorch_loop`,
    the rule the activation memory reads) not under torch.compile: PyTorch-native Llama modules run op
    by op, counted as torchtitan's eager Llama (TORCHTITAN_* bytes). torchtune's modules at 1814feb17
    (2024-11) issue the same operators: RMSNorm `x.float()`, `pow(2).mean`, `* rsqrt`, `type_as`,
    `* scale`; GQA `k.unsqueeze(2).expand(...).flatten(1, 2)` copies; the attention output's
    `transpose(1, 2).contiguous()`; SwiGLU `w2(silu(w1(x)) * w3(x))` in two kernels; its rotary
    (real arithmetic on fp32 halves, `torch.stack`, `type_as`) moves more than the complex multiply counted."""
    return (ctx.framework is Framework.OTHER and runs_pytorch_loop(ctx.framework, ctx.fine_tuning)
            and not ctx.compiled_model)


def elementwise_seconds(ctx: StepContext, g: PlanAxes):
    """(attention block, dense FFN, MoE FFN) elementwise seconds per layer and micro-batch, forward.

    Megatron's fused kernels: the inventory's norm and residual-add bytes per token
    (`LayerOps.hidden_elementwise_bytes`: 20 B x h for a Llama layer, 22 with dropout; / tp with
    sequence parallelism) + the activation's bytes per FFN element (6 gated, 4 otherwise) x f / tp;
    Composer (`Framework.FSDP`)
    `training.eager_elementwise_factor` x those; torchtitan's eager Llama counted per operator
    (TORCHTITAN_* bytes; so is an eager fine-tuning step on another PyTorch loop, `eager_native_modules`), its
    compiled blocks (`ctx.compiled_model`) as fused kernels plus rotary and copies. FP8 / MX / NVFP4 add FP8_CAST_BYTES per GEMM-input element. MoE: the
    activation on the routed tokens plus the permute / unpermute copies of t_local x top_k x h."""
    h, act_bytes = float(ctx.hidden), 2.0
    hidden_div = np.where(g.sp, g.tp, 1.0)
    layer = ctx.ops.layers[0]
    ffn_bytes = layer.activation_bytes_per_ffn_element()
    if ctx.framework is Framework.TORCHTITAN or eager_native_modules(ctx):
        compiled = ctx.compiled_model
        repeat_kv = 2.0 * (2.0 * ctx.kv_dim + 2.0 * ctx.q_dim) if ctx.kv_dim < ctx.q_dim else 0.0
        rope = TORCHTITAN_COMPILED_ROPE_BYTES if compiled else TORCHTITAN_ROPE_BYTES
        head_bytes = rope * (ctx.q_dim + ctx.kv_dim) + TORCHTITAN_ATTN_OUT_COPY_BYTES * ctx.q_dim + repeat_kv
        hidden_bytes = layer.hidden_elementwise_bytes() if compiled else h * TORCHTITAN_NORM_RESIDUAL_BYTES_PER_HIDDEN
        elem_attn = g.t * (hidden_bytes / hidden_div + head_bytes / g.tp) / ctx.hbm_bytes_s
        swiglu = ctx.model.ffn_kind is FfnKind.SWIGLU
        if not compiled:
            ffn_bytes = TORCHTITAN_SWIGLU_BYTES_PER_FFN if swiglu else knobs.value("training.eager_elementwise_factor") * ffn_bytes
    elif hf_eager.applies(ctx):  # HF transformers' eager Llama modules, counted per operator
        elem_attn = g.t * (hf_eager.hidden_bytes_per_token(ctx) + hf_eager.head_bytes_per_token(ctx)) / g.tp / ctx.hbm_bytes_s
        ffn_bytes = hf_eager.SWIGLU_BYTES_PER_FFN
    elif hf_eager.applies_layernorm_gelu(ctx):  # HF transformers' eager BERT-style modules, per operator
        elem_attn = g.t * hf_eager.layernorm_gelu_bytes_per_token(ctx) / g.tp / ctx.hbm_bytes_s
        ffn_bytes = hf_eager.GELU_BYTES_PER_FFN
    else:
        eager_framework = ctx.framework in (Framework.FSDP, Framework.TRANSFORMERS)
        eager = knobs.value("training.eager_elementwise_factor") if eager_framework else 1.0
        hidden_bytes = native_amp.elementwise_bytes_per_token(ctx, g, layer.hidden_elementwise_bytes() / hidden_div)
        elem_attn = eager * g.t * hidden_bytes / ctx.hbm_bytes_s
        ffn_bytes = eager * ffn_bytes
    if ctx.low_precision:  # inputs of QKV and output projection
        elem_attn = elem_attn + g.t * (h + ctx.q_dim) / g.tp * FP8_CAST_BYTES / ctx.hbm_bytes_s
    elem_dense = elem_moe = 0.0
    if ctx.dense_layers:
        f = float(ctx.model.ffn)
        elem_dense = g.t * f / g.tp * ffn_bytes / ctx.hbm_bytes_s
        if ctx.low_precision:  # inputs of the up and down projections
            elem_dense = elem_dense + g.t * (h + f / g.tp) * FP8_CAST_BYTES / ctx.hbm_bytes_s
    if ctx.moe_layers:
        k, fe = float(ctx.model.moe.top_k), float(ctx.model.moe.expert_ffn)
        elem_moe = (g.t_expert * k * fe / g.etp * ffn_bytes + 2 * g.t_local * k * h * 2 * act_bytes) / ctx.hbm_bytes_s
        if ctx.low_precision:  # inputs of the routed and shared experts' GEMMs (step.expert)
            elem_moe = elem_moe + expert.expert_cast_elements(g, ctx.model.moe, ctx.hidden) * FP8_CAST_BYTES / ctx.hbm_bytes_s
    return elem_attn, elem_dense, elem_moe


def layer_compute(ctx: StepContext, g: PlanAxes) -> LayerCompute:
    """One layer's forward, backward and recompute seconds per micro-batch on one GPU: the
    inventory's GEMMs (`layer_gemm_calls`, backward = 2 x forward: input- and weight-gradient GEMMs
    of the same shapes), the attention core and the elementwise traffic (backward 2 x forward).
    Recompute: full = one more layer forward (less `checkpoint_early_stop.skipped_recompute_seconds`);
    selective = one more attention-core forward
    (Korthikanti et al. 2022 sec. 4), or under torchtitan `training.torchtitan_selective_recompute_fraction`
    of the layer forward (its selective activation checkpointing)."""

    def seconds(calls, groups):
        return sum(c.count * gemm_seconds(ctx, c.m, c.n, c.k) for c in calls if c.group in groups)

    dense_calls = layer_gemm_calls(ctx.ops.dense_layer, g.t, g.t_local, g.t_expert, g.tp, g.etp, g.ep) if ctx.dense_layers else []
    moe_calls = layer_gemm_calls(ctx.ops.moe_layer, g.t, g.t_local, g.t_expert, g.tp, g.etp, g.ep) if ctx.moe_layers else []
    attn_calls = dense_calls if ctx.dense_layers else moe_calls
    qkv, out = seconds(attn_calls, ("attn_in",)), seconds(attn_calls, ("attn_out",))
    dense_up, dense_down = seconds(dense_calls, ("fc1",)), seconds(dense_calls, ("fc2",))
    moe_mlp = seconds(moe_calls, ("fc1", "fc2", "router"))
    attn_fwd, attn_bwd = attention_core_seconds(ctx, g)
    elem_attn, elem_dense, elem_moe = elementwise_seconds(ctx, g)
    L = float(ctx.layers)
    dense_frac, moe_frac = ctx.dense_layers / L, ctx.moe_layers / L
    gemm_fwd = qkv + out + dense_frac * (dense_up + dense_down) + moe_frac * moe_mlp
    elem_fwd = elem_attn + dense_frac * elem_dense + moe_frac * elem_moe
    cast_fwd, cast_bwd = native_amp.weight_cast_seconds(ctx, g)  # fp16 autocast of fp32 weights
    layer_fwd = gemm_fwd + attn_fwd + elem_fwd + cast_fwd
    layer_bwd = 2.0 * gemm_fwd + attn_bwd + 2.0 * elem_fwd + cast_bwd
    if ctx.fine_tuning.adapters:  # frozen base: no weight gradients; adapters, dequantisation (finetune_time)
        extra_fwd, extra_bwd = finetune_time.layer_extra_seconds(ctx, g, gemm_seconds, gemm_fwd)
        layer_fwd, layer_bwd = layer_fwd + extra_fwd, layer_bwd + extra_bwd
    layer_fwd, layer_bwd = eager_host.layer_floor(ctx, layer_fwd, layer_bwd)  # eager HF: host issue floor
    if ctx.framework is Framework.TORCHTITAN:
        selective = knobs.value("training.torchtitan_selective_recompute_fraction") * layer_fwd
    else:
        selective = attn_fwd
    skipped = checkpoint_early_stop.skipped_recompute_seconds(ctx, dense_down, dense_frac)
    full = layer_fwd if isinstance(skipped, float) and skipped == 0.0 else layer_fwd - skipped  # x - 0.0 is x
    recompute = np.where(g.rc == RecomputeCode.FULL, full, np.where(g.rc == RecomputeCode.SELECTIVE, selective, 0.0))
    return LayerCompute(qkv, out, dense_up, dense_down, moe_mlp, attn_fwd, attn_bwd, dense_frac, moe_frac,
                        layer_fwd, layer_bwd, recompute, gemm_fwd)


def loss_bytes_per_logit(framework: Framework, compiled: bool = False) -> float:
    """HBM bytes per logit of the cross-entropy, forward + backward: COMPILED_LOSS_BYTES_PER_LOGIT for a
    torch.compile'd PyTorch loss (`compiled`), FUSED_LOSS_BYTES_PER_LOGIT under `Framework.FSDP`
    (llm-foundry's fused cross entropy), else LOSS_BYTES_PER_LOGIT (Megatron-core's vocab-parallel cross
    entropy, op by op; PyTorch's cross_entropy on fp32 logits moves about as much)."""
    if compiled:
        return COMPILED_LOSS_BYTES_PER_LOGIT
    if framework is Framework.TRANSFORMERS:
        return hf_eager.LOSS_BYTES_PER_LOGIT
    return FUSED_LOSS_BYTES_PER_LOGIT if framework is Framework.FSDP else LOSS_BYTES_PER_LOGIT


def head_loss_bytes_per_logit(ctx: StepContext, tp):
    """`loss_bytes_per_logit` of the plan's loss for every tp: a compiled loss at tp = 1 only (under
    tp > 1 torchtitan runs its loss-parallel DTensor path, counted as the eager one, as the memory
    model's `loss_memory.loss_bytes_per_vocab_entry` does)."""
    eager = loss_bytes_per_logit(ctx.framework)
    if not ctx.compiled_loss:
        return eager
    return np.where(tp == 1, loss_bytes_per_logit(ctx.framework, compiled=True), eager)


def stage_compute(ctx: StepContext, g: PlanAxes, lc: LayerCompute) -> StageCompute:
    """The busiest pipeline rank: ceil(L / (pp vpp)) x vpp layers (Megatron's uneven split; = L / pp
    when pp x vpp divides L) and, on the last stage, the output head + loss: one GEMM t x V / tp x h
    (x 3 for forward + backward) in the activation dtype also in FP8 runs (Megatron-core's output
    layer is a plain ColumnParallelLinear; torchtitan's float8 converter skips `output`) plus
    `loss_bytes_per_logit` bytes per logit."""
    L = float(ctx.layers)
    layers_per_stage = np.ceil(L / (g.pp * g.vpp)) * g.vpp
    head_n, head_k = local_gemm_shape(ctx.ops.head, g.tp)
    head = (finetune_time.head_gemm_passes(ctx) * gemm_seconds(ctx, g.t, head_n, head_k, ctx.act_dtype)
            + finetune_time.head_adapter_seconds(ctx, g, gemm_seconds)
            + g.t * ctx.vocab / g.tp * head_loss_bytes_per_logit(ctx, g.tp) / ctx.hbm_bytes_s)
    stage_fwd, stage_bwd = layers_per_stage * lc.layer_fwd, layers_per_stage * lc.layer_bwd
    return StageCompute(layers_per_stage, layers_per_stage / L, head, stage_fwd, stage_bwd,
                        stage_fwd + stage_bwd + head, layers_per_stage * lc.layer_recompute)
