"""Time of one collective on a TPU slice: bidirectional rings along the axes of an ICI torus, and the
data-centre network (DCN) between slices. Formulas from the JAX scaling book, "Sharded Matrices and
How to Multiply Them" (jax-ml/scaling-book sharding.md @04d8de58), section "How long does this take?":

    AllGather / ReduceScatter along one axis of |X| chips (bidirectional ring, bandwidth bound):
        T = V / W_ICI                         V = bytes of the whole (gathered) array
    over several axes at once:                W_ICI = bidirectional bandwidth of one axis
        T = max(T_min * sum_i |X_i| / 2,  V / (W_ICI * n_axes))
    AllReduce = ReduceScatter + AllGather:  T = 2 V / W_ICI
    AllToAll on a bidirectional ring: 1/4 of the AllGather (footnote: each device sends N^2/4 chunks
    of V / N^2); on a unidirectional ring 1/2 of the unidirectional AllGather.

Symbols as this module uses them, for a slice of shape (d_1, ..., d_k) of a torus with A axes:
- one axis's bidirectional bandwidth W_axis = B / A, where B is the chip's ICI bandwidth per
  direction (`System.scaleup_bandwidth_gbps`, Google's per-chip bidirectional figure / 2): the chip
  has 2 links per axis, each carrying B / (2 A) each way, and a bidirectional ring sends on both
  (TPU v5e: 400 GB/s bidirectional over 4 ports -> B = 200, W_axis = 100 GB/s; the scaling book's
  table has 9e10 for v5e and 1.8e11 for v5p / v6e, the per-link rates it measured or quotes).
- an axis without wrap-around links is a line, not a ring: data crosses it in one direction per
  link pair, "about 2x longer" (scaling book tpus.md, wrap-around paragraph): W_axis / 2.
- exact ring volume: a chip receives (n - 1) / n of V, over the sum of its axes' bandwidths
  (the book's V / (W_ICI n_axes) is the large-n limit), each at the achievable fraction
  `collectives.nvlink_efficiency` of line rate (the one scale-up-link knob; assumed, not measured on
  ICI).
- latency: T_min = 1 us per hop (sharding.md: "typically around 1us"), sum_i d_i / 2 hops on rings,
  d_i - 1 on lines; the time is the larger of the latency and bandwidth terms, as in the book.

Slice shape (`slice_shape`): the most balanced factorisation of the chip count into A axes (4096
chips of a 3-axis torus -> 16 x 16 x 16; 256 of a 2-axis torus -> 16 x 16), as Google's supported
slice shapes are (TPU v5e/v6e docs: 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; v5p: 2x2x1 ... 16x16x24).
Wrap-around (`wraparound`): TPU v5e / v6e have it only on an axis of length 16; v4 / v5p get it
from the optical switches only on whole 4x4x4 cubes (scaling book tpus.md): an axis wraps when its
length is a multiple of `System.ici_wraparound_length`, and on 3-axis tori only when every axis is.

Between slices (multislice, more chips than `scaleup_domain_gpus`): each chip has its share of the
hosts' DCN NICs (`System.scaleout_gbps_per_gpu`, at `collectives.nic_efficiency.<kind>`). An
AllReduce is the book's hierarchical one (training.md, multislice DP): ReduceScatter in the slice,
AllReduce across the k slices of each chip's 1/n_s shard over DCN (2 (k-1)/k of it), AllGather in the
slice; AllGather / ReduceScatter move (k-1)/k of the slice shard over DCN. DCN latency is not
modelled (no source read).

Concurrent groups (a DP group and a TP group of the same step) are each given a slice of their own
size: links two groups share are not split between them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.specs import System

#: per-hop ICI latency, seconds: scaling book sharding.md ("Each hop over an ICI link has some
#: intrinsic overhead regardless of the data volume. This is typically around 1us.")
ICI_HOP_LATENCY_S = 1e-6

#: collectives this module times (the values of primitives.collectives.Collective)
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")


@dataclass(frozen=True)
class TorusCollective:
    """One collective on a TPU slice (or several slices over DCN): time = latency_s + bandwidth_s
    (seconds; latency_s is what the hop latency adds beyond the ICI bandwidth term), the slice shape
    and whether each of its axes wraps around."""

    time_s: float
    latency_s: float
    bandwidth_s: float
    shape: tuple[int, ...]
    wraps: tuple[bool, ...]
    chips_per_slice: int
    slices: int


@lru_cache(maxsize=4096)
def slice_shape(chips: int, axes: int) -> tuple[int, ...]:
    """The most balanced factorisation of `chips` into `axes` factors, ascending (module docstring):
    the one with the smallest largest factor, then the largest smallest one."""
    if chips < 1 or axes not in (2, 3):
        raise InputError(f"num_gpus: a torus slice needs >= 1 chips on 2 or 3 axes, got {chips} on {axes}",
                         field="num_gpus")
    best: tuple[int, ...] | None = None
    for a in range(1, int(round(chips ** (1.0 / axes))) + 2):
        if chips % a:
            continue
        rest = chips // a
        if axes == 2:
            cands = [(a, rest)]
        else:
            cands = [(a, b, rest // b) for b in range(a, int(math.isqrt(rest)) + 1) if rest % b == 0]
        for cand in cands:
            shape = tuple(sorted(cand))
            if shape[0] != a:
                continue
            if best is None or (shape[-1], -shape[0]) < (best[-1], -best[0]):
                best = shape
    if best is None:  # a prime count: a line of chips
        best = (1,) * (axes - 1) + (chips,)
    return best


def wraparound(shape: tuple[int, ...], wrap_length: int) -> tuple[bool, ...]:
    """Whether each axis of a slice is a ring (module docstring): its length a multiple of
    `wrap_length`, and on 3-axis tori every axis so (whole cubes). An axis of 2 chips is a line of
    one link (the chips' other link on that axis leaves the slice)."""
    multiple = [d % wrap_length == 0 for d in shape]
    whole = all(multiple) if len(shape) == 3 else True
    return tuple(m and whole for m in multiple)


def axis_bandwidth_gbps(system: System) -> float:
    """Bidirectional bandwidth of one torus axis of one chip, GB/s: per-direction chip bandwidth / axes."""
    return float(system.scaleup_bandwidth_gbps or 0.0) / float(system.ici_torus_axes or 1)


def _ici_seconds(op: str, size: float, shape: tuple[int, ...], wraps: tuple[bool, ...], w_axis: float):
    """(latency, bandwidth) seconds of `op` on one slice (module docstring)."""
    n = math.prod(shape)
    live = [(d, w) for d, w in zip(shape, wraps) if d > 1]
    if n <= 1 or not live:
        return 0.0, 0.0
    eff = knobs.value("collectives.nvlink_efficiency")
    per_axis = [w_axis * eff * 1e9 * (1.0 if w else 0.5) for d, w in live]
    total_bw = sum(per_axis)
    hops = sum(d / 2.0 if w else d - 1.0 for d, w in live)
    gathered = size * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "broadcast"):
        bw, lat = gathered / total_bw, hops * ICI_HOP_LATENCY_S
    elif op == "all_reduce":
        bw, lat = 2.0 * gathered / total_bw, 2.0 * hops * ICI_HOP_LATENCY_S
    elif op == "all_to_all":
        # 1/4 of the AllGather on a ring, 1/2 on a line (per axis, on its own bandwidth)
        bw = gathered / sum(b * (4.0 if w else 2.0) for b, (d, w) in zip(per_axis, live))
        lat = hops * ICI_HOP_LATENCY_S
    else:  # send_recv: one link, one way, to a neighbour
        bw, lat = size / (w_axis * eff * 1e9 / 2.0), ICI_HOP_LATENCY_S
    return lat, bw


