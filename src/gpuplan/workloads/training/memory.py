"""Training memory per GPU, itemised: weights, gradients, optimizer states, activations, other.

The answer is for the most loaded GPU: every pipeline rank is evaluated and the largest total
is reported (`peak_pipeline_rank`). All ranks of a (TP, CP, DP, EP) group hold the same amount.

Model states (bytes per parameter held by the GPU)
- weights: 2 (bf16/fp16/fp8 compute: FP8 training with Transformer Engine keeps bf16 weights and
  casts per GEMM), 4 (fp32/tf32).
- gradients: `plan.grad_precision`: 4 (fp32 main-grad accumulation, Megatron-LM default) or 2.
- optimizer (Adam): fp32 m + v = 8, plus an fp32 master copy (4) when compute is not fp32 (12).
  Mixed precision with fp32 grads is 2 + 4 + 12 = 18 B/param (Megatron-LM
  theoretical_memory_usage.py); with 16-bit grads 2 + 2 + 12 = 16 B/param (ZeRO paper,
  Rajbhandari et al. 2020 sec. 3.1: "2Ψ + 2Ψ + KΨ, K = 12").
- ZeRO / FSDP over the data-parallel group (dp x cp for dense weights, the expert data-parallel
  group tp x cp x dp / (ep x etp) for experts (Megatron-core MoE parallel folding),
  as Megatron's distributed optimizer shards): zero1 divides the optimizer, zero2 also the
  gradients, zero3 / fsdp also the weights (and needs a gather buffer, see `other`).
- TP divides every linear weight (norms stay replicated); experts are divided by ep x etp
  (Megatron's expert tensor parallel size defaults to tp); PP gives each rank L / pp layers, the
  first rank the input embedding, the last the output head and final norm (a tied embedding is
  duplicated on the last rank when pp > 1).

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", sec. 4, Table 2), bytes stored per token per layer, with b = activation bytes (2),
l = bytes of a saved linear input (1 under FP8, else b), sp = tp if sequence parallel else 1:
- attention: norm input b*h/sp, QKV input l*h/sp, Q b*a*d/tp, K and V b*g*d/tp each (GQA shrinks
  them), attention output l*a*d/tp, residual dropout mask h/sp (1 byte, if dropout);
  without fused (flash) attention add the s x s scores: a*s*(b + [1 + b if attention dropout])/tp
  (the 5as^2b term); with it, the fp32 softmax statistics 4*a/tp.
- MLA (DeepSeek-V2 sec. 2.1): the low-rank inputs/outputs (q_lora, kv_lora + rope) replicated,
  Q and K of a*(d_nope + d_rope), V and output of a*d_v, split by TP.
- FFN: norm input b*h/sp, fc1 input l*h/sp, fc1 output b*f/tp (2x for gated), activation
  output l*f/tp, dropout mask h/sp. With f = 4h, no GQA, dropout and no flash attention this
  reproduces Korthikanti's sbh(34 + 5as/h) per layer exactly (tests check it).
- MoE: router input and fp32 probabilities 4*E, top_k dispatched copies of the token and their
  expert intermediates (the per-GPU routed load averages tokens x top_k after all-to-all), the
  experts' down-projection outputs Megatron's unpermute keeps for the probabilities' gradient
  (b*h per routed copy), shared experts as a dense FFN.
- MTP (DeepSeek-V3 sec. 2.2; Megatron-core puts the modules on the last stage): their parameters
  and states, per depth a layer's saved set plus the projection and norm inputs, and one more
  fp32 softmax of the logits in the loss phase.
- recompute: none stores all of the above; selective recomputes the attention core (drops the
  s^2 term; identical to none when flash attention is used); full keeps only each layer's input
  (b*h/sp) and re-materialises one layer at a time in backward (`recompute_working_set`).
- micro-batches in flight on pipeline rank r (Narayanan et al. 2021 sec. 2.2; Megatron-LM
  schedules.py warm-up counts): 1F1B min(p - r, m); interleaved with v chunks
  min((p - r - 1) * 2 + (v - 1) * p + 1, m * v) chunks of L / (p v) layers; m = micro-batches per
  step (unbounded when no global batch is given).
- the last rank also holds the logits of the micro-batch in its loss (`loss_bytes_per_vocab_entry`,
  per vocabulary entry / tp): Megatron's fused vocab-parallel cross entropy b (compute dtype) + 4
  (the fp32 copy it turns into the softmax and the gradient in place); torchtitan's PyTorch cross
  entropy on fp32-cast logits 12 (16 with loss parallel, tp > 1); 4 under torch.compile (`plan.compiled_loss`,
  `loss_memory.loss_bytes_per_vocab_entry`).
- backward working set: the gradient of a layer output and of its FFN intermediates while one
  layer's backward runs, b*(h/sp + 2f/tp) per token (+ one re-materialised layer under full
  recompute). The peak is the stored layers plus the larger of the two phases, loss or layer
  backward: the loss tensors are freed when the output layer's backward has run.

Framework differences (`plan.framework`):
- torchtitan: fp32 parameters (the master copy; FSDP2 casts to bf16 in the all-gather), fp32
  gradients and Adam m + v: 4 + 4 + 8 = 16 B/param (`state_bytes_per_param`); `selective` recompute
  is its per-op SAC (`op_sac_bytes_per_token`); torchao float8 saves bf16 linear inputs
  (`linear_input_bytes`); FSDP2's root (embedding, final norm, output head) stays unsharded in bf16
  (it is never resharded after forward); with pp > 1 a stage keeps its parameters unsharded and
  accumulates unsharded fp32 gradients.
- Megatron-LM and the others: the Korthikanti accounting above, 18 B/param with fp32 gradients;
  FP8 / MXFP8 / NVFP4 through Transformer Engine also caches each block weight's quantised copy and
  its transpose across the step's micro-batches (`fp8_weight_cache`).

Other: ZeRO-3 / FSDP parameter gather buffer (two layers' unsharded weights in the compute dtype:
the one computing and the one prefetched), the FSDP2 root (torchtitan), and framework memory
outside PyTorch's allocator (CUDA context and library handles, NCCL buffers), named constants below.

Allocated vs reserved: `allocated_bytes` is what torch.cuda.max_memory_allocated reports (the total
less the CUDA context and NCCL buffers); `reserved_bytes` adds the caching allocator's slack
(reserved = allocated x `training.memory.reserved_over_allocated`, a fitted knob), as torchtitan's
memory log reports.
"""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass, field

