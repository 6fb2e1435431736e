"""Training step time: per-operator rooflines, communication with the overlap frameworks achieve,
and the pipeline bubble, for one plan or a million plans at once (numpy broadcasting).

One optimizer step on the slowest pipeline stage (the last one, which also holds the output
head) is

    step = m x (compute_mb + recompute_mb + tp_mb + cp_mb + ep_mb + pp_mb)     # steady state
         + bubble                                                               # fill + drain
         + dp_exposed + optimizer

with m = global_batch / (micro_batch x dp) micro-batches. When pp x vpp does not divide the layers
(e.g. DeepSeek-V3's 61 layers on pp 16), layers are split as evenly as possible (Megatron's uneven
split, the same split `memory` uses) and the stage modelled is the busiest: ceil(L / (pp vpp)) x vpp
layers, with that share of the body's parameters. Every term is a field of `StepTime`;
the fields sum to `step_time_s` (tests check it).

Per layer and micro-batch, on one GPU, with t = micro_batch x seq_len / cp tokens, h hidden,
q = heads x head_dim, k = kv_heads x head_dim, f the FFN size:

- GEMMs (forward): QKV (t x (q+2k)/tp x h), output projection (t x h x q/tp), MLP up/gate
  (t x n_up f/tp x h) and down (t x h x f/tp); MoE layers run E/ep local experts, each on
  ep x t x top_k / E tokens (balanced routing), plus shared experts and the router GEMM. Each is
  `primitives.op_cost.gemm_time_array` (roofline, MAMF-measured ceiling x shape factor).
  Backward = 2 x forward (input gradient + weight gradient GEMMs of the same shapes).
- Attention core: FlashAttention FLOPs 4 b (a/tp) d s(s+1)/2 / cp forward (causal), backward
  2.5 x forward (FlashAttention-2, Dao 2023: 5 GEMMs in backward vs 2 forward), at
  TRAINING_ATTENTION_CEILING (x FLASH_V1_OVER_V2 with `AttentionKernel.FLASH_V1`). With `AttentionKernel.UNFUSED` (pre-FlashAttention Megatron /
  DeepSpeed: scores materialised, fused scale-mask-softmax + dropout), the two batched GEMMs are
  full s x s and every score element moves UNFUSED_SCORE_BYTES_FWD / _BWD bytes through HBM.
- Elementwise (norms, residual adds, dropout, activation): the inventory's per-operator bytes
  (`LayerOps.hidden_elementwise_bytes`, divided by tp with sequence parallelism, replicated
  otherwise) plus the activation's bytes per FFN element x f/tp; backward moves 2 x forward; at
  achievable HBM bandwidth.
  Megatron's fused kernels move those bytes; Composer's separate kernels EAGER_ELEMENTWISE_FACTOR x
  them; torchtitan's eager Llama is counted operator by operator (TORCHTITAN_* constants: fp32
  RMSNorm, complex-multiply rotary on q and k, GQA `repeat_kv` copies, SwiGLU in two kernels).
- Recompute: full = one more layer forward; selective = one more attention-core forward
  (Korthikanti et al. 2022 sec. 4). Under `Framework.TORCHTITAN`, "selective" is torchtitan's own
  selective activation checkpointing, which recomputes about half of each layer's forward
  (TORCHTITAN_SELECTIVE_RECOMPUTE_FRACTION): layer mode checkpoints every 2nd block, op mode saves
  the outputs of every other matmul and recomputes the rest.
- Output head + cross-entropy on the last stage: one GEMM t x V/tp x h (x3 for fwd+bwd) plus
  `loss_bytes_per_logit` bytes per logit (Megatron's op-by-op cross entropy: 52 B; llm-foundry's
  fused one: 6 B). The head GEMM runs in bf16/fp16 also in FP8 runs: FP8
  recipes convert only the transformer layers' linears (TransformerEngine modules in Megatron-core,
  whose output layer is a plain ColumnParallelLinear; torchtitan's float8 converter skips `output`).

Communication (times from `primitives.collectives`):
- TP: 2 all-reduces of t x h x 2 bytes per layer forward and 2 backward (+2 in a full-recompute
  forward); with sequence parallelism the same count of all-gather + reduce-scatter pairs, which
  move the same bytes (Korthikanti et al. 2022 sec. 4.2.2). Backward TP collectives overlap the
  weight-gradient GEMM for TP_BACKWARD_OVERLAP of their time (Megatron's async TP all-reduce,
  Narayanan et al. 2021 / Megatron-LM `--async-tensor-model-parallel-allreduce`).
  With `tp_comm_overlap` and sequence parallelism (TransformerEngine userbuffers; Wang et al. 2023,
  "Overlap Communication with Dependent Computation via Decomposition", ASPLOS; NeMo
  `tp_comm_overlap`), each all-gather / reduce-scatter (half an all-reduce's time, c) overlaps a
  GEMM by the method NeMo's tuned configs give it (UB_* constants): the all-gathers before QKV and
  FC1 (and the backward all-gathers of the row-parallel dgrads) by ring exchange in tp chunks,
  max(0, c - g) + min(c, g) / tp exposed + OVERLAP_CONTENTION x min(c, g); the reduce-scatters
  after the output projection and FC2 by `pipeline` (4 splits, the GEMM on the SMs the reduction
  leaves: slowed by SMs / (SMs - n_sm)), the last split exposed; in backward the re-gather of the
  input beside the QKV / FC1 dgrad and the reduce-scatter of the input gradient beside their wgrad
  by `bulk` (n_sm SMs lost while both run).
- CP: per `ContextParallelMethod` of the framework (`workloads.training.context_parallel`):
  TransformerEngine's p2p ring passes each rank's K,V block cp-1 times forward and K,V + dK,dV
  backward, overlapped with the attention core (only the excess is exposed); PyTorch's
  context_parallel (torchtitan) all-gathers K,V once per pass (hidden only behind the first ring
  step), rings dK,dV in fp32 and merges each step's output in fp32 (eager, memory-bound).
- EP: 2 all-to-alls (dispatch, combine) of t x top_k x h x 2 bytes per MoE layer forward, 2 backward
  (+2 in a full-recompute forward), inside / across scale-up domains, partly hidden behind another
  micro-batch (`moe_time`).
- PP: one send of the boundary activation (t x h x 2 / tp bytes: Megatron's scatter-gather)
  forward and one backward per micro-batch and virtual stage. The interleaved schedule (vpp > 1)
  overlaps these sends with the next virtual stage's compute in Megatron-core (`overlap_p2p_comm`,
  on by default; `--no-overlap-p2p-communication` turns it off): only the excess of a transfer
  over half a virtual stage's forward + backward is exposed. The 1F1B schedule (vpp = 1), the
  2021-22 Megatron stack (`AttentionKernel.UNFUSED`: Narayanan et al. 2021 and Korthikanti et al.
  2022 predate the option) and other frameworks block on them.
- DP: gradients reduced over dp x cp ranks. No sharding: all-reduce; ZeRO-1/2: reduce-scatter +
  all-gather of bf16 parameters; ZeRO-3/FSDP: per micro-batch all-gather forward, all-gather
  backward, reduce-scatter. Overlap by framework (`Framework`): Megatron-core and FSDP bucket the
  reduce and overlap it with the backward pass (window = backward of the last micro-batch, and the
  parameter all-gather with the first forward); FSDP overlaps each micro-batch's gathers with its
  compute; DeepSpeed's ZeRO-0/1 engine (Megatron-DeepSpeed) reduces after the backward pass.
  While an overlapped NCCL collective runs, its thread blocks (one per channel: 16 for a ring over
  8 NICs per node, 32 inside an H100 node) hold that many SMs, so the compute it hides behind runs
  channels / SMs slower: that share of the overlapped time is added (NCCL launches one CTA per
  channel; Calculon models the same effect as `processor_usage`).
  Gradients are reduced in fp32 with bf16 (Megatron forces accumulate_allreduce_grads_in_fp32 for
  bf16), in fp16 with fp16, and in the parameter dtype under ZeRO-3/FSDP (fp32 under
  `Framework.TORCHTITAN`, whose FSDP2 default reduce dtype is float32). Parameters are gathered
  in bf16, except under `Framework.FSDP` (Composer's 2023 DEFAULT mixed precision gathers fp32:
  COMPOSER_GATHER_BYTES). FSDP2 (`Framework.TORCHTITAN`) also copies the gathered parameters out
  and the gradients in on the GPU each micro-batch (FSDP2_COPY_BYTES_PER_PARAM, memory-bound; counted
  with the exposed DP time, as they exist only because of the sharding).
- Pipeline bubble: (pp-1)/vpp micro-batch times (1F1B, Narayanan et al. 2021 sec. 2.2; interleaved
  schedule divides by the virtual stages per GPU). The fill runs the forward passes of stages
  0..pp-2 and the drain their backward passes, so the micro-batch time in the bubble is the last
  stage's minus the output head: 1F1B's critical path is sum_{i<pp-1}(f_i + b_i) + m (f_last + b_last).
- Optimizer: Adam reads fp32 master weight, m, v and gradient and writes master, m, v and the
  bf16 weight: ADAM_BYTES_PER_PARAM bytes per local (sharded) parameter, memory-bound.

Model FLOPs (for TFLOP/s and MFU) follow Megatron's definition: `models.flops.flops_per_token`
with causal=False (= 72 B s l h^2 (1 + s/6h + V/12lh) for GPT, Narayanan et al. 2021 eq. 3 without
the recompute pass; PaLM App. B's 6N + 12 L h s), recompute excluded. MFU is against the GPU's
dense bf16 (fp16) peak, also for FP8 runs (the convention of the Megatron/NeMo tables).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum

import numpy as np

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.layers.flops import flops_per_token
from gpuplan.layers.inventory import LayerOps, ModelOps, local_gemm_shape, model_ops, refuse_hybrid
from gpuplan.layers.operators import Shard
from gpuplan.layers.params import parameter_counts
from gpuplan.primitives.op_cost import gemm_time_array, memory_bandwidth_bytes_s
from gpuplan.specs import Gpu, ModelSpec, Precision, Recompute, Sharding, System, TrainPlan
from gpuplan.specs.dtypes import Weights
from gpuplan.specs.model import FfnKind
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.plan import default_expert_tp
from gpuplan.workloads.training.context_parallel import attention_passes, cp_exposed_seconds
from gpuplan.workloads.training import finetune_time, moe_time
from gpuplan.primitives.collectives import (
    Collective, collective_seconds_array, collective_sm_fraction, group_per_node,
)


class RecomputeCode(IntEnum):
    NONE = 0
    SELECTIVE = 1
    FULL = 2


class ShardingCode(IntEnum):
    NONE = 0
    ZERO1 = 1
    ZERO2 = 2
    ZERO3 = 3


RECOMPUTE_CODE = {Recompute.NONE: 0, Recompute.SELECTIVE: 1, Recompute.FULL: 2}
SHARDING_CODE = {Sharding.NONE: 0, Sharding.ZERO1: 1, Sharding.ZERO2: 2, Sharding.ZERO3: 3, Sharding.FSDP: 3}

#: Per score element of unfused attention, forward: write QK^T (2), softmax read+write (4), dropout
#: mask + read + write (5), read by the AV GEMM (2) = 13 B; backward: about twice that (26 B).
UNFUSED_SCORE_BYTES_FWD = 13.0
UNFUSED_SCORE_BYTES_BWD = 26.0
#: FlashAttention backward / forward FLOPs (Dao 2023, FlashAttention-2 sec. 3: 5 vs 2 GEMMs).
FLASH_BACKWARD_RATIO = 2.5
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
#: Adam: read master, m, v, grad (4 x 4 B), write master, m, v (3 x 4 B) and the bf16 weight (2 B).
ADAM_BYTES_PER_PARAM = 30.0
#: Fraction of backward TP collective time hidden behind weight-gradient GEMMs (Megatron async TP
#: all-reduce overlaps the input-gradient all-reduce with the weight-gradient GEMM: about half the
#: backward collectives; modelling assumption).
TP_BACKWARD_OVERLAP = knobs.register(
    "training.tp_backward_overlap", unit="fraction", default=0.5, low=0.0, high=1.0,
    source="modelling assumption: Megatron's async TP all-reduce overlaps the input-gradient all-reduce with the weight-gradient GEMM (about half the backward collectives)",
    scales="exposed backward tensor-parallel collectives (without TE userbuffers)")
#: Compute slowdown while TransformerEngine userbuffers or pipeline sends run alongside: those
#: move data with a few SMs or the copy engines, so 5% of the overlapped time (assumption; Calculon's
#: `processor_usage` is 15% on NVLink, 2% on InfiniBand). Data-parallel NCCL collectives instead
#: occupy one SM per channel: their slowdown is channels / SMs (`primitives.collectives.collective_sm_fraction`).
OVERLAP_CONTENTION = knobs.register(
    "training.overlap_contention", unit="fraction", default=0.05, low=0.0, high=0.5,
    source="assumption; Calculon processor_usage is 0.15 on NVLink, 0.02 on InfiniBand",
    scales="compute slowdown while TE userbuffers or pipeline sends overlap it")
#: TransformerEngine userbuffers TP-overlap methods and SM budgets per GEMM (NeMo's tuned H100
#: configs, nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py,
#: `userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192`, the same in its fp8 twin): the forward
#: all-gathers before QKV and FC1 and the backward all-gathers of the row-parallel dgrads use
#: `ring_exchange` (point-to-point, copy engines); the forward reduce-scatters after the output
#: projection and FC2 use `pipeline` with num_splits 4 on 24 and 16 SMs (set_sm_margin: the GEMM
#: runs on the rest); backward `bulk` overlaps run the re-gather of the input beside the QKV / FC1
#: dgrad GEMMs on 4 / 2 SMs and the reduce-scatter of the input gradient beside the QKV / FC1 wgrad
#: GEMMs on 24 / 4 SMs. TE's `comm_gemm_overlap` implements the three methods (ring exchange =
#: SPLIT_PIPELINED_AG_P2P, pipeline = SPLIT_PIPELINED_RS, bulk = BULK_OVERLAP_AG / _RS).
UB_PIPELINE_SPLITS = 4.0
UB_PROJ_FPROP_SMS = 24.0
UB_FC2_FPROP_SMS = 16.0
UB_QKV_DGRAD_SMS = 4.0
UB_QKV_WGRAD_SMS = 24.0
UB_FC1_DGRAD_SMS = 2.0
UB_FC1_WGRAD_SMS = 4.0
#: Training attention (forward + backward, causal, head_dim 128) as a fraction of dense peak:
#: FlashAttention-2 (Dao 2023, sec. 4.1 / Fig. 4-7): about 180 of 312 TFLOP/s on A100 at 2k-16k
#: tokens (225 at its best shape); "up to 335 TFLOP/s" on H100 = 0.34 of 989 (no Hopper-specific
#: instructions; training stacks of 2023-24 ran FA2 or cuDNN attention at similar rates).
#: `efficiency.attention_ceiling` is the inference (forward, FA3) ceiling and is not used here.
#: Blackwell: the Hopper value x the ratio of the fused-attention kernel's fraction of peak on B200 and
#: H100 (the stacks of 2025 run TransformerEngine's cuDNN fused attention). B200: FlashAttention-4
#: reaches 1613 TFLOP/s BF16 forward = 71% of 2250 and is "up to 1.3x" cuDNN 9.13 (Zadouri, Shah, Dao
#: et al. 2026, arXiv 2603.05451), so cuDNN forward = 0.551; H100 cuDNN at head_dim 128, 16k tokens:
#: forward 595, backward 516 TFLOP/s of 989 (Shah et al. 2024, FlashAttention-3, Fig. 5-6), and the
#: same backward / forward ratio (0.867) is taken for B200. Forward + backward at the FLOP ratio 1 : 2.5:
#: B200 3.5 / (1 / 0.551 + 2.5 / 0.478) = 0.497, H100 3.5 / (1 / 0.602 + 2.5 / 0.522) = 0.542; ratio 0.917
#: (Blackwell doubled the tensor cores but not the exponential units or shared-memory bandwidth that
#: attention also needs: FlashAttention-4 sec. 1), so 0.339 x 0.917 = 0.311.
_B200_CUDNN_FWD = 1613.0 / 1.3 / 2250.0
_H100_CUDNN_FWD, _CUDNN_BWD_OVER_FWD = 595.0 / 989.0, 516.0 / 595.0


def _fwd_bwd_fraction(fwd: float) -> float:
    """Forward + backward attention fraction of peak at the FLOP ratio 1 : FLASH_BACKWARD_RATIO."""
    return (1.0 + FLASH_BACKWARD_RATIO) / (1.0 / fwd + FLASH_BACKWARD_RATIO / (fwd * _CUDNN_BWD_OVER_FWD))


BLACKWELL_TRAINING_ATTENTION = 335.0 / 989.0 * _fwd_bwd_fraction(_B200_CUDNN_FWD) / _fwd_bwd_fraction(_H100_CUDNN_FWD)
BLACKWELL_TRAINING_ATTENTION_SOURCE = (
    "Hopper 0.339 x (B200 / H100 cuDNN fused-attention fwd+bwd fraction of peak): B200 forward 1613/1.3 of 2250"
    " (arXiv 2603.05451, FlashAttention-4 vs cuDNN 9.13), H100 595 fwd / 516 bwd of 989 (FlashAttention-3 Fig. 5-6)"
    " -> 0.497 / 0.542 = 0.917 -> 0.311")
TRAINING_ATTENTION_CEILING = {
    family: knobs.register(
        f"training.attention_ceiling.{family}", unit="fraction of dense peak", default=v, low=0.05, high=1.0,
        source=src, scales="training attention core (FlashAttention-2 forward + backward)")
    for family, v, src in (
        ("ampere", 180.0 / 312.0, "Dao 2023 (FlashAttention-2) Fig. 4-7: about 180 of 312 TFLOP/s on A100"),
        ("hopper", 335.0 / 989.0, "Dao 2023 (FlashAttention-2): up to 335 TFLOP/s on H100 = 0.34 of 989"),
        ("blackwell", BLACKWELL_TRAINING_ATTENTION, BLACKWELL_TRAINING_ATTENTION_SOURCE),
    )
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
#: Hopper's sustained GEMM fraction relative to the one above (the A100-fitted value): the share of
#: the short-benchmark (mamf-finder) rate a GEMM keeps inside a full training step depends on how
#: far the part's clock falls under its sustained power draw (H100 SXM: 700 W; its 989 TFLOP/s
#: peak is quoted at the 1830 MHz boost clock), so it is a property of the part, not one value for
#: every GPU. Fitted on the H100 training families (0.891 +- 0.040 with the base refit on every
#: family, `validate --cv family`, 2026-11-24); 1.0 would be the A100 value.
SUSTAINED_GEMM_RATIO_HOPPER = knobs.register(
    "training.sustained_gemm_ratio.hopper", unit="ratio", default=0.89, low=0.5, high=1.25,
    source="fitted: the H100 families' steady-state throughput (Megatron-core 2024 weak / strong scaling, NeMo 24.07, "
           "Megatron-Bridge, MosaicML llm-foundry, torchtitan)",
    scales="every training GEMM on Hopper parts (x training.sustained_gemm_fraction)",
    fitted_on=("meg24", "meg24-ss", "nemo2407", "mbridge", "mpt-h100", "ttbench", "megft"))
#: Extra HBM bytes per GEMM-input element with FP8 (TransformerEngine): cast + transpose of the
#: bf16 input (read 2 B, write 1 B twice) and of the output gradient in backward.
FP8_CAST_BYTES = 4.0
#: Bytes per parameter of the ZeRO-3 / FSDP all-gathers under `Framework.FSDP` (Composer /
#: llm-foundry): Composer's `mixed_precision: DEFAULT` of 2023 (the MPT benchmark tables) set
#: MixedPrecision(param_dtype=float32, reduce_dtype=<autocast dtype>, buffer_dtype=float32), so
#: parameters are gathered in fp32 and cast by autocast at each matmul; gradients are reduced in
#: bf16. (Later Composer releases gather in the autocast dtype and reduce in fp32.)
COMPOSER_GATHER_BYTES = 4.0
#: Bytes per gradient element of torchtitan's FSDP2 reduce-scatter: its JobConfig default
#: `mixed_precision_reduce = "float32"` (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)),
#: so gradients are reduced in fp32 while parameters are gathered in bf16.
TORCHTITAN_REDUCE_BYTES = 4.0
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
#: FSDP2 (torchtitan) copies per unsharded parameter and micro-batch, on the GPU: all-gather
#: copy-out (`split_with_sizes_copy` of the gathered buffer into the parameters, read 2 + write 2)
#: in forward and again in backward (reshard_after_forward), and the reduce-scatter copy-in
#: (`chunk_cat` of the bf16 gradients into the fp32 reduce buffer, read 2 + write 4):
#: 4 + 4 + 6 = 14 B, memory-bound. FSDP1 (Composer) gathers into its flat parameter in place.
FSDP2_COPY_BYTES_PER_PARAM = 14.0


@dataclass(frozen=True)
class StepContext:
    """Everything about (model, system, seq_len, precision, framework) the step formulas need,
    derived once so that a plan search only varies the plan axes."""

    model: ModelSpec
    system: System
    gpu: Gpu
    seq_len: int
    precision: Precision
    framework: Framework
    attention_kernel: AttentionKernel
    gemm_dtype: str  # dtype of the GEMMs (fp8 only where the GPU has it)
    tp_comm_overlap: bool  # TransformerEngine TP comm overlap (applies where sequence parallelism is on)
    low_precision: bool  # GEMM inputs cast per GEMM (fp8 / mxfp8 / nvfp4 on a part that runs them)
    p2p_overlap: bool  # Megatron-core interleaved schedule overlaps pipeline sends with compute
    act_dtype: str  # bf16 or fp16: attention, elementwise, communication
    hbm_bytes_s: float
    # shape
    hidden: int
    q_dim: int
    kv_dim: int
    head_dim: int
    heads: int
    vocab: int
    layers: int
    dense_layers: int
    moe_layers: int
    # parameters
    body_params: int  # transformer layers (all experts)
    expert_params: int  # routed experts, all layers (sharded by ep)
    input_embedding_params: int  # token (+ position) table: first stage
    output_head_params: int  # untied head: last stage (0 when tied; then the table is shared)
    model_flops_per_token: float  # Megatron definition, recompute excluded
    ops: ModelOps  # the operator inventory (layers.inventory.model_ops)
    attention_flops_per_token: float  # causal attention-core forward FLOPs per token, mean over layers
    #: fine-tuning choices (LoRA / QLoRA, optimizer, offload, master weights): `finetune_time`'s terms
    fine_tuning: FineTuning = FineTuning()
    grad_fp32: bool = True  # gradients kept in fp32 (plan.grad_precision), read by the optimizer step

    @classmethod
    def build(
        cls,
        model: ModelSpec,
        system: System,
        gpu: Gpu,
        seq_len: int,
        precision: Precision = Precision.BF16,
        framework: Framework = Framework.MEGATRON,
        attention_kernel: AttentionKernel = AttentionKernel.FLASH,
        tp_comm_overlap: bool = False,
        fine_tuning: FineTuning | None = None,
        grad_precision: Precision = Precision.FP32,
    ) -> "StepContext":
        refuse_hybrid(model, "training step time")  # the terms below model attention + FFN layers only
        if model.mla is not None:
            q_dim = model.heads * (model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim)
            kv_dim = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
            head_dim = model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim
        else:
            q_dim, kv_dim, head_dim = model.heads * model.head_dim, model.kv_heads * model.head_dim, model.head_dim
        precision = Precision(precision)
        # the tensor-core precision of the layers' GEMMs (specs.dtypes.gemm_compute_dtype, a training
        # recipe casting both operands: mxfp8 runs at the fp8 rate, nvfp4 at fp4; a part without it
        # falls back to the nearest recipe it has); fp32 / tf32 runs are modelled on bf16 GEMMs
        gemm_dtype = (gpu.gemm_compute_dtype(precision.value, weights=Weights.CAST) if precision.low_precision_matmul
                      else {Precision.FP16: "fp16"}.get(precision, "bf16"))
        act_dtype = "fp16" if precision is Precision.FP16 else "bf16"
        counts = parameter_counts(model)
        ops = model_ops(model)
        moe_layers = sum(1 for i in range(model.layers) if model.is_moe_layer(i))
        expert_params = counts.components.get("moe_routed_experts", 0)
        pos = counts.components.get("position_embedding", 0)
        head = counts.components.get("lm_head", 0)
        return cls(
            model=model, system=system, gpu=gpu, seq_len=int(seq_len), precision=precision,
            framework=Framework(framework), attention_kernel=AttentionKernel(attention_kernel),
            gemm_dtype=gemm_dtype, tp_comm_overlap=bool(tp_comm_overlap), act_dtype=act_dtype,
            low_precision=gemm_dtype in ("fp8", "fp6", "fp4"),
            p2p_overlap=(Framework(framework) in (Framework.MEGATRON, Framework.OTHER)
                         and AttentionKernel(attention_kernel) is not AttentionKernel.UNFUSED),
            hbm_bytes_s=memory_bandwidth_bytes_s(gpu),
            hidden=model.hidden, q_dim=q_dim, kv_dim=kv_dim, head_dim=head_dim, heads=model.heads,
            vocab=model.vocab, layers=model.layers, dense_layers=model.layers - moe_layers, moe_layers=moe_layers,
            body_params=counts.non_embedding, expert_params=expert_params,
            input_embedding_params=counts.components.get("embedding", 0) + pos,
            output_head_params=head,
            model_flops_per_token=flops_per_token(model, int(seq_len), causal=False).total,
            ops=ops,
            attention_flops_per_token=sum(lo.core.forward_flops(int(seq_len), True) for lo in ops.layers) / model.layers,
            fine_tuning=fine_tuning or FineTuning(),
            grad_fp32=Precision(grad_precision) in (Precision.FP32, Precision.TF32),
        )


@dataclass(frozen=True)
class StepArrays:
    """Step time split into parts (seconds per optimizer step, one array element per plan)."""

    compute_s: np.ndarray  # forward + backward operators (no recompute), all micro-batches
    recompute_s: np.ndarray
    tp_comm_s: np.ndarray  # exposed
    cp_comm_s: np.ndarray  # exposed
    ep_comm_s: np.ndarray  # exposed
    pp_comm_s: np.ndarray  # exposed
    bubble_s: np.ndarray
    dp_comm_s: np.ndarray  # exposed
    optimizer_s: np.ndarray
    offload_s: np.ndarray  # exposed host <-> GPU copies of offloaded parameters (finetune_time)
    step_s: np.ndarray

    def parts(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "step_s"}


def sustained_gemm_fraction(gpu: Gpu) -> float:
    """Sustained fraction of the mamf-finder GEMM rate in a training step: `training.sustained_gemm_fraction`,
    x `training.sustained_gemm_ratio.hopper` on Hopper parts."""
    base = knobs.value("training.sustained_gemm_fraction")
    if "hopper" in gpu.architecture.lower():
        return base * knobs.value("training.sustained_gemm_ratio.hopper")
    return base


def _gemm(ctx: StepContext, m, n, k, dtype: str | None = None):
    return gemm_time_array(ctx.gpu, m, n, k, dtype or ctx.gemm_dtype) / sustained_gemm_fraction(ctx.gpu)


def training_attention_ceiling(gpu: Gpu) -> float:
    """Forward+backward FlashAttention efficiency for training (TRAINING_ATTENTION_CEILING)."""
    arch = gpu.architecture.lower()
    for family in TRAINING_ATTENTION_CEILING:
        if family in arch:
            return knobs.value(f"training.attention_ceiling.{family}")
    return knobs.value("training.attention_ceiling.default")


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
class PlanAxes:
    """The plan axes as broadcastable float arrays, with the token counts every term uses:
    t = micro_batch x seq_len / cp tokens per micro-batch on one GPU; t_local = t / tp with sequence
    parallelism (the rank's sequence shard outside TP regions), else t; t_expert = the tokens an
    expert-TP rank holds after the all-gather over etp (t_local x etp with SP, else t)."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    vpp: np.ndarray
    mb: np.ndarray
    m: np.ndarray
    rc: np.ndarray
    sp: np.ndarray
    shard: np.ndarray
    t: np.ndarray
    t_local: np.ndarray
    t_expert: np.ndarray

    @classmethod
    def build(cls, ctx: StepContext, tp, pp, dp, cp, ep, vpp, micro_batch, num_micro_batches, recompute,
              sequence_parallel, sharding, etp=None) -> "PlanAxes":
        f64 = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
        tp, pp, dp, cp, ep, vpp, mb, m = (f64(x) for x in (tp, pp, dp, cp, ep, vpp, micro_batch, num_micro_batches))
        sp = np.asarray(sequence_parallel, dtype=bool)
        etp = f64(default_expert_tp(tp, dp, cp, ep) if etp is None else etp)
        t = mb * float(ctx.seq_len) / cp
        t_local = t / np.where(sp, tp, 1.0)
        return cls(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, vpp=vpp, mb=mb, m=m, rc=np.asarray(recompute), sp=sp,
                   shard=np.asarray(sharding), t=t, t_local=t_local, t_expert=np.where(sp, t_local * etp, t))


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
    (`training.attention_ceiling.*`) x SM fill min(1, mb (a / tp) ceil(s / cp / 128) / SMs), x
    `training.flash_v1_over_v2` for FlashAttention v1; backward FLASH_BACKWARD_RATIO x forward
    (Dao 2023: 5 GEMMs in backward vs 2 forward). Unfused: two batched GEMMs over the full s x s
    scores (x 2 in backward) plus UNFUSED_SCORE_BYTES_FWD / _BWD bytes per score through HBM."""
    s = float(ctx.seq_len)
    heads_local = ctx.heads / g.tp
    if ctx.attention_kernel in (AttentionKernel.FLASH, AttentionKernel.FLASH_V1):
        sms = ctx.gpu.sm_count or 132
        fill = np.minimum(1.0, g.mb * heads_local * np.ceil(s / g.cp / 128.0) / sms)
        eff = training_attention_ceiling(ctx.gpu) * fill
        if ctx.attention_kernel is AttentionKernel.FLASH_V1:
            eff = eff * knobs.value("training.flash_v1_over_v2")
        flops = g.mb * s * ctx.attention_flops_per_token / g.tp / g.cp
        fwd = flops / (_peak_flops(ctx, ctx.act_dtype) * eff)
        return fwd, FLASH_BACKWARD_RATIO * fwd
    scores = g.mb * heads_local * s * s / g.cp
    bmm = 2.0 * gemm_time_array(ctx.gpu, s / g.cp, s, ctx.head_dim, ctx.act_dtype, batch=g.mb * heads_local)
    return (bmm + scores * UNFUSED_SCORE_BYTES_FWD / ctx.hbm_bytes_s,
            2.0 * bmm + scores * UNFUSED_SCORE_BYTES_BWD / ctx.hbm_bytes_s)


def elementwise_seconds(ctx: StepContext, g: PlanAxes):
    """(attention block, dense FFN, MoE FFN) elementwise seconds per layer and micro-batch, forward.

    Megatron's fused kernels: the inventory's norm and residual-add bytes per token
    (`LayerOps.hidden_elementwise_bytes`: 20 B x h for a Llama layer, 22 with dropout; / tp with
    sequence parallelism) + the activation's bytes per FFN element (6 gated, 4 otherwise) x f / tp;
    Composer (`Framework.FSDP`)
    `training.eager_elementwise_factor` x those; torchtitan's eager Llama counted per operator
    (TORCHTITAN_* bytes). FP8 / MX / NVFP4 add FP8_CAST_BYTES per GEMM-input element. MoE: the
    activation on the routed tokens plus the permute / unpermute copies of t_local x top_k x h."""
    h, act_bytes = float(ctx.hidden), 2.0
    hidden_div = np.where(g.sp, g.tp, 1.0)
    layer = ctx.ops.layers[0]
    ffn_bytes = layer.activation_bytes_per_ffn_element()
    if ctx.framework is Framework.TORCHTITAN:
        repeat_kv = 2.0 * (2.0 * ctx.kv_dim + 2.0 * ctx.q_dim) if ctx.kv_dim < ctx.q_dim else 0.0
        head_bytes = TORCHTITAN_ROPE_BYTES * (ctx.q_dim + ctx.kv_dim) + TORCHTITAN_ATTN_OUT_COPY_BYTES * ctx.q_dim + repeat_kv
        elem_attn = g.t * (h * TORCHTITAN_NORM_RESIDUAL_BYTES_PER_HIDDEN / hidden_div + head_bytes / g.tp) / ctx.hbm_bytes_s
        swiglu = ctx.model.ffn_kind is FfnKind.SWIGLU
        ffn_bytes = TORCHTITAN_SWIGLU_BYTES_PER_FFN if swiglu else knobs.value("training.eager_elementwise_factor") * ffn_bytes
    else:
        eager = knobs.value("training.eager_elementwise_factor") if ctx.framework is Framework.FSDP else 1.0
        elem_attn = eager * g.t * layer.hidden_elementwise_bytes() / hidden_div / ctx.hbm_bytes_s
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
        if ctx.low_precision:  # inputs of the routed and shared experts' GEMMs (moe_time)
            elem_moe = elem_moe + moe_time.expert_cast_elements(g, ctx.model.moe, ctx.hidden) * FP8_CAST_BYTES / ctx.hbm_bytes_s
    return elem_attn, elem_dense, elem_moe


def layer_compute(ctx: StepContext, g: PlanAxes) -> LayerCompute:
    """One layer's forward, backward and recompute seconds per micro-batch on one GPU: the
    inventory's GEMMs (`layer_gemm_calls`, backward = 2 x forward: input- and weight-gradient GEMMs
    of the same shapes), the attention core and the elementwise traffic (backward 2 x forward).
    Recompute: full = one more layer forward; selective = one more attention-core forward
    (Korthikanti et al. 2022 sec. 4), or under torchtitan `training.torchtitan_selective_recompute_fraction`
    of the layer forward (its selective activation checkpointing)."""

    def seconds(calls, groups):
        return sum(c.count * _gemm(ctx, c.m, c.n, c.k) for c in calls if c.group in groups)

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
    layer_fwd = gemm_fwd + attn_fwd + elem_fwd
    layer_bwd = 2.0 * gemm_fwd + attn_bwd + 2.0 * elem_fwd
    if ctx.fine_tuning.adapters:  # frozen base: no weight gradients; adapters, dequantisation (finetune_time)
        extra_fwd, extra_bwd = finetune_time.layer_extra_seconds(ctx, g, _gemm, gemm_fwd)
        layer_fwd, layer_bwd = layer_fwd + extra_fwd, layer_bwd + extra_bwd
    if ctx.framework is Framework.TORCHTITAN:
        selective = knobs.value("training.torchtitan_selective_recompute_fraction") * layer_fwd
    else:
        selective = attn_fwd
    recompute = np.where(g.rc == RecomputeCode.FULL, layer_fwd, np.where(g.rc == RecomputeCode.SELECTIVE, selective, 0.0))
    return LayerCompute(qkv, out, dense_up, dense_down, moe_mlp, attn_fwd, attn_bwd, dense_frac, moe_frac,
                        layer_fwd, layer_bwd, recompute)


def loss_bytes_per_logit(framework: Framework) -> float:
    """HBM bytes per logit of the cross-entropy, forward + backward: FUSED_LOSS_BYTES_PER_LOGIT under
    `Framework.FSDP` (llm-foundry's fused cross entropy), else LOSS_BYTES_PER_LOGIT (Megatron-core's
    vocab-parallel cross entropy, op by op; PyTorch's cross_entropy on fp32 logits moves about as much)."""
    return FUSED_LOSS_BYTES_PER_LOGIT if framework is Framework.FSDP else LOSS_BYTES_PER_LOGIT


def stage_compute(ctx: StepContext, g: PlanAxes, lc: LayerCompute) -> StageCompute:
    """The busiest pipeline rank: ceil(L / (pp vpp)) x vpp layers (Megatron's uneven split; = L / pp
    when pp x vpp divides L) and, on the last stage, the output head + loss: one GEMM t x V / tp x h
    (x 3 for forward + backward) in the activation dtype also in FP8 runs (Megatron-core's output
    layer is a plain ColumnParallelLinear; torchtitan's float8 converter skips `output`) plus
    `loss_bytes_per_logit` bytes per logit."""
    L = float(ctx.layers)
    layers_per_stage = np.ceil(L / (g.pp * g.vpp)) * g.vpp
    head_n, head_k = local_gemm_shape(ctx.ops.head, g.tp)
    head = (finetune_time.head_gemm_passes(ctx) * _gemm(ctx, g.t, head_n, head_k, ctx.act_dtype)
            + finetune_time.head_adapter_seconds(ctx, g, _gemm)
            + g.t * ctx.vocab / g.tp * loss_bytes_per_logit(ctx.framework) / ctx.hbm_bytes_s)
    stage_fwd, stage_bwd = layers_per_stage * lc.layer_fwd, layers_per_stage * lc.layer_bwd
    return StageCompute(layers_per_stage, layers_per_stage / L, head, stage_fwd, stage_bwd,
                        stage_fwd + stage_bwd + head, layers_per_stage * lc.layer_recompute)


def tp_comm_seconds(ctx: StepContext, g: PlanAxes, lc: LayerCompute, sc: StageCompute):
    """Exposed tensor-parallel communication per micro-batch: 2 all-reduces of t x h x 2 bytes per
    layer forward (+2 in a full-recompute forward) and 2 backward, of which `training.tp_backward_overlap`
    hides behind the weight-gradient GEMMs (Megatron's async TP all-reduce); with sequence
    parallelism the same count of all-gather + reduce-scatter pairs, which move the same bytes
    (Korthikanti et al. 2022 sec. 4.2.2). With TE userbuffers (`tp_comm_overlap` + SP; Wang et al.
    2023 ASPLOS), each AG / RS (c = half an all-reduce) overlaps a GEMM by NeMo's method for it:
    forward AG ring exchange (`userbuffers_ring_exposed`), forward RS pipeline
    (`userbuffers_pipeline_exposed`, 24 / 16 SMs), backward AG of the row-parallel dgrads ring
    exchange, and the column-parallel layers' re-gather and input-gradient RS bulk
    (`userbuffers_bulk_exposed`, beside their dgrad / wgrad GEMMs)."""
    gpn = ctx.system.gpus_per_node
    ar = collective_seconds_array(Collective.ALL_REDUCE, g.t * float(ctx.hidden) * 2.0, g.tp,
                                  group_per_node(g.tp, 1, gpn), ctx.system, gpu=ctx.gpu)
    fwd_collectives = np.where(g.rc == RecomputeCode.FULL, 4.0, 2.0)
    tp_mb = sc.layers_per_stage * ar * (fwd_collectives + 2.0 * (1.0 - knobs.value("training.tp_backward_overlap")))
    if not ctx.tp_comm_overlap:
        return tp_mb
    c = 0.5 * ar
    mlp_half = lc.moe_frac * lc.moe_mlp / 2.0
    qkv, out = lc.qkv, lc.out
    up, down = lc.dense_frac * lc.dense_up + mlp_half, lc.dense_frac * lc.dense_down + mlp_half
    sms = float(ctx.gpu.sm_count or 132)
    ring = lambda gemm: userbuffers_ring_exposed(c, gemm, g.tp)  # noqa: E731
    fwd_exp = (ring(qkv) + userbuffers_pipeline_exposed(c, out, UB_PROJ_FPROP_SMS, sms)
               + ring(up) + userbuffers_pipeline_exposed(c, down, UB_FC2_FPROP_SMS, sms))
    # backward: the row-parallel dgrads all-gather their input gradient (ring exchange); the
    # column-parallel layers re-gather their input for the weight gradient (bulk, beside the dgrad
    # GEMM) and reduce-scatter the input gradient (bulk, beside the wgrad GEMM)
    bwd_exp = (ring(out) + ring(down)
               + userbuffers_bulk_exposed(c, qkv, UB_QKV_DGRAD_SMS, sms) + userbuffers_bulk_exposed(c, qkv, UB_QKV_WGRAD_SMS, sms)
               + userbuffers_bulk_exposed(c, up, UB_FC1_DGRAD_SMS, sms) + userbuffers_bulk_exposed(c, up, UB_FC1_WGRAD_SMS, sms))
    overlapped = sc.layers_per_stage * (np.where(g.rc == RecomputeCode.FULL, 2.0, 1.0) * fwd_exp + bwd_exp)
    return np.where(g.sp & (g.tp > 1), overlapped, tp_mb)


def userbuffers_ring_exposed(c, gemm, tp):
    """Exposed time of a TE userbuffers `ring_exchange` overlap (an all-gather of c seconds pipelined
    in tp point-to-point steps with the GEMM of `gemm` seconds it feeds, copy engines moving the
    data): max(0, c - g) + min(c, g) / tp (the first chunk cannot overlap) + the copy engines'
    contention `training.overlap_contention` x min(c, g)."""
    overlapped = np.minimum(c, gemm)
    return np.maximum(0.0, c - gemm) + overlapped / tp + knobs.value("training.overlap_contention") * overlapped


def userbuffers_pipeline_exposed(c, gemm, comm_sms, sms):
    """Exposed time of a TE userbuffers `pipeline` overlap (a GEMM of `gemm` seconds split in
    UB_PIPELINE_SPLITS chunks, each chunk's output reduce-scattered while the next computes, the
    reduction kernel on `comm_sms` SMs and the GEMM launched on the others, `set_sm_margin`): the GEMM
    slows to g' = g x SMs / (SMs - comm_sms); max(0, c - g') + min(c, g') / splits of the reduce-scatter
    (c seconds) stays exposed (the last chunk's) + the slowdown g' - g."""
    slowed = gemm * sms / (sms - comm_sms)
    return (slowed - gemm) + np.maximum(0.0, c - slowed) + np.minimum(c, slowed) / UB_PIPELINE_SPLITS


def userbuffers_bulk_exposed(c, gemm, comm_sms, sms):
    """Exposed time of a TE userbuffers `bulk` overlap (a collective of c seconds run on `comm_sms` SMs
    beside an independent GEMM of `gemm` seconds on all SMs): the excess max(0, c - g) + the GEMM's
    loss of those SMs while both run, comm_sms / SMs x min(c, g)."""
    return np.maximum(0.0, c - gemm) + comm_sms / sms * np.minimum(c, gemm)


def cp_comm_seconds(ctx: StepContext, g: PlanAxes, lc: LayerCompute, sc: StageCompute):
    """Exposed context-parallel time per micro-batch: the framework's K/V exchange not hidden behind
    the attention core, and (PyTorch's ring) its per-step eager work; `workloads.training.context_parallel`
    (`cp_exposed_seconds`) has the formulas per `ContextParallelMethod`."""
    selective = (knobs.value("training.torchtitan_selective_recompute_fraction")
                 if ctx.framework is Framework.TORCHTITAN else 1.0)
    passes = attention_passes(g.rc, RecomputeCode.FULL, RecomputeCode.SELECTIVE, selective)
    return cp_exposed_seconds(ctx.framework, ctx.system, ctx.gpu, t=g.t, tp=g.tp, cp=g.cp, q_dim=ctx.q_dim,
                              kv_dim=ctx.kv_dim, attn_fwd=lc.attn_fwd, attn_bwd=lc.attn_bwd, fwd_passes=passes,
                              layers=sc.layers_per_stage, hbm_bytes_s=ctx.hbm_bytes_s)


def ep_comm_seconds(ctx: StepContext, g: PlanAxes, lc: LayerCompute, sc: StageCompute):
    """Exposed expert-parallel time per micro-batch: `moe_time.ep_comm_seconds` (expert all-to-all
    inside / across scale-up domains, its overlap with another micro-batch, per-layer host time; a
    full-recompute plan dispatches and combines once more in its recompute forward)."""
    return moe_time.ep_comm_seconds(ctx, g, lc, sc, _gemm, full_recompute=g.rc == RecomputeCode.FULL)


def pp_comm_seconds(ctx: StepContext, g: PlanAxes, sc: StageCompute):
    """Exposed pipeline point-to-point time per micro-batch: one send of the boundary activation
    (t x h x 2 / tp bytes, Megatron's scatter-gather) forward and one backward per virtual stage.
    Megatron-core's interleaved schedule (vpp > 1, `overlap_p2p_comm`) hides a send behind half a
    virtual stage's forward + backward (the excess is exposed, the overlap costs
    `training.overlap_contention`); 1F1B and other stacks block on them."""
    gpn = ctx.system.gpus_per_node
    crosses = g.tp * g.cp * g.dp >= gpn
    p2p = collective_seconds_array(Collective.P2P, g.t * float(ctx.hidden) * 2.0 / g.tp, np.where(g.pp > 1, 2, 1),
                                   np.where(crosses, 1, 2), ctx.system, gpu=ctx.gpu)
    half_chunk = (sc.compute_mb + sc.recompute_mb) / g.vpp / 2.0
    contention = knobs.value("training.overlap_contention")
    hidden_send = np.maximum(0.0, p2p - half_chunk) + contention * np.minimum(p2p, half_chunk)
    per_transfer = np.where((g.vpp > 1) & ctx.p2p_overlap, hidden_send, p2p)
    return np.where(g.pp > 1, 2.0 * g.vpp * per_transfer, 0.0)


def bubble_seconds(g: PlanAxes, micro_batch_s, head):
    """Pipeline fill and drain: (pp - 1) / vpp micro-batch times (1F1B, Narayanan et al. 2021 sec.
    2.2; the interleaved schedule divides by vpp). The fill runs stages 0..pp-2's forward passes and
    the drain their backward passes, so the micro-batch time in the bubble excludes the output head."""
    return (g.pp - 1.0) / g.vpp * (micro_batch_s - head)


def local_params(ctx: StepContext, g: PlanAxes, sc: StageCompute):
    """(dense, expert) parameters one GPU of the busiest stage holds: the stage's share of the body
    (+ the embedding table on the first / the head on the last stage: the larger when pp > 1) over tp;
    its share of the routed experts over ep x etp."""
    dense_body = ctx.body_params - ctx.expert_params
    embed_stage = np.where(g.pp > 1, max(ctx.input_embedding_params, ctx.output_head_params),
                           ctx.input_embedding_params + ctx.output_head_params)
    return ((dense_body * sc.stage_share + embed_stage) / g.tp,
            ctx.expert_params * sc.stage_share / (g.ep * g.etp))


def dp_comm_seconds(ctx: StepContext, g: PlanAxes, sc: StageCompute, local_dense, local_experts,
                    reduced=None, gathered_bytes=None):
    """Exposed data-parallel communication per step. Gradients reduce over dp x cp ranks (experts
    over their expert-DP group tp x cp x dp / (ep x etp)). No sharding: all-reduce; ZeRO-1:
    reduce-scatter + all-gather of the parameters once per step; ZeRO-2: the reduce-scatter after
    every micro-batch (gradients are partitioned, so a rank keeps only its shard and cannot wait for
    the accumulation boundary: DeepSpeed engine "ZeRO stage >= 2 communicates during non gradient
    accumulation boundaries as well", deepspeedai/DeepSpeed#2252), each behind that micro-batch's
    backward, the gather once per step (every micro-batch under FSDP's SHARD_GRAD_OP, which frees
    the parameters after each backward); ZeRO-3/FSDP: per micro-batch two all-gathers and a
    reduce-scatter. Megatron-core and FSDP overlap them (the reduce with the last backward, the
    gather with the first forward; ZeRO-3 per micro-batch with its compute), DeepSpeed's ZeRO-0/1
    engine does not. An overlapped NCCL collective holds one SM per channel, slowing the compute it
    hides behind by channels / SMs (`collective_sm_fraction`; Calculon's processor_usage). Gradient
    bytes: fp32 (bf16 runs), fp16 (fp16 runs), the compute dtype under ZeRO-3 (fp32 under
    torchtitan: COMPOSER / TORCHTITAN constants); FSDP2 adds its copy-in / copy-out kernels.
    Fine-tuning (`finetune_time`): `reduced` = the (dense, expert) trainable parameters whose
    gradients are reduced, `gathered_bytes` = the (dense, expert) bytes gathered (a quantised frozen
    base in its storage bytes); default every local parameter, at the gather dtype."""
    gpn = ctx.system.gpus_per_node
    dp_group = g.dp * g.cp
    expert_dp = np.maximum(1.0, g.tp * g.cp * g.dp / (g.ep * g.etp))
    zero3_grad_bytes = TORCHTITAN_REDUCE_BYTES if ctx.framework is Framework.TORCHTITAN else 2.0
    grad_bytes = np.where(g.shard == ShardingCode.ZERO3, zero3_grad_bytes, 2.0 if ctx.precision is Precision.FP16 else 4.0)
    gather_bytes = COMPOSER_GATHER_BYTES if ctx.framework is Framework.FSDP else 2.0

    reduced = (local_dense, local_experts) if reduced is None else reduced
    gathered_bytes = (local_dense * gather_bytes, local_experts * gather_bytes) if gathered_bytes is None else gathered_bytes

    def dp_collectives(params, gathered, group, stride):
        pn = group_per_node(group, stride, gpn)
        return tuple(np.where(group > 1, collective_seconds_array(kind, nbytes, group, pn, ctx.system, gpu=ctx.gpu), 0.0)
                     for kind, nbytes in ((Collective.ALL_REDUCE, params * grad_bytes),
                                          (Collective.REDUCE_SCATTER, params * grad_bytes), (Collective.ALL_GATHER, gathered)))

    reduce_all, reduce_scatter, gather = dp_collectives(reduced[0], gathered_bytes[0], dp_group, g.tp)
    if ctx.expert_params:
        e_all, e_rs, e_ag = dp_collectives(reduced[1], gathered_bytes[1], expert_dp, g.ep * g.etp)
        reduce_all, reduce_scatter, gather = reduce_all + e_all, reduce_scatter + e_rs, gather + e_ag
    last_bwd = sc.stage_bwd + sc.recompute_mb
    if ctx.framework is not Framework.DEEPSPEED:
        contention = collective_sm_fraction(dp_group, group_per_node(dp_group, g.tp, gpn), ctx.system, ctx.gpu)
        unsharded = np.maximum(0.0, reduce_all - last_bwd) + contention * np.minimum(reduce_all, last_bwd)
        reduce_mb = np.maximum(0.0, reduce_scatter - last_bwd) + contention * np.minimum(reduce_scatter, last_bwd)
        gather_mb = np.maximum(0.0, gather - sc.stage_fwd) + contention * np.minimum(gather, sc.stage_fwd)
        zero12 = reduce_mb + gather_mb
        # ZeRO-2: each micro-batch's gradients are reduce-scattered behind its own backward; FSDP's
        # SHARD_GRAD_OP also re-gathers the parameters it frees after each backward
        zero2 = g.m * reduce_mb + np.where(ctx.framework is Framework.FSDP, g.m, 1.0) * gather_mb
        per_mb = 2.0 * gather + reduce_scatter
        window = sc.compute_mb + sc.recompute_mb
        zero3 = g.m * (np.maximum(0.0, per_mb - window) + contention * np.minimum(per_mb, window))
    else:
        unsharded = reduce_all
        zero12 = reduce_scatter + gather
        zero2 = g.m * reduce_scatter + gather
        zero3 = g.m * (2.0 * gather + reduce_scatter)
    if ctx.framework is Framework.TORCHTITAN:  # FSDP2 copy-in / copy-out kernels on the gathered parameters
        zero3 = zero3 + g.m * (local_dense + local_experts) * FSDP2_COPY_BYTES_PER_PARAM / ctx.hbm_bytes_s
        # under a pipeline schedule torchtitan keeps the parameters unsharded for the step (no reshard
        # after forward) and reduces gradients once after the last micro-batch: one gather and one
        # reduce-scatter per step, overlapped like ZeRO-1/2, one copy-out (4 B) and one copy-in (6 B)
        zero3_pp = zero12 + (local_dense + local_experts) * (4.0 + 6.0) / ctx.hbm_bytes_s
        zero3 = np.where(g.pp > 1, zero3_pp, zero3)
    return np.where(g.shard == ShardingCode.ZERO3, zero3, np.where(
        g.shard == ShardingCode.NONE, unsharded, np.where(g.shard == ShardingCode.ZERO2, zero2, zero12)))


def optimizer_seconds(ctx: StepContext, g: PlanAxes, local_dense, local_experts, sc: StageCompute | None = None):
    """Adam step, memory-bound: ADAM_BYTES_PER_PARAM (read master, m, v, gradient; write master, m,
    v and the bf16 weight) per parameter this GPU updates (its ZeRO shard under ZeRO-1 and above).
    Fine-tuning (another optimizer, adapters only, pure low precision, offload to the CPU):
    `finetune_time.optimizer_seconds` on the trainable elements of the shard."""
    dp_group = g.dp * g.cp
    expert_dp = np.maximum(1.0, g.tp * g.cp * g.dp / (g.ep * g.etp))
    if not ctx.fine_tuning.ordinary and sc is not None:
        elements = finetune_time.trainable_elements(ctx, g, sc, local_dense, local_experts)
        shard = np.where(g.shard >= ShardingCode.ZERO1, dp_group, 1.0)
        return finetune_time.optimizer_seconds(ctx, g, elements / shard, sc.stage_bwd + sc.recompute_mb)
    params = np.where(g.shard >= ShardingCode.ZERO1, local_dense / dp_group + local_experts / expert_dp,
                      local_dense + local_experts)
    return params * ADAM_BYTES_PER_PARAM / ctx.hbm_bytes_s


def step_time_arrays(
    ctx: StepContext,
    tp, pp, dp, cp, ep, vpp, micro_batch, num_micro_batches, recompute, sequence_parallel, sharding,
    etp=None,
) -> StepArrays:
    """Step time of every plan given as broadcastable arrays: the named terms above, composed as

        step = m x (compute + recompute + tp + cp + ep + pp) + bubble + dp + optimizer

    `recompute` holds RecomputeCode values, `sharding` ShardingCode values, `sequence_parallel`
    booleans; `etp` the expert tensor parallel degree (None: tp where ep divides dp x cp, else 1,
    as `TrainPlan.expert_tp`). Arrays may carry only the axes they depend on; intermediate terms stay
    small and only the final sums are full size.
    """
    g = PlanAxes.build(ctx, tp, pp, dp, cp, ep, vpp, micro_batch, num_micro_batches, recompute, sequence_parallel,
                       sharding, etp)
    lc = layer_compute(ctx, g)
    sc = stage_compute(ctx, g, lc)
    tp_mb = tp_comm_seconds(ctx, g, lc, sc)
    cp_mb = cp_comm_seconds(ctx, g, lc, sc)
    ep_mb = ep_comm_seconds(ctx, g, lc, sc)
    pp_mb = pp_comm_seconds(ctx, g, sc)
    mb_time = sc.compute_mb + sc.recompute_mb + tp_mb + cp_mb + ep_mb + pp_mb
    local_dense, local_experts = local_params(ctx, g, sc)
    dp_terms = {}
    if ctx.fine_tuning.adapters:  # only the adapters' gradients are reduced; the base is gathered as stored
        share = local_experts / np.maximum(local_dense + local_experts, 1.0)
        trainable = finetune_time.trainable_elements(ctx, g, sc, local_dense, local_experts)
        stored = finetune_time.stage_storage_bytes(ctx, g, sc, local_dense, local_experts)
        dp_terms = dict(reduced=(trainable * (1.0 - share), trainable * share),
                        gathered_bytes=(stored * (1.0 - share), stored * share))
    m = g.m
    parts = dict(
        compute_s=m * sc.compute_mb, recompute_s=m * sc.recompute_mb, tp_comm_s=m * tp_mb, cp_comm_s=m * cp_mb,
        ep_comm_s=m * ep_mb + 0.0 * m, pp_comm_s=m * pp_mb, bubble_s=bubble_seconds(g, mb_time, sc.head),
        dp_comm_s=dp_comm_seconds(ctx, g, sc, local_dense, local_experts, **dp_terms),
        optimizer_s=optimizer_seconds(ctx, g, local_dense, local_experts, sc),
        offload_s=finetune_time.offload_seconds(ctx, g, sc, local_dense, local_experts),
    )
    shape = np.broadcast_shapes(*(np.shape(v) for v in parts.values()))
    parts = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), shape) for k, v in parts.items()}
    total = sum(parts.values())
    return StepArrays(step_s=total, **parts)


