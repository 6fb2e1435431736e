"""Serving-simulator speed: simulated requests per wall-clock second.

Llama-3-8B (bf16) on one H100 SXM, chunked-prefill continuous batching, Poisson arrivals at 30
requests/s with ShareGPT-like lognormal lengths (input mean 512, output mean 256): 200,000 requests,
420,147 engine steps. The first call compiles the numba loop and is not timed. Last line:
`sim_requests_per_s: N requests/s` (wall clock); the line before gives the process CPU time, the
figure to compare on a shared machine.

Measured 2026-11-24 on the shared 2-core machine, runs interleaved (CPU seconds for the 200,000
requests; the spread is the machine's load): event-driven loop (simulator_events.py, the default)
0.13-0.22 s, 0.9-1.5 million simulated requests per CPU-second; `--reference` (the step-by-step
loop, every running sequence visited at every step) 0.57-1.07 s, 187,000-350,000 per CPU-second;
about 4.3x less CPU, best run against best run. Same steps and figures in both.

Measured 2026-11-28 (310,760 engine steps with today's model), five runs each, interleaved with the
code before the event loop was split into named helpers (sim/events.py) and the step time moved to
workloads/inference/kernels.py: before 0.099-0.107 s CPU, after 0.095-0.123 s (best 0.099 against
0.095); in-process A/B (20 interleaved repetitions, minimum): event-driven 0.0967 -> 0.0937 s
(0.97x), reference 0.411 -> 0.402 s, decode-only loop 0.188 -> 0.185 s.

Measured 2026-11-28 (issue #35; counted KV blocks, sim/events.py docstring; per-request arrays only
where read; one copy of the arrivals): `simulate` 0.097 -> 0.049 CPU-s at load average ~1-3 (1.96 ->
4.1 million simulated requests per CPU-second), of which the event loop 0.081 -> 0.034 s and the
percentiles ~0.010 s (numpy's partition, unchanged); minor page faults per call 9,345 -> 0-360
(ru_minflt). Interleaved runs at load average 10-12 (the machine shared with other engineers):
main 0.106-0.149 CPU-s, this 0.067-0.091 CPU-s. Every output unchanged (benchmarks/output_digests.py).

Measured 2026-11-28 (issue #35, the 4 M target; branch h-sim4): a completion calendar instead of the
completion heap where KV blocks are counted (its pops were ~18% of the loop: perf samples mapped to
source lines), request links / ring phases / calendar links in int32 and one per-request array fewer
(first-touch minor faults of the timed call 6,323 -> 4,764, ~2 us each on this machine), percentiles by
bracketed selection (sim/percentiles.py: 2.3-3.0 -> ~0.7 ms per 200,000-value sample), no boolean-index
copies when every request finished. Whole runs of this script, 6 interleaved with main's at load
average 2.7-3.9: main cpu_s 0.053-0.055 (3.6-3.8 million simulated requests per CPU-second), this
0.035-0.036 (5.6-5.7 million); wall_s main 0.054-0.108, this 0.055-0.073: /proc/stat showed no idle
CPU (other engineers' processes), so the wall figure is about twice the CPU one and reaches 4 M only
with a free core. In-process (20 repetitions, 3 interleaved processes each): `simulate` minimum
43.1-44.2 -> 23.9-26.6 ms (median 43.5-45.4 -> 25.1-26.9), the event loop 31.0-32.3 -> 19.3-21.4 ms.
Where this run's ~0.035 CPU-s go: the loop's computation ~20 ms, first-touch page faults of its
~19 MB of per-request state ~9 ms (4,362 faults inside the loop; without them, in a process whose
heap had already grown, the call takes 0.027-0.028 s), the three percentile samples ~2 ms, set-up
and the other statistics ~3 ms. Tried and dropped (no gain or slower, interleaved A/B): inlining
table_lookup / graph_tokens_of_step / causal_pairs_upto into the loop (19.5 -> 22.9 ms: a larger
function spills more), and moving the rare helpers (eviction walk, static batches, prefill-first)
out of line. Every output unchanged (benchmarks/output_digests.py, 54 digests).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from gpuplan.catalog import load_catalog
from gpuplan.heap import keep_freed_memory
from gpuplan.models import load_model
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, LengthDistribution, LengthKind, make_workload
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig
from gpuplan.workloads.inference import jit
from gpuplan.workloads.inference.sim.simulator import simulate


def main() -> None:
    print(f"heap_keeps_freed_memory: {keep_freed_memory()}")  # as the CLI's process does (gpuplan.heap)
    cat = load_catalog()
    gpu = cat.gpu("h100-sxm5-80gb")
    dep = Deployment(load_model("llama-3-8b"), gpu, cat.system(gpu.id))
    steps, mem, sched = step_time_model(dep), memory_plan(dep), SchedulerConfig()
    lens = dict(input_len=LengthDistribution(512, LengthKind.LOGNORMAL, 1.0),
                output_len=LengthDistribution(256, LengthKind.LOGNORMAL, 1.0))
    rng = np.random.default_rng(0)
    event_driven = "--reference" not in sys.argv[1:]
    jit.compile_kernels()  # the loop timed compiled, as a long run goes (workloads/inference/jit.py)
    simulate(steps, mem, make_workload(rng, 100, ArrivalKind.POISSON, rate=30.0, **lens), sched,
             event_driven=event_driven)  # compile (or load numba's cache)
    n = 200_000
    wl = make_workload(rng, n, ArrivalKind.POISSON, rate=30.0, **lens)
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate(steps, mem, wl, sched, event_driven=event_driven)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"loop: {'event-driven' if event_driven else 'step-by-step reference'}")
    print(f"simulated: {res.completed} requests, {res.steps} steps, {res.duration_s:.0f} s of serving")
    print(f"ttft_p50_ms: {res.ttft_ms.p50:.1f} ms")
    print(f"tpot_p50_ms: {res.tpot_ms.p50:.2f} ms")
    print(f"wall_s: {wall:.3f} s")
    print(f"cpu_s: {cpu:.3f} s (sim_requests_per_cpu_s: {n / cpu:.0f}; on a loaded machine the wall figure below waits for the CPU)")
    print(f"sim_requests_per_s: {n / wall:.0f} requests/s")


if __name__ == "__main__":
    main()
