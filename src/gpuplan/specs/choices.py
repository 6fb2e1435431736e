"""The named choices of a training plan (enums), in a module that imports nothing but `enum`: the
CLI builds its options from them without loading pydantic or numpy (issue 35). The specs that carry
them: `specs.finetune.FineTuning` (method, base dtype, optimizer, offload, master weights) and
`specs.plan.TrainPlan` (recompute, sharding, precision); their docstrings say what each value means.
"""

from __future__ import annotations

from enum import Enum


class FineTuneMethod(str, Enum):
    FULL = "full"
    LORA = "lora"
    QLORA = "qlora"


class BaseDtype(str, Enum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP32 = "fp32"
    INT8 = "int8"
    NF4 = "nf4"
    FP4 = "fp4"

    @property
    def four_bit(self) -> bool:
        return self in (BaseDtype.NF4, BaseDtype.FP4)

    @property
    def quantized(self) -> bool:
        """Stored in an integer code that every matmul dequantises (int8, nf4, fp4)."""
        return self in (BaseDtype.INT8, BaseDtype.NF4, BaseDtype.FP4)


class Optimizer(str, Enum):
    ADAMW = "adamw"
    ADAMW_8BIT = "adamw_8bit"
    PAGED_ADAMW_8BIT = "paged_adamw_8bit"
    ADAMW_4BIT = "adamw_4bit"
    ADAFACTOR = "adafactor"
    SGD = "sgd"
    LION = "lion"


class OptimizerImpl(str, Enum):
    """How the AdamW step is issued (`workloads.training.step.optimizer_impl`): a Python loop over the
    parameter tensors, several eager kernels each (Hugging Face `adamw_hf`, torch.optim.AdamW
    foreach=False); torch's multi-tensor `_foreach_*` ops (foreach=True, its CUDA default since
    PyTorch 2.0); one fused multi-tensor kernel (torch fused=True, apex / TransformerEngine / DeepSpeed
    FusedAdam, Megatron's distributed optimizer)."""

    LOOP = "loop"
    FOREACH = "foreach"
    FUSED = "fused"


class Offload(str, Enum):
    NONE = "none"
    OPTIMIZER = "optimizer"
    PARAMS = "params"
    NVME = "nvme"

    @property
    def moves_params(self) -> bool:
        """Parameters (and gradients) live off the GPU between uses."""
        return self in (Offload.PARAMS, Offload.NVME)

    @property
    def moves_optimizer(self) -> bool:
        """Optimizer states (and the step) live off the GPU."""
        return self is not Offload.NONE


class MasterWeights(str, Enum):
    FP32 = "fp32"
    NONE = "none"


class Recompute(str, Enum):
    NONE = "none"
    SELECTIVE = "selective"  # recompute the attention core only (Korthikanti et al. 2022)
    FULL = "full"  # keep only each layer's input; recompute the layer in backward


class Sharding(str, Enum):
    NONE = "none"
    ZERO1 = "zero1"  # optimizer states sharded over DP (also Megatron's distributed optimizer)
    ZERO2 = "zero2"  # + gradients
    ZERO3 = "zero3"  # + parameters
    FSDP = "fsdp"  # = ZeRO-3


class Precision(str, Enum):
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"  # OFP8, per-tensor scaled (delayed or current scaling)
    MXFP8 = "mxfp8"  # OCP MX: 1x32 blocks with E8M0 scales (Blackwell-native)
    NVFP4 = "nvfp4"  # E2M1 with an E4M3 scale per 16 elements (Blackwell)

    @property
    def low_precision_matmul(self) -> bool:
        """Whether GEMM inputs are quantised per GEMM (FP8 / MX / NVFP4 recipes: weights stay bf16,
        inputs are cast, the output head stays in the activation dtype)."""
        return self in (Precision.FP8, Precision.MXFP8, Precision.NVFP4)
