"""Context parallelism (CP): the attention work each rank does and the time its K/V exchange
exposes, per implementation (`specs.execution.ContextParallelMethod`, a property of the framework).

The sequence of s tokens is split over cp ranks; each rank keeps its queries and must see the keys
and values of every earlier token. Both stacks modelled here cut the sequence into 2 cp chunks and
give rank r the chunks r and 2cp-1-r (causal load balance: TransformerEngine's p2p ring;
PyTorch's round-robin `_cp_options.enable_load_balance=True`, its default), so every rank computes
the same s^2 / (2 cp) (query, key) pairs: `causal_pairs_per_rank`, `causal_imbalance`. Without the
balance, contiguous chunks leave the last rank (2cp - 1) / cp times the mean.

Per layer, micro-batch and attention pass (forward, a recompute forward, backward), with t = s / cp
tokens on the rank, w the K (= V) width the kernel reads on this rank, a_f / a_b the attention
core's forward / backward seconds (already per rank and load balanced):

**P2P_RING** (Megatron-core, TransformerEngine `cp_comm_type="p2p"`, `attn_forward_func_with_cp`):
cp - 1 hops of the rank's K,V block (t x 2 w x 2 B) forward, each overlapped with the attention of
the block held; backward sends K,V and dK,dV (2 x the bytes). Exposed: the excess of the ring over
the attention it hides behind: max(0, (cp-1) hop - a_f) + max(0, 2 (cp-1) hop - a_b).

**TORCH_ALLGATHER** (torchtitan: `torch.distributed.tensor.experimental._attention`,
`_templated_ring_attention` and `_templated_ring_attention_backward`):
- K,V are all-gathered once per pass (`_AllGatherRotater`: issued at ring step 0, waited at step
  1), so only the first (diagonal) step's attention, 1 / cp of the pass, hides it:
  max(0, AG(cp x t x 2 w x 2 B) - a / cp) forward and again in backward (the K,V rotater).
  torchtitan's Llama expands GQA heads (`repeat_kv`) before SDPA: w = q width / tp.
- Backward passes dK, dV around the ring in fp32 (`dkv_rotater` is `_RotateMethod.ALL_TO_ALL`,
  `accum_dtype` float32): cp transfers of t x 2 w x 4 B; each of the first cp - 1 overlaps the next
  step's attention (a_b / cp); the last is waited after the loop (exposed).
- Each ring step runs eager, memory-bound work on the compute stream: the `torch.cat` of K,V for the
  rotater, the fp32 merge of the step's output with the running output and log-sum-exp
  (`_SDPAMerger`, `convert_to_f32=True`), the fp32 dQ/dK/dV accumulation and the fp32 `torch.cat`
  of dK,dV (`_partial_update` re-concatenates a full tensor on half the steps):
  TORCH_CP_FWD_STEP_BYTES / TORCH_CP_BWD_STEP_BYTES per element of the rank's q-sized tensor
  (t x q / tp), per step after the first, at achievable HBM bandwidth.
- `training.torch_cp_attention_slowdown` (fitted): the ring steps after the first, (cp - 1) / cp of
  the rank's attention, each a separate SDPA call on a (t, t / 2) or (t / 2, t) block of the
  load-balanced chunks, run this many times slower than the model's FlashAttention rate. torchtitan
  limits SDPA to the flash and memory-efficient backends under CP (`get_train_context`:
  `sdpa_kernel([FLASH_ATTENTION, EFFICIENT_ATTENTION])`, "TODO: support cuDNN backend"), i.e.
  PyTorch's FlashAttention-2, the kernel the Hopper training ceiling already assumes, so no sourced
  figure explains the gap: 1 is the physics prior (`Knob.prior`), and the default 1.49 is the value
  fitted on the torchtitan rows: what the counted terms leave (the off-diagonal steps at two thirds
  of the rate). `--cv family` starts from the prior, so the left-out torchtitan family is predicted
  with 1, not with a value fitted on it.
"""

from __future__ import annotations

import numpy as np

from gpuplan import knobs
from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.parallel_groups import collective_seconds_array, group_per_node
from gpuplan.specs import Gpu, System
from gpuplan.specs.execution import ContextParallelMethod, Framework
from gpuplan.workloads.training.plan_codes import RecomputeCode
from gpuplan.workloads.training.step.compute import LayerCompute, StageCompute
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