def _dcn_seconds(op: str, size: float, chips_per_slice: int, slices: int, dcn_bytes_s: float) -> float:
    """Bandwidth seconds of the DCN phase between `slices` slices (module docstring)."""
    k = float(slices)
    shard = size / chips_per_slice
    if op == "all_reduce":
        return 2.0 * (k - 1.0) / k * shard / dcn_bytes_s
    if op in ("all_gather", "reduce_scatter", "broadcast"):
        return (k - 1.0) / k * shard / dcn_bytes_s
    if op == "all_to_all":
        n = chips_per_slice * k
        return size * (n - chips_per_slice) / n / n / dcn_bytes_s
    return size / dcn_bytes_s  # send_recv across slices


def torus_collective(op: str, size_bytes: float, system: System, num_gpus: int, nic_efficiency: float) -> TorusCollective:
    """One collective `op` (an OPS value; nccl-tests size convention) on `num_gpus` chips of the torus
    `system`; `nic_efficiency` is the achievable fraction of its DCN NICs' line rate."""
    if op not in OPS:
        raise InputError(f"collective: unknown '{op}'; allowed: {', '.join(OPS)}", field="collective")
    axes = system.ici_torus_axes
    if axes is None or system.ici_wraparound_length is None:
        raise InputError(f"system: {system.id} is not an ICI torus", field="system")
    n = int(num_gpus)
    slice_max = system.scaleup_domain_gpus
    slices = max(1, math.ceil(n / slice_max))
    if slices > 1 and system.scaleout_gbps_per_gpu <= 0:
        raise InputError(f"num_gpus: {n} chips span {slices} slices but {system.id} has no DCN NICs in the catalog;"
                         f" at most {slice_max} chips", field="num_gpus")
    per_slice = math.ceil(n / slices)
    shape = slice_shape(per_slice, axes)
    wraps = wraparound(shape, system.ici_wraparound_length)
    if op == "send_recv":  # two chips: neighbours on one slice, or one on each of two slices
        if slices > 1:
            lat, ici_bw = 0.0, 0.0
        else:
            lat, ici_bw = _ici_seconds(op, size_bytes, shape, wraps, axis_bandwidth_gbps(system))
    else:
        lat, ici_bw = _ici_seconds(op, size_bytes, shape, wraps, axis_bandwidth_gbps(system))
    dcn_bw = 0.0
    if slices > 1:
        dcn = system.scaleout_gbps_per_gpu * nic_efficiency * 1e9
        dcn_bw = _dcn_seconds(op, size_bytes, per_slice, slices, dcn)
    bandwidth = ici_bw + dcn_bw
    time = max(lat, ici_bw) + dcn_bw  # latency-bound hops hide the ICI bandwidth term, and vice versa
    return TorusCollective(time_s=time, latency_s=time - bandwidth, bandwidth_s=bandwidth, shape=shape, wraps=wraps,
                           chips_per_slice=per_slice, slices=slices)


__all__ = ["ICI_HOP_LATENCY_S", "OPS", "TorusCollective", "axis_bandwidth_gbps", "slice_shape", "torus_collective",
           "wraparound"]
