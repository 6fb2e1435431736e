"""Execution choices of a training run: the software stack and the kernels it runs.

These are data, read by the memory model and the step-time model alike (no booleans that mean
different things in two modules):

- `Framework`: the stack whose documented behaviour (overlap of data-parallel communication,
  fused or eager elementwise kernels, gather/reduce dtypes) the model uses.
- `AttentionKernel`: fused FlashAttention-2 (or cuDNN fused attention), FlashAttention v1, or the
  unfused pre-2022 path that materialises the s x s score matrix. Fused kernels never store the
  scores for backward (memory) and run at the attention-kernel rate (time); unfused ones store and
  move them.
- `ContextParallelMethod`: how the stack exchanges K and V between context-parallel ranks (a
  property of the framework, `Framework.context_parallel_method`): TransformerEngine's p2p ring
  overlapped with each step's attention (Megatron-core), or PyTorch's `context_parallel` with its
  default all-gather rotation, fp32 merges and fp32 dK/dV ring (torchtitan). The formulas are in
  `workloads.training.step.context`.
- `DeepSpeedRelease`: which DeepSpeed engine a `deepspeed` plan runs: the current one (v0.6.0 on:
  coalesced parameter gathers) or the 2021 one (v0.3.13 .. v0.5.10: one gather per weight matrix).
  Only ZeRO-3's communication differs (`workloads.training.step.deepspeed_zero3`).
- `PipelineSchedule`: the pipeline schedule a pp > 1 plan runs: Megatron-style 1F1B (interleaved
  when vpp > 1) or DeepSeek's DualPipe (bidirectional; `workloads.training.step.pipeline`).
- `CudaGraphScope`: which parts of a Megatron training step run as replayed CUDA graphs
  (`--cuda-graph-impl` / `--cuda-graph-scope`); what each removes is in
  `workloads.training.step.cuda_graphs`.
- `Execution`: the bundle a plan carries (framework, attention kernel, TP-communication overlap,
  matmul precision, gradient dtype, compiled loss and blocks), built by `TrainPlan.execution`.
"""

from __future__ import annotations

import re
from enum import Enum

from gpuplan.specs._base import Spec


