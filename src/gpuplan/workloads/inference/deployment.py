"""A serving deployment: one model replica on `tp x pp` GPUs of a system, with its number formats."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuplan.errors import InputError
from gpuplan.specs import Gpu, ModelSpec, System
from gpuplan.workloads.inference.dtypes import ServingDtype, parse_dtype


def default_activation_dtype(weight: ServingDtype) -> ServingDtype:
    """Activations run in fp8 with fp8 weights (TensorRT-LLM / vLLM FP8 W8A8 checkpoints), in fp4
    with nvfp4 weights (Blackwell W4A4), else in bf16."""
    if weight == ServingDtype.FP8:
        return ServingDtype.FP8
    if weight == ServingDtype.NVFP4:
        return ServingDtype.NVFP4
    if weight == ServingDtype.FP16:
        return ServingDtype.FP16
    return ServingDtype.BF16


@dataclass(frozen=True)
class Deployment:
    """Model x hardware x parallelism x formats of one replica.

    tp: tensor parallel (heads, FFN columns, vocab split over tp GPUs; 2 all-reduces per layer);
    pp: pipeline stages (layers split); ep: expert parallel degree inside the tp x pp group
    (ep = 1: every routed expert is tensor-sharded over tp GPUs; ep > 1: each GPU holds E/ep whole
    experts and tokens travel by all-to-all).
    """

    model: ModelSpec
    gpu: Gpu
    system: System
    tp: int = 1
    pp: int = 1
    ep: int = 1
    weight_dtype: ServingDtype = ServingDtype.BF16
    kv_dtype: ServingDtype = ServingDtype.BF16
    activation_dtype: ServingDtype = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        object.__setattr__(self, "weight_dtype", parse_dtype(self.weight_dtype, "weight_dtype"))
        object.__setattr__(self, "kv_dtype", parse_dtype(self.kv_dtype, "kv_dtype"))
        if self.activation_dtype is None:
            object.__setattr__(self, "activation_dtype", default_activation_dtype(self.weight_dtype))
        else:
            object.__setattr__(self, "activation_dtype", parse_dtype(self.activation_dtype, "activation_dtype"))
        for name in ("tp", "pp", "ep"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise InputError(f"{name}: must be a positive integer, got {v!r}", field=name)
        if self.model.heads % self.tp:
            raise InputError(f"tp: {self.tp} does not divide the model's {self.model.heads} attention heads", field="tp")
        if self.pp > self.model.layers:
            raise InputError(f"pp: {self.pp} exceeds the model's {self.model.layers} layers", field="pp")
        if self.ep > 1:
            if self.model.moe is None:
                raise InputError("ep: expert parallelism needs an MoE model", field="ep")
            if self.ep > self.tp * self.pp or self.model.moe.num_experts % self.ep:
                raise InputError(
                    f"ep: {self.ep} must divide {self.model.moe.num_experts} experts and be <= tp x pp = {self.tp * self.pp}",
                    field="ep",
                )

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp

    @property
    def layers_per_stage(self) -> int:
        return math.ceil(self.model.layers / self.pp)

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads each TP rank stores: kv_heads / tp, at least 1 (with tp > kv_heads the KV heads
        are replicated, as vLLM and TensorRT-LLM do)."""
        return max(1, math.ceil(self.model.kv_heads / self.tp))

    @property
    def kv_shard_fraction(self) -> float:
        """The fraction of one layer's KV bytes per token a TP rank holds. MLA's latent is one vector
        per token shared by all heads, replicated on every TP rank (vLLM / SGLang without DP
        attention), so the fraction is 1; GQA: kv_heads_per_gpu / kv_heads."""
        if self.model.mla is not None:
            return 1.0
        return self.kv_heads_per_gpu / self.model.kv_heads
