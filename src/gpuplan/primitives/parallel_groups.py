"""Collectives of parallel groups: the time of one collective for many (size, group) pairs at once,
memoised, as the training step model and the serving TP / expert all-to-all need them; and the share
of SMs a running collective holds. The collective itself is primitives.collectives."""

from __future__ import annotations


import numpy as np

from gpuplan.errors import InputError
from gpuplan.primitives.collectives import (
    Collective, collective_time, collective_time_array, group_channels, knob_state,
)
from gpuplan.specs import Gpu, System


# ----------------------------------------------------------------------------- parallel groups (training step)
# The training step model needs the time of one collective for many (size, group) pairs at once.
# A parallel group is described by its size `n` and by how many of its members share a node
# (`per_node`). Megatron orders ranks tensor (innermost) -> context -> data -> pipeline, so a group
# of rank stride `stride` has per_node = min(n, max(1, gpus_per_node // stride)) members on each
# node. Concurrent groups with the same stride use disjoint GPUs and NICs (rail-aligned fabrics,
# DGX SuperPOD RA), so one group sees the NICs of its own members only: the collective is
# `collective_time(..., gpus_per_domain=per_node)` (the group's ranks in each scale-up domain, each
# with its own NIC share), evaluated once per unique (size, n, per_node) and memoised.


