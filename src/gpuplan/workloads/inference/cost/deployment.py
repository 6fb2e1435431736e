"""A serving deployment: one model replica on `tp x pp` GPUs of a system, with its number formats."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuplan.errors import InputError
from gpuplan.specs import Gpu, ModelSpec, System
from gpuplan.specs.dtypes import StoredFormat, parse_stored_format
from gpuplan.workloads.inference.cost.tp_allreduce import TpAllReduce, parse_tp_allreduce


#: The activation format a checkpoint's weight format implies: W8A8 fp8 (TensorRT-LLM / vLLM FP8
#: checkpoints), W8A8 MXFP8 (vLLM CompressedTensorsW8A8Mxfp8: "Activations are dynamically quantized
#: to MXFP8 at runtime"), W4A4 NVFP4 (Blackwell; ModelOpt NVFP4 checkpoints), the model's own
#: fp32 / fp16; every other format (int4, int8 weight-only, mxfp4, mxfp6) with bf16 activations.
DEFAULT_ACTIVATION = {StoredFormat.FP8: StoredFormat.FP8, StoredFormat.MXFP8: StoredFormat.MXFP8,
                      StoredFormat.NVFP4: StoredFormat.NVFP4, StoredFormat.FP16: StoredFormat.FP16,
                      StoredFormat.FP32: StoredFormat.FP32, StoredFormat.TF32: StoredFormat.TF32}


def default_activation_dtype(weight: StoredFormat) -> StoredFormat:
    """The activation format of a `weight` checkpoint (DEFAULT_ACTIVATION; bf16 otherwise)."""
    return DEFAULT_ACTIVATION.get(weight, StoredFormat.BF16)


@dataclass(frozen=True)
class Deployment:
    """Model x hardware x parallelism x formats of one replica.

    tp: tensor parallel (heads, FFN columns, vocab split over tp GPUs; 2 all-reduces per layer);
    pp: pipeline stages (layers split); ep: expert parallel degree inside the tp x pp group
    (ep = 1: every routed expert is tensor-sharded over tp GPUs; ep > 1: each GPU holds E/ep whole
    experts and tokens travel by all-to-all).

    attention_dp: data-parallel degree of the attention inside the replica ("DP attention":
    TensorRT-LLM `enable_attention_dp`, SGLang `--enable-dp-attention`, vLLM DP + EP;
    ../shared/validation/SCHEMA.md). The tp GPUs form attention_dp groups of
    attention_tp = tp / attention_dp GPUs; each group serves its own requests and holds their KV
    cache, with attention (and every non-expert GEMM: dense FFN layers, shared experts, router, LM
    head) tensor-parallel over its attention_tp GPUs, the weights replicated across groups.
    TensorRT-LLM: "If using attention DP, the MLP also uses DP instead of TP"
    (tensorrt_llm/_torch/models/modeling_deepseekv3.py, DeepseekV3DecoderLayer._compute_mlp_tp_size);
    "Parallelism in TensorRT LLM" (nvidia.github.io/TensorRT-LLM/features/parallel-strategy.html):
    attention DP replicates the attention weights, each rank its own requests and KV cache. The
    routed experts keep tp and ep as given and see the tokens of all groups (dispatch / combine
    all-to-all over ep).

    grouped_decode_attention: whether the generation-phase attention kernel loads each KV head's
    cache once for all the query heads that share it (grouped-query / multi-query attention): True
    for TensorRT-LLM's XQA kernel (from v0.7: engines.py), FlashAttention's and FlashInfer's decode kernels and
    MLA kernels. False for a kernel with one thread block per (sequence, query head), each reading
    its KV head's cache, so every KV head is read heads / kv_heads times (`decode_kv_reads`):
    TensorRT-LLM's masked multi-head attention, its only generation kernel before XQA (cpp
    decoderMaskedMultiheadAttentionLaunch.h `mmha_launch_kernel_ex`: grid {num_heads, batch_size};
    TensorRT-LLM blog "New XQA-kernel provides 2.4x more Llama-70B throughput within the same
    latency budget", one H200, 128/2048 tokens: 1,227 -> 2,941 tokens/s per GPU).

    tp_allreduce: how the engine runs the tensor-parallel all-reduce (workloads.inference.cost.tp_allreduce):
    `tensorrt-llm` (default, the PyTorch backend: its one-shot / two-shot kernels within its IPC
    workspace, NCCL above), `tensorrt-llm-plugin` (TensorRT engines, v0.x: one-shot below a size,
    else NCCL), `vllm` (vLLM's / SGLang's custom all-reduce below 8 MiB, NCCL above) or `nccl`.

    python_step_loop: whether the engine does its per-request work of every step (scheduling,
    input preparation, sampling, output processing) in Python on the step's critical path, so each
    running sequence adds host time to the step (operators.HOST_SECONDS_PER_SEQUENCE): True for
    vLLM, SGLang and TGI (EngineProfile.python_step_loop); False for the C++ batch managers
    (TensorRT-LLM, lmdeploy TurboMind) and gpuplan's generic engine.

    attention_dp_balance: whether the engine's attention-DP balance scheduler is on (TensorRT-LLM
    `attention_dp_config: enable_balance: true`, which holds a rank's new context requests until
    the other ranks have some, up to `timeout_iters`; off by default: llmapi/llm_args.py
    `AttentionDpConfig.enable_balance = False`). It sets how much lock-step attention-DP ranks lose
    to the slowest one (operators.attention_dp_balance); no effect with attention_dp = 1.
    """

    model: ModelSpec
    gpu: Gpu
    system: System
    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: int = 1
    weight_dtype: StoredFormat = StoredFormat.BF16
    kv_dtype: StoredFormat = StoredFormat.BF16
    activation_dtype: StoredFormat = field(default=None)  # type: ignore[assignment]
    grouped_decode_attention: bool = True
    tp_allreduce: TpAllReduce = TpAllReduce.TENSORRT_LLM
    python_step_loop: bool = False
    attention_dp_balance: bool = False

    def __post_init__(self):
        object.__setattr__(self, "tp_allreduce", parse_tp_allreduce(self.tp_allreduce))
        object.__setattr__(self, "weight_dtype", parse_stored_format(self.weight_dtype, "weight_dtype"))
        object.__setattr__(self, "kv_dtype", parse_stored_format(self.kv_dtype, "kv_dtype"))
        if self.activation_dtype is None:
            object.__setattr__(self, "activation_dtype", default_activation_dtype(self.weight_dtype))
        else:
            object.__setattr__(self, "activation_dtype", parse_stored_format(self.activation_dtype, "activation_dtype"))
        for name in ("tp", "pp", "ep", "attention_dp"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise InputError(f"{name}: must be a positive integer, got {v!r}", field=name)
        if self.tp % self.attention_dp:
            raise InputError(f"attention_dp: {self.attention_dp} must divide tp = {self.tp}", field="attention_dp")
        if self.model.heads % self.attention_tp:
            raise InputError(f"tp: attention tensor parallelism {self.attention_tp} (tp / attention_dp) does not divide "
                             f"the model's {self.model.heads} attention heads", field="tp")
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
    def attention_tp(self) -> int:
        """GPUs one attention group spans: tp / attention_dp (the tensor-parallel degree of attention
        and of every non-expert GEMM)."""
        return self.tp // self.attention_dp

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel split of each routed expert: tp / ep when ep > 1 (TensorRT-LLM
        `moe_tp_size = tp_size / moe_ep_size`; vLLM and SGLang likewise shard an expert over the TP ranks
        that share it), at least 1; tp without expert parallelism. Each GPU holds E / ep experts, each
        1 / expert_tp of its weights, so a GPU's share of the routed experts is 1 / (ep x expert_tp)."""
        return max(1, self.tp // self.ep) if self.ep > 1 else self.tp

    @property
    def layers_per_stage(self) -> int:
        return math.ceil(self.model.layers / self.pp)

    @property
    def stage_layers(self) -> tuple[range, ...]:
        """The layers of each pipeline stage, as vLLM splits them (vllm/distributed/utils.py
        `get_pp_indices`): L // pp each, the remainder r one each to the r stages before the last
        (`partitions[-i] += 1 for i in range(2, r + 2)`), which holds the final norm and LM head."""
        sizes = [self.model.layers // self.pp] * self.pp
        for i in range(2, self.model.layers % self.pp + 2):
            sizes[-i] += 1
        starts = [sum(sizes[:s]) for s in range(self.pp)]
        return tuple(range(a, a + n) for a, n in zip(starts, sizes))

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads each attention-TP rank stores: kv_heads / attention_tp, at least 1 (with
        attention_tp > kv_heads the KV heads are replicated, as vLLM and TensorRT-LLM do)."""
        return max(1, math.ceil(self.model.kv_heads / self.attention_tp))

    @property
    def decode_kv_reads(self) -> float:
        """Times a decode step reads each cached KV head (class docstring): 1 with a grouped decode
        kernel or MLA (one latent shared by every head); else the query heads per KV head on a GPU,
        (heads / attention_tp) / kv_heads_per_gpu (8 for Llama-2-70B at any tp <= 8)."""
        if self.grouped_decode_attention or self.model.mla is not None:
            return 1.0
        return max(1.0, (self.model.heads / self.attention_tp) / self.kv_heads_per_gpu)

    @property
    def kv_shard_fraction(self) -> float:
        """The fraction of one layer's KV bytes per token (of its own attention group's requests) an
        attention-TP rank holds. MLA's latent is one vector per token shared by all heads,
        replicated on every attention-TP rank, so the fraction is 1 (with attention_dp = tp each GPU
        holds only its own requests' latents: the point of DP attention for MLA); GQA:
        kv_heads_per_gpu / kv_heads."""
        if self.model.mla is not None:
            return 1.0
        return self.kv_heads_per_gpu / self.model.kv_heads