#: Bytes per element (of the rank's q-sized tensor t x q / tp; K and V are that size after
#: torchtitan's `repeat_kv`) that one forward ring step after the first moves through HBM in
#: `_templated_ring_attention` (torch/distributed/tensor/experimental/_attention.py), bf16 = 2 B,
#: fp32 = 4 B, read + write:
#: - `torch.cat([key.flatten(), value.flatten()])` for the rotater: K and V read 2 + written 2: 8;
#: - `_SDPAMerger.step`: block output `.to(float32)` 2 + 4 = 6, then `out - block_out` 4 + 4 + 4,
#:   `sigmoid(lse diff) * (...)` 4 + 4, `out - (...)` 4 + 4 + 4: 32 (the lse terms are per head and
#:   token, negligible): 38 on a full step;
#: - load balance: half the steps (i > rank) update only the second half of the queries (19) and
#:   re-concatenate the full fp32 output (`_partial_update` -> `torch.cat`: 4 + 4 = 8): 27.
#: Mean over steps: 8 + (38 + 27) / 2 = 40.5.
TORCH_CP_FWD_STEP_BYTES = 8.0 + (38.0 + (19.0 + 8.0)) / 2.0
#: Backward ring step after the first (`_templated_ring_attention_backward`), same units:
#: - K,V `torch.cat` for the rotater: 8;
#: - dQ (fp32) += step dQ (bf16): 4 + 2 + 4 = 10 on full steps; on partial steps (i > rank) half
#:   added (5) and the full fp32 tensor re-concatenated (8): 13; mean 11.5;
#: - dK and dV likewise (i <= rank: first-half `_partial_update`): mean 2 x 11.5 = 23;
#: - `torch.cat([grad_key.flatten(), grad_value.flatten()])` in fp32 for the dK,dV ring: 2 x (4 + 4) = 16.
#: Total 8 + 11.5 + 23 + 16 = 58.5.
TORCH_CP_BWD_STEP_BYTES = 8.0 + 11.5 + 23.0 + 16.0
#: Once per backward pass: fp32 zeros for dQ, dK, dV (3 x 4) and their casts back to bf16
#: (3 x (4 + 2)): 30 B per element.
TORCH_CP_BWD_PASS_BYTES = 3.0 * 4.0 + 3.0 * (4.0 + 2.0)

TORCH_CP_ATTENTION_SLOWDOWN = knobs.register(
    "training.torch_cp_attention_slowdown", unit="ratio", default=1.49, low=1.0, high=3.0, prior=1.0,
    source="fitted: what the counted all-gather, fp32 merge and dK/dV ring terms leave of torchtitan's "
           "FSDP+CP rows (benchmarks/llama3_h100_202412_torchtitan.md Tables 2 and 6); 1 = a ring step's "
           "SDPA runs at the one-call FlashAttention rate",
    scales="attention-core time of PyTorch context_parallel ring steps (torchtitan, cp > 1)",
    fitted_on=("ttbench",))


def causal_pairs_per_rank(seq_len, cp, load_balance: bool = True):
    """(query, key) pairs of a causal sequence of `seq_len` tokens that the busiest of `cp` ranks
    computes (diagonal included: s (s + 1) / 2 in all). Load balanced (2 cp chunks, rank r holding
    r and 2cp-1-r): every rank the same share, s (s + 1) / (2 cp). Contiguous chunks of c = s / cp:
    the last rank attends to all earlier chunks, (cp - 1) c^2 + c (c + 1) / 2 pairs."""
    s, cp = np.asarray(seq_len, dtype=np.float64), np.asarray(cp, dtype=np.float64)
    if load_balance:
        return s * (s + 1.0) / (2.0 * cp)
    c = s / cp
    return (cp - 1.0) * c * c + c * (c + 1.0) / 2.0


def causal_imbalance(cp, load_balance: bool = True):
    """Busiest rank's causal attention pairs over the mean (large s): 1 balanced, (2 cp - 1) / cp not."""
    cp = np.asarray(cp, dtype=np.float64)
    return np.ones_like(cp) if load_balance else (2.0 * cp - 1.0) / cp


def kv_width(framework: Framework, q_dim: int, kv_dim: int) -> int:
    """Width (elements per token, all heads) of the K (= V) tensor the CP exchange moves: torchtitan's
    Llama runs `repeat_kv` (GQA heads expanded to the query heads) before SDPA, so PyTorch's ring
    moves q-width K,V; TransformerEngine's ring moves the kv heads."""
    if framework.context_parallel_method is ContextParallelMethod.TORCH_ALLGATHER:
        return max(q_dim, kv_dim)
    return kv_dim


def kv_block_bytes(t, width, tp, dtype_bytes: float = 2.0):
    """Bytes of one rank's K and V block (or dK and dV): t tokens x 2 x width / tp x dtype bytes."""
    return np.asarray(t, dtype=np.float64) * 2.0 * width / tp * dtype_bytes


def torch_allgather_kv_bytes(t, width, tp, cp, dtype_bytes: float = 2.0):
    """Bytes of the all-gathered K,V per pass and layer (nccl-tests size: the whole output on each
    rank): cp blocks of `kv_block_bytes`."""
    return np.asarray(cp, dtype=np.float64) * kv_block_bytes(t, width, tp, dtype_bytes)


def attention_passes(rc, full_code: int, selective_code: int, selective_fraction: float):
    """Forward passes of the attention core per micro-batch: 1, + 1 under full recompute, +
    `selective_fraction` under selective recompute (Megatron's selective recompute re-runs the core
    attention: 1; torchtitan's layer SAC re-runs every 2nd block)."""
    return 1.0 + np.where(rc == full_code, 1.0, np.where(rc == selective_code, selective_fraction, 0.0))


