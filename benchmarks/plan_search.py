"""Plan-search throughput and memory.

Case 1 (throughput): GPT-3 175B on 1024 GPUs of DGX H100, sequence 2048, global batch 2048.
Case 2 (memory bound): DeepSeek-V3 on 15,360 GPUs of DGX H100 at sequence 8192 (about 11.7 M grid
points): the streamed search must stay under 300 MiB of peak resident memory. No global batch is
given, so each plan gets its own (`default_global_batch`) and plans rank by time per token.

Each runs the full `search_plans` (grid enumeration, vectorised step time, vectorised memory
screen, exact confirmation of the best plans) a few times on one process and reports the best
rate. The search runs on one thread (numpy elementwise work on the calling thread; no pool), so
plans/s is also the rate per core; `threads:` says so, and `*_plans_per_cpu_s` gives the process
CPU time of the same best run, steadier than wall time on a shared machine. `peak_rss_mib` is the process's peak resident set (resource.getrusage ru_maxrss, KiB on
Linux) after both cases, so it includes the interpreter, numpy and gpuplan themselves.
Prints its figures last, one per line (`name: value unit`).

    python benchmarks/plan_search.py [--repeat 5]

Measured 2026-11-28 (issue #35) on the shared 2-core machine, CPU time per GPT-3 175B search
(40,320 points), in-process breakdown at load ~1-3: 16.7 -> 13.8 ms (2.4 -> 2.9 million plans per
CPU-second). The exact memory check of the five best plans 4.9 -> 2.2 ms (`training_memory` 1.01 ->
0.36 ms a plan: its pipeline ranks share the saved context, outside-allocator bytes, chunks in flight
and per-layer-kind activation bytes); the fastest plan per explained value 1.1 -> 0.75 ms; the step
context 0.7 -> 0.3 ms (FLOPs per token kept per model). What is left is numpy work on the grid:
the step-time arrays (~3.9 ms) and the memory screen (~3.7 ms), a few hundred small array
operations each. DeepSeek-V3 (9.3 M points) is unchanged at 6-7 million per CPU-second. Interleaved
runs at load average 10-12: GPT-3 main 1.8-2.4 M, this 1.6-3.0 M per CPU-second; DeepSeek-V3 main
4.6-5.9 M, this 5.4-6.4 M. Every result unchanged (benchmarks/output_digests.py).

Issue #35, second pass (plan_grid.COMPUTE_ORDER, the screen's two ranks in one call, the ranking on
fitting plans, docs/architecture.md "Plan search throughput"), 3 runs each interleaved with main's at
load 8-11, best run: GPT-3 175B 3.03 -> 4.52 M plans per CPU-second (plans_per_s 3.01 -> 4.51 M),
DeepSeek-V3 7.02 -> 12.65 M (deepseek_v3_plans_per_s 6.97 -> 12.49 M), peak RSS 68 -> 71 MiB; in-process
CPU per GPT-3 search 13.5 -> 8.2-8.9 ms (8.5 ms in a process without page faults). After merging
main, at load 5-6: GPT-3 175B 3.19 -> 4.97 M plans per CPU-second (plans_per_s 3.16 -> 4.97 M, 482 page
faults a search), DeepSeek-V3 7.36 -> 11.00 M (deepseek_v3_plans_per_s 7.34 -> 10.83 M). Every result
unchanged (benchmarks/output_digests.py, 54 digests).
Issue 32 (2026-11-29: the search back above its speed at efcccaa, before the FSDP2 pipeline, DualPipe,
deterministic, CUDA-graph and gradient-accumulation terms; docs/architecture.md "Plan search
throughput"), 12 interleaved runs each of efcccaa and this, alternating, at load average 9-23, medians:
GPT-3 175B 4.17 -> 4.46 M plans per CPU-second (runs 3.43-5.09 / 3.84-4.67), DeepSeek-V3 15.5 -> 17.1 M
(14.0-16.5 / 15.0-17.9). Instructions per GPT-3 search (valgrind callgrind, 22 searches less 2, load
independent): efcccaa 55.5 M, main before this (e59fec4) 54.9 M, this 50.0 M. Every result unchanged (plan JSON of both models under six
frameworks and modes, `validate --builtin training --json`, benchmarks/output_digests.py).
`page_faults_per_search` is the minor page faults of one GPT-3 search (ru_minflt over the timed
searches): ~600 where the C allocator hands the freed heap back after each search (about 1 ms of the
search), ~0 where the process's heap layout keeps it; it varies from process to process, not with
the code, so read plans_per_cpu_s next to it.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from gpuplan.catalog import load_catalog
from gpuplan.heap import keep_freed_memory
from gpuplan.models import load_model
from gpuplan.workloads.training.plan_search import SearchSpace, search_plans


def best_of(model, system, gpu, num_gpus: int, space: SearchSpace, repeat: int):
    """(result, elapsed_s, plans/s, plans per CPU-second, minor page faults per search) of the fastest of
    `repeat` searches (after one warm-up)."""
    search_plans(model, system, gpu, num_gpus, space)  # warm caches (collective times, imports)
    best = None
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = search_plans(model, system, gpu, num_gpus, space)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        if best is None or elapsed < best[1]:
            best = (result, elapsed, result.plans_evaluated / elapsed, result.plans_evaluated / max(cpu, 1e-9))
    return (*best, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / repeat)


def describe(result) -> str:
    p = result.best[0].plan
    return (f"tp={p.tp} pp={p.pp} dp={p.dp} cp={p.cp} ep={p.ep} vpp={p.vpp} mb={p.micro_batch} "
            f"{p.recompute.value} {p.sharding.value} step {result.best[0].step.step_time_s:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed searches per case (best is reported)")
    args = parser.parse_args()
    print(f"heap_keeps_freed_memory: {keep_freed_memory()}")  # as the CLI's process does (gpuplan.heap)
    catalog = load_catalog()
    system = catalog.system("dgx-h100")
    gpu = catalog.gpu(system.gpu)

    gpt3, elapsed, rate, rate_cpu, faults = best_of(load_model("gpt3-175b"), system, gpu, 1024,
                                  SearchSpace(seq_len=2048, global_batch=2048), args.repeat)
    ds, ds_elapsed, ds_rate, ds_rate_cpu, _ = best_of(load_model("deepseek-v3"), system, gpu, 15360, SearchSpace(seq_len=8192),
                                      max(1, args.repeat // 2))
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # ru_maxrss is KiB on Linux
    print(f"best plan (gpt3-175b, 1024 GPUs): {describe(gpt3)}")
    print(f"best plan (deepseek-v3, 15360 GPUs, seq 8192): {describe(ds)}")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end")
    print("threads: 1")
    print(f"plans_per_cpu_s: {rate_cpu:.0f} plans/CPU-s")
    print(f"deepseek_v3_plans_per_cpu_s: {ds_rate_cpu:.0f} plans/CPU-s")
    print(f"plans_evaluated: {gpt3.plans_evaluated} plans")
    print(f"page_faults_per_search: {faults:.0f} faults")
    print(f"search_time_s: {elapsed:.4f} s")
    print(f"deepseek_v3_plans_evaluated: {ds.plans_evaluated} plans")
    print(f"deepseek_v3_search_time_s: {ds_elapsed:.3f} s")
    print(f"deepseek_v3_plans_per_s: {ds_rate:.0f} plans/s")
    print(f"peak_rss_mib: {peak_rss_mib:.0f} MiB")
    print(f"plans_per_s: {rate:.0f} plans/s")


if __name__ == "__main__":
    main()
