"""Energy, electricity, CO2 and rental cost of one training run (`train` and `plan` both use this).

From the workload's totals (`workloads.training.totals.TrainingEstimate`: GPUs, time, GPU-hours and
math-kernel activity) and the one power model (`facilities.power`):

    power      = power_draw(system, gpu, num_gpus, activity, switches, storage)   (average over the run)
    energy_kwh = power.facility_power_w / 1000 x time_s / 3600      (facility_power_w = IT x PUE)
    co2_kg     = energy_kwh x grid_kg_co2_per_kwh;  electricity_usd = energy_kwh x electricity_usd_per_kwh
    cost_usd   = gpu_hours x $/GPU-hour   (`facilities.pricing.gpu_hour_price`: given, else the cheapest
                                            on-demand catalog price, else the named assumption)

Fabric switches: the caller may pass the count of a sized cluster (`plan`); otherwise the
rail-optimised fat tree of `facilities.fabric` for the run's nodes is sized here (none for one node),
so `train` and `plan` count the same switches for the same run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.errors import Infeasible, InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumption, Assumptions
from gpuplan.facilities.fabric import design_fabric
from gpuplan.facilities.power import Energy, PowerDraw, energy, has_power_figures, power_draw
from gpuplan.facilities.pricing import gpu_hour_price, gpu_hours_cost_usd
from gpuplan.specs import Gpu, System
from gpuplan.workloads.training.totals import TrainingEstimate


@dataclass(frozen=True)
class TrainingRunCost:
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


def training_run_cost(
    est: TrainingEstimate,
    system: System,
    gpu: Gpu,
    *,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
    usd_per_gpu_hour: float | None = None,
    switches: int | None = None,
) -> TrainingRunCost:
    """Power, energy, CO2 and cost of the run `est` (module docstring)."""
    price = gpu_hour_price(gpu, usd_per_gpu_hour, required=False)
    cost = None if price is None else gpu_hours_cost_usd(est.gpu_hours, price.value)
    if not has_power_figures(system, gpu):
        return TrainingRunCost(None, None, price, cost, note=f"no tdp_w in the catalog for '{gpu.id}': energy not estimated")
    note = ""
    if switches is None:
        try:
            switches = run_switches(system, gpu, est.num_gpus, assumptions)
        except (Infeasible, InputError) as exc:
            switches, note = 0, f"fabric not sized ({exc}): switch power not counted"
    power = power_draw(system, gpu, est.num_gpus, est.activity_fraction, switches=switches, assumptions=assumptions)
    return TrainingRunCost(power, energy(power.facility_power_w, est.time_s / 3600.0, assumptions), price, cost, note)


def run_cost_dict(run: TrainingRunCost) -> dict:
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
