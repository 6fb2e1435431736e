"""Collective times for the training step model, over numpy arrays of message sizes and groups.

The step model needs the time of one collective for many (size, group) pairs at once. This module
turns those arrays into calls of the primitives layer's collective model
(`gpuplan.primitives.collectives.collective_time`), one call per *unique* (size, group layout)
pair, so a plan search over a million plans makes only a few hundred calls.

A parallel group is described by its size `n` and by how many of its members share a node
(`per_node`). Megatron orders ranks tensor (innermost) -> context -> data -> pipeline, so a group
of stride `stride` has per_node = min(n, max(1, gpus_per_node // stride)) members on each node.
Concurrent groups with the same stride use disjoint GPUs and NICs (rail-aligned fabrics, DGX
SuperPOD RA), so one group sees the NICs of its own members only: the collective is evaluated on
a *group-slice* system with `per_node` GPUs and `per_node x NICs-per-GPU` NICs per node.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from gpuplan.primitives.collectives import collective_time, knob_state
from gpuplan.specs import System


class Collective(str, Enum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    P2P = "p2p"


def group_per_node(n, stride, gpus_per_node: int):
    """Members of a group of size n and rank stride `stride` that share one node (Megatron order)."""
    n = np.asarray(n)
    return np.minimum(n, np.maximum(1, gpus_per_node // np.asarray(stride)))


def _slice_system(system: System, per_node: int) -> System:
    """The slice of each node a group uses: `per_node` GPUs and their share of the NICs."""
    if per_node >= system.gpus_per_node:
        return system
    nics = system.nics_per_node * per_node / system.gpus_per_node
    update = {"gpus_per_node": per_node, "scaleup_domain_gpus": min(system.scaleup_domain_gpus, per_node)}
    if system.nics_per_node:
        if nics >= 1 and float(nics).is_integer():
            update["nics_per_node"] = int(nics)
        else:  # fewer NICs than GPUs per node: keep one NIC at its share of the line rate
            update["nics_per_node"] = 1
            update["nic_gbit_s"] = (system.nic_gbit_s or 0) * nics
    return system.model_copy(update=update)


_CACHE: dict[tuple, float] = {}
_CACHE_LIMIT = 200_000


def collective_seconds(op: Collective, size_bytes: float, n: int, per_node: int, system: System) -> float:
    """Time of one collective `op` of `size_bytes` (nccl-tests size) on a group of `n` GPUs with
    `per_node` of them on each node of `system`; 0 for a group of one. Memoised per system content
    and per overridden collective knob (`collectives.knob_state()`)."""
    if n <= 1 or size_bytes <= 0:
        return 0.0
    key = (op, float(size_bytes), int(n), int(per_node), system.model_dump_json(), knob_state())
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) > _CACHE_LIMIT:
            _CACHE.clear()
        hit = _CACHE[key] = _collective_seconds(op, size_bytes, n, per_node, system)
    return hit


def _collective_seconds(op: Collective, size_bytes: float, n: int, per_node: int, system: System) -> float:
    if op is Collective.P2P:
        # point-to-point between two stages: a 2-GPU group on the link the stages share
        pair_sliced = _slice_system(system, 1) if per_node == 1 else system
        return float(collective_time("p2p", size_bytes, pair_sliced, 2).time_s)
    return float(collective_time(op.value, size_bytes, _slice_system(system, per_node), int(n)).time_s)


def collective_seconds_array(op: Collective, size_bytes, n, per_node, system: System) -> np.ndarray:
    """`collective_seconds` over broadcast numpy arrays: one call per unique (size, n, per_node)."""
    size_b, n_b, pn_b = np.broadcast_arrays(
        np.asarray(size_bytes, dtype=np.float64), np.asarray(n, dtype=np.int64), np.asarray(per_node, dtype=np.int64)
    )
    flat = np.stack([size_b.ravel(), n_b.ravel().astype(np.float64), pn_b.ravel().astype(np.float64)], axis=1)
    if flat.shape[0] == 0:
        return np.zeros(size_b.shape)
    uniq, inverse = np.unique(flat, axis=0, return_inverse=True)
    times = np.array([collective_seconds(op, float(s), int(g), int(p), system) for s, g, p in uniq])
    return times[inverse.ravel()].reshape(size_b.shape)


def collective_sm_fraction(n, per_node, system: System, gpu) -> np.ndarray:
    """Fraction of the GPU's SMs a running collective of this group occupies: NCCL runs one
    thread block per channel (`primitives.collectives.nccl_channels`), so compute overlapped with
    it runs on the other SMs: channels / SM count (0 for a group of one)."""
    from gpuplan.primitives.collectives import group_channels

    n_b, pn_b = np.broadcast_arrays(np.asarray(n, dtype=np.float64), np.asarray(per_node, dtype=np.float64))
    channels = group_channels(system, gpu, pn_b, np.maximum(1.0, n_b / np.maximum(pn_b, 1.0)))
    sms = float(gpu.sm_count or 132)
    return np.where(n_b > 1, np.minimum(1.0, channels / sms), 0.0)


__all__ = ["Collective", "collective_seconds", "collective_sm_fraction", "collective_seconds_array", "group_per_node"]