@dataclass(frozen=True)
class StepTime:
    """Step time of one plan, its breakdown (seconds, summing to `step_time_s`) and throughput."""

    plan: TrainPlan
    framework: Framework
    attention_kernel: AttentionKernel
    step_time_s: float
    breakdown_s: dict[str, float]
    num_micro_batches: int
    tokens_per_step: int
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_flops_per_token: float
    tflops_per_gpu_model: float  # Megatron model FLOPs (recompute excluded) per GPU per second
    mfu_pct: float  # vs dense bf16/fp16 peak
    #: attention convention of `model_flops_per_token` (layers.flops.FlopsPerToken.attention_convention)
    model_flops_convention: str = "megatron_full_scores"


def mfu_peak_tflops(gpu: Gpu) -> float:
    """The peak MFU is measured against: dense bf16 (fp16 where the part has no bf16)."""
    return gpu.matmul_peak_tflops("bf16")


def check_plan(model: ModelSpec, system: System, plan: TrainPlan, num_gpus: int | None = None) -> None:
    """Raise InputError when the plan's degrees do not fit the model (`memory.check_plan`: heads,
    layers, experts, folding, sequence) or do not multiply to the GPU count."""
    from gpuplan.workloads.training.memory import check_plan as check_model_split

    if num_gpus is not None and plan.num_gpus != num_gpus:
        raise InputError(
            f"tp x pp x dp x cp = {plan.num_gpus} does not equal the GPU count {num_gpus}", field="dp"
        )
    check_model_split(model, plan)