class Framework(str, Enum):
    """Training framework: decides how data-parallel communication overlaps compute."""

    MEGATRON = "megatron"  # megatron-core DDP / distributed optimizer, overlap_grad_reduce + overlap_param_gather
    DEEPSPEED = "deepspeed"  # DeepSpeed engine, ZeRO-0/1: gradient all-reduce after the backward pass
    FSDP = "fsdp"  # PyTorch FSDP (llm-foundry/Composer): prefetched gathers overlapped per micro-batch
    TORCHTITAN = "torchtitan"  # FSDP2: as FSDP
    #: MaxText (JAX / XLA on TPU): sharding over the mesh axes ici_fsdp (recommended, -1 = every chip
    #: of the slice left over), ici_tensor, ici_sequence, ici_data; across slices dcn_data (AI-Hypercomputer/
    #: maxtext docs 'Sharding', base.yml defaults). Its step is timed as OTHER's (Megatron-like overlap:
    #: XLA's scheduler overlaps the collectives with compute); the plan search offers it MaxText's axes
    #: (`workloads.training.framework_defaults.framework_axes`).
    MAXTEXT = "maxtext"
    #: Hugging Face transformers modules run eagerly (HF Trainer, TRL, Axolotl, accelerate, or a plain
    #: PyTorch loop over an AutoModelForCausalLM): per-operator elementwise bytes and loss
    #: (`workloads.training.step.hf_eager`), torch.autocast over an fp32 model with fp32 master weights
    #: (`native_amp`); data-parallel gradients bucketed and overlapped with backward as torch DDP does
    #: (timed as Megatron's overlap_grad_reduce).
    TRANSFORMERS = "transformers"
    OTHER = "other"  # treated as MEGATRON, except the expert all-to-all: shared-expert overlap only (step.expert)

    @property
    def context_parallel_method(self) -> "ContextParallelMethod":
        """How this stack runs context-parallel attention (`ContextParallelMethod`)."""
        if self is Framework.TORCHTITAN:
            return ContextParallelMethod.TORCH_ALLGATHER
        return ContextParallelMethod.P2P_RING

    @property
    def overlaps_tp_backward(self) -> bool:
        """Whether the stack hides backward tensor-parallel collectives behind the weight-gradient
        GEMM. Megatron-core's `LinearWithGradAccumulationAndAsyncCommunication` launches the
        input-gradient all-reduce / reduce-scatter asynchronously and runs the wgrad GEMM while it
        flies (Megatron-DeepSpeed and NeMo inherit it). torchtitan's vanilla TP (DTensor
        ColwiseParallel / RowwiseParallel) issues each redistribute in order and waits on it: its only
        overlap is async TP (`parallelism.enable_async_tensor_parallel`, default False,
        torchtitan/config/configs.py; inductor's `_micro_pipeline_tp`), which gpuplan does not plan."""
        return self is not Framework.TORCHTITAN

    @property
    def selective_recompute_regathers_tp(self) -> bool:
        """Whether the stack's selective activation checkpointing re-issues the tensor-parallel
        all-gathers in the recomputed forward (two per layer: the sequence-parallel inputs of the
        attention and MLP blocks). torchtitan's per-op SAC saves the outputs of `mm`, SDPA and
        `_c10d_functional.reduce_scatter_tensor` only (`_save_list`, torchtitan
        distributed/activation_checkpoint.py), so `all_gather_into_tensor` runs again in backward; its
        layer SAC (`selective_ac_option` = "2") recomputes every 2nd block whole, the same two
        all-gathers' worth per layer on average. Megatron's selective recompute re-runs the attention
        core only, inside the tensor-parallel region: no collective."""
        return self is Framework.TORCHTITAN

    @property
    def tp_collectives_copy_sequence_dim(self) -> bool:
        """Whether the stack's sequence-parallel collectives add an HBM copy of the activation each:
        DTensor shards torchtitan's sequence-parallel activations on the sequence dim (`Shard(1)` of
        [batch, seq, hidden]), and torch's functional collectives gather / scatter along dim 0 only, so
        `all_gather_tensor` runs `torch.cat(torch.chunk(res, group_size, dim=0), dim=gather_dim)` after
        the all-gather and `reduce_scatter_tensor` `torch.cat(torch.chunk(self, group_size,
        dim=scatter_dim))` before the reduce-scatter (torch/distributed/_functional_collectives.py).
        Megatron keeps [seq, batch, hidden] and gathers on dim 0 in place."""
        return self is Framework.TORCHTITAN

    @property
    def pipelines_fsdp2(self) -> bool:
        """Whether the stack's ZeRO-3 / FSDP under a pipeline schedule is PyTorch FSDP2 (`fully_shard`)
        composed with torch.distributed.pipelining: torchtitan, and the `other` stacks built the same
        way (NeMo AutoModel: nemo_automodel/components/moe/parallelizer.py `apply_fsdp`,
        `reshard_after_forward=not pp_enabled`). Such a stage keeps its parameters unsharded through a
        schedule run and reduce-scatters its gradients once per run (`workloads.training.step.data`
        `fsdp2_pipeline_syncs`; the memory model's unsharded stage). DeepSpeed's pipeline engine refuses
        ZeRO-2 / 3 (deepspeed/runtime/pipe/engine.py: "ZeRO-2 and ZeRO-3 are incompatible with pipeline
        parallelism"); Megatron-core and Composer (FSDP1) are not modelled with PP under FSDP."""
        return self in (Framework.TORCHTITAN, Framework.OTHER)

    @property
    def checkpoint_stops_early(self) -> bool:
        """Whether the stack's full activation checkpointing is PyTorch's non-reentrant
        `torch.utils.checkpoint` with early stop, whose recompute ends once every tensor the block
        saved for backward is rebuilt (`workloads.training.step.checkpoint_early_stop`). Early stop is
        the default of non-reentrant checkpoint from PyTorch 2.1 on (pytorch PR #96866, 2023-03:
        "Make early stop the default for checkpoint"); the reentrant variant always re-runs the whole
        block. Composer / llm-foundry (`FSDP`): llm-foundry's yamls set
        `activation_checkpointing_reentrant: false` (scripts/train/yamls/pretrain/mpt-*.yaml), which
        Composer turns into `checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT)` on
        every MPT block (composer/trainer/dist_strategy.py; MPT's `activation_checkpointing_fn`), and
        its published MPT benchmarks ran PyTorch 2.1.0 (scripts/train/benchmarking/sweep.sh image
        `mosaicml/pytorch:2.1.0_cu121`). Not: torchtitan, whose full AC passes `early_stop=False` to
        `ptd_checkpoint_wrapper` since PR #1580 (2025-08-29); Megatron-LM and DeepSpeed, whose own
        checkpoint functions are reentrant; Hugging Face transformers, whose gradient checkpointing
        defaults to `use_reentrant=True`. A plan states otherwise with `TrainPlan.checkpoint_early_stop`
        (a torchtitan run before PR #1580, `checkpoint_early_stop_allowed`)."""
        return self is Framework.FSDP

    @property
    def checkpoint_early_stop_allowed(self) -> bool:
        """Whether a plan of this stack may say its full AC stops early (`TrainPlan.checkpoint_early_stop`):
        stacks that checkpoint with PyTorch's non-reentrant `torch.utils.checkpoint`, by default or as
        an option: Composer (`activation_checkpointing_reentrant: false`), torchtitan (every release:
        `ptd_checkpoint_wrapper`, whose `checkpoint_impl` defaults to `CheckpointImpl.NO_REENTRANT`,
        torch/distributed/algorithms/_checkpoint/checkpoint_wrapper.py; early stop on before PR #1580
        and with `activation_checkpoint.early_stop = true` after), Hugging Face transformers
        (`gradient_checkpointing_kwargs={"use_reentrant": False}`) and `other`. Not Megatron-LM or
        DeepSpeed (their own reentrant `CheckpointFunction`) nor MaxText (JAX `jax.checkpoint`)."""
        return self not in (Framework.MEGATRON, Framework.DEEPSPEED, Framework.MAXTEXT)

    @property
    def assumed_defaults(self) -> tuple[str, ...]:
        """What the step-time and memory models assume of this stack where a plan does not say
        (`gpuplan train` prints them; `--json` key `framework_defaults_assumed`). Each is the stack's
        own default at the releases the public rows ran; the module that models it cites the source.
        A `deepspeed` plan's lines depend on its release: `assumed_defaults_of`."""
        return _ASSUMED_DEFAULTS[Framework.MEGATRON if self is Framework.OTHER else self]


