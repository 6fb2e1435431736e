"""Collectives of `gpuplan bench` over the local devices with torch.distributed: all_reduce,
all_gather and all_to_all, timed the way nccl-tests times them and reported as its columns.

Definitions (NVIDIA/nccl-tests doc/PERFORMANCE.md and src/{all_reduce,all_gather,alltoall}.cu,
`*GetBw`): S = the size nccl-tests prints, bytes per rank of the largest buffer (all_reduce: the
buffer; all_gather: the gathered output, n inputs of S / n; all_to_all: the whole send buffer, S / n
to each peer), t = the time of one operation,

    algbw = S / t,     busbw = algbw * f(n),
    f = 2 (n - 1) / n  for all_reduce,   (n - 1) / n  for all_gather, reduce_scatter, all_to_all.

Timing (nccl-tests src/common.cu): `warmup` untimed calls, then `iters` calls back to back between
two device synchronisations; t = elapsed / iters on each rank, averaged over the ranks (nccl-tests'
default `-a 1`). The window is repeated `repeats` times and the fastest kept (the figure least
disturbed by other load, as the other benches).

Processes: n ranks are spawned (multiprocessing 'spawn': a fresh interpreter each, as CUDA needs;
'fork' is not an option even on a CPU: after the bench's GEMMs have started torch's OpenMP pool, a
forked rank hangs in its first collective) and rendezvous over TCP on 127.0.0.1 at a free port.
Each rank imports torch, a few seconds on an idle machine and close to a minute on a loaded 2-core
CI machine, so `gpuplan bench --quick` on a CPU leaves the collectives out (run_bench). Backend: gloo on the CPU (2 ranks: a CI
machine measures its shared-memory transport, not a network), nccl on cuda and rocm (RCCL, one rank
per visible GPU; fewer than 2 GPUs: nothing to measure). mps has no torch.distributed backend.
Rank 0 writes the results as JSON to a file the parent reads; a rank that fails or hangs past the
time limit ends the measurement with a one-line reason (the bench reports the collectives skipped).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass

from gpuplan.input_files import MAX_DATA_BYTES, read_input_bytes
from gpuplan.output_files import write_atomic

COLLECTIVES = ("all_reduce", "all_gather", "all_to_all")
#: Bytes per rank (S above) per mode.
SIZES = {"quick": (2**16, 2**20, 2**22), "full": (2**16, 2**20, 2**22, 2**24, 2**26)}
#: Operations per timed window per size (fewer for big messages), and windows per size.
ITERS = {"quick": 5, "full": 10}
REPEATS = {"quick": 3, "full": 5}
#: Seconds the parent waits for the ranks before giving up (spawning imports torch in each rank).
TIME_LIMIT_S = 300.0
CPU_RANKS = 2


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw factor (module docstring). ValueError for an unknown collective or
    fewer than one rank."""
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    n = float(ranks)
    if collective == "all_reduce":
        return 2.0 * (n - 1.0) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1.0) / n
    if collective in ("broadcast", "reduce"):
        return 1.0
    raise ValueError(f"unknown collective '{collective}'")


@dataclass(frozen=True)
class CollectivePoint:
    collective: str
    size_bytes: int
    ranks: int
    time_s: float

    @property
    def algbw_gbps(self) -> float:
        return self.size_bytes / self.time_s / 1e9

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * bus_factor(self.collective, self.ranks)

    def to_dict(self) -> dict:
        return {"collective": self.collective, "size_bytes": self.size_bytes, "ranks": self.ranks,
                "time_us": self.time_s * 1e6, "algbw_gbps": self.algbw_gbps, "busbw_gbps": self.busbw_gbps}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plan_ranks(device: str, gpu_count: int) -> tuple[str | None, int, str]:
    """(torch.distributed backend, ranks, reason): the backend and rank count for `device`; backend
    None with the reason when nothing can be measured."""
    if device == "cpu":
        return "gloo", CPU_RANKS, ""
    if device in ("cuda", "rocm"):
        if gpu_count < 2:
            return None, gpu_count, f"{gpu_count} GPU visible: a collective needs 2 or more"
        return "nccl", gpu_count, ""
    if device == "mps":
        return None, 1, "torch.distributed has no mps backend"
    raise ValueError(f"unknown device '{device}'")