def estimate_step_time(
    model: ModelSpec,
    system: System,
    plan: TrainPlan,
    gpu: Gpu,
    framework: Framework | None = None,
    attention_kernel: AttentionKernel | None = None,
) -> StepTime:
    """Step time of one plan (formulas in the module docstring). `gpu` is the system's GPU spec.

    The execution choices come from the plan (`plan.framework`, `plan.attention_kernel`, the same
    fields the memory model reads); `framework` / `attention_kernel` given here override them."""
    check_plan(model, system, plan)
    framework = plan.framework if framework is None else Framework(framework)
    attention_kernel = plan.attention_kernel if attention_kernel is None else AttentionKernel(attention_kernel)
    if (framework, attention_kernel) != (plan.framework, plan.attention_kernel):
        plan = plan.model_copy(update={"framework": framework, "attention_kernel": attention_kernel})
    ctx = StepContext.build(
        model, system, gpu, plan.seq_len, plan.precision, framework, attention_kernel, plan.tp_comm_overlap,
        fine_tuning=plan.fine_tuning, grad_precision=plan.grad_precision,
    )
    arrays = step_time_arrays(
        ctx, plan.tp, plan.pp, plan.dp, plan.cp, plan.ep, plan.vpp, plan.micro_batch, plan.grad_accum_steps,
        RECOMPUTE_CODE[plan.recompute], plan.sequence_parallel, SHARDING_CODE[plan.sharding], etp=plan.expert_tp,
    )
    return step_time_result(ctx, plan, {k: float(v) for k, v in arrays.parts().items()})


