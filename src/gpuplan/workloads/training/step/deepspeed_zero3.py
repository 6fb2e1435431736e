"""DeepSpeed ZeRO-3 as its 2021 releases ran it (v0.3.13, the first ZeRO-3 release, to v0.5.10):
how many parameter all-gathers one micro-batch issues, which of them can hide behind compute, and
how the gradients are reduced. `data.dp_comm_seconds` times them.

What the source does (microsoft/DeepSpeed, deepspeed/runtime/zero/stage3.py and
partition_parameters.py at v0.3.13 .. v0.5.10; the coalesced fetch of `all_gather_coalesced` and
`reduce_scatter_coalesced` arrived only in v0.6.0):

- Every parameter of at least `stage3_param_persistence_threshold` = 1e5 elements (each weight
  matrix; biases and norms persist whole) is gathered on its own: `_all_gather` issues one
  `torch.distributed.all_gather` per parameter (`_allgather_param`), so one call per matrix.
- A submodule's forward and backward pre-hooks (`pre_sub_module_forward_function`,
  `pre_sub_module_backward_function`) call `fetch_sub_module`, which gathers what is not yet
  there and then waits on it with `torch.cuda.synchronize()`; then `prefetch_next_sub_modules`
  gathers the next `stage3_prefetch_bucket_size` = 5e7 elements (at least one parameter) on the
  communication stream while the submodule computes, but only where the parameters already
  available hold fewer than `stage3_max_live_parameters` = 1e9 elements
  (`total_available_parameter_numel < max_available_parameters_in_numel`). Right after a fetch the
  available ones are the current submodule's own, so the gather of matrix j hides behind the
  compute of the matrix before it (forward order; after it, in backward) only where that matrix
  is under 1e9 elements: `prefetched_shares`. The others are fetched after a device-wide
  synchronize: exposed.
- Each `all_gather` passes a list of world-size views of the output (`partitions`) to
  `torch.distributed.all_gather`; PyTorch's ProcessGroupNCCL (`allgather`, PyTorch 1.x) gathers into
  a flat buffer of its own and then copies it out view by view, one `copy_` kernel per rank on the
  NCCL stream (`outputTensors[i][j].copy_(outputFlattened[i][j], true)`): world-size kernels per
  call, each at least a kernel's minimum duration (`COPY_KERNEL_S`): `list_copy_seconds`. Before
  the call `_allgather_param` allocates the full parameter with `torch.zeros` (a fill): with the
  copy-out that is 3 x the gathered bytes of HBM traffic per gather (`GATHER_HBM_BYTES_PER_BYTE`).
- Activation checkpointing re-runs each layer's forward in the backward pass; its pre-forward
  hooks gather the parameters again (a third pass). After the recomputed forward a parameter is
  kept for the backward when the trace reaches its next use within `stage3_max_reuse_distance`
  = 1e9 elements (`_keep_for_later`, `get_reuse_distance_in_numel`): between matrix j's
  recomputed forward and its backward the trace holds every later matrix of the layer twice
  (forward, then backward), so j is kept where 2 x sum(later matrices) < 1e9: `kept_share`.
- Gradients: with the ZeRO-3 default `contiguous_gradients` = False of v0.3.13 .. v0.4.2
  (constants.py ZERO3_OPTIMIZATION_CONTIGUOUS_GRADIENTS_DEFAULT; the runs of Narayanan et al.
  2021, submitted April 2021, could only use these) `reduce_ipg_grads` takes
  `buffered_reduce_fallback` with rank None: `dist.all_reduce` of each `reduce_bucket_size` = 5e8
  element bucket of fp16 gradients (v0.4.3 turned contiguous_gradients on: reduce-scatter).
  The reduction runs on its own stream, but the next submodule's fetch synchronizes the whole
  device (`torch.cuda.synchronize()` in `_synchronize_communication`), so it waits on the
  reduction: exposed.

The matrices are those of the layer inventory (`layers.inventory`, `LayerOps.linears`), each over
tp (Megatron-DeepSpeed shards them before ZeRO sees them).
"""

from __future__ import annotations

import numpy as np

from gpuplan.workloads.training.step.inputs import StepContext

#: stage3_max_live_parameters default (deepspeed/runtime/zero/constants.py, v0.3.13 .. v0.5.10):
#: no prefetch while the parameters available hold this many elements or more.
DEEPSPEED_MAX_LIVE_PARAMETERS = 1e9
#: stage3_max_reuse_distance default (same file): a parameter is not released when its next use
#: comes within this many elements of other parameters.
DEEPSPEED_MAX_REUSE_DISTANCE = 1e9

