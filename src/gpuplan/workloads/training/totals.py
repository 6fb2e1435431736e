"""Totals of a training run: time and GPU-hours to train N tokens (or a FLOP budget).

    steps      = ceil(tokens / tokens_per_step)
    time_s     = steps x step_time_s
    gpu_hours  = num_gpus x time_s / 3600
    activity   = (compute_s + recompute_s) / step_time_s   (fraction of the step running math kernels)

Energy, electricity, CO2 and cost of the run are not workload quantities: `facilities.run_cost`
computes them from these totals with the one power model (`facilities.power`) and the one price
lookup (`facilities.pricing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.errors import Infeasible, InputError
from gpuplan.specs import Gpu, ModelSpec, Precision, System, TrainPlan
from gpuplan.workloads.training.plan_search import SearchResult, SearchSpace, search_plans
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.step.assembly import StepTime, estimate_step_time
from gpuplan.workloads.memory_headroom import headroom_note


@dataclass(frozen=True)
class TrainingEstimate:
    model: str
    system: str
    num_gpus: int
    tokens: float
    plan: TrainPlan
    step: StepTime
    memory_per_gpu_gib: float
    steps: int
    time_s: float
    days: float
    gpu_hours: float
    search: SearchResult | None = None

    @property
    def activity_fraction(self) -> float:
        """Fraction of the step the GPUs run math kernels: (compute_s + recompute_s) / step_time_s, in [0, 1]."""
        b = self.step.breakdown_s
        return min(1.0, max(0.0, (b["compute_s"] + b["recompute_s"]) / self.step.step_time_s))


def estimate_training(
    model: ModelSpec,
    system: System,
    num_gpus: int,
    tokens: float | None = None,
    *,
    gpu: Gpu | None = None,
    flop_budget: float | None = None,
    seq_len: int = 2048,
    global_batch: int | None = None,
    precision: Precision = Precision.BF16,
    plan: TrainPlan | None = None,
    space: SearchSpace | None = None,
    framework: Framework | None = None,
    progress=None,
    top: int = 5,
) -> TrainingEstimate:
    """Train `model` on `num_gpus` GPUs of `system` for `tokens` tokens (or `flop_budget` model
    FLOPs): the best plan (searched unless `plan` is given; `top` best plans kept), its step time
    and the totals. `framework` None: the system's (`framework_defaults.default_framework`)."""
    from gpuplan.workloads.training.memory import training_memory
    from gpuplan.workloads.training.framework_defaults import default_framework

    framework = framework or default_framework(system)

    if gpu is None:  # the system names its GPU; resolve it once here (callers may pass the spec)
        from gpuplan.catalog import get_gpu

        gpu = get_gpu(system.gpu)
    if (tokens is None) == (flop_budget is None):
        raise InputError("give exactly one of tokens or flop_budget", field="tokens")
    search = None
    if plan is None:
        space = space or SearchSpace(global_batch=global_batch, seq_len=seq_len, precision=precision)
        search = search_plans(model, system, gpu, num_gpus, space, top=top, framework=framework, progress=progress)
        ranked = search.best[0]
        plan, step, mem_gib = ranked.plan, ranked.step, ranked.memory_gib
    else:
        if plan.num_gpus != num_gpus:
            raise InputError(f"tp x pp x dp x cp = {plan.num_gpus} does not equal --gpus {num_gpus}", field="gpus")
        step = estimate_step_time(model, system, plan, gpu, framework)
        memory = training_memory(model, plan, gpu)
        mem_gib = memory.per_gpu_bytes["total"] / 2**30
        if memory.fits is False:  # the user's own plan: report it, never cost a plan that cannot run
            raise Infeasible(
                f"plan tp={plan.tp} pp={plan.pp} dp={plan.dp} cp={plan.cp} needs {mem_gib:,.1f} GiB per GPU, "
                f"more than the {headroom_note(gpu.memory_bytes)} on {gpu.id}; raise tp/pp, shard "
                f"(--sharding zero3), recompute, or add GPUs"
            )
    if flop_budget is not None:
        tokens = flop_budget / step.model_flops_per_token
    steps = max(1, math.ceil(tokens / step.tokens_per_step))
    time_s = steps * step.step_time_s
    gpu_hours = num_gpus * time_s / 3600.0
    return TrainingEstimate(
        model=model.name, system=system.id, num_gpus=num_gpus, tokens=float(tokens), plan=plan, step=step,
        memory_per_gpu_gib=mem_gib, steps=steps, time_s=time_s, days=time_s / 86400.0, gpu_hours=gpu_hours,
        search=search,
    )


__all__ = ["TrainingEstimate", "estimate_training"]