class CudaGraphScope(str, Enum):
    """A capture region of Megatron-core's training CUDA graphs (megatron/core/transformer/enums.py
    `CudaGraphModule`, NVIDIA/Megatron-LM@d98e8a6; `--cuda-graph-scope` / Megatron-Bridge
    `cfg.model.cuda_graph_scope`). `full_iteration` is Megatron's `cuda_graph_impl="full_iteration"`:
    one graph for the whole forward-backward path, optimizer step excluded (transformer_config.py
    `cuda_graph_impl` docstring); it excludes the per-layer scopes (`cuda_graph_modules must be
    empty when cuda_graph_impl="full_iteration"`)."""

    ATTN = "attn"
    MLP = "mlp"
    MOE = "moe"
    MOE_ROUTER = "moe_router"
    MOE_PREPROCESS = "moe_preprocess"
    MAMBA = "mamba"
    FULL_ITERATION = "full_iteration"


def cuda_graph_scope_of(value) -> frozenset:
    """A set of `CudaGraphScope` from a comma-separated string, an iterable of names / members, or
    None / "" / "none" (no graphs). Raises ValueError naming the allowed values."""
    if value is None:
        return frozenset()
    items = [v for v in re.split(r"[,\s]+", value.strip())] if isinstance(value, str) else list(value)
    out = set()
    for item in items:
        name = item.value if isinstance(item, CudaGraphScope) else str(item).strip().lower()
        if name in ("", "none"):
            continue
        try:
            out.add(CudaGraphScope(name))
        except ValueError:
            allowed = ", ".join(m.value for m in CudaGraphScope)
            raise ValueError(f"cuda_graph_scope: unknown scope {name!r}; allowed: none, {allowed}") from None
    return frozenset(out)


