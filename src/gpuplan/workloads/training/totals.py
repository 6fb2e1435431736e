"""Totals of a training run: time, GPU-hours, energy, cost and CO2 to train N tokens (or a FLOP budget).

    steps      = ceil(tokens / tokens_per_step)
    time_s     = steps x step_time_s
    gpu_hours  = num_gpus x time_s / 3600
    energy     = time_s x PUE x (num_gpus x gpu_power_w + nodes x node_overhead_w)
    cost_usd   = gpu_hours x usd_per_gpu_hour
    co2_kg     = energy_kwh x grid_kg_per_kwh

Power model (`gpu_power_w`): a GPU draws its idle floor plus the rest of its TDP in proportion to
the fraction of the step it runs math kernels:

    gpu_power_w = tdp_w x (GPU_IDLE_FRACTION + (1 - GPU_IDLE_FRACTION) x busy),
    busy = (compute_s + recompute_s) / step_time_s

capped at TDP. GPU_IDLE_FRACTION = 0.10: an idle H100 SXM draws about 70 W of its 700 W (nvidia-smi
readings widely reported; NVIDIA does not publish an idle figure), an A100 SXM about 50-60 W of
400 W. Llama 3 (Dubey et al. 2024, sec. 3.3.4) reports tens-of-megawatt swings between compute and
communication phases, i.e. power follows math-kernel activity. Node overhead (CPUs, NICs, switches
inside the node, fans) = system_power_w - gpus_per_node x tdp_w from the catalog (DGX H100: 10.2 kW
- 8 x 700 W = 4.6 kW at maximum), scaled by the same activity fraction above a 50% floor;
NODE_OVERHEAD_FRACTION x GPU TDP per GPU where the system has no power figure.
PUE default 1.2 (hyperscale AI data centres report 1.1-1.2; Uptime Institute's 2023 survey
average is 1.58: pass --pue). Grid intensity default 0.46 kg CO2/kWh (IEA, world average
electricity 2022, ~460 g/kWh). Cloud price default: the cheapest on-demand catalog price for the GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.errors import Infeasible, InputError
from gpuplan.specs import Gpu, ModelSpec, Precision, System, TrainPlan
from gpuplan.workloads.training.plan_search import SearchResult, SearchSpace, search_plans
from gpuplan.workloads.training.step_time import Framework, StepTime, estimate_step_time

GPU_IDLE_FRACTION = 0.10
NODE_OVERHEAD_FRACTION = 0.30
NODE_OVERHEAD_FLOOR = 0.50
DEFAULT_PUE = 1.2
DEFAULT_GRID_KG_PER_KWH = 0.46


@dataclass(frozen=True)
class PowerDraw:
    gpu_w: float  # one GPU, average over a step
    node_overhead_w: float  # one node, non-GPU
    it_w: float  # all GPUs + node overheads
    facility_w: float  # x PUE


def power_draw(gpu: Gpu, system: System, num_gpus: int, busy: float, pue: float) -> PowerDraw:
    """Average power of the run (module docstring formula)."""
    busy = min(1.0, max(0.0, busy))
    gpu_w = gpu.tdp_w * (GPU_IDLE_FRACTION + (1.0 - GPU_IDLE_FRACTION) * busy)
    if system.system_power_w:
        node_max = max(0.0, system.system_power_w - system.gpus_per_node * gpu.tdp_w)
    else:
        node_max = NODE_OVERHEAD_FRACTION * gpu.tdp_w * system.gpus_per_node
    node_w = node_max * (NODE_OVERHEAD_FLOOR + (1.0 - NODE_OVERHEAD_FLOOR) * busy)
    nodes = math.ceil(num_gpus / system.gpus_per_node)
    it_w = num_gpus * gpu_w + nodes * node_w
    return PowerDraw(gpu_w, node_w, it_w, it_w * pue)


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
    power: PowerDraw
    pue: float
    energy_mwh: float
    usd_per_gpu_hour: float | None
    price_source: str
    cost_usd: float | None
    grid_kg_per_kwh: float
    co2_tonnes: float
    search: SearchResult | None = None


def cheapest_price(gpu_id: str) -> tuple[float | None, str]:
    """Cheapest on-demand $/GPU-hour in the catalog for `gpu_id` (None when the catalog has none)."""
    from gpuplan.catalog import load_catalog

    try:
        prices = load_catalog().cloud_prices(gpu_id)
    except Exception:  # noqa: BLE001 - a catalog without prices for this GPU
        prices = []
    if not prices:
        return None, "no catalog price (pass --usd-per-gpu-hour)"
    p = min(prices, key=lambda c: c.usd_per_gpu_hour)
    return p.usd_per_gpu_hour, f"{p.provider} {p.instance} on-demand ({p.date})"


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
    usd_per_gpu_hour: float | None = None,
    pue: float = DEFAULT_PUE,
    grid_kg_per_kwh: float = DEFAULT_GRID_KG_PER_KWH,
    framework: Framework = Framework.MEGATRON,
    progress=None,
) -> TrainingEstimate:
    """Train `model` on `num_gpus` GPUs of `system` for `tokens` tokens (or `flop_budget` model
    FLOPs): the best plan (searched unless `plan` is given), its step time and the totals."""
    from gpuplan.workloads.training.memory import training_memory

    if gpu is None:  # the system names its GPU; resolve it once here (callers may pass the spec)
        from gpuplan.catalog import get_gpu

        gpu = get_gpu(system.gpu)
    if (tokens is None) == (flop_budget is None):
        raise InputError("give exactly one of tokens or flop_budget", field="tokens")
    if pue < 1.0:
        raise InputError(f"pue must be >= 1.0, got {pue}", field="pue")
    if grid_kg_per_kwh < 0:
        raise InputError("grid_kg_per_kwh must be >= 0", field="grid_kg_per_kwh")
    search = None
    if plan is None:
        space = space or SearchSpace(global_batch=global_batch, seq_len=seq_len, precision=precision)
        search = search_plans(model, system, gpu, num_gpus, space, framework=framework, progress=progress)
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
                f"more than the {gpu.memory_bytes / 2**30:,.0f} GiB of {gpu.id}; raise tp/pp, shard "
                f"(--sharding zero3), recompute, or add GPUs"
            )
    if flop_budget is not None:
        tokens = flop_budget / step.model_flops_per_token
    steps = max(1, math.ceil(tokens / step.tokens_per_step))
    time_s = steps * step.step_time_s
    busy = (step.breakdown_s["compute_s"] + step.breakdown_s["recompute_s"]) / step.step_time_s
    power = power_draw(gpu, system, num_gpus, busy, pue)
    energy_mwh = power.facility_w * time_s / 3600.0 / 1e6
    if usd_per_gpu_hour is None:
        usd_per_gpu_hour, price_source = cheapest_price(gpu.id)
    else:
        price_source = "given"
    gpu_hours = num_gpus * time_s / 3600.0
    return TrainingEstimate(
        model=model.name, system=system.id, num_gpus=num_gpus, tokens=float(tokens), plan=plan, step=step,
        memory_per_gpu_gib=mem_gib, steps=steps, time_s=time_s, days=time_s / 86400.0, gpu_hours=gpu_hours,
        power=power, pue=pue, energy_mwh=energy_mwh, usd_per_gpu_hour=usd_per_gpu_hour, price_source=price_source,
        cost_usd=None if usd_per_gpu_hour is None else gpu_hours * usd_per_gpu_hour,
        grid_kg_per_kwh=grid_kg_per_kwh, co2_tonnes=energy_mwh * 1000.0 * grid_kg_per_kwh / 1000.0, search=search,
    )


__all__ = ["DEFAULT_GRID_KG_PER_KWH", "DEFAULT_PUE", "PowerDraw", "TrainingEstimate", "estimate_training", "power_draw"]