import numpy as np

from gpuplan import knobs
from gpuplan.layers.inventory import layer_kinds, layer_ops, model_ops, refuse_hybrid
from gpuplan.layers.operators import AttentionCore, Saved, Shard
from gpuplan.layers.params import layer_params, norm_params
from gpuplan.primitives.nccl_memory import nccl_buffer_bytes
from gpuplan.specs.dtypes import number_format
from gpuplan.specs.execution import Framework, PipelineSchedule
from gpuplan.specs.gpu import Gpu
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.plan import Precision, Recompute, Sharding, TrainPlan
from gpuplan.units import GIB, MIB
from gpuplan.workloads.training.finetune_activations import fine_tuning_activation_delta_per_token
from gpuplan.workloads.training.finetune_memory import (
    FineTunePeak, fine_tuning_peak, fine_tuning_rules, rank_fine_tuning_states)
from gpuplan.workloads.training.hf_memory import hf_activation_delta_per_token
from gpuplan.workloads.training.memory_savings import memory_saving_delta_per_token, optimizer_bytes_per_param
from gpuplan.workloads.memory_headroom import usable_memory_bytes
from gpuplan.workloads.training import memory_terms as terms
from gpuplan.workloads.training.memory_terms import activation_bytes
from gpuplan.workloads.training.loss_memory import (  # noqa: F401 (re-exported: the loss's rule lives there)
    COMPILED_CROSS_ENTROPY_LOGIT_COPIES, LOSS_PARALLEL_CROSS_ENTROPY_BYTES, PYTORCH_CROSS_ENTROPY_BYTES,
    held_logits_bytes_per_vocab_entry, loss_bytes_per_vocab_entry)
from gpuplan.workloads.training.plan_codes import SHARDING_CODE
from gpuplan.workloads.training.plan_validity import check_plan
from gpuplan.workloads.training.selective_checkpoint import op_sac_bytes_per_token

#: CUDA context + cuBLAS/cuDNN handles and kernels images per process, outside PyTorch's
#: allocator, with lazy module loading (`TrainPlan.cuda_lazy_loading`; CUDA_MODULE_LOADING=LAZY, NVIDIA
#: CUDA Programming Guide "Lazy Loading", Table 17: introduced in CUDA 11.7 disabled by default, enabled by
#: default on Linux from 12.2; PyTorch sets it when unset from 1.13, pytorch/pytorch PR #85692 / #86509).
#: PyTorch "CUDA semantics" notes the context takes "hundreds of MiB"; H100 + CUDA 12 processes
#: typically show ~500-600 MiB in nvidia-smi before any tensor. Estimate, not measured here; PR #85692
#: measures 287,047,680 B (274 MiB) used after one tensor with LAZY, a lower bound (a training step then
#: loads the kernels it launches).
CUDA_CONTEXT_BYTES = knobs.register(
    "training.memory.cuda_context_bytes", unit="bytes", default=512 * MIB, low=0.0, high=8 * GIB,
    source="estimate: PyTorch CUDA semantics notes 'hundreds of MiB'; H100 + CUDA 12 processes show ~500-600 MiB in nvidia-smi",
    scales="per-GPU training memory outside PyTorch's allocator (CUDA context, library handles, kernel images)")
