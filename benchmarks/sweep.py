"""Sweep throughput: points per second with 1 and 2 workers on the local process pool and on a local
Ray instance (127.0.0.1, no dashboard, when ray is installed), and the scaling ratio (2 workers / 1 worker).

The sweep: docs/sweeps.md's first example (Llama 3 8B on 1T tokens, DGX H100, DGX H200 and an H100
with twice the HBM bandwidth) scaled to 201 points: 67 GPU counts, 64 to 592 in steps of 8, each a
full plan search. Rates include starting the pool (the local pool's workers start from a fork
server that has imported the evaluation once: interfaces.sweep.backends; a Ray instance's workers
are started and warmed on other points first, as on a running cluster) and are points /
wall-clock seconds of `run_sweep`, no output file. Target (issue 35): scaling >= 0.9 x per added
local worker (2 workers / 1 >= 1.8). The machine's other load shows in the scaling ratio: compare on
an idle machine (the load average is printed first).
Wall-clock rates need an idle machine; on a shared one (other load takes cores from the workers) the
CPU figures say the same thing: each configuration also runs in a fresh child interpreter, and the
CPU seconds of every process of the run (driver, fork server, workers) are summed: the driver's from
getrusage, the others' from /proc/PID/stat, polled every 20 ms while they live (Linux only; the polling
thread's own CPU is not counted). `sweep_cpu_s_per_point[local,N]` = that CPU / points; a worker's start-up
is the CPU that grows with N. On two free cores two workers finish in max(CPU per worker) ~ CPU/2, so
`sweep_scaling_2_over_1_from_cpu[local]` = 2 x cpu_per_point(1) / cpu_per_point(2) is the scaling an
idle 2-core machine would show (start-up and driver work counted, waiting for a free core not).
Prints its figures last, one per line (`name: value unit`).

    python benchmarks/sweep.py [--no-ray] [--no-cpu]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from gpuplan.interfaces.sweep import parse_spec, run_sweep

SPEC = {
    "name": "llama-3-8b: H100 vs H200, and an H100 with 2x HBM bandwidth (201 points)", "goal": "train",
    "axes": {"models": ["llama-3-8b"], "hardware": ["dgx-h100", "dgx-h200"],
             "gpus": list(range(64, 600, 8)), "seq_len": [4096], "tokens": ["1T"]},
    "variants": [{"name": "h100-hbm2x", "base": "dgx-h100", "hbm_bandwidth_scale": 2.0}],
}
POINTS = 3 * len(SPEC["axes"]["gpus"])

#: a different model: warms a Ray instance's worker processes without caching SPEC's answers
WARM = {"goal": "train", "axes": {"models": ["gpt3-1.3b"], "hardware": ["dgx-h100"], "gpus": [8, 16]}}


def rate(backend: str, workers: int) -> float:
    spec = parse_spec(SPEC)
    t0 = time.perf_counter()
    summary, rows = run_sweep(spec, None, backend=backend, workers=workers)
    elapsed = time.perf_counter() - t0
    assert summary.computed == len(rows) == POINTS
    return len(rows) / elapsed


def _proc_cpu(pid: int) -> tuple[int, float] | None:
    """(parent pid, utime + stime seconds) of a live process from /proc (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(workers: int) -> float | None:
    """CPU seconds of one run of SPEC on the local pool with `workers` workers, by every process of
    the run (this driver, the fork server, the workers): the driver's own from getrusage, the others'
    read from /proc every 20 ms while they live (module docstring). None where /proc is missing."""
    import threading

    if not os.path.isdir("/proc/self"):
        return None
    seen: dict[int, float] = {}
    me = os.getpid()
    stop = threading.Event()
    poller_cpu = [0.0]

    def poll() -> None:
        start = time.thread_time()
        while not stop.is_set():
            parents = {}
            for name in os.listdir("/proc"):
                if name.isdigit():
                    info = _proc_cpu(int(name))
                    if info is not None:
                        parents[int(name)] = info
            tree = {me}
            grew = True
            while grew:
                new = {pid for pid, (ppid, _) in parents.items() if ppid in tree} - tree
                tree |= new
                grew = bool(new)
            for pid in tree - {me}:
                seen[pid] = max(seen.get(pid, 0.0), parents[pid][1])
            poller_cpu[0] = time.thread_time() - start
            stop.wait(0.02)

    thread = threading.Thread(target=poll, daemon=True)
    cpu0 = time.process_time()
    thread.start()
    rate("local", workers)
    stop.set()
    thread.join()
    return time.process_time() - cpu0 - poller_cpu[0] + sum(seen.values())  # the polling not counted


def cpu_per_point(workers: int) -> float | None:
    """`tree_cpu_s` / points, in a fresh interpreter (its fork server starts cold, as a user's does)."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); import sweep; "
            f"print(sweep.tree_cpu_s({workers}))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    return None if not out or out[-1] == "None" else float(out[-1]) / POINTS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-ray", action="store_true", help="local pool only")
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU-time runs in child interpreters")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; {POINTS} points")
    results = {}
    for workers in (1, 2):
        results[("local", workers)] = rate("local", workers)
        print(f"sweep_points_per_s[local,{workers}]: {results[('local', workers)]:.2f} points/s", flush=True)
    backends = ["local"]
    try:
        import ray
    except ImportError:
        ray = None
    if ray is not None and not args.no_ray:
        from gpuplan.interfaces.sweep.backends import local_ray_options

        backends.append("ray")
        for workers in (1, 2):
            ray.init(**local_ray_options(workers))  # a Ray instance with exactly `workers` CPUs
            try:
                # start the Ray workers and their imports on other points (caches stay cold for SPEC's)
                run_sweep(parse_spec(WARM), None, backend="ray", workers=workers)
                results[("ray", workers)] = rate("ray", workers)
            finally:
                ray.shutdown()
            print(f"sweep_points_per_s[ray,{workers}]: {results[('ray', workers)]:.2f} points/s", flush=True)
    for backend in backends:
        print(f"sweep_scaling_2_over_1[{backend}]: {results[(backend, 2)] / results[(backend, 1)]:.2f} x")
    if not args.no_cpu:
        cpu = {workers: cpu_per_point(workers) for workers in (1, 2)}
        if None in cpu.values():
            print("sweep_cpu_s_per_point: skipped (needs /proc)")
        else:
            for workers, value in cpu.items():
                print(f"sweep_cpu_s_per_point[local,{workers}]: {value:.4f} s")
            print(f"sweep_scaling_2_over_1_from_cpu[local]: {2 * cpu[1] / cpu[2]:.2f} x")
    print(f"machine: load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