def cp_exposed_seconds(framework: Framework, system: System, gpu: Gpu, *, t, tp, cp, q_dim: int, kv_dim: int,
                       attn_fwd, attn_bwd, fwd_passes, layers, hbm_bytes_s: float):
    """Exposed context-parallel time per micro-batch on the busiest pipeline stage (seconds): the
    method's communication not hidden behind attention plus its ring-step eager work (module
    docstring), over `layers` layers, `fwd_passes` forward passes of the attention. `attn_fwd` /
    `attn_bwd` are one layer's attention-core seconds on this rank (load balanced); `t` the tokens per
    micro-batch on the rank. Zero where cp = 1 (without timing any exchange where every cp is 1)."""
    cp = np.asarray(cp, dtype=np.float64)
    if not np.any(cp > 1):  # the np.where below would pick 0.0 everywhere: its zeros, in its shape
        return np.zeros(np.broadcast_shapes(*(np.shape(x) for x in (cp, t, tp, attn_fwd, attn_bwd, fwd_passes, layers))))
    cp_pn = group_per_node(cp, tp, system.gpus_per_node)
    cp_int = np.where(cp > 1, cp, 2).astype(np.int64)
    if framework.context_parallel_method is ContextParallelMethod.P2P_RING:
        hop = collective_seconds_array(Collective.P2P, kv_block_bytes(t, kv_dim, tp), np.where(cp > 1, 2, 1), np.where(cp_pn > 1, 2, 1),
                                       system, gpu=gpu)
        ring_fwd = (cp - 1.0) * hop
        per_layer = fwd_passes * np.maximum(0.0, ring_fwd - attn_fwd) + np.maximum(0.0, 2.0 * ring_fwd - attn_bwd)
        return np.where(cp > 1, layers * per_layer, 0.0)
    width = kv_width(framework, q_dim, kv_dim)
    # plans without CP (cp = 1) gather nothing: a zero size costs 0 s without laying out the stand-in
    # 2-rank group (which, one rank per node, would need NICs the system may lack)
    gather_bytes = np.where(cp > 1, torch_allgather_kv_bytes(t, width, tp, cp), 0.0)
    gather = collective_seconds_array(Collective.ALL_GATHER, gather_bytes, cp_int, cp_pn, system, gpu=gpu)
    dkv_hop = collective_seconds_array(Collective.P2P, kv_block_bytes(t, width, tp, 4.0), np.where(cp > 1, 2, 1),
                                       np.where(cp_pn > 1, 2, 1), system, gpu=gpu)
    slow = knobs.value("training.torch_cp_attention_slowdown") - 1.0
    fwd_exposed = np.maximum(0.0, gather - attn_fwd / cp)
    bwd_exposed = (np.maximum(0.0, gather - attn_bwd / cp) + (cp - 1.0) * np.maximum(0.0, dkv_hop - attn_bwd / cp)
                   + dkv_hop)
    q_elements = t * float(q_dim) / tp
    steps = cp - 1.0
    eager = q_elements * (fwd_passes * steps * TORCH_CP_FWD_STEP_BYTES
                          + steps * TORCH_CP_BWD_STEP_BYTES + TORCH_CP_BWD_PASS_BYTES) / hbm_bytes_s
    off_diagonal = steps / cp  # the ring steps after the first hold (cp - 1) / cp of the rank's attention
    per_layer = fwd_passes * fwd_exposed + bwd_exposed + eager + slow * off_diagonal * (fwd_passes * attn_fwd + attn_bwd)
    return np.where(cp > 1, layers * per_layer, 0.0)


__all__ = [
    "TORCH_CP_BWD_PASS_BYTES", "TORCH_CP_BWD_STEP_BYTES", "TORCH_CP_FWD_STEP_BYTES", "attention_passes",
    "causal_imbalance", "causal_pairs_per_rank", "cp_exposed_seconds", "kv_block_bytes", "kv_width",
    "torch_allgather_kv_bytes",
]


def cp_comm_seconds(ctx: StepContext, g: PlanAxes, lc: LayerCompute, sc: StageCompute):
    """Exposed context-parallel time per micro-batch: the framework's K/V exchange not hidden behind
    the attention core, and (PyTorch's ring) its per-step eager work; this module
    (`cp_exposed_seconds`) has the formulas per `ContextParallelMethod`."""
    selective = (knobs.value("training.torchtitan_selective_recompute_fraction")
                 if ctx.framework is Framework.TORCHTITAN else 1.0)
    passes = attention_passes(g.rc, RecomputeCode.FULL, RecomputeCode.SELECTIVE, selective)
    return cp_exposed_seconds(ctx.framework, ctx.system, ctx.gpu, t=g.t, tp=g.tp, cp=g.cp, q_dim=ctx.q_dim,
                              kv_dim=ctx.kv_dim, attn_fwd=lc.attn_fwd, attn_bwd=lc.attn_bwd, fwd_passes=passes,
                              layers=sc.layers_per_stage, hbm_bytes_s=ctx.hbm_bytes_s)
