"""The serving kernels interpreted and compiled (workloads/inference/jit.py): the same numbers bit
for bit, and the process budget of interpreted engine steps that decides between them.

Interpreted runs happen in a fresh interpreter (a process that has compiled stays compiled); the
compiled runs here, after `compile_kernels()`. Tolerance: none. The kernels use int64 and float64
with numpy's division semantics and no fastmath, so the interpreted loop performs the compiled
loop's IEEE-754 operations in the same order (jit.py's module docstring)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gpuplan

SRC = str(Path(gpuplan.__file__).resolve().parents[1])

#: builds and runs small serving scenarios (every scheduler, eviction under a cut KV budget, sliding
#: windows, prefix caching, CUDA-graph padding); `results()` maps each to its full result, floats
#: as repr
_SCENARIOS = r'''
import dataclasses
import numpy as np
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.cost.prefix_cache import PrefixCache
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, LengthDistribution, LengthKind, make_workload
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.sim.simulator import simulate

LOGNORMAL = dict(input_len=LengthDistribution(512, LengthKind.LOGNORMAL, 1.0),
                 output_len=LengthDistribution(256, LengthKind.LOGNORMAL, 1.0))
UNIFORM = dict(input_len=LengthDistribution(512, LengthKind.UNIFORM, 0.9),
               output_len=LengthDistribution(256, LengthKind.UNIFORM, 0.9))
# name: (model, scheduler, arrivals, requests, concurrency, rate, KV budget fraction, graphs, prefix hit)
SCENARIOS = {
    "poisson_chunked": ("llama-3-8b", SchedulerConfig(), ArrivalKind.POISSON, 300, None, 30.0, 1.0, (), 0.0),
    "closed_continuous": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.CONTINUOUS, max_batch_seqs=64),
                          ArrivalKind.CLOSED_LOOP, 200, 64, None, 1.0, (), 0.0),
    "closed_static": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=32),
                      ArrivalKind.CLOSED_LOOP, 120, 40, None, 1.0, (), 0.0),
    "poisson_prefill_first": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.PREFILL_FIRST), ArrivalKind.POISSON,
                              300, None, 30.0, 1.0, (), 0.0),
    "evict_chunked": ("llama-3-8b", SchedulerConfig(max_batch_seqs=256), ArrivalKind.CLOSED_LOOP, 300, 200, None,
                      0.05, (), 0.0),
    "noevict_graphs": ("llama-3-8b", SchedulerConfig(no_evict=True, max_batch_seqs=512), ArrivalKind.BURST, 300, None,
                       None, 1.0, (1, 2, 4, 8, 16, 32, 64, 128, 256, 512), 0.0),
    "prefix_cache": ("llama-3-8b", SchedulerConfig(), ArrivalKind.POISSON, 300, None, 40.0, 1.0, (), 0.5),
    "window_gemma": ("gemma-2-9b", SchedulerConfig(), ArrivalKind.CLOSED_LOOP, 200, 64, None, 1.0, (), 0.0),
    "window_128_evict": ("gpt-oss-20b", SchedulerConfig(), ArrivalKind.CLOSED_LOOP, 200, 128, None, 0.02, (), 0.0),
}


def summary(res):
    def f(x):
        return repr(float(x))
    pct = {k: [f(getattr(getattr(res, k), q)) for q in ("p50", "p90", "p99", "mean")]
           for k in ("ttft_ms", "tpot_ms", "e2e_ms")}
    scalars = {k: f(getattr(res, k)) for k in ("duration_s", "output_tokens_per_s", "requests_per_s",
                                               "mean_in_flight", "busy_s", "prefill_busy_s")}
    return {"counts": [res.requests, res.completed, res.steps, res.preemptions], **pct, **scalars,
            "kv_time_s": [f(x) for x in res.kv_time_s], "kv_bytes": [f(x) for x in res.kv_bytes]}


def results():
    cat = load_catalog()
    gpu = cat.gpu("h100-sxm5-80gb")
    out = {}
    for name, (model, sched, kind, n, conc, rate, frac, graphs, hit) in SCENARIOS.items():
        dep = Deployment(load_model(model), gpu, cat.system(gpu.id))
        steps, mem = step_time_model(dep), memory_plan(dep)
        mem = dataclasses.replace(mem, kv_budget_bytes=mem.kv_budget_bytes * frac)
        wl = make_workload(np.random.default_rng(7), n, kind, rate=rate, concurrency=conc,
                           **(UNIFORM if frac < 1.0 else LOGNORMAL))
        res = simulate(steps, mem, wl, sched, cuda_graph_batch_sizes=graphs,
                       prefix_cache=PrefixCache(hit) if hit else None)
        out[name] = summary(res)
    return out
'''


def run_child(script: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600,
                          check=True)


def test_interpreted_runs_equal_compiled_runs_bit_for_bit():
    interpreted = json.loads(run_child(_SCENARIOS + (
        "\nimport json, sys\nfrom gpuplan.workloads.inference import jit\n"
        "jit.set_interpreted_steps(10**12)  # no run reaches it: all interpreted\n"
        "out = results()\n"
        "assert not jit.compiled() and 'numba' not in sys.modules\n"
        "print(json.dumps(out))\n")).stdout)
    from gpuplan.workloads.inference import jit

    scope: dict = {}
    exec(_SCENARIOS, scope)  # noqa: S102 - the same scenarios, run here
    jit.compile_kernels()
    compiled = scope["results"]()
    assert compiled.keys() == interpreted.keys()
    for name in compiled:
        assert interpreted[name] == compiled[name], name
    assert int(compiled["evict_chunked"]["counts"][3]) > 100  # eviction was exercised (preemptions)


def test_a_process_runs_interpreted_within_its_budget_then_compiles():
    # the same closed-loop run (it writes its arrivals) three ways: interpreted within the budget;
    # a trial stopped by a budget of 10 steps, then compiled from the start; compiled again
    script = _SCENARIOS + r'''
import sys
from gpuplan.workloads.inference import jit
cat = load_catalog()
gpu = cat.gpu("h100-sxm5-80gb")
dep = Deployment(load_model("llama-3-8b"), gpu, cat.system(gpu.id))
steps, mem = step_time_model(dep), memory_plan(dep)
wl = make_workload(np.random.default_rng(3), 150, ArrivalKind.CLOSED_LOOP, concurrency=32, **LOGNORMAL)
assert jit.interpreted_steps_left() == jit.INTERPRETED_STEPS
first = simulate(steps, mem, wl, SchedulerConfig())
assert not jit.compiled() and "numba" not in sys.modules
assert 0 < first.steps < jit.INTERPRETED_STEPS
assert jit.interpreted_steps_left() == jit.INTERPRETED_STEPS - first.steps
jit.set_interpreted_steps(10)
second = simulate(steps, mem, wl, SchedulerConfig())
assert jit.compiled() and "numba" in sys.modules and jit.interpreted_steps_left() == 0
third = simulate(steps, mem, wl, SchedulerConfig())
assert summary(first) == summary(second) == summary(third)
print("ok", first.steps)
'''
    assert run_child(script).stdout.startswith("ok ")


def test_loops_without_a_trial_compile_first():
    # speculative decoding runs the step-by-step reference loop, which has no interpreted trial
    script = _SCENARIOS + r'''
import sys
from gpuplan.workloads.inference import jit
from gpuplan.workloads.inference.cost.speculative import SpeculativeDecoding
cat = load_catalog()
gpu = cat.gpu("h100-sxm5-80gb")
dep = Deployment(load_model("llama-3-8b"), gpu, cat.system(gpu.id))
steps, mem = step_time_model(dep), memory_plan(dep)
wl = make_workload(np.random.default_rng(3), 40, ArrivalKind.CLOSED_LOOP, concurrency=8, **LOGNORMAL)
simulate(steps, mem, wl, SchedulerConfig(), speculative=SpeculativeDecoding(tokens=3, acceptance=0.7, mtp_layers=1))
assert jit.compiled() and "numba" in sys.modules
print("ok")
'''
    assert run_child(script).stdout.startswith("ok")


def test_a_division_python_refuses_is_left_to_the_compiled_loop():
    # numba's error_model="numpy" makes x / 0.0 inf; Python raises ZeroDivisionError: an interpreted
    # trial that raises one is run compiled instead (a zero HBM bandwidth makes every decode step's
    # KV read term bytes / 0.0)
    script = _SCENARIOS + r'''
import math, sys
from gpuplan.workloads.inference import jit
from gpuplan.workloads.inference.cost.operators import StepTimeModel
real = StepTimeModel.step_coefficients
StepTimeModel.step_coefficients = lambda self, *a, **k: real(self, *a, **k)._replace(hbm_bytes_per_s=0.0)
cat = load_catalog()
gpu = cat.gpu("h100-sxm5-80gb")
dep = Deployment(load_model("llama-3-8b"), gpu, cat.system(gpu.id))
steps, mem = step_time_model(dep), memory_plan(dep)
wl = make_workload(np.random.default_rng(3), 20, ArrivalKind.CLOSED_LOOP, concurrency=4, **LOGNORMAL)
res = simulate(steps, mem, wl, SchedulerConfig())
assert jit.compiled() and math.isinf(res.busy_s)
print("ok")
'''
    assert run_child(script).stdout.startswith("ok")