class DeepSpeedRelease(str, Enum):
    """The DeepSpeed engine a `deepspeed` plan runs (module docstring). CURRENT: v0.6.0 (tagged
    2022-03-07, deepspeedai/DeepSpeed tag v0.6.0, commit a32e9b3) and later, whose ZeRO-3 fetches
    parameters with coalesced all-gathers (PR #1453, merged 2022-01-20 after v0.5.10). V0_5: the
    2021 engine of v0.3.13 (the first ZeRO-3 release) .. v0.5.10 (tagged 2022-01-14)."""

    CURRENT = "current"
    V0_5 = "0.5"

    @property
    def label(self) -> str:
        """What `gpuplan train` prints as the release assumed."""
        if self is DeepSpeedRelease.V0_5:
            return "v0.3.13 .. v0.5.10 (2021 engine)"
        return "v0.6.0 and later (current engine)"


class PipelineSchedule(str, Enum):
    """The pipeline schedule of a pp > 1 plan.

    ONE_F_ONE_B: PipeDream-flush 1F1B (Narayanan et al. 2021 sec. 2.2), interleaved when vpp > 1
    (Megatron-core, torch.distributed.pipelining's Interleaved1F1B). DUALPIPE: DeepSeek's bidirectional
    schedule (DeepSeek-V3 report, arXiv 2412.19437 sec. 3.2.1; deepseek-ai/DualPipe): micro-batches
    enter from both ends of the pipeline, each rank holds two stages (stage i and stage pp-1-i, hence
    2x parameters), forward and backward chunks of two micro-batches run overlapped, and the bubble is
    (pp/2 - 1)(F&B + B - 3W) instead of (pp - 1)(F + B). Needs an even pp and vpp = 1."""

    ONE_F_ONE_B = "1f1b"
    DUALPIPE = "dualpipe"


#: (major, minor) of the first release that runs the current engine (DeepSpeedRelease.CURRENT)
DEEPSPEED_CURRENT_ENGINE_FROM = (0, 6)
#: Date of the v0.6.0 tag (deepspeedai/DeepSpeed, commit a32e9b3, 2022-03-07): a document dated
#: before it can only have run the 2021 engine (interfaces.validation.training reads row dates)
DEEPSPEED_CURRENT_ENGINE_DATE = (2022, 3, 7)

_RELEASE_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?")


def deepspeed_release_of(raw: str | DeepSpeedRelease) -> DeepSpeedRelease:
    """The release a user or a row names: `current`, or a DeepSpeed version MAJOR.MINOR[.PATCH]
    (`0.5`, `v0.5.8`, `0.14.2`): below 0.6 the 2021 engine, else the current one. ValueError naming
    the allowed values otherwise."""
    if isinstance(raw, DeepSpeedRelease):
        return raw
    text = str(raw).strip().lower()
    if text == DeepSpeedRelease.CURRENT.value:
        return DeepSpeedRelease.CURRENT
    m = _RELEASE_VERSION.fullmatch(text)
    if m is None:
        raise ValueError(f"'{raw}' is not current or a DeepSpeed version (0.5, 0.6.0, ...; below 0.6 runs "
                         "the 2021 ZeRO-3 engine)")
    version = (int(m.group(1)), int(m.group(2)))
    return DeepSpeedRelease.V0_5 if version < DEEPSPEED_CURRENT_ENGINE_FROM else DeepSpeedRelease.CURRENT


#: ZeRO-3 line of the 2021 engine (replaces the current engine's line of `_ASSUMED_DEFAULTS`)
_DEEPSPEED_V0_5_ZERO3 = (
    "ZeRO-3 as v0.3.13 .. v0.5 ran it: one all-gather per weight matrix, the next prefetched behind compute "
    "only while the live parameters hold < 1e9 elements (stage3_max_live_parameters), a third gather for "
    "the recomputed forward, gradients all-reduced in fp16 per 5e8-element bucket (contiguous_gradients "
    "off), exposed")