def step_time_result(ctx: StepContext, plan: TrainPlan, breakdown: dict[str, float]) -> StepTime:
    """StepTime of `plan` from its breakdown (seconds): throughput, model TFLOP/s and MFU derived."""
    m = plan.grad_accum_steps
    step = float(sum(breakdown.values()))
    tokens = plan.micro_batch * m * plan.dp * plan.seq_len
    tps = tokens / step
    gpus = plan.num_gpus
    tflops = ctx.model_flops_per_token * tps / gpus / 1e12
    return StepTime(
        plan=plan, framework=ctx.framework, attention_kernel=ctx.attention_kernel,
        step_time_s=step, breakdown_s=dict(breakdown), num_micro_batches=m, tokens_per_step=tokens,
        tokens_per_s=tps, tokens_per_s_per_gpu=tps / gpus, model_flops_per_token=ctx.model_flops_per_token,
        tflops_per_gpu_model=tflops, mfu_pct=100.0 * tflops / mfu_peak_tflops(ctx.gpu),
    )


__all__ = [
    "AttentionKernel", "Framework", "RecomputeCode", "ShardingCode", "StepArrays", "StepContext", "StepTime",
    "check_plan", "estimate_step_time", "step_time_result", "mfu_peak_tflops", "step_time_arrays",
]