def group_per_node(n, stride, gpus_per_node: int):
    """Members of a group of size n and rank stride `stride` that share one node (Megatron order):
    min(n, max(1, gpus_per_node // stride)); numpy-broadcasting."""
    n = np.asarray(n)
    return np.minimum(n, np.maximum(1, gpus_per_node // np.asarray(stride)))


#: (op, specs key) -> {(size, n, per_node): seconds}: one table per collective and specs, so a lookup
#: hashes three numbers, not the specs' JSON with them
_GROUP_CACHE: dict[tuple, dict[tuple, float]] = {}
_GROUP_CACHE_LIMIT = 200_000


def _group_table(op: Collective, specs_key: tuple) -> dict[tuple, float]:
    """The memo of `op` under `specs_key` (created empty)."""
    table = _GROUP_CACHE.get((op, specs_key))
    if table is None:
        table = _GROUP_CACHE[(op, specs_key)] = {}
    return table


def _room_for(op: Collective, specs_key: tuple, entries: int) -> dict[tuple, float]:
    """`_group_table`, after emptying every table if `entries` more would take them past
    _GROUP_CACHE_LIMIT entries in all."""
    if sum(map(len, _GROUP_CACHE.values())) + entries > _GROUP_CACHE_LIMIT:
        _GROUP_CACHE.clear()
    return _group_table(op, specs_key)


def collective_seconds(op: Collective, size_bytes: float, n: int, per_node: int, system: System,
                       gpu: Gpu | None = None) -> float:
    """Time of one collective `op` of `size_bytes` (nccl-tests size) on a group of `n` GPUs with
    `per_node` of them on each node of `system`; 0 for a group of one. `gpu` as in
    `collective_time`. Memoised per system and GPU content and the collective knobs in effect
    (`knob_state()`: an override of a collective knob keys new entries; other knobs keep them)."""
    return _cached_group_seconds(op, size_bytes, n, per_node, system, gpu, _specs_key(system, gpu))


_SPEC_JSON: dict[int, tuple[object, str]] = {}


def _content(spec) -> str | None:
    """A spec's content as JSON, computed once per object (specs are frozen; the object is kept so
    its id is not reused)."""
    if spec is None:
        return None
    hit = _SPEC_JSON.get(id(spec))
    if hit is None or hit[0] is not spec:
        if len(_SPEC_JSON) > 4096:
            _SPEC_JSON.clear()
        hit = _SPEC_JSON[id(spec)] = (spec, spec.model_dump_json())
    return hit[1]


def _specs_key(system: System, gpu: Gpu | None) -> tuple:
    """Cache key of the inputs besides the group: system and GPU content, the collective knobs in effect."""
    return _content(system), _content(gpu), knob_state()


def _cached_group_seconds(op: Collective, size_bytes: float, n: int, per_node: int, system: System,
                          gpu: Gpu | None, specs_key: tuple) -> float:
    if n <= 1 or size_bytes <= 0:
        return 0.0
    key = (float(size_bytes), int(n), int(per_node))
    hit = _group_table(op, specs_key).get(key)
    if hit is None:
        hit = _room_for(op, specs_key, 1)[key] = _group_collective_seconds(op, size_bytes, n, per_node, system, gpu)
    return hit


def _group_collective_seconds(op: Collective, size_bytes: float, n: int, per_node: int, system: System,
                              gpu: Gpu | None) -> float:
    """P2P: a 2-GPU send_recv, across the network when the two stages are on different nodes
    (per_node 1), else packed in the domain; other ops: `n` ranks, `per_node` of them per domain.

    A system without NICs (a PCIe box) has no layout for a group that leaves its domain: such groups
    belong to plans with more GPUs than the system holds, which the search's validity rules drop
    (`plan_validity`); they are costed as a group inside one domain, never refused mid-search."""
    nicless = system.scaleout_gbps_per_gpu <= 0
    if op is Collective.SEND_RECV:
        per_domain = 1 if per_node == 1 and not nicless else None
        return float(collective_time(op, size_bytes, system, 2, gpu=gpu, gpus_per_domain=per_domain).time_s)
    if nicless and (int(n) > system.scaleup_domain_gpus or int(per_node) < int(n)):
        n = per_node = min(int(n), system.scaleup_domain_gpus)
    per_domain = min(int(per_node), system.scaleup_domain_gpus)
    return float(collective_time(op, size_bytes, system, int(n), gpu=gpu, gpus_per_domain=per_domain).time_s)


def collective_seconds_array(op: Collective, size_bytes, n, per_node, system: System,
                             gpu: Gpu | None = None) -> np.ndarray:
    """`collective_seconds` over broadcast numpy arrays: one value per unique (size, n, per_node), in
    lexicographic order of the triples (`_unique_triples`), memoised like `collective_seconds`; the
    unique groups not yet in the memo are timed in one vectorised call (`_group_seconds_batch`),
    which gives the scalar path's values bit for bit."""
    size_b, n_b, pn_b = (np.asarray(size_bytes, dtype=np.float64), np.asarray(n, dtype=np.int64),
                         np.asarray(per_node, dtype=np.int64))
    shape = np.broadcast_shapes(size_b.shape, n_b.shape, pn_b.shape)
    if 0 in shape:
        return np.zeros(shape)
    sizes, groups, members, inverse = _unique_triples(*(_flat(x, shape) for x in (size_b, n_b, pn_b)))
    specs_key = _specs_key(system, gpu)
    triples = list(zip(sizes.tolist(), groups.tolist(), members.tolist()))
    times = list(map(_group_table(op, specs_key).get, triples))  # None: not memoised yet
    missing = [i for i, t in enumerate(times) if t is None]
    if missing:
        timed = [i for i in missing if not (triples[i][1] <= 1 or triples[i][0] <= 0)]  # the others take 0 s
        computed = []
        if timed:
            rows = np.array(timed)
            computed = _group_seconds_batch(op, sizes[rows], groups[rows].astype(np.float64),
                                            members[rows].astype(np.float64), system, gpu).tolist()
        table = _room_for(op, specs_key, len(missing))
        for i in missing:
            times[i] = table[triples[i]] = 0.0
        for i, t in zip(timed, computed):
            times[i] = table[triples[i]] = t
    return np.array(times, dtype=np.float64)[inverse].reshape(shape)


def _flat(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`x` broadcast to `shape`, as a new contiguous 1-D array (np.broadcast_to(...).ravel()'s values)."""
    out = np.empty(shape, dtype=x.dtype)
    np.copyto(out, x)
    return out.ravel()


def _unique_triples(size, n, per_node):
    """The distinct (size, n, per_node) of three flat arrays in lexicographic order, and each
    element's index among them (np.unique(axis=0)'s answer): one stable lexicographic sort of the
    elements (np.lexsort), a new triple wherever a sorted element differs from the one before it,
    and each element's rank scattered back through the sort (one sort instead of np.unique's three:
    the arrays of a plan search are ~10^2 elements, where each sort call costs more than its work)."""
    order = np.lexsort((per_node, n, size))
    s, g, p = size[order], n[order], per_node[order]
    new = np.empty(order.size, dtype=bool)
    new[:1] = True
    new[1:] = (s[1:] != s[:-1]) | (g[1:] != g[:-1]) | (p[1:] != p[:-1])
    inverse = np.empty(order.size, dtype=np.intp)
    inverse[order] = np.add.accumulate(new.astype(np.intp)) - 1  # np.cumsum(new) - 1, without its bool cast
    return s[new], g[new], p[new], inverse


def _group_seconds_batch(op: Collective, size, n, per_node, system: System, gpu: Gpu | None) -> np.ndarray:
    """`_group_collective_seconds` of many groups (float arrays, every n > 1 and size > 0) in one
    `collective_time_array` call: the same layout rules, the same formulas on arrays. Where that
    call would refuse the batch (an `InputError`), or a value is not finite, or the system is a TPU
    torus (timed one slice at a time anyway), each group goes through the scalar path instead, so
    values and errors are exactly the scalar path's."""
    def scalar(idx):
        return [_group_collective_seconds(op, float(size[i]), int(n[i]), int(per_node[i]), system, gpu) for i in idx]

    if system.ici_torus_axes is not None:
        return np.array(scalar(range(len(size))), dtype=np.float64)
    domain = system.scaleup_domain_gpus
    nicless = system.scaleout_gbps_per_gpu <= 0
    if op is Collective.SEND_RECV:
        n_eff = np.full_like(n, 2.0)
        per_domain = np.where((per_node == 1) & (not nicless), 1.0, min(2, domain))
    else:
        n_eff, pn_eff = n, per_node
        if nicless:
            squeeze = (n > domain) | (pn_eff < n)
            n_eff = np.where(squeeze, np.minimum(n, domain), n)
            pn_eff = np.where(squeeze, np.minimum(n, domain), pn_eff)
        per_domain = np.minimum(pn_eff, domain)
    if np.any(n_eff < 2):
        return np.array(scalar(range(len(size))), dtype=np.float64)
    try:
        out = np.asarray(collective_time_array(op, size, system, n_eff, gpu=gpu, gpus_per_domain=per_domain),
                         dtype=np.float64)
    except InputError:
        return np.array(scalar(range(len(size))), dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        out[bad] = scalar(bad)
    return out


def collective_sm_fraction(n, per_node, system: System, gpu: Gpu) -> np.ndarray:
    """Fraction of the GPU's SMs a running collective of this group occupies: NCCL runs one
    thread block per channel (`nccl_channels`), so compute overlapped with it runs on the other
    SMs: channels / SM count (0 for a group of one)."""
    n_b, pn_b = np.broadcast_arrays(np.asarray(n, dtype=np.float64), np.asarray(per_node, dtype=np.float64))
    channels = group_channels(system, gpu, pn_b, np.maximum(1.0, n_b / np.maximum(pn_b, 1.0)))
    sms = float(gpu.sm_count_or_default)
    return np.where(n_b > 1, np.minimum(1.0, channels / sms), 0.0)


__all__ = ["collective_seconds", "collective_seconds_array", "collective_sm_fraction", "group_per_node"]