def assumed_defaults_of(framework: Framework, release: DeepSpeedRelease = DeepSpeedRelease.CURRENT) -> tuple[str, ...]:
    """`Framework.assumed_defaults`, with a `deepspeed` plan's release: the release assumed first, and
    the 2021 engine's ZeRO-3 line under V0_5 (`gpuplan train` prints them; `--json` key
    `framework_defaults_assumed`)."""
    lines = framework.assumed_defaults
    if framework is not Framework.DEEPSPEED:
        return lines
    release = DeepSpeedRelease(release)
    head = f"DeepSpeed release {release.label} (--deepspeed-release {release.value})"
    if release is DeepSpeedRelease.V0_5:
        lines = tuple(_DEEPSPEED_V0_5_ZERO3 if line.startswith("ZeRO-3") else line for line in lines)
    return (head,) + lines


_MEGATRON_DEFAULTS = (
    "distributed optimizer: gradient reduce-scatter and parameter all-gather overlapped with backward and "
    "forward (overlap_grad_reduce, overlap_param_gather)",
    "TP: backward all-reduce / reduce-scatter hidden behind the weight-gradient GEMM; TransformerEngine "
    "userbuffers overlap only with --tp-comm-overlap; MoE with tp > 1 runs sequence parallelism",
    "CP: TransformerEngine p2p ring (cp_comm_type p2p), causal load balance",
    "PP: interleaved 1F1B overlaps its sends (overlap_p2p_comm) when vpp > 1",
    "attention: TransformerEngine fused attention (FlashAttention-2 rates on Ampere / Hopper, cuDNN on Blackwell)",
    "fused elementwise kernels; vocab-parallel cross entropy, not fused",
)
_ASSUMED_DEFAULTS: dict[Framework, tuple[str, ...]] = {
    Framework.MEGATRON: _MEGATRON_DEFAULTS,
    Framework.MAXTEXT: ("XLA's scheduler overlaps collectives as Megatron-core does; sharding over ici_fsdp "
                        "(MaxText base.yml)",) + _MEGATRON_DEFAULTS[1:],
    Framework.DEEPSPEED: (
        "ZeRO-0/1/2: gradients all-reduced after the backward pass, not overlapped",
        "ZeRO-3: prefetch bucket 5e7 elements, reduce bucket 5e8 elements, one collective latency per call",
        "TP (Megatron-DeepSpeed): backward collectives hidden as Megatron's",
    ),
    Framework.FSDP: (
        "FSDP (Composer / llm-foundry): prefetched all-gathers overlapped per micro-batch, fp32 gathers "
        "(Composer's DEFAULT mixed precision)",
        "eager elementwise kernels; flash-attn's fused cross entropy",
        "full AC: non-reentrant torch.utils.checkpoint with early stop (PyTorch >= 2.1): the recomputed "
        "forward stops before the MLP down projection",
    ),
    Framework.TRANSFORMERS: (
        "Hugging Face transformers modules in eager PyTorch: fp32 RMSNorm, rotate_half rotary, SwiGLU in two "
        "kernels, the attention output copied for o_proj, fp32 logits in ForCausalLMLoss",
        "mixed precision = torch.autocast over an fp32 model (fp32 residual stream, weights cast per forward); "
        "master_weights none = a model loaded in bf16/fp16",
        "attention: torch SDPA (flash / cuDNN kernels), no repeat_kv copy",
        "data parallel: torch DDP, gradient buckets all-reduced during the backward pass",
    ),
    Framework.TORCHTITAN: (
        "FSDP2: all-gathers and reduce-scatters overlapped; reshard_after_forward = not pp",
        "TP: DTensor TP, no backward collective hidden (enable_async_tensor_parallel = False); sequence "
        "parallelism on with tp > 1, a torch.cat copy per sequence-dim collective, selective AC re-gathering "
        "its inputs; float8 tensorwise all-gathers in fp8",
        "CP: PyTorch context_parallel, all-gather K/V rotation, fp32 merges and dK/dV ring",
        "PP: a validation row that states no micro-batch runs pp micro-batches per step "
        "(pipeline_parallel_microbatches, torchtitan's default before 2025-04); the search picks its own",
        "selective AC = per-op SAC (save every 2nd mm, the SDPA outputs); float8 = torchao Float8Linear, "
        "output layer bf16",
        "full AC re-runs the whole block forward when eager (early_stop = False since torchtitan PR #1580, "
        "2025-08-29; earlier runs stopped before the MLP down projection: --checkpoint-early-stop); compiled "
        "blocks never re-run the down projection",
        "eager Llama elementwise (fp32 RMSNorm, complex rotary, repeat_kv) unless compiled (compiled_model: "
        "training.compile, fused per block); cross entropy on fp32 logits, "
        "not compiled unless the plan says so (compiled_loss: training.compile since torchtitan PR #1033, 2025-04-02)",
    ),
}