#: The same with eager module loading (PyTorch before 1.13, or CUDA before 11.7): every kernel image of
#: the loaded libraries (libtorch_cuda, cuBLAS, cuDNN) is loaded at context creation. Measured: Hugging
#: Face transformers docs `perf_train_gpu_one` (2022 version, huggingface/transformers@0016acf7ef42) load a
#: 1 x 1 tensor to the GPU (`torch.ones((1, 1)).to("cuda")`) and read 1,343 MiB used through NVML, "the
#: CUDA kernels" alone. (PR #85692 measures 666,632,192 B, 636 MiB, with CUDA_MODULE_LOADING=DEFAULT on its
#: 2022-09 build: the eager image depends on the libraries built in, and the 1,343 MiB is the figure of a
#: PyTorch of the eager era itself.)
CUDA_CONTEXT_BYTES_EAGER = knobs.register(
    "training.memory.cuda_context_bytes_eager", unit="bytes", default=1343 * MIB, low=0.0, high=8 * GIB,
    source="measured: HF transformers docs perf_train_gpu_one (2022): 1,343 MiB NVML used after torch.ones((1, 1)).to('cuda')",
    scales="per-GPU training memory outside PyTorch's allocator under eager CUDA module loading (PyTorch < 1.13)")


def cuda_context_bytes(lazy_loading: bool = True) -> float:
    """Per-GPU CUDA context, library handles and kernel images outside PyTorch's allocator: the lazy-loading
    figure (`training.memory.cuda_context_bytes`) or the eager one (`training.memory.cuda_context_bytes_eager`)."""
    return knobs.value("training.memory.cuda_context_bytes" if lazy_loading else "training.memory.cuda_context_bytes_eager")
#: PyTorch caching-allocator slack: reserved / allocated at peak. Estimate from the allocator
#: rounding (blocks rounded to 512 B / 2 MiB and split-block reuse); used only for reserved figures.
#: Fitted on the torchtitan reserved peaks (ttmem): after the allocated peak is modelled term by term
#: (op-SAC, PyTorch cross entropy, FSDP2 root and gather buffers), reserved / allocated of those
#: runs is 1.0-1.2 (torch.compile runs at the low end: fewer eager temporaries to fragment the cache).
#: Where the slack comes from (PyTorch CUDA semantics notes, "Memory management"): blocks are rounded
#: (512 B; 2 MiB segments for allocations over 1 MiB), freed blocks stay cached per stream (FSDP2
#: all-gathers and reduce-scatters run on their own streams) and a cached block is reused only by a
#: request it can hold, so segments split by the transient loss tensors stay reserved afterwards.
#: No other family measures reserved memory, so leaving ttmem out cannot inform this knob: its
#: cross-validated ttmem figure uses the prior 1.01, the allocator's deterministic rounding alone
#: (requests rounded up to 512 B, large blocks carved from 2 MiB-multiple segments: about 1% of a peak
#: made of tensors of tens of MiB; PyTorch CUDA semantics notes), without the fragmentation fitted here.
RESERVED_OVER_ALLOCATED = knobs.register(
    "training.memory.reserved_over_allocated", unit="ratio", default=1.12, low=1.0, high=2.0, prior=1.01,
    source="fitted: torchtitan reserved peaks (ttmem) over the modelled allocated peak; slack from the caching "
           "allocator's block rounding, per-stream pools and split-block reuse (PyTorch CUDA semantics notes)",
    scales="PyTorch-reserved training memory = allocated x this", fitted_on=("ttmem",))
#: Adam state bytes per parameter besides the parameter itself under torchtitan: fp32 exp_avg and
#: exp_avg_sq (torch.optim.AdamW). torchtitan keeps the (sharded) parameters themselves in fp32 and
#: all-gathers them in bf16 (FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)), so
#: there is no separate master copy: 4 (param) + 4 (fp32 grad) + 8 = 16 B per parameter.
TORCHTITAN_ADAM_BYTES = 8

_STATE_KEYS = ("weights", "gradients", "optimizer", "activations", "other", "total")


def nccl_communicators(tp, cp, dp, pp, ep):
    """NCCL communicators a training rank runs collectives on, one per parallel group of more than
    one GPU: tensor (tp), context (cp), data (the gradient group of dp x cp ranks, Megatron-core's
    data-parallel-with-context group), pipeline (pp), expert (ep). Each holds its ring buffers
    (primitives.nccl_memory.nccl_buffer_bytes; at NCCL_CHANNELS, training memory being given no
    fabric). Works on ints and numpy arrays."""
    return (tp > 1) * 1 + (cp > 1) + (dp * cp > 1) + (pp > 1) + (ep > 1)


