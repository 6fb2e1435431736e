"""Sweep throughput: points per second with 1 and 2 workers on the local process pool and on a local
Ray instance (127.0.0.1, no dashboard), and the scaling ratio (2 workers / 1 worker).

The sweep: 16 training points (llama-3-8b and llama-2-7b on DGX H100 and H200, 16, 64, 256, 1024 GPUs,
sequence 4096, global batch 1024), each a full plan search. Rates include starting the pool (and the
imports in the pool's fresh processes; a Ray instance's workers are started and warmed on other
points first, as on a running cluster) and are points / wall-clock seconds of `run_sweep`, no
output file. The machine's other load shows in the scaling ratio: compare on an idle machine.
Prints its figures last, one per line (`name: value unit`).

    python benchmarks/sweep.py
"""

from __future__ import annotations

import time

from gpuplan.interfaces.sweep import parse_spec, run_sweep

SPEC = {
    "name": "benchmark", "goal": "train",
    "axes": {"models": ["llama-3-8b", "llama-2-7b"], "hardware": ["dgx-h100", "dgx-h200"],
             "gpus": [16, 64, 256, 1024], "seq_len": [4096], "tokens": ["1T"]},
    "train": {"global_batch": 1024},
}

#: a different model: warms a Ray instance's worker processes without caching SPEC's answers
WARM = {"goal": "train", "axes": {"models": ["gpt3-1.3b"], "hardware": ["dgx-h100"], "gpus": [8, 16]}}


def rate(backend: str, workers: int) -> float:
    spec = parse_spec(SPEC)
    t0 = time.perf_counter()
    summary, rows = run_sweep(spec, None, backend=backend, workers=workers)
    elapsed = time.perf_counter() - t0
    assert summary.computed == len(rows) == 16
    return len(rows) / elapsed


def main() -> None:
    results = {}
    for workers in (1, 2):
        results[("local", workers)] = rate("local", workers)
    import ray

    from gpuplan.interfaces.sweep.backends import local_ray_options

    for workers in (1, 2):
        ray.init(**local_ray_options(workers))  # a Ray instance with exactly `workers` CPUs
        try:
            # start the Ray workers and their imports on other points (caches stay cold for SPEC's)
            run_sweep(parse_spec(WARM), None, backend="ray", workers=workers)
            results[("ray", workers)] = rate("ray", workers)
        finally:
            ray.shutdown()
    for (backend, workers), r in results.items():
        print(f"sweep_points_per_s[{backend},{workers}]: {r:.2f} points/s")
    for backend in ("local", "ray"):
        print(f"sweep_scaling_2_over_1[{backend}]: {results[(backend, 2)] / results[(backend, 1)]:.2f} x")


if __name__ == "__main__":
    main()
