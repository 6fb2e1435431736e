"""The training execution plan: how a model is split over GPUs and what is kept or recomputed."""

from __future__ import annotations

import numpy as np
from pydantic import Field, field_validator, model_serializer, model_validator

from gpuplan.validation_rules import MAX_GPUS, MAX_WIDTH

from gpuplan.specs._base import Spec
from gpuplan.specs.choices import Precision, Recompute, Sharding  # noqa: F401
from gpuplan.specs.execution import (AttentionKernel, CudaGraphScope, DeepSpeedRelease, Execution, Framework,
                                     PipelineSchedule, cuda_graph_scope_of, deepspeed_release_of)
from gpuplan.specs.finetune import FineTuning, MasterWeights
from gpuplan.specs.memory_savings import MemorySaving, memory_savings_of


def default_expert_tp(tp, dp, cp, ep):
    """Megatron's default expert tensor parallel size, tp, where ep x tp fits the stage's tp x cp x dp
    ranks (ep divides dp x cp); else 1, the folded layout. Works on ints (without numpy: a plan's
    property, read per layer by the memory model) and numpy arrays."""
    fits = (dp * cp) % ep == 0
    if isinstance(fits, bool) and isinstance(tp, int):
        return tp if fits else 1
    return np.where(fits, tp, 1)


def expert_data_parallel_size(tp, cp, dp, ep, etp):
    """Expert data-parallel group size: the tp x cp x dp ranks of a pipeline stage over the ep x etp
    ranks that hold one copy of the routed experts, at least 1 (Megatron-core parallel_state.py
    initialize_model_parallel: expert_data_parallel_size = world_size // (expert_tensor_parallel_size
    x expert_model_parallel_size x pipeline_model_parallel_size), world_size / pp = tp x cp x dp).
    Works on ints and numpy arrays (floats too: the step model's plan axes)."""
    return np.maximum(1, np.floor_divide(tp * cp * dp, ep * etp))


def batch_splits_into_micro_batches(global_batch, micro_batch, dp):
    """Whether a global batch (sequences per step) is a whole number of micro-batches on every
    data-parallel rank: global_batch % (micro_batch x dp) == 0 (Megatron-core
    num_microbatches_calculator.py: `assert global_batch_size % micro_batch_times_data_parallel_size
    == 0`). Works on ints (exactly, at any size) and numpy arrays (the plan search's grid;
    `workloads.training.plan_validity`)."""
    return global_batch % (micro_batch * dp) == 0