def state_bytes_per_param(plan: TrainPlan) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per parameter before sharding.

    Megatron-LM / DeepSpeed / FSDP1 recipes: a working weight copy in the compute dtype, gradients in
    `plan.grad_precision`, Adam m + v + an fp32 master copy (module docstring). torchtitan: the
    parameter itself is the fp32 master (FSDP2 `MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=fp32)` casts it to bf16 only in the all-gather), fp32 gradients (the reduce dtype)
    and Adam m + v: 4 + 4 + 8 = 16 B per parameter (`TORCHTITAN_ADAM_BYTES`).
    """
    if plan.framework is Framework.TORCHTITAN:  # memory_savings: BF16 moments (optimizer_bytes_per_param)
        return 4.0, 4.0, optimizer_bytes_per_param(plan, TORCHTITAN_ADAM_BYTES)
    return (float(weight_bytes_per_param(plan.precision)), float(grad_bytes_per_param(plan)),
            optimizer_bytes_per_param(plan, adam_bytes_per_param(plan.precision)))


def weight_bytes_per_param(precision: Precision) -> int:
    """Bytes of the working weight copy: 4 for fp32/tf32, else 2 (bf16; FP8 GEMMs cast from bf16)."""
    return 4 if precision in (Precision.FP32, Precision.TF32) else 2


def grad_bytes_per_param(plan: TrainPlan) -> int:
    return 4 if plan.grad_precision in (Precision.FP32, Precision.TF32) else 2


def adam_bytes_per_param(precision: Precision) -> int:
    """Adam m + v in fp32 (8) plus an fp32 master copy (4) unless compute is already fp32."""
    return 8 if precision in (Precision.FP32, Precision.TF32) else 12


def linear_input_bytes(precision: Precision, framework: Framework = Framework.MEGATRON) -> float:
    """Bytes of the input a linear saves for its weight gradient. FP8 / MXFP8 / NVFP4 training with
    Transformer Engine saves the quantised input: its storage bytes with block scales (specs.dtypes:
    fp8 1, mxfp8 1.03125, nvfp4 0.5625). torchtitan's float8 (torchao `Float8Linear`) saves the
    high-precision input and re-casts it in backward (torchao float8_linear.py,
    `matmul_with_hp_or_float8_args.forward`: `ctx.save_for_backward(input_hp, weight_hp_t)`): b."""
    if precision.low_precision_matmul and framework is not Framework.TORCHTITAN:
        return number_format(precision.value).bytes_per_element
    return activation_bytes(precision)


@dataclass(frozen=True)
class TrainingMemory:
    """Per-GPU training memory of the most loaded GPU. `per_gpu_bytes` sums to its `total`."""

    per_gpu_bytes: dict[str, float]
    activations_bytes_detail: dict[str, float]
    other_bytes_detail: dict[str, float]
    params_per_gpu: int
    bytes_per_param: dict[str, float]  # weights/gradients/optimizer bytes per parameter, before sharding
    peak_pipeline_rank: int
    microbatches_in_flight: float  # (layers' worth) micro-batches whose activations are held at the peak
    allocated_bytes: float  # what torch.cuda.max_memory_allocated would see: total - memory outside the allocator
    reserved_bytes: float  # allocated plus caching-allocator slack
    capacity_bytes: float | None = None
    fits: bool | None = None
    headroom_bytes: float | None = None  # usable memory (workloads.memory_headroom) less the total
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: fine-tuning (workloads.training.finetune_memory): 8-bit optimizer states paged into CUDA unified
    #: memory (outside PyTorch's counters and the total), bytes offloaded to host memory or NVMe, and
    #: the parameters this GPU trains (None: every parameter it holds)
    paged_optimizer_bytes: float = 0.0
    host_bytes: float = 0.0
    trainable_params: int | None = None


# ---------------------------------------------------------------------------------------------
# parameters per pipeline rank


@lru_cache(maxsize=4096)
def pipeline_layer_split(layers: int, pp: int, vpp: int) -> tuple[tuple[int, ...], ...]:
    """Layers of each pipeline rank: L split into pp x vpp chunks (as even as possible), chunk c on rank c % pp
    (cached: the plan search asks for every rank of each (pp, vpp) it screens or checks)."""
    chunks = pp * vpp
    bounds = np.linspace(0, layers, chunks + 1).round().astype(int).tolist()
    return tuple(tuple(i for c in range(rank, chunks, pp) for i in range(bounds[c], bounds[c + 1])) for rank in range(pp))


def _layer_split(model: ModelSpec, plan: TrainPlan) -> tuple[tuple[int, ...], ...]:
    """`pipeline_layer_split` of the model's layers under `plan`; under DualPipe each rank holds two
    stages of the pp-way split, r and pp - 1 - r (`memory_terms.dualpipe_stages`)."""
    if _dualpipe(plan):
        stages = pipeline_layer_split(model.layers, plan.pp, 1)
        return tuple(tuple(i for st in terms.dualpipe_stages(plan.pp, r) for i in stages[st]) for r in range(plan.pp))
    return pipeline_layer_split(model.layers, plan.pp, plan.vpp)


def _dualpipe(plan: TrainPlan) -> bool:
    return plan.pipeline_schedule is PipelineSchedule.DUALPIPE and plan.pp > 1


def layers_per_chunk_divisor(plan: TrainPlan) -> int:
    """Chunks a rank's layers form for the stored-activation count: vpp (interleaved), or the two
    stages a DualPipe rank holds (`memory_terms.DUALPIPE_STAGES_PER_RANK`)."""
    return terms.DUALPIPE_STAGES_PER_RANK if _dualpipe(plan) else plan.vpp


@lru_cache(maxsize=16384)
def _layer_param_split(model: ModelSpec, layer: int) -> tuple[int, int, int]:
    """(weights split by TP, replicated weights, routed-expert weights) of one layer, from the inventory's shards:
    COLUMN / ROW linears and the attention core's per-head sinks are split over tp; REPLICATED linears (MLA
    down-projections, the router) and norms are whole on every rank; routed experts are split over ep x etp."""
    return _ops_param_split(layer_ops(model, layer).ops)


@lru_cache(maxsize=1024)
def _mtp_param_split(model: ModelSpec) -> tuple[int, int, int]:
    """`_layer_param_split` of all multi-token-prediction modules (their projection, norms and layer)."""
    return _ops_param_split(model_ops(model).mtp)


@lru_cache(maxsize=1024)
def _layer_param_splits(model: ModelSpec) -> tuple[tuple[int, int, int], ...]:
    """`_layer_param_split` of every layer: one cache look-up (a model hash) per rank, not per layer."""
    return tuple(_layer_param_split(model, i) for i in range(model.layers))


def _ops_param_split(ops) -> tuple[int, int, int]:
    split = replicated = experts = 0
    for op in ops:
        shard = getattr(op, "shard", None)
        if shard is Shard.EXPERT:
            experts += op.params
        elif shard in (Shard.COLUMN, Shard.ROW) or isinstance(op, AttentionCore):
            split += op.params
        else:
            replicated += op.params
    return split, replicated, experts


def rank_params(model: ModelSpec, plan: TrainPlan, layers: list[int], first: bool, last: bool) -> tuple[float, float]:
    """(dense params, expert params) held by one GPU of a pipeline rank, after TP/EP division."""
    dense = experts = 0.0
    splits = _layer_param_splits(model)
    tp, expert_group = plan.tp, plan.ep * plan.expert_tp
    for layer in layers:
        split, replicated, routed = splits[layer]
        dense += split / tp + replicated
        experts += routed / expert_group
    table = model.vocab * model.hidden / plan.tp
    if first:
        dense += table
        if model.learned_position_embeddings:
            dense += (model.max_position_embeddings or 0) * model.hidden
    if last:
        dense += norm_params(model)
        if not model.tied_embeddings or plan.pp > 1:
            dense += table
        if model.mtp_layers:  # Megatron-core places the MTP modules on the last pipeline stage
            split, replicated, routed = _mtp_param_split(model)
            dense += split / plan.tp + replicated
            experts += routed / (plan.ep * plan.expert_tp)
    return dense, experts


# ---------------------------------------------------------------------------------------------
# activations


def saved_context(model: ModelSpec, plan: TrainPlan) -> Saved:
    """What decides the bytes operators save for backward under `plan` (layers.operators.Saved)."""
    b = activation_bytes(plan.precision)
    return Saved(
        act_bytes=b, linear_input_bytes=linear_input_bytes(plan.precision, plan.framework), tp=plan.tp,
        sp=plan.tp if plan.sequence_parallel else 1, etp=plan.expert_tp, fused_attention=plan.flash_attention,
        keep_scores=not plan.flash_attention and plan.recompute is Recompute.NONE,
        score_keys=plan.seq_len / plan.cp, attention_dropout=model.attention_dropout > 0,
    )


def layer_activation_bytes_per_token(model: ModelSpec, plan: TrainPlan, layer: int, stored: bool = True,
                                     saved: Saved | None = None) -> float:
    """Bytes one token leaves in memory for one layer's backward: the sum of the layer's operators'
    `saved_bytes` (layers.operators; Korthikanti Table 2 term by term, generalised to GQA, MLA, MoE).

    Full recompute keeps only the layer input, b x h / sp; `stored=False` gives the full set even
    under full recompute (the re-materialised layer). `saved`: `saved_context(model, plan)`, when the
    caller has it already.
    """
    if stored and plan.recompute is Recompute.FULL:
        return activation_bytes(plan.precision) * model.hidden / (plan.tp if plan.sequence_parallel else 1)
    saved = saved or saved_context(model, plan)
    if stored and plan.recompute is Recompute.SELECTIVE and plan.framework is Framework.TORCHTITAN:
        return op_sac_bytes_per_token(model, layer, saved)
    # a frozen base with adapters keeps fewer projection inputs, eager modules more (finetune_activations,
    # hf_memory: transformers' eager norms and PEFT's fp32 adapters)
    return (_saved_activation_bytes(model, layer, saved) + fine_tuning_activation_delta_per_token(model, plan, layer, saved)
            + hf_activation_delta_per_token(model, plan, layer, saved) + memory_saving_delta_per_token(model, plan, layer, saved))


@lru_cache(maxsize=65536)
def _saved_activation_bytes(model: ModelSpec, layer: int, saved: Saved) -> float:
    return layer_ops(model, layer).saved_activation_bytes(saved)


def microbatches_per_step(plan: TrainPlan) -> float:
    """m: micro-batches per pipeline per optimizer step (unbounded without a global batch)."""
    return float(plan.grad_accum_steps) if plan.global_batch is not None else math.inf


def chunks_in_flight(plan: TrainPlan, rank: int) -> float:
    """Model chunks (of L/(pp*vpp) layers) whose activations pipeline rank `rank` holds at its peak
    (`memory_terms.chunks_in_flight`: 1F1B min(p - r, m), interleaved min(2(p - r - 1) + (v - 1)p + 1, m v))."""
    if _dualpipe(plan):
        return float(terms.dualpipe_chunks_in_flight(plan.pp))
    return float(terms.chunks_in_flight(plan.pp, plan.vpp, microbatches_per_step(plan), rank))


def widest_ffn(model: ModelSpec) -> int:
    """The widest FFN a layer's backward holds gradients of: the dense FFN or top_k x the expert FFN."""
    return max(model.ffn, (model.moe.expert_ffn * model.moe.top_k) if model.moe else 0)


