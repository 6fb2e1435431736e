"""Digests of the outputs the speed work must leave unchanged: run it on two checkouts and compare.

For each configuration, the sha256 of a canonical JSON of its full result (every percentile, step
count, trace point, ranked plan and step-time part, floats at full precision via repr):
- serving simulator (`simulate`, event-driven and reference loops): chunked / continuous /
  prefill-first / static schedulers, closed loop, memory pressure with preemption, sliding-window
  model, CUDA-graph padding, prefix caching;
- plan search (`search_plans`): GPT-3 175B on 1024 GPUs (given batch) and DeepSeek-V3 on 15,360
  GPUs (per-plan batch), the best plans' axes, step time and parts.

    PYTHONPATH=/work/main/src python benchmarks/output_digests.py > before.txt
    PYTHONPATH=src python benchmarks/output_digests.py > after.txt && diff before.txt after.txt
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model


def digest(obj) -> str:
    def canon(x):
        if isinstance(x, dict):
            return {str(k): canon(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [canon(v) for v in x]
        if isinstance(x, np.ndarray):
            return [canon(v) for v in x.tolist()]
        if isinstance(x, (float, np.floating)):
            return repr(float(x))
        if isinstance(x, (np.integer,)):
            return int(x)
        if hasattr(x, "__dataclass_fields__"):
            return {k: canon(getattr(x, k)) for k in x.__dataclass_fields__}
        if hasattr(x, "model_dump"):
            return canon(x.model_dump())
        if hasattr(x, "value") and not isinstance(x, (int, str)):
            return str(x.value)
        return x if isinstance(x, (int, str, bool, type(None))) else repr(x)
    return hashlib.sha256(json.dumps(canon(obj), sort_keys=True).encode()).hexdigest()[:16]


def serving_cases():
    from gpuplan.workloads.inference.cost.deployment import Deployment
    from gpuplan.workloads.inference.cost.memory import memory_plan
    from gpuplan.workloads.inference.cost.operators import step_time_model
    from gpuplan.workloads.inference.cost.prefix_cache import PrefixCache
    from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, LengthDistribution, LengthKind, make_workload
    from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig
    from gpuplan.workloads.inference.sim.simulator import simulate

    cat = load_catalog()
    gpu = cat.gpu("h100-sxm5-80gb")
    lens = dict(input_len=LengthDistribution(512, LengthKind.LOGNORMAL, 1.0),
                output_len=LengthDistribution(256, LengthKind.LOGNORMAL, 1.0))
    for model in ("llama-3-8b", "gemma-2-9b"):
        try:
            dep = Deployment(load_model(model), gpu, cat.system(gpu.id))
        except Exception as exc:  # a model not bundled on this checkout
            yield f"serve {model}", f"unavailable: {type(exc).__name__}"
            continue
        steps, mem = step_time_model(dep), memory_plan(dep)
        for kind in ("chunked", "continuous", "prefill-first", "static"):
            for rate, n, arrivals in ((30.0, 20_000, ArrivalKind.POISSON), (400.0, 6_000, ArrivalKind.POISSON),
                                      (64.0, 4_000, ArrivalKind.CLOSED_LOOP)):
                closed = arrivals == ArrivalKind.CLOSED_LOOP
                wl = make_workload(np.random.default_rng(1), n, arrivals, rate=None if closed else rate,
                                   concurrency=int(rate) if closed else None, **lens)
                for event_driven in (True, False):
                    res = simulate(steps, mem, wl, SchedulerConfig(kind=kind), event_driven=event_driven)
                    yield f"serve {model} {kind} rate={rate} {arrivals.value} event={event_driven}", digest(res)
        long = dict(input_len=LengthDistribution(4096, LengthKind.LOGNORMAL, 1.0),
                    output_len=LengthDistribution(2048, LengthKind.LOGNORMAL, 1.0))
        wl = make_workload(np.random.default_rng(3), 6_000, ArrivalKind.POISSON, rate=200.0, **long)
        res = simulate(steps, mem, wl, SchedulerConfig(), event_driven=True)
        yield f"serve {model} KV pressure (preemptions {res.preemptions})", digest(res)
        wl = make_workload(np.random.default_rng(2), 8_000, ArrivalKind.POISSON, rate=60.0, **lens)
        res = simulate(steps, mem, wl, SchedulerConfig(), cuda_graph_batch_sizes=(1, 2, 4, 8, 16, 32, 64, 128),
                       prefix_cache=PrefixCache(0.5))
        yield f"serve {model} graphs+prefix", digest(res)


def plan_cases():
    from gpuplan.workloads.training.plan_search import SearchSpace, search_plans

    cat = load_catalog()
    system = cat.system("dgx-h100")
    gpu = cat.gpu(system.gpu)
    for model, gpus, space in (("gpt3-175b", 1024, SearchSpace(seq_len=2048, global_batch=2048)),
                               ("deepseek-v3", 15360, SearchSpace(seq_len=8192))):
        r = search_plans(load_model(model), system, gpu, gpus, space)
        yield f"plan {model} {gpus}", digest({"evaluated": r.plans_evaluated, "best": [
            {"plan": b.plan, "step": b.step} for b in r.best]})


if __name__ == "__main__":
    for name, d in (*serving_cases(), *plan_cases()):
        print(f"{name}: {d}")
