"""Serving memory per GPU: weights, KV cache (paged), activation workspace, runtime reserve, and
what fits (maximum concurrent sequences, maximum context).

    kv_budget = total x memory_fraction - weights - workspace - reserve      (KvBudgetRule.TOTAL, vLLM)
    kv_budget = (total - weights - workspace - reserve) x memory_fraction    (KvBudgetRule.FREE, TensorRT-LLM)
    kv_capacity_blocks = floor(kv_budget / (block_size x kv_bytes_per_token_per_gpu))
    max_concurrent_sequences(L) = floor(kv_capacity_blocks / blocks_per_sequence(L))

KV bytes per token come from gpuplan.layers.kv_cache_bytes_per_token (GQA, MLA latent, sliding
window); a TP rank holds kv_shard_fraction of them (replicated heads when tp > kv_heads, the whole
MLA latent). Only attention layers hold KV per token; the recurrent layers of a hybrid model
(Mamba-2, Gated DeltaNet, short conv, RG-LRU) hold a constant state per sequence
(gpuplan.layers.state_bytes_per_sequence), split over attention_tp x pp GPUs like their heads. With attention data parallelism (Deployment.attention_dp) the plan is that of one
attention group: its GPUs hold the KV of the group's own requests only, sharded over attention_tp,
and the non-expert weights are sharded over attention_tp (replicated across groups). Sliding-window layers keep at most `window` tokens (plus one block being filled).

Weights are the operator inventory's, per GPU and stage (workloads.inference.cost.weights). With
pipeline stages every stage holds the KV of its own layers for every sequence, so the replica holds
as many blocks as its tightest stage (vLLM sizes the cache by the minimum over workers): the plan
is that of the stage with the fewest KV blocks (the first on a tie).

The reserve is the runtime reserve knob plus, for a replica of more than one GPU, one NCCL
communicator's connection buffers (primitives.nccl_memory: ring channels of the replica's fabric
x 9.6 MB; 308 MB on NVSwitch H100).

The knob-free parts (each stage's weights, `weights.stage_weights`, and its KV and state bytes per
GPU, `kv_layout`) are remembered per layout and formats (layout_cache); the knobs (memory fraction, runtime
reserve) are read afresh at every call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from gpuplan import knobs
from gpuplan.errors import Infeasible
from gpuplan.layers import KvSplit, kv_bytes_per_token_split
from gpuplan.layers.inventory import model_ops
from gpuplan.primitives.nccl_memory import nccl_buffer_bytes, ring_channels
from gpuplan.specs.dtypes import bytes_per_element
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.layout_cache import LayoutCache
from gpuplan.workloads.inference.cost.weights import stage_weights, weights_bytes_per_gpu
from gpuplan.workloads.memory_headroom import usable_fraction
from gpuplan.workloads.inference.kernels import paged_kv_bytes


class KvBudgetRule(str, Enum):
    TOTAL = "total"  # vLLM: gpu_memory_utilization x total memory covers weights + activations + KV
    FREE = "free"  # TensorRT-LLM: free_gpu_memory_fraction of what is free after weights + workspace


#: vLLM `gpu_memory_utilization` default 0.9 (vLLM engine arguments documentation): what a published
#: vLLM benchmark ran at (validation's engine profile). gpuplan's own plans use the one memory headroom
#: knob of training and serving, `memory.usable_fraction` (workloads.memory_headroom; default 0.9 too).
VLLM_GPU_MEMORY_UTILIZATION = 0.90
#: TensorRT-LLM `KvCacheConfig.free_gpu_memory_fraction` default 0.9 (TensorRT-LLM docs,
#: "Useful runtime options"; trtllm-bench throughput runs in perf-overview.md used 0.95).
TRTLLM_FREE_GPU_MEMORY_FRACTION = knobs.register(
    "serving.memory.trtllm_free_gpu_memory_fraction", unit="fraction", default=0.90, low=0.05, high=1.0,
    source="TensorRT-LLM KvCacheConfig.free_gpu_memory_fraction default 0.9 (TensorRT-LLM docs, 'Useful runtime options')",
    scales="KV-cache budget under KvBudgetRule.FREE (TensorRT-LLM-like engines) when no fraction is given")
#: Memory outside the allocator: CUDA context and kernels (~0.5 GiB on Hopper), cuBLAS workspaces and
#: allocator slack. 1 GiB: estimate in line with vLLM's measured "non-torch memory" (~0.5-1 GiB per
#: GPU in its startup log) and below aiconfigurator's catch-all `other_mem: 3.5 GB`.
RUNTIME_RESERVE_BYTES = knobs.register(
    "serving.memory.runtime_reserve_bytes", unit="bytes", default=1 * 2**30, low=0.0, high=16 * 2**30,
    source="estimate: vLLM's measured non-torch memory ~0.5-1 GiB per GPU; below aiconfigurator's other_mem 3.5 GB",
    scales="per-GPU serving memory outside the allocator (CUDA context, cuBLAS workspaces, slack)")
#: vLLM paged-attention block size default, tokens per block (vLLM CacheConfig block_size=16).
VLLM_BLOCK_SIZE = 16
#: TensorRT-LLM KV-cache `tokens_per_block` default 64 (TensorRT-LLM KV cache management docs).
TRTLLM_BLOCK_SIZE = 64
#: Token budget of one engine step (vLLM V1 max_num_batched_tokens default 8192 for online serving;
#: TensorRT-LLM max_num_tokens default 8192): sizes the activation workspace.
DEFAULT_MAX_BATCH_TOKENS = 8192
#: Sequence cap of one step (vLLM max_num_seqs default 256; TensorRT-LLM max_batch_size 2048).
DEFAULT_MAX_BATCH_SEQS = 256


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory of one replica (bytes), and what fits. Breakdown sums to `total_bytes`."""

    total_bytes: int
    weights_bytes: float
    activation_workspace_bytes: float
    runtime_reserve_bytes: float
    unused_bytes: float  # kept free by the memory-fraction rule
    kv_budget_bytes: float
    kv_cache_bytes_per_token: float  # whole model, one replica (sum over all layers and KV heads)
    kv_bytes_per_token_per_gpu: float  # what one GPU stores per token of context (global layers)
    window_kv_bytes_per_token_per_gpu: float  # the part held by sliding-window layers (capped at window)
    window: int  # tokens kept by sliding-window layers (0 = none)
    block_size: int
    kv_capacity_blocks: int
    state_bytes_per_sequence_per_gpu: float = 0.0  # recurrent layers' constant state of one sequence (hybrids)

    @property
    def window_blocks_cap(self) -> int:
        """Blocks a sliding-window layer holds at most: ceil(w / b) + 1 (the window straddles a
        block); no window: a cap no sequence reaches."""
        return (math.ceil(self.window / self.block_size) + 1) if self.window else 1 << 40

    def sequence_kv_bytes(self, context: float) -> float:
        """Per-GPU KV bytes one sequence of `context` tokens holds in paged blocks: global layers
        ceil(L/b) blocks, window layers at most `window_blocks_cap` (kernels.paged_kv_bytes, the
        simulator's; ceil(ceil(L) / b) = ceil(L / b)), plus a hybrid's recurrent state."""
        kv = paged_kv_bytes(math.ceil(context), self.block_size, float(self.kv_bytes_per_token_per_gpu),
                            float(self.window_kv_bytes_per_token_per_gpu), self.window_blocks_cap)
        return float(kv) + self.state_bytes_per_sequence_per_gpu

    @property
    def kv_capacity_bytes(self) -> float:
        return self.kv_capacity_blocks * self.block_size * (self.kv_bytes_per_token_per_gpu + self.window_kv_bytes_per_token_per_gpu)

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache that fit if every layer were global (the figure engines log)."""
        return self.kv_capacity_blocks * self.block_size

    def max_concurrent_sequences(self, context: float) -> int:
        """How many sequences of `context` tokens fit at once (paged blocks, fragmentation included)."""
        per = self.sequence_kv_bytes(max(1.0, context))
        return int(self.kv_budget_bytes // per) if per > 0 else 0

    def max_context(self, batch: int = 1) -> int:
        """The longest context each of `batch` sequences can hold at once (tokens)."""
        per_seq = self.kv_budget_bytes / max(1, batch)
        lo, hi = 0, 1 << 26
        while lo < hi:  # bisection on the monotone sequence_kv_bytes
            mid = (lo + hi + 1) // 2
            if self.sequence_kv_bytes(mid) <= per_seq:
                lo = mid
            else:
                hi = mid - 1
        return lo


def activation_workspace_bytes(dep: Deployment, max_batch_tokens: int, max_batch_seqs: int) -> float:
    """Peak transient activations of one step (the profile run vLLM does at start-up):
    tokens x (QKV out + gate/up out + activation out + 4 hidden-size buffers) x 2 B
    + sampled sequences x vocab/attention_tp x 4 B (fp32 logits); per attention group (attention_tp GPUs)."""
    m = dep.model
    f = (m.moe.expert_ffn * m.moe.top_k if m.moe is not None else m.ffn) / dep.tp
    qkv = (m.heads + 2 * m.kv_heads) * m.head_dim / dep.attention_tp
    per_token = (qkv + 3 * f + 4 * m.hidden) * 2.0
    return max_batch_tokens * per_token + max_batch_seqs * m.vocab / dep.attention_tp * 4.0


def kv_layout_key(dep: Deployment) -> tuple:
    """Every field of `dep` that `compute_kv_layout` reads, directly or through its properties
    (attention_tp, kv_shard_fraction, stage_layers): the cache key of `kv_layout`."""
    return (dep.model, dep.tp, dep.pp, dep.attention_dp, dep.kv_dtype, dep.activation_dtype)


def kv_layout(dep: Deployment) -> tuple[KvSplit, tuple[tuple[float, float, float], ...]]:
    """`compute_kv_layout`, remembered per `kv_layout_key`: a pure function of it that reads no knob
    (tests check both)."""
    return _KV_LAYOUT(dep)


def compute_kv_layout(dep: Deployment) -> tuple[KvSplit, tuple[tuple[float, float, float], ...]]:
    """The whole model's KV split per token, and per pipeline stage what one GPU holds (module
    docstring): (global-layer KV bytes per token, sliding-window-layer KV bytes per token, recurrent
    state bytes per sequence)."""
    m = dep.model
    kv = kv_bytes_per_token_split(m, bytes_per_element(dep.kv_dtype))  # attention layers: global and windowed apart
    kv_bpe = bytes_per_element(dep.kv_dtype)
    # recurrent state in the model dtype (vLLM CacheConfig mamba_cache_dtype "auto"): 16-bit unless fp32; TP splits
    # its heads (vLLM mamba2_state_shape: heads / tp; the groups it replicates when tp > n_groups are left out)
    state_bpe = max(2.0, bytes_per_element(dep.activation_dtype))
    layer_ops = model_ops(m).layers
    stages = []
    for layers in dep.stage_layers:
        # this stage's layers: KV of its attention layers (global and windowed), state of its recurrent layers
        global_pg = window_pg = state_pg = 0.0
        for i in layers:
            lo = layer_ops[i]
            core = lo.attention_core
            if core is not None:
                per = core.kv_cache_elements * kv_bpe * dep.kv_shard_fraction
                if core.window is None:
                    global_pg += per
                else:
                    window_pg += per
            for rc in lo.recurrent_cores:
                state_pg += (rc.conv_state_elements + rc.recurrent_state_elements) * state_bpe / dep.attention_tp
        stages.append((global_pg, window_pg, state_pg))
    return kv, tuple(stages)


_KV_LAYOUT: LayoutCache[tuple[KvSplit, tuple[tuple[float, float, float], ...]]] = LayoutCache(kv_layout_key, compute_kv_layout)


def memory_plan(dep: Deployment, *, rule: KvBudgetRule = KvBudgetRule.TOTAL, memory_fraction: float | None = None,
                block_size: int = VLLM_BLOCK_SIZE, max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
                max_batch_seqs: int = DEFAULT_MAX_BATCH_SEQS) -> MemoryPlan:
    """Per-GPU memory plan (module docstring). Raises Infeasible when the weights do not fit."""
    m = dep.model
    total = dep.gpu.memory_bytes
    if memory_fraction is None:
        memory_fraction = (usable_fraction() if rule == KvBudgetRule.TOTAL
                           else knobs.value("serving.memory.trtllm_free_gpu_memory_fraction"))
    workspace = activation_workspace_bytes(dep, max_batch_tokens, max_batch_seqs)
    reserve = (knobs.value("serving.memory.runtime_reserve_bytes")
               + (float(nccl_buffer_bytes(1, ring_channels(dep.system, dep.gpu))) if dep.num_gpus > 1 else 0.0))
    kv, stage_kv = kv_layout(dep)
    plans = []
    for stage, (global_pg, window_pg, state_pg) in zip(stage_weights(dep), stage_kv):
        weights = stage.total_bytes
        if rule == KvBudgetRule.TOTAL:
            budget = total * memory_fraction - weights - workspace - reserve
        else:
            budget = (total - weights - workspace - reserve) * memory_fraction
        if budget <= 0:
            raise Infeasible(
                f"{m.name} does not fit: {weights_bytes_per_gpu(dep) / 2**30:.1f} GiB of weights per GPU + "
                f"{(workspace + reserve) / 2**30:.1f} GiB workspace/reserve exceed {memory_fraction:.0%} of "
                f"{total / 2**30:.1f} GiB on {dep.gpu.id} (tp={dep.tp}, pp={dep.pp})"
            )
        per_block = block_size * (global_pg + window_pg)
        blocks = int(budget // per_block) if per_block > 0 else 0
        plans.append(MemoryPlan(
            total_bytes=total, weights_bytes=weights, activation_workspace_bytes=workspace, runtime_reserve_bytes=reserve,
            unused_bytes=total - weights - workspace - reserve - budget, kv_budget_bytes=budget,
            kv_cache_bytes_per_token=kv.total_bytes_per_token, kv_bytes_per_token_per_gpu=global_pg,
            window_kv_bytes_per_token_per_gpu=window_pg, window=kv.window if window_pg else 0, block_size=block_size,
            kv_capacity_blocks=blocks, state_bytes_per_sequence_per_gpu=state_pg,
        ))
    return min(plans, key=lambda p: p.kv_capacity_blocks)