def outside_allocator_bytes(tp, cp, dp, pp, ep, lazy_loading: bool = True):
    """(CUDA context, NCCL buffers) bytes outside PyTorch's allocator: the context on every GPU
    (`cuda_context_bytes`, by the plan's module loading), the connection buffers of the plan's NCCL communicators (`nccl_communicators`;
    primitives.nccl_memory.nccl_buffer_bytes). Works on ints and numpy arrays."""
    return cuda_context_bytes(lazy_loading), nccl_buffer_bytes(nccl_communicators(tp, cp, dp, pp, ep))


# ---------------------------------------------------------------------------------------------
# the result


class _PlanTerms:
    """What the pipeline ranks of one plan share: its `saved_context`, memory outside the allocator,
    each rank's `chunks_in_flight` (one array call) and `layer_activation_bytes_per_token` computed
    once per layer kind (`layer_kinds`: equal operators; per layer under adapters, whose delta reads
    the layer's projections)."""

    def __init__(self, model: ModelSpec, plan: TrainPlan):
        self.model, self.plan, self.saved, self.memo = model, plan, saved_context(model, plan), {}
        self.states: dict[tuple[float, float], tuple] = {}  # (dense, expert) parameters -> model_state_bytes
        self.means: dict[tuple[int, ...], float] = {}  # the layers' kinds -> their mean bytes per token
        self.kind = range(model.layers) if plan.fine_tuning.adapters else layer_kinds(model)[0]
        self.outside = outside_allocator_bytes(plan.tp, plan.cp, plan.dp, plan.pp, plan.ep, plan.cuda_lazy_loading)
        self.in_flight = (np.full(plan.pp, terms.dualpipe_chunks_in_flight(plan.pp)) if _dualpipe(plan) else
                          terms.chunks_in_flight(plan.pp, plan.vpp, microbatches_per_step(plan), np.arange(plan.pp)))

    def model_states(self, dense: float, experts: float) -> tuple:
        """`memory_terms.model_state_bytes` of a rank holding these parameters (ranks with the same
        layers hold the same: computed once)."""
        key = (dense, experts)
        if key not in self.states:
            plan = self.plan
            # FSDP2 under a pipeline schedule keeps the stage unsharded (`_rank_memory`)
            fsdp2_pp = (plan.sharding in (Sharding.ZERO3, Sharding.FSDP) and plan.pp > 1
                        and plan.framework.pipelines_fsdp2)
            self.states[key] = terms.model_state_bytes(
                dense, experts, state_bytes_per_param(plan), SHARDING_CODE[plan.sharding], plan.dp * plan.cp,
                plan.expert_dp, fsdp2_pp, activation_bytes(plan.precision))
        return self.states[key]

    def mean_layer_bytes(self, layers, tokens: float) -> float:
        """The mean stored bytes of `layers` (non-empty) for `tokens` tokens each (the plan's tokens per
        micro-batch): np.mean of each layer's bytes per token x tokens, once per sequence of layer kinds."""
        key = tuple(self.kind[i] for i in layers)
        if key not in self.means:
            self.means[key] = (np.array([self.layer_bytes(i) for i in layers]) * tokens).mean()
        return self.means[key]

    def layer_bytes(self, layer: int, stored: bool = True) -> float:
        key = (self.kind[layer], stored)
        if key not in self.memo:
            self.memo[key] = layer_activation_bytes_per_token(self.model, self.plan, layer, stored, self.saved)
        return self.memo[key]


