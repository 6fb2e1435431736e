"""Speedup laws: Amdahl, Gustafson, and Little's law for latency hiding.

- Amdahl (1967): a fixed problem whose fraction `p` of the serial run time parallelises over `n`
  workers: speedup = 1 / ((1 - p) + p / n), bounded by 1 / (1 - p) as n -> infinity.
- Gustafson (1988, "Reevaluating Amdahl's law"): the problem grows with `n`; `p` is the parallel
  fraction of the time measured on the parallel machine: scaled speedup = (1 - p) + p * n.
- Little's law (Little 1961): items in a system = arrival rate x time in system. For memory,
  bytes in flight = bandwidth x latency: to sustain `bandwidth_gbps` with a memory latency of
  `latency_ns`, the GPU must keep bandwidth * latency bytes outstanding; divided over SMs and by
  the bytes one warp has outstanding (32 lanes x bytes per load x independent loads per thread),
  that is the number of resident warps per SM needed to hide the latency (CUDA C++ Best Practices
  Guide, "Occupancy"; Volkov 2016 thesis, "Understanding latency hiding on GPUs").
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError


def _fraction(p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise InputError(f"parallel_fraction: must be in 0..1, got {p}", field="parallel_fraction")
    return p


def _workers(n: float) -> float:
    if n < 1:
        raise InputError(f"workers: must be >= 1, got {n}", field="workers")
    return n


@dataclass(frozen=True)
class SpeedupResult:
    law: str
    parallel_fraction: float
    workers: float
    speedup: float
    efficiency: float  # speedup / workers
    limit_speedup: float | None  # as workers -> infinity (None = unbounded)


def amdahl(parallel_fraction: float, workers: float) -> SpeedupResult:
    """Amdahl: speedup = 1 / ((1 - p) + p / n); limit 1 / (1 - p)."""
    p, n = _fraction(parallel_fraction), _workers(workers)
    s = 1.0 / ((1.0 - p) + p / n)
    return SpeedupResult("amdahl", p, n, s, s / n, None if p == 1.0 else 1.0 / (1.0 - p))


def gustafson(parallel_fraction: float, workers: float) -> SpeedupResult:
    """Gustafson: scaled speedup = (1 - p) + p * n (unbounded in n when p > 0)."""
    p, n = _fraction(parallel_fraction), _workers(workers)
    s = (1.0 - p) + p * n
    return SpeedupResult("gustafson", p, n, s, s / n, 1.0 if p == 0 else None)


@dataclass(frozen=True)
class LatencyHidingResult:
    bandwidth_gbps: float
    latency_ns: float
    bytes_in_flight: float  # whole device: bandwidth x latency
    sm_count: int
    bytes_in_flight_per_sm: float
    bytes_in_flight_per_warp: float  # 32 lanes x bytes per load x loads in flight per thread
    warps_needed_per_sm: float
    max_warps_per_sm: int | None
    occupancy_needed: float | None  # warps needed / max warps (> 1: needs more ILP or bigger loads)


def littles_law(bandwidth_gbps: float, latency_ns: float, *, sm_count: int = 1, bytes_per_load: int = 4,
                loads_in_flight_per_thread: int = 1, max_warps_per_sm: int | None = None) -> LatencyHidingResult:
    """Bytes and warps in flight needed to cover `latency_ns` at `bandwidth_gbps` (Little's law):

        bytes_in_flight = bandwidth_gbps * 1e9 * latency_ns * 1e-9
        warps_needed_per_sm = bytes_in_flight / sm_count / (32 * bytes_per_load * loads_in_flight_per_thread)
    """
    if bandwidth_gbps <= 0:
        raise InputError(f"bandwidth: must be > 0 GB/s, got {bandwidth_gbps}", field="bandwidth")
    if latency_ns <= 0:
        raise InputError(f"latency: must be > 0 ns, got {latency_ns}", field="latency")
    if sm_count < 1 or bytes_per_load < 1 or loads_in_flight_per_thread < 1:
        raise InputError("sm_count, bytes_per_load, loads_in_flight: must be >= 1", field="sm_count")
    total = bandwidth_gbps * latency_ns  # (GB/s = B/ns) x ns = bytes
    per_sm = total / sm_count
    per_warp = 32 * bytes_per_load * loads_in_flight_per_thread
    warps = per_sm / per_warp
    return LatencyHidingResult(
        bandwidth_gbps=bandwidth_gbps,
        latency_ns=latency_ns,
        bytes_in_flight=total,
        sm_count=sm_count,
        bytes_in_flight_per_sm=per_sm,
        bytes_in_flight_per_warp=per_warp,
        warps_needed_per_sm=warps,
        max_warps_per_sm=max_warps_per_sm,
        occupancy_needed=None if not max_warps_per_sm else warps / max_warps_per_sm,
    )