def element_counts(collective: str, size_bytes: int, ranks: int, element_size: int) -> tuple[int, int]:
    """(input elements, output elements) per rank for S = size_bytes (module docstring), rounded
    down to a multiple of `ranks` elements as nccl-tests does."""
    count = max(ranks, size_bytes // element_size // ranks * ranks)
    if collective == "all_reduce":
        return count, count
    if collective == "all_gather":
        return count // ranks, count
    if collective == "all_to_all":
        return count, count
    raise ValueError(f"unknown collective '{collective}'")


def _operation(dist, collective: str, inp, out):
    if collective == "all_reduce":
        return lambda: dist.all_reduce(inp)
    if collective == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(out, inp)
    return lambda: dist.all_to_all_single(out, inp)


def _rank_main(rank: int, ranks: int, port: int, backend: str, device: str, sizes, iters: int, repeats: int,
               result_path: str) -> None:  # pragma: no cover - runs in the spawned ranks
    import torch
    import torch.distributed as dist

    on_gpu = device in ("cuda", "rocm")
    if on_gpu:
        torch.cuda.set_device(rank)
    dev = "cuda" if on_gpu else "cpu"
    dtype = torch.float32
    esize = 4
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    try:
        points = []
        for collective in COLLECTIVES:
            for size in sizes:
                n_in, n_out = element_counts(collective, size, ranks, esize)
                inp = torch.ones(n_in, dtype=dtype, device=dev)
                out = torch.empty(n_out, dtype=dtype, device=dev)
                op = _operation(dist, collective, inp, out)
                op()
                best = float("inf")
                for _ in range(repeats):
                    dist.barrier()
                    sync()
                    t0 = time.perf_counter()
                    for _ in range(iters):
                        op()
                    sync()
                    per_op = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64, device=dev)
                    dist.all_reduce(per_op)  # sum over ranks -> mean below
                    best = min(best, float(per_op.item()) / ranks)
                points.append({"collective": collective, "size_bytes": n_out * esize if collective != "all_reduce"
                               else n_in * esize, "ranks": ranks, "time_s": best})
        if rank == 0:
            write_atomic(result_path, json.dumps(points), "bench")
    finally:
        dist.destroy_process_group()


def run_collectives(device: str, quick: bool, gpu_count: int = 0) -> tuple[list[CollectivePoint], str]:
    """Measure the collectives (module docstring): (points, reason skipped or '')."""
    backend, ranks, why = plan_ranks(device, gpu_count)
    if backend is None:
        return [], why
    import multiprocessing as mp

    mode = "quick" if quick else "full"
    ctx = mp.get_context("spawn")
    fd, result_path = tempfile.mkstemp(prefix="gpuplan-bench-coll-", suffix=".json")
    os.close(fd)
    port = free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, ranks, port, backend, device, SIZES[mode], ITERS[mode],
                                                  REPEATS[mode], result_path), daemon=True) for r in range(ranks)]
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + TIME_LIMIT_S
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        if any(p.is_alive() for p in procs):
            return [], f"the {ranks} ranks did not finish within {TIME_LIMIT_S:.0f} s"
        failed = [p.exitcode for p in procs if p.exitcode != 0]
        if failed:
            return [], f"a rank exited with code {failed[0]} ({backend} on {device})"
        raw = json.loads(read_input_bytes(result_path, "bench", max_bytes=MAX_DATA_BYTES))
        return [CollectivePoint(d["collective"], int(d["size_bytes"]), int(d["ranks"]), float(d["time_s"]))
                for d in raw], ""
    except (OSError, ValueError) as exc:
        return [], f"{type(exc).__name__}: {exc}"
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)
        if os.path.exists(result_path):
            os.unlink(result_path)


def collective_rows(points: list[CollectivePoint], system: str, source: str, prefix: str) -> list[dict[str, str]]:
    """One collectives row (../shared/validation/SCHEMA.md) per point: busbw_gbps, nccl-tests' size."""
    rows = []
    for i, p in enumerate(points, start=1):
        rows.append({"id": f"{prefix}-{i}", "source": source, "confidence": "high",
                     "notes": f"gpuplan bench: mean of ranks, best window; time {p.time_s * 1e6:.6g} us, "
                              f"algbw {p.algbw_gbps:.6g} GB/s",
                     "system": system, "num_gpus": str(p.ranks), "nodes": "1", "collective": p.collective,
                     "size_bytes": str(p.size_bytes), "algorithm": "auto", "metric": "busbw_gbps",
                     "value": repr(p.busbw_gbps)})
    return rows


__all__ = ["COLLECTIVES", "CollectivePoint", "bus_factor", "collective_rows", "element_counts", "free_port",
           "plan_ranks", "run_collectives"]
