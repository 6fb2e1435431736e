"""Energy, electricity, CO2 and rental cost of a run: a training run (`train`, `plan`) or a day of
serving (`plan --goal serve`, `serve plan`). One power model (`facilities.power`), one price lookup
(`facilities.pricing`), one set of assumptions:

    power      = power_draw(system, gpu, gpus, k x activity, switches, storage)   (average over the run;
                 k = power.loaded_activity_scale: full activity draws the measured loaded power,
                 loaded_power_fraction_of_nameplate x nameplate, not nameplate)
    energy_kwh = power.facility_power_w / 1000 x hours                  (facility_power_w = IT x PUE)
    co2_kg     = energy_kwh x grid_kg_co2_per_kwh;  electricity_usd = energy_kwh x electricity_usd_per_kwh
    cost_usd   = gpu_hours x $/GPU-hour   (`facilities.pricing.gpu_hour_price`: given, else the cheapest
                                            on-demand catalog price, else the named assumption)

Activity: a training run's comes from its step time (`TrainingEstimate.activity_fraction`); serving
runs at `busy_activity_fraction` (1.0: decode is memory-bound, but its kernels keep the GPU busy;
no measured serving power is modelled, so a serving day draws the training-load figure).
Fabric switches: the caller may pass the count of a sized cluster (`plan`); otherwise a training run
sizes the rail-optimised fat tree of `facilities.fabric` for its nodes (none for one node), so
`train` and `plan` count the same switches for the same run. Serving replicas (`serve plan`) are
independent and count no scale-out fabric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpuplan.errors import Infeasible, InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumption, Assumptions
from gpuplan.facilities.fabric import design_fabric
from gpuplan.facilities.power import (Energy, PowerDraw, energy, has_power_figures, loaded_activity_scale,
                                     power_draw)
from gpuplan.facilities.pricing import gpu_hour_price, gpu_hours_cost_usd
from gpuplan.specs import Gpu, System
from gpuplan.workloads.training.totals import TrainingEstimate


@dataclass(frozen=True)
class RunCost:
    power: PowerDraw | None  # None where the catalog lacks the GPU's TDP (see `note`)
    energy: Energy | None
    price: Assumption | None  # $/GPU-hour and its source; None where no price is known
    cost_usd: float | None
    note: str = ""


def run_switches(system: System, gpu: Gpu, gpus: int, assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> int:
    """Fabric switches of the cluster the run needs: none on one node, else the default fat tree's."""
    nodes = math.ceil(gpus / system.gpus_per_node)
    if nodes <= 1:
        return 0
    return design_fabric(system, gpu, nodes, assumptions=assumptions).switches


def run_cost(
    system: System,
    gpu: Gpu,
    gpus: int,
    activity: float,
    hours: float,
    *,
    switches: int = 0,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
    usd_per_gpu_hour: float | None = None,
    note: str = "",
) -> RunCost:
    """`gpus` GPUs of `system` at `activity` for `hours` (module docstring)."""
    price = gpu_hour_price(gpu, usd_per_gpu_hour, required=False)
    cost = None if price is None else gpu_hours_cost_usd(gpus * hours, price.value)
    if not has_power_figures(system, gpu):
        return RunCost(None, None, price, cost, note=f"no tdp_w in the catalog for '{gpu.id}': energy not estimated")
    # full activity draws the measured loaded power, not nameplate (facilities.power.loaded_activity_scale)
    power = power_draw(system, gpu, gpus, activity * loaded_activity_scale(system, gpu, assumptions), switches=switches,
                       assumptions=assumptions)
    power = replace(power, activity_fraction=float(activity))
    return RunCost(power, energy(power.facility_power_w, hours, assumptions), price, cost, note)


def training_run_cost(
    est: TrainingEstimate,
    system: System,
    gpu: Gpu,
    *,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
    usd_per_gpu_hour: float | None = None,
    switches: int | None = None,
) -> RunCost:
    """Power, energy, CO2 and cost of the training run `est`, at its own activity."""
    note = ""
    if switches is None:
        try:
            switches = run_switches(system, gpu, est.num_gpus, assumptions) if has_power_figures(system, gpu) else 0
        except (Infeasible, InputError) as exc:
            switches, note = 0, f"fabric not sized ({exc}): switch power not counted"
    return run_cost(system, gpu, est.num_gpus, est.activity_fraction, est.time_s / 3600.0, switches=switches,
                    assumptions=assumptions, usd_per_gpu_hour=usd_per_gpu_hour, note=note)


def serving_day_cost(
    system: System,
    gpu: Gpu,
    gpus: int,
    *,
    switches: int = 0,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
    usd_per_gpu_hour: float | None = None,
) -> RunCost:
    """One day (24 h) of serving on `gpus` GPUs at busy_activity_fraction."""
    return run_cost(system, gpu, gpus, assumptions.busy_activity_fraction, 24.0, switches=switches,
                    assumptions=assumptions, usd_per_gpu_hour=usd_per_gpu_hour)


def kwh_per_million_output_tokens(run: RunCost, output_tokens_per_s: float) -> float | None:
    """Facility energy per million output tokens: facility_kw / (tokens/s x 3600) x 1e6."""
    if run.power is None or not output_tokens_per_s > 0:
        return None
    return run.power.facility_power_w / 1e3 / (output_tokens_per_s * 3600.0) * 1e6


def run_cost_dict(run: RunCost) -> dict:
    """Flat JSON of a run's power, energy, CO2 and cost (units in the keys; None where unknown)."""
    p, e = run.power, run.energy
    return {
        "activity_fraction": p.activity_fraction if p else None,
        "gpu_power_w": p.gpu_power_w if p else None,
        "node_overhead_w": p.node_overhead_w if p else None,
        "storage_power_w": p.storage_power_w if p else None,
        "fabric_switches": p.switches if p else None,
        "switches_power_w": p.switches_power_w if p else None,
        "it_power_w": p.it_power_w if p else None,
        "facility_power_w": p.facility_power_w if p else None,
        "hours": e.hours if e else None,
        "energy_kwh": e.energy_kwh if e else None,
        "energy_mwh": e.energy_mwh if e else None,
        "electricity_usd": e.electricity_usd if e else None,
        "co2_kg": e.co2_kg if e else None,
        "co2_tonnes": e.co2_tonnes if e else None,
        "usd_per_gpu_hour": run.price.value if run.price else None,
        "price_source": price_source(run.price),
        "cost_usd": run.cost_usd,
        "power_note": run.note,
    }


def price_source(price: Assumption | None) -> str:
    if price is None:
        return "no price known (pass --usd-per-gpu-hour)"
    if price.source == "user override":
        return "given"
    return f"{price.description} ({price.date})"