class TrainPlan(Spec):
    tp: int = Field(default=1, gt=0, le=MAX_GPUS)
    pp: int = Field(default=1, gt=0, le=MAX_GPUS)
    dp: int = Field(default=1, gt=0, le=MAX_GPUS)
    cp: int = Field(default=1, gt=0, le=MAX_GPUS)
    ep: int = Field(default=1, gt=0, le=MAX_GPUS)  # expert parallel degree (Megatron-core MoE parallel folding, see expert_tp)
    #: Expert tensor parallel degree (Megatron-core `--expert-tensor-parallel-size`). None = Megatron's
    #: default, tp, where that is valid (ep x tp divides tp x cp x dp, i.e. ep divides dp x cp), else 1
    #: (the folded layout MoE recipes use, e.g. tp 2 with ep 32 on 16-way data parallelism).
    etp: int | None = Field(default=None, gt=0)
    vpp: int = Field(default=1, gt=0)  # virtual pipeline stages per GPU (interleaved 1F1B)
    micro_batch: int = Field(default=1, gt=0)
    global_batch: int | None = Field(default=None, gt=0)  # sequences per optimizer step
    seq_len: int = Field(default=2048, gt=0, le=MAX_WIDTH)
    recompute: Recompute = Recompute.NONE
    sequence_parallel: bool = False
    #: TransformerEngine TP communication overlap (userbuffers, Megatron-core/NeMo `tp_comm_overlap`):
    #: with sequence parallelism, each all-gather / reduce-scatter is split into tp chunks pipelined
    #: with the GEMM it feeds. Has no effect without sequence parallelism.
    tp_comm_overlap: bool = False
    precision: Precision = Precision.BF16
    sharding: Sharding = Sharding.NONE
    #: dtype of the gradient buffer. fp32 = Megatron's main_grad accumulation (the "18 bytes/param" setup);
    #: bf16/fp16 = gradients kept in the compute dtype (plain PyTorch AMP / FSDP mixed precision, "16 bytes/param").
    grad_precision: Precision = Precision.FP32
    #: Training stack (specs.execution.Framework): overlap, eager or fused elementwise kernels.
    framework: Framework = Framework.MEGATRON
    #: Attention kernel (specs.execution.AttentionKernel). The legacy boolean `flash_attention=False`
    #: given at construction means AttentionKernel.UNFUSED.
    attention_kernel: AttentionKernel = AttentionKernel.FLASH
    #: The cross-entropy runs as one torch.compile'd graph (specs.execution.Execution.compiled_loss):
    #: torchtitan with `training.compile` since its PR #1033 (2025-04-02). Memory and step time read it.
    compiled_loss: bool = False
    #: Each transformer block runs under torch.compile (torchtitan `training.compile`: `apply_compile`);
    #: the step model's elementwise kernels are then fused (`step.compute.elementwise_seconds`).
    compiled_model: bool = False
    #: Fine-tuning choices (specs.finetune.FineTuning): LoRA / QLoRA, the frozen base's dtype, the
    #: optimizer, offload, fp32 master weights or pure low-precision training. The default is
    #: ordinary training (every weight, AdamW, fp32 master, nothing offloaded).
    fine_tuning: FineTuning = FineTuning()
    #: DeepSpeed engine a `deepspeed` plan runs (specs.execution.DeepSpeedRelease): the current one
    #: (v0.6.0 on), or `0.5`, the 2021 engine whose ZeRO-3 gathers each weight matrix on its own
    #: (workloads.training.step.deepspeed_zero3). Read only by deepspeed ZeRO-3 plans. A version
    #: string ("0.5.8", "0.14") is accepted and mapped (`deepspeed_release_of`).
    deepspeed_release: DeepSpeedRelease = DeepSpeedRelease.CURRENT
    #: Pipeline schedule of a pp > 1 plan (specs.execution.PipelineSchedule): 1f1b (interleaved when
    #: vpp > 1) or dualpipe (DeepSeek-V3's bidirectional schedule: even pp, vpp 1, 2x parameters).
    pipeline_schedule: PipelineSchedule = PipelineSchedule.ONE_F_ONE_B
    #: Pipeline schedule runs per optimizer step: stacks on torch.distributed.pipelining (torchtitan, NeMo
    #: AutoModel) call the schedule's `step()` once per local batch (`local_batch_size` sequences per
    #: data-parallel rank) and accumulate gradients over global_batch / (local_batch_size x dp) such runs;
    #: each run fills and drains the pipeline and, under FSDP2, reduce-scatters the gradients and re-gathers
    #: the parameters (`workloads.training.step.pipeline`, `step.data`). Megatron-core and DeepSpeed run
    #: every micro-batch of the step in one schedule: 1. Must divide the micro-batches per step.
    pipeline_flushes: int = Field(default=1, gt=0, le=MAX_GPUS)
    #: Megatron's deterministic mode (`--deterministic-mode`): bit-reproducible kernels, NCCL without
    #: NVLink SHARP (workloads.training.step.deterministic). Step time reads it.
    deterministic: bool = False
    #: Megatron's gradient-accumulation fusion (on by default; False = `--no-gradient-accumulation-fusion`):
    #: off, every weight gradient is written and added to the fp32 main_grad in a separate pass
    #: (workloads.training.step.grad_accumulation). Step time reads it.
    grad_accum_fusion: bool = True
    #: CUDA loads kernels lazily (CUDA_MODULE_LOADING=LAZY: CUDA 11.7+, PyTorch's default from 1.13, the
    #: driver's from CUDA 12.2): the per-GPU CUDA context is the lazy one
    #: (`workloads.training.memory.cuda_context_bytes`). False: every kernel image of the loaded
    #: libraries is loaded at context creation (PyTorch before 1.13).
    cuda_lazy_loading: bool = True
    #: Memory savings switched on beyond `recompute` (specs.memory_savings.MemorySaving: norm and MLA
    #: up-projection recompute, routed-expert SwiGLU output recompute, BF16 AdamW moments), each once, in
    #: the enum's order. Memory reads it (workloads.training.memory_savings).
    memory_savings: tuple[MemorySaving, ...] = ()
    #: Full activation checkpointing stops its recompute once every saved tensor is rebuilt (PyTorch's
    #: non-reentrant checkpoint with early stop: `workloads.training.step.checkpoint_early_stop`). None =
    #: the framework's current default (`Framework.checkpoint_stops_early`: fsdp yes; torchtitan no, since
    #: its PR #1580 of 2025-08-29 passes `early_stop=False`); True for a torchtitan run before that PR (or
    #: with `activation_checkpoint.early_stop = true`), False for a stack that turns it off.
    #: True is refused for stacks whose checkpoint is reentrant (`Framework.checkpoint_early_stop_allowed`).
    checkpoint_early_stop: bool | None = None

    @field_validator("memory_savings", mode="before")
    @classmethod
    def _savings_in_order(cls, value):
        return memory_savings_of(value)

    #: Megatron training CUDA graphs (specs.execution.CudaGraphScope; `--cuda-graph-scope`): empty = none,
    #: Megatron's default (`cuda_graph_impl="none"`). Step time reads it (`workloads.training.step.cuda_graphs`).
    cuda_graph_scope: frozenset[CudaGraphScope] = frozenset()

    @field_validator("cuda_graph_scope", mode="before")
    @classmethod
    def _scope_from_names(cls, value):
        return cuda_graph_scope_of(value)

    @model_validator(mode="after")
    def _cuda_graph_scope_fits(self):
        """Megatron-core's own checks (transformer_config.py `__post_init__`, NVIDIA/Megatron-LM@d98e8a6):
        full_iteration excludes the per-layer scopes; moe_preprocess needs moe_router; moe and moe_router
        exclude each other."""
        s = self.cuda_graph_scope
        if CudaGraphScope.FULL_ITERATION in s and len(s) > 1:
            raise ValueError("cuda_graph_scope: full_iteration captures the whole step; it cannot be combined with "
                             "per-layer scopes")
        if CudaGraphScope.MOE_PREPROCESS in s and CudaGraphScope.MOE_ROUTER not in s:
            raise ValueError("cuda_graph_scope: moe_preprocess needs moe_router")
        if CudaGraphScope.MOE in s and CudaGraphScope.MOE_ROUTER in s:
            raise ValueError("cuda_graph_scope: moe and moe_router exclude each other")
        return self

    @field_validator("deepspeed_release", mode="before")
    @classmethod
    def _release_from_version(cls, value):
        return deepspeed_release_of(value)

    @model_serializer(mode="wrap")
    def _omit_default_release(self, handler):
        """A plan dump leaves out `deepspeed_release`, `deterministic`, `grad_accum_fusion`, `cuda_lazy_loading`,
        `memory_savings`, `cuda_graph_scope`, `pipeline_schedule`, `pipeline_flushes` and `checkpoint_early_stop` where they are the
        defaults, so the dumps (and hashes) of every plan written before the fields existed are unchanged; loading
        restores them."""
        data = handler(self)
        if isinstance(data, dict):
            if self.deepspeed_release is DeepSpeedRelease.CURRENT:
                data.pop("deepspeed_release", None)
            if self.pipeline_schedule is PipelineSchedule.ONE_F_ONE_B:  # fields added later: same rule
                data.pop("pipeline_schedule", None)
            if self.pipeline_flushes == 1:
                data.pop("pipeline_flushes", None)
            if not self.deterministic:
                data.pop("deterministic", None)
            if self.grad_accum_fusion:
                data.pop("grad_accum_fusion", None)
            if self.cuda_lazy_loading:
                data.pop("cuda_lazy_loading", None)
            if not self.memory_savings:
                data.pop("memory_savings", None)
            if self.checkpoint_early_stop is None:
                data.pop("checkpoint_early_stop", None)
            if not self.cuda_graph_scope:
                data.pop("cuda_graph_scope", None)
            else:
                data["cuda_graph_scope"] = sorted(v.value for v in self.cuda_graph_scope)
        return data

    @model_validator(mode="before")
    @classmethod
    def _legacy_flash_flag(cls, data):
        if isinstance(data, dict) and "flash_attention" in data:
            data = dict(data)
            flag = data.pop("flash_attention")
            if not flag:
                data["attention_kernel"] = AttentionKernel.UNFUSED
            elif "attention_kernel" not in data:
                data["attention_kernel"] = AttentionKernel.FLASH
        return data

    @property
    def flash_attention(self) -> bool:
        """Whether attention is fused (the s x s scores never stored): FlashAttention v1 or v2."""
        return self.attention_kernel is not AttentionKernel.UNFUSED

    @property
    def execution(self) -> Execution:
        """The execution choices of this plan as one typed value."""
        return Execution(framework=self.framework, attention_kernel=self.attention_kernel,
                         tp_comm_overlap=self.tp_comm_overlap, precision=Precision(self.precision).value,
                         grad_precision=Precision(self.grad_precision).value, compiled_loss=self.compiled_loss,
                         compiled_model=self.compiled_model, checkpoint_early_stop=self.checkpoint_stops_early)

    @property
    def checkpoint_stops_early(self) -> bool:
        """Whether this plan's full recompute stops early: `checkpoint_early_stop`, else the framework's
        default (`Framework.checkpoint_stops_early`)."""
        if self.checkpoint_early_stop is None:
            return Framework(self.framework).checkpoint_stops_early
        return bool(self.checkpoint_early_stop)

    @model_validator(mode="after")
    def _early_stop_needs_non_reentrant_checkpoint(self):
        if self.checkpoint_early_stop and not Framework(self.framework).checkpoint_early_stop_allowed:
            raise ValueError(f"checkpoint_early_stop true needs a stack with non-reentrant checkpointing (fsdp, "
                             f"torchtitan, transformers, other), not {Framework(self.framework).value}: its "
                             "checkpoint re-runs the whole layer")
        return self

    @model_validator(mode="after")
    def _savings_fit_optimizer(self):
        if MemorySaving.BF16_OPTIMIZER_STATES in self.memory_savings and self.fine_tuning.optimizer.value != "adamw":
            raise ValueError(f"memory_savings bf16_optimizer_states applies to optimizer adamw, not "
                             f"{self.fine_tuning.optimizer.value}")
        return self

    @model_validator(mode="after")
    def _batch_divides(self):
        if self.global_batch is not None and not batch_splits_into_micro_batches(self.global_batch, self.micro_batch, self.dp):
            raise ValueError(
                f"global_batch ({self.global_batch}) is not a multiple of micro_batch x dp ({self.micro_batch} x {self.dp})"
            )
        return self

    @model_validator(mode="after")
    def _pipeline_schedule_fits(self):
        m = self.grad_accum_steps
        if m % self.pipeline_flushes:
            raise ValueError(f"pipeline_flushes ({self.pipeline_flushes}) must divide the micro-batches per step "
                             f"({m} = global_batch / (micro_batch x dp))")
        if self.pipeline_schedule is PipelineSchedule.DUALPIPE:
            per_flush = m // self.pipeline_flushes
            # deepseek-ai/DualPipe dualpipe.py `DualPipe.step`: `assert num_ranks % 2 == 0` and
            # `assert num_chunks > 0 and num_chunks % 2 == 0 and num_chunks >= num_ranks * 2`
            if self.pp < 2 or self.pp % 2 or self.vpp != 1:
                raise ValueError(f"pipeline_schedule dualpipe needs an even pp >= 2 and vpp 1, not pp {self.pp}, "
                                 f"vpp {self.vpp}")
            if per_flush % 2 or per_flush < 2 * self.pp:
                raise ValueError(f"pipeline_schedule dualpipe needs an even number of micro-batches per schedule run, "
                                 f"at least 2 x pp = {2 * self.pp}, not {per_flush}")
        return self

    @model_validator(mode="after")
    def _fine_tuning_fits_the_plan(self):
        ft = self.fine_tuning
        if ft.offload.moves_params and self.sharding not in (Sharding.ZERO3, Sharding.FSDP):
            # FSDP CPUOffload(offload_params=True) offloads the flat-parameter shards FSDP owns;
            # DeepSpeed's offload_param is a ZeRO stage-3 option ("only valid with stage 3")
            raise ValueError(f"offload {ft.offload.value} moves parameter shards: it needs sharding zero3 or fsdp, "
                             f"not {Sharding(self.sharding).value}")
        if ft.optimizer_in_backward and self.grad_accum_steps > 1:
            # torchtune: "Please set gradient_accumulation_steps=1, or optimizer_in_bwd=False"
            raise ValueError(f"optimizer_in_backward frees each gradient after its step: it needs one micro-batch per "
                             f"step, not {self.grad_accum_steps} (global_batch = micro_batch x dp)")
        if ft.master_weights is MasterWeights.NONE and Precision(self.precision).low_precision_matmul:
            raise ValueError(f"master_weights none trains the weights themselves in the compute dtype: precision must be "
                             f"bf16, fp16 or fp32, not {Precision(self.precision).value}")
        return self

    @property
    def expert_tp(self) -> int:
        """Expert tensor parallel degree in effect (see `etp`)."""
        if self.etp is not None:
            return self.etp
        return int(default_expert_tp(self.tp, self.dp, self.cp, self.ep))

    @property
    def expert_dp(self) -> int:
        """Expert data-parallel degree (`expert_data_parallel_size` of this plan)."""
        return int(expert_data_parallel_size(self.tp, self.cp, self.dp, self.ep, self.expert_tp))

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def grad_accum_steps(self) -> int:
        """Micro-batches per pipeline per step = global_batch / (micro_batch x dp); 1 if no global batch."""
        if self.global_batch is None:
            return 1
        return self.global_batch // (self.micro_batch * self.dp)
