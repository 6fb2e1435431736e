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
Prints its figures last, one per line (`name: value unit`).

    python benchmarks/sweep.py [--no-ray]
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-ray", action="store_true", help="local pool only")
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


if __name__ == "__main__":
    main()