def _rank_memory(model: ModelSpec, plan: TrainPlan, rank: int, layers: tuple[int, ...],
                 shared: _PlanTerms | None = None) -> dict[str, object]:
    """One pipeline rank's terms (`memory_terms`, one plan); `memory_grid.rank_memory_arrays` is the
    same for a grid of plans (a test checks them term by term). `shared`: the plan's `_PlanTerms`."""
    shared = shared or _PlanTerms(model, plan)
    first, last = rank == 0, rank == plan.pp - 1
    if _dualpipe(plan):  # ranks 0 and pp - 1 each hold the first and the last stage
        first = last = rank in (0, plan.pp - 1)
    dense, experts = rank_params(model, plan, layers, first, last)
    zero3 = plan.sharding in (Sharding.ZERO3, Sharding.FSDP)
    # FSDP2 under a pipeline schedule (torchtitan, NeMo AutoModel: `Framework.pipelines_fsdp2`): no
    # reshard after forward (`fsdp_reshard_after_forward = not pp_enabled`, torchtitan's default policy,
    # "to avoid per-microbatch all-gathers") and no gradient reduction until the schedule run's last
    # micro-batch (torch.distributed.pipelining stages run FSDP backward without gradient sync)
    fsdp2_pp = zero3 and plan.pp > 1 and plan.framework.pipelines_fsdp2
    b = activation_bytes(plan.precision)
    weights, grads, optim = shared.model_states(dense, experts)  # terms.model_state_bytes

    tokens = plan.micro_batch * plan.seq_len / plan.cp  # tokens per micro-batch on this GPU
    layer_bytes = shared.layer_bytes
    in_flight = float(shared.in_flight[rank])  # chunks_in_flight(plan, rank)
    stored = float(terms.stored_activation_bytes(shared.mean_layer_bytes(layers, tokens), len(layers),
                                                 layers_per_chunk_divisor(plan), in_flight)) if layers else 0.0
    acts: dict[str, float] = {"layers": stored}
    sp = plan.tp if plan.sequence_parallel else 1
    if first and model.hidden_dropout > 0:  # embedding dropout mask of each micro-batch in flight on chunk 0
        acts["embedding_dropout_masks"] = terms.embedding_dropout_bytes(tokens, model.hidden, sp, in_flight, plan.pp)
    # The peak is in one of two phases, both on top of the stored layers: the loss (forward end and
    # backward start: logits and their gradient, last rank only) or a layer's backward (its gradient
    # working set and, under full recompute, its re-materialised activations). The loss tensors are
    # freed once the output layer's backward has run, before the first layer's backward starts.
    backward_phase = {"backward_working_set": terms.backward_working_set_bytes(
        tokens, b, model.hidden, widest_ffn(model), sp, plan.tp) if layers else 0.0}
    if plan.recompute is Recompute.FULL and layers:
        full = max(layer_bytes(i, stored=False) for i in layers)
        backward_phase["recompute_working_set"] = full * tokens
    elif plan.recompute is Recompute.SELECTIVE and plan.framework is Framework.TORCHTITAN and layers:
        # per-op SAC re-runs the ops it did not save when the layer's backward starts: the layer's
        # full saved set less what SAC kept is alive again for that one layer
        backward_phase["recompute_working_set"] = tokens * max(
            layer_bytes(i, stored=False) - layer_bytes(i) for i in layers)
    loss_phase = {}
    if last and held_logits_bytes_per_vocab_entry(plan):  # the loop's fp32 logits, alive through backward
        backward_phase["held_logits"] = tokens * model.vocab / plan.tp * held_logits_bytes_per_vocab_entry(plan)
    if last:
        loss_phase["logits"] = terms.logits_bytes(tokens, model.vocab, plan.tp, loss_bytes_per_vocab_entry(plan),
                                                  model.mtp_layers, b, model.hidden, sp)
        if model.mtp_layers:  # run by the last stage, for the one micro-batch it holds when it runs them
            last_layer = layer_bytes(model.layers - 1)
            acts["mtp_layers"] = terms.mtp_activation_bytes(model.mtp_layers, last_layer, b, model.hidden, sp, tokens)
    acts.update(loss_phase if sum(loss_phase.values()) > sum(backward_phase.values()) else backward_phase)

    other: dict[str, float] = {}

    def block_dense() -> float:  # the block weights held here (TP-split over tp, replicated whole)
        return sum(_layer_param_split(model, i)[0] / plan.tp + _layer_param_split(model, i)[1] for i in layers)

    if zero3 and not fsdp2_pp:
        biggest = max((layer_params(model, i).total for i in layers), default=0)
        other["zero3_gather_buffer"] = terms.zero3_gather_bytes(biggest, plan.tp, b)
        if plan.framework is Framework.TORCHTITAN:
            # torchtitan's root holds what no block does: the embedding, final norm and output head
            other["fsdp_root_unsharded"] = terms.fsdp_root_bytes(dense, block_dense(), b)
    if plan.precision.low_precision_matmul and plan.framework is not Framework.TORCHTITAN and layers:
        # cached unless Megatron-core passes `disable_parameter_transpose_cache`; the output head stays bf16
        other["fp8_weight_cache"] = terms.fp8_weight_cache_bytes(number_format(plan.precision.value).bytes_per_element,
                                                                 block_dense(), experts)
    context, nccl = shared.outside
    other["cuda_context"], other["nccl_buffers"] = context, float(nccl)
    out = {"weights": weights, "gradients": grads, "optimizer": optim, "acts": acts, "other": other,
           "params": dense + experts, "peak": FineTunePeak(grads, acts)}
    if fine_tuning_rules(plan):  # LoRA / QLoRA, other optimizers, offload, pure low precision; HF Trainer
        ft = rank_fine_tuning_states(model, plan, layers, first, last)
        for key in ("zero3_gather_buffer", "fsdp_root_unsharded"):
            other.pop(key, None)
        other.update(ft.other)
        peak = fine_tuning_peak(plan, ft, acts, loss_phase, backward_phase, microbatches_per_step(plan))
        out.update(weights=ft.weights, gradients=peak.gradients, optimizer=ft.optimizer, fine_tuning=ft, acts=peak.acts,
                   peak=peak)
    return out


