"""`gpuplan.api.comm`: time and nccl-tests bandwidths of one collective on a system
(gpuplan.primitives.collectives); `sweep=True` over message sizes 1 KiB .. 16 GiB (x4 steps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import DEFAULT_SYSTEM, Result, gpu_of, resolve_system
from gpuplan.specs import System

COLLECTIVES = "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv"
SWEEP_SIZES_BYTES = tuple(1024 * 4**i for i in range(13))  # 1 KiB .. 16 GiB


def collective_record(r) -> dict:
    """One collective's JSON object (nccl-tests algbw / busbw definitions)."""
    return {
        "collective": r.collective.value, "algorithm": r.algorithm.value, "protocol": r.protocol.value,
        "size_bytes": r.size_bytes, "num_gpus": r.num_gpus, "gpus_per_domain": r.gpus_per_domain,
        "domains": r.domains, "time_s": r.time_s, "time_us": r.time_s * 1e6, "algbw_gbps": r.algbw_gbps,
        "busbw_gbps": r.busbw_gbps, "latency_s": r.latency_s, "bandwidth_s": r.bandwidth_s,
    }


@dataclass(frozen=True)
class CommResult(Result):
    """`comm`: one result per size; JSON is one object, or a list with `sweep`."""

    results: tuple[Any, ...]
    sweep: bool

    def json_data(self) -> Any:
        rows = [collective_record(r) for r in self.results]
        return rows if self.sweep else rows[0]


def comm(collective: str, system: str | System = DEFAULT_SYSTEM, gpus: int = 8, *, size: str | int = "1GiB",
         algorithm: str = "auto", gpus_per_domain: int | None = None, sweep: bool = False) -> CommResult:
    """Time, algbw and busbw of `collective` over `gpus` GPUs of `system` (`size` as nccl-tests counts it)."""
    from gpuplan.primitives.collectives import collective_time
    from gpuplan.units import parse_bytes

    spec = resolve_system(system)
    gpu = gpu_of(spec)
    if gpus < 2:
        raise InputError(f"gpus: a collective needs at least 2 GPUs, got {gpus}", field="gpus")
    sizes = SWEEP_SIZES_BYTES if sweep else (parse_bytes(size, field="size"),)
    return CommResult(tuple(collective_time(collective, s, spec, gpus, algorithm, gpu, gpus_per_domain) for s in sizes), sweep)
