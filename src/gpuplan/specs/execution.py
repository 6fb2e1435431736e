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
- `Execution`: the bundle a plan carries (framework, attention kernel, TP-communication overlap,
  matmul precision, gradient dtype), built by `TrainPlan.execution`.
"""

from __future__ import annotations

from enum import Enum

from gpuplan.specs._base import Spec


class Framework(str, Enum):
    """Training framework: decides how data-parallel communication overlaps compute."""

    MEGATRON = "megatron"  # megatron-core DDP / distributed optimizer, overlap_grad_reduce + overlap_param_gather
    DEEPSPEED = "deepspeed"  # DeepSpeed engine, ZeRO-0/1: gradient all-reduce after the backward pass
    FSDP = "fsdp"  # PyTorch FSDP (llm-foundry/Composer): prefetched gathers overlapped per micro-batch
    TORCHTITAN = "torchtitan"  # FSDP2: as FSDP
    OTHER = "other"  # treated as MEGATRON

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


__all__ = ["AttentionKernel", "ContextParallelMethod", "Execution", "Framework"]