class ContextParallelMethod(str, Enum):
    """K/V exchange of context-parallel attention (formulas: `workloads.training.step.context`)."""

    #: TransformerEngine `cp_comm_type="p2p"` (Megatron-core default): each rank's K,V block passes
    #: around the ring, each hop overlapped with the attention of the block already held;
    #: sequence split in 2 cp chunks (rank r holds chunks r and 2cp-1-r) for causal balance.
    P2P_RING = "p2p_ring"
    #: torch.distributed.tensor.experimental.context_parallel (torchtitan): `_cp_options.rotate_method`
    #: ALL_GATHER (default) gathers every rank's K,V once per pass, waited before the second ring
    #: step; per-step SDPA calls merged in fp32 (`convert_to_f32=True`); dK,dV passed around the
    #: ring in fp32 (ALL_TO_ALL rotater); round-robin load balance (`enable_load_balance=True`).
    TORCH_ALLGATHER = "torch_allgather"


class AttentionKernel(str, Enum):
    FLASH = "flash"  # FlashAttention-2 / cuDNN fused attention: scores never reach HBM
    FLASH_V1 = "flash_v1"  # FlashAttention v1 (2022): fused, about half FlashAttention-2's rate
    #: the flash-attn library's FlashAttention-2 kernels where the stack's own choice would be a faster
    #: vendor kernel: TransformerEngine on Blackwell when its cuDNN backend is excluded (deterministic
    #: training with attention dropout); elsewhere the same rate as FLASH
    FLASH2 = "flash2"
    UNFUSED = "unfused"  # scores materialised; fused scale-mask-softmax (+ dropout) kernels

    @property
    def fused(self) -> bool:
        """Whether the kernel keeps the s x s scores on chip (FlashAttention v1 and v2 both do)."""
        return self is not AttentionKernel.UNFUSED


class Execution(Spec):
    """The execution choices of a plan, one typed value (see module docstring)."""

    framework: Framework = Framework.MEGATRON
    attention_kernel: AttentionKernel = AttentionKernel.FLASH
    tp_comm_overlap: bool = False
    precision: str = "bf16"
    grad_precision: str = "fp32"
    #: The loss `cross_entropy(logits.float(), labels)` runs as one torch.compile'd graph: torchtitan's
    #: `build_cross_entropy_loss` wraps it in `torch.compile` whenever `training.compile` is set, since
    #: torchtitan PR #1033 (2025-04-02, torchtitan/components/loss.py); before, the model was compiled
    #: and the loss ran eagerly. Inductor fuses the fp32 cast, log-softmax and NLL into reductions that
    #: keep no logits-sized intermediate (the memory model's `COMPILED_CROSS_ENTROPY_BYTES`, the step
    #: model's `COMPILED_LOSS_BYTES_PER_LOGIT`).
    compiled_loss: bool = False
    #: Each transformer block runs under `torch.compile(fullgraph=True)` (torchtitan `training.compile`,
    #: `apply_compile`): Inductor fuses the pointwise chains between GEMMs (norms, residual adds, rotary,
    #: SwiGLU), counted as fused kernels by the step model (`step.compute.elementwise_seconds`).
    compiled_model: bool = False
    #: The stack's full activation checkpointing stops its recompute early (non-reentrant
    #: `torch.utils.checkpoint` with early stop: `workloads.training.step.checkpoint_early_stop`); the
    #: plan's `TrainPlan.checkpoint_early_stop`, else the framework's `Framework.checkpoint_stops_early`.
    checkpoint_early_stop: bool = False


__all__ = ["AttentionKernel", "ContextParallelMethod", "CudaGraphScope", "cuda_graph_scope_of", "DEEPSPEED_CURRENT_ENGINE_DATE", "DEEPSPEED_CURRENT_ENGINE_FROM",
           "DeepSpeedRelease", "Execution", "Framework", "PipelineSchedule", "assumed_defaults_of", "deepspeed_release_of"]