def training_memory(model: ModelSpec, plan: TrainPlan, gpu: Gpu | None = None) -> TrainingMemory:
    """Itemised per-GPU training memory of the most loaded GPU; fits/headroom against `gpu` if given
    (hybrid layers are not modelled here: refused by name)."""
    refuse_hybrid(model, "training memory")
    check_plan(model, plan)
    split = _layer_split(model, plan)
    best: dict[str, object] | None = None
    best_total = -1.0
    best_rank = 0
    shared = _PlanTerms(model, plan)
    for rank, layers in enumerate(split):
        r = _rank_memory(model, plan, rank, layers, shared)
        total = r["weights"] + r["gradients"] + r["optimizer"] + sum(r["acts"].values()) + sum(r["other"].values())
        if total > best_total:
            best, best_total, best_rank = r, total, rank
    assert best is not None
    acts = {k: float(v) for k, v in best["acts"].items()}
    other = {k: float(v) for k, v in best["other"].items()}
    per_gpu = {
        "weights": float(best["weights"]),
        "gradients": float(best["gradients"]),
        "optimizer": float(best["optimizer"]),
        "activations": sum(acts.values()),
        "other": sum(other.values()),
    }
    per_gpu["total"] = sum(per_gpu.values())
    outside_allocator = other.get("cuda_context", 0.0) + other.get("nccl_buffers", 0.0)
    allocated = per_gpu["total"] - outside_allocator
    capacity = fits = headroom = None
    if gpu is not None:
        capacity = float(gpu.memory_bytes)
        headroom = usable_memory_bytes(capacity) - per_gpu["total"]  # what is left of the usable part
        fits = headroom >= 0
    notes = []
    if plan.precision.low_precision_matmul:
        notes.append(f"{plan.precision.value}: weights kept in bf16 and cast per GEMM (Transformer Engine); linear inputs saved in fp8")
    ft = best.get("fine_tuning")
    per_param = dict(zip(("weights", "gradients", "optimizer"), state_bytes_per_param(plan)))
    if ft is not None:
        per_param = dict(ft.bytes_per_param)
        notes.append(f"fine-tuning: {plan.fine_tuning.label()}; {ft.trainable_params:,.0f} trainable parameters on this "
                     f"GPU; bytes per parameter are per trainable parameter")
        if ft.paged_optimizer:
            notes.append(f"paged optimizer states: {to_gib(ft.paged_optimizer):.2f} GiB in CUDA unified memory, outside "
                         f"PyTorch's allocated figure and not counted against fits (the driver pages them to host memory)")
        if ft.host:
            notes.append(f"offload {plan.fine_tuning.offload.value}: {to_gib(ft.host):.2f} GiB per GPU kept in host "
                         f"{'NVMe' if plan.fine_tuning.offload.value == 'nvme' else 'memory'}")
        notes.extend(best["peak"].notes)
    return TrainingMemory(
        per_gpu_bytes=per_gpu,
        activations_bytes_detail=acts,
        other_bytes_detail=other,
        params_per_gpu=int(round(float(best["params"]))),
        bytes_per_param=per_param,
        peak_pipeline_rank=best_rank,
        microbatches_in_flight=chunks_in_flight(plan, best_rank) / layers_per_chunk_divisor(plan),
        allocated_bytes=allocated,
        reserved_bytes=allocated * knobs.value("training.memory.reserved_over_allocated"),
        capacity_bytes=capacity,
        fits=fits,
        headroom_bytes=headroom,
        notes=tuple(notes),
        paged_optimizer_bytes=ft.paged_optimizer if ft is not None else 0.0,
        host_bytes=(ft.host if ft is not None else 0.0) + best["peak"].host_activations,
        trainable_params=int(round(ft.trainable_params)) if ft is not None else None,
    )


def to_gib(n: float) -> float:
    return n / GIB