#: Minimum duration of one small kernel on the GPU (launch + tail), s: aiconfigurator's
#: `mem_empirical_constant_latency: 3 us` (ai-dynamo/aiconfigurator @095f58a, h100_sxm / h200_sxm
#: system YAML; the figure serving's `serving.per_kernel_latency_s` starts from).
COPY_KERNEL_S = 3e-6

#: HBM bytes moved per gathered byte by DeepSpeed <= 0.5 and PyTorch around the NCCL all-gather:
#: `torch.zeros` of the full parameter (write 1) + ProcessGroupNCCL's copy-out of its flat buffer
#: into the views (read 1 + write 1) = 3.
GATHER_HBM_BYTES_PER_BYTE = 3.0


def list_copy_seconds(calls, ranks):
    """GPU time of PyTorch's copy-out of list-based all-gathers: calls x ranks copy kernels of
    COPY_KERNEL_S each (ranks = the all-gather's group; 0 for a group of one)."""
    ranks = np.asarray(ranks, dtype=np.float64)
    return np.asarray(calls, dtype=np.float64) * np.where(ranks > 1, ranks, 0.0) * COPY_KERNEL_S


def _layer_matrices(ctx: StepContext, tp: float) -> list[list[float]]:
    """Each layer kind's weight matrices in forward order, elements one GPU holds (params / tp)."""
    return [[float(lin.params) / tp for lin in lo.linears] for lo in ctx.ops.layers if lo.linears]


def prefetched_shares(matrices: list[float], max_live: float = DEEPSPEED_MAX_LIVE_PARAMETERS) -> tuple[float, float]:
    """(forward, backward) share of a layer's weight elements that DeepSpeed <= 0.5 prefetches
    behind compute: matrix j is prefetched in forward where the matrix before it (cyclically, the
    previous layer's last) holds < max_live elements, in backward where the matrix after it does.
    share = sum(m_j prefetched) / sum(m_j)."""
    total = sum(matrices)
    if total <= 0:
        return 1.0, 1.0
    k = len(matrices)
    fwd = sum(m for j, m in enumerate(matrices) if matrices[j - 1] < max_live)
    bwd = sum(m for j, m in enumerate(matrices) if matrices[(j + 1) % k] < max_live)
    return fwd / total, bwd / total


def kept_share(matrices: list[float], max_reuse: float = DEEPSPEED_MAX_REUSE_DISTANCE) -> float:
    """Share of a layer's weight elements kept from the recomputed forward to the backward (not
    gathered again): matrix j where 2 x sum(m_i, i > j) < max_reuse."""
    total = sum(matrices)
    if total <= 0:
        return 0.0
    return sum(m for j, m in enumerate(matrices) if 2.0 * sum(matrices[j + 1:]) < max_reuse) / total


def gather_passes(ctx: StepContext, tp, full_recompute) -> tuple[np.ndarray, np.ndarray]:
    """(exposed, prefetched) all-gather passes of every local weight per micro-batch, DeepSpeed
    ZeRO-3 <= v0.5. With s_f, s_b the prefetched shares, kept the kept share, r = 1 under full
    recompute (else 0, and kept = 0):

        exposed    = (1 - s_f)(1 + r) + (1 - s_b)(1 - r kept)
        prefetched =       s_f (1 + r) +      s_b (1 - r kept)

    (exposed + prefetched = 2 passes, 3 - kept under full recompute), averaged over the layer kinds."""
    tp_arr = np.asarray(tp, dtype=np.float64)
    r = np.asarray(full_recompute, dtype=np.float64)
    exposed = np.zeros(np.broadcast_shapes(tp_arr.shape, r.shape))
    prefetched = np.zeros_like(exposed)
    for t in np.unique(tp_arr).tolist():
        kinds = _layer_matrices(ctx, t) or [[0.0]]
        s_f, s_b, kept = (float(np.mean(v)) for v in zip(*[(*prefetched_shares(m), kept_share(m)) for m in kinds]))
        on = tp_arr == t
        exp_t = (1.0 - s_f) * (1.0 + r) + (1.0 - s_b) * (1.0 - r * kept)
        pre_t = s_f * (1.0 + r) + s_b * (1.0 - r * kept)
        exposed = np.where(on, exp_t, exposed)
        prefetched = np.where(on, pre_t, prefetched)
    return exposed, prefetched


__all__ = ["COPY_KERNEL_S", "DEEPSPEED_MAX_LIVE_PARAMETERS", "GATHER_HBM_BYTES_PER_BYTE", "DEEPSPEED_MAX_REUSE_DISTANCE", "gather_passes", "kept_share",
           "list_copy_seconds", "prefetched_shares"]
