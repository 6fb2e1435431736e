"""The one power model: what a GPU, a node and a cluster draw, and the energy, electricity cost and
CO2 that follow. `train`, `plan`, `dc` and `serve` all compute power here, from one set of
assumptions (`facilities.assumptions`: PUE, grid intensity, $/kWh, idle fractions).

Activity `a` (0..1) is the fraction of the time the GPUs run math kernels: a training run's comes
from its step time ((compute + recompute) / step time); a cluster sized for provisioning runs at
`busy_activity_fraction` (1.0: nameplate maximum) and idles at a = 0.

    gpu_w(a)       = tdp_w x (i_gpu + (1 - i_gpu) x a)                 i_gpu  = gpu_idle_power_fraction (0.10)
    overhead_max_w = system_power_w - gpus_per_node x tdp_w            catalog system maximum, else
                   = gpus_per_node x tdp_w x node_overhead_fraction_of_gpu_tdp (0.82)
    overhead_w(a)  = overhead_max_w x (i_node + (1 - i_node) x a)      i_node = node_overhead_idle_fraction (0.50)
    node_w(a)      = gpus_per_node x gpu_w(a) + overhead_w(a)          node_w(1) = system_power_w, the nameplate
    it_w           = gpus x gpu_w(a) + n x overhead_w(a) + n x storage_w_per_node + switches x switch_w,
                     n = gpus / gpus_per_node (node-equivalents)
    facility_w     = it_w x PUE
    energy_kwh     = facility_w / 1000 x hours;  electricity_usd = energy_kwh x $/kWh;  co2_kg = energy_kwh x kg CO2/kWh

Node overhead (host CPUs and memory, NICs, NVSwitches, fans, drives) comes from the catalog's
system maximum power where it has one: NVIDIA DGX H100 10.2 kW max for 8 x 700 W H100 SXM ->
4.6 kW (0.82 x GPU TDP); DGX A100 6.5 kW for 8 x 400 W -> 3.3 kW (1.03 x); DGX B200 14.3 kW for
8 x 1,000 W -> 6.3 kW (0.79 x). Systems without a catalog maximum use the DGX H100 ratio.
Power follows math-kernel activity: Llama 3 (Dubey et al. 2024, sec. 3.3.4) reports
tens-of-megawatt swings of a 16k-GPU job between compute and communication phases. A job on part
of a node (one serving replica on 1 of 8 GPUs) is charged its share of the node's overhead and
storage, gpus / gpus_per_node, as a per-GPU rental is; whole nodes are charged whole.
Storage (a share per node) and fabric switches draw a constant power. 8760 h = 365 d x 24 h.

A cluster's energy over a year (`estimate_power`, and the TCO's power bill from it) comes from a
stated average draw, not nameplate 24/7. Provisioning (facility kW, racks, cooling, the facility
build-out) stays at nameplate, the power the cluster may draw:

    loaded_it_w  = n x L x node_w(1) + storage + switches       L = loaded_power_fraction_of_nameplate
                 = n x node_w(k) + storage + switches           k = `loaded_activity_scale`
    idle_it_w    = n x node_w(0) + storage + switches
    average_it_w = idle_it_w + (loaded_it_w - idle_it_w) x u    u = utilisation (share of hours busy)
    average_facility_w = average_it_w x PUE;  annual energy = average_facility_w x 8760 h

L is measured: 8-GPU H100 nodes training at full load draw 76% of their 10.2 kW rating (Newkirk et
al. 2025, arXiv:2506.14551; Latif et al. 2024, arXiv:2412.08602: peak 8.4 kW, 82%). L = 1 gives the
nameplate figure (`--set loaded_power_fraction_of_nameplate=1`). A run (facilities.run_cost: a
training run at its activity a, a day of serving at busy_activity_fraction) draws node_w(k a): full
math-kernel activity is the measured loaded draw. The nameplate-24/7 keys
(`annual_energy_kwh`, `annual_cost_usd`) keep their meaning beside the `average_*` ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumptions
from gpuplan.specs import Gpu, System

HOURS_PER_YEAR = 24 * 365  # 8760


def _check_activity(activity: float) -> float:
    if not (math.isfinite(activity) and 0.0 <= activity <= 1.0):
        raise InputError(f"activity: must be in [0, 1], got {activity}", field="activity")
    return float(activity)


def has_power_figures(system: System, gpu: Gpu) -> bool:
    """True when the model can size this node: it needs the GPU's TDP (the catalog lacks it for TPUs)."""
    return bool(gpu.tdp_w)


def _tdp_w(system: System, gpu: Gpu) -> float:
    if not gpu.tdp_w:
        raise InputError(f"system: GPU '{gpu.id}' of '{system.id}' has no tdp_w in the catalog; cannot size power",
                         field="system")
    return float(gpu.tdp_w)


def gpu_power_w(system: System, gpu: Gpu, activity: float, assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> float:
    """Board power of one GPU at `activity`: tdp_w x (i_gpu + (1 - i_gpu) x a)."""
    i_gpu = assumptions.gpu_idle_power_fraction
    return _tdp_w(system, gpu) * (i_gpu + (1.0 - i_gpu) * _check_activity(activity))


def node_overhead_max_w(system: System, gpu: Gpu, assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> float:
    """Non-GPU power of one node at its maximum: catalog system_power_w - GPUs x TDP (never below 0),
    else GPUs x TDP x node_overhead_fraction_of_gpu_tdp."""
    gpus_w = system.gpus_per_node * _tdp_w(system, gpu)
    if system.system_power_w:
        return max(0.0, float(system.system_power_w) - gpus_w)
    return gpus_w * assumptions.node_overhead_fraction_of_gpu_tdp


def node_overhead_w(system: System, gpu: Gpu, activity: float, assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> float:
    """Non-GPU power of one node at `activity`: overhead_max_w x (i_node + (1 - i_node) x a)."""
    i_node = assumptions.node_overhead_idle_fraction
    return node_overhead_max_w(system, gpu, assumptions) * (i_node + (1.0 - i_node) * _check_activity(activity))


def node_power_w(system: System, gpu: Gpu, activity: float = 1.0, assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> float:
    """Power of one full node at `activity` (GPUs + overhead); at 1.0, the system's maximum power."""
    return (system.gpus_per_node * gpu_power_w(system, gpu, activity, assumptions)
            + node_overhead_w(system, gpu, activity, assumptions))


@dataclass(frozen=True)
class PowerDraw:
    """Average power of `gpus` GPUs on `nodes` nodes at one activity, term by term (watts)."""

    activity_fraction: float
    gpus: int
    nodes: int  # ceil(gpus / gpus_per_node); overhead and storage are charged for gpus / gpus_per_node
    gpu_power_w: float  # one GPU
    node_overhead_w: float  # one node, non-GPU
    gpus_power_w: float  # gpus x gpu_power_w
    node_overheads_power_w: float  # gpus / gpus_per_node x node_overhead_w
    storage_power_w: float
    switches: int
    switches_power_w: float
    it_power_w: float  # sum of the five terms above
    facility_power_w: float  # it_power_w x PUE


def power_draw(
    system: System,
    gpu: Gpu,
    gpus: int,
    activity: float,
    *,
    switches: int = 0,
    include_storage: bool = True,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> PowerDraw:
    """IT and facility power of `gpus` GPUs of `system` at `activity`, with `switches` fabric switches
    and (by default) the storage share, per node-equivalent (gpus / gpus_per_node)."""
    if gpus < 1:
        raise InputError(f"gpus: must be >= 1, got {gpus}", field="gpus")
    if switches < 0:
        raise InputError(f"switches: must be >= 0, got {switches}", field="switches")
    node_equivalents = gpus / system.gpus_per_node
    gpu_w = gpu_power_w(system, gpu, activity, assumptions)
    overhead_w = node_overhead_w(system, gpu, activity, assumptions)
    storage_w = node_equivalents * assumptions.storage_power_kw_per_node * 1e3 if include_storage else 0.0
    switches_w = switches * assumptions.switch_power_w
    it_w = gpus * gpu_w + node_equivalents * overhead_w + storage_w + switches_w
    return PowerDraw(
        activity_fraction=float(activity), gpus=gpus, nodes=math.ceil(node_equivalents), gpu_power_w=gpu_w,
        node_overhead_w=overhead_w, gpus_power_w=gpus * gpu_w, node_overheads_power_w=node_equivalents * overhead_w,
        storage_power_w=storage_w,
        switches=switches, switches_power_w=switches_w, it_power_w=it_w, facility_power_w=it_w * assumptions.pue,
    )


@dataclass(frozen=True)
class Energy:
    """Energy at the facility meter over `hours`, what it costs and what it emits."""

    hours: float
    energy_kwh: float
    electricity_usd: float
    co2_kg: float

    @property
    def energy_mwh(self) -> float:
        return self.energy_kwh / 1e3

    @property
    def co2_tonnes(self) -> float:
        return self.co2_kg / 1e3


def energy(facility_power_w: float, hours: float, assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> Energy:
    """energy_kwh = facility_w / 1000 x hours; electricity_usd = kWh x $/kWh; co2_kg = kWh x kg CO2/kWh."""
    if not (math.isfinite(hours) and hours >= 0):
        raise InputError(f"hours: must be >= 0, got {hours}", field="hours")
    kwh = facility_power_w / 1e3 * hours
    return Energy(hours=hours, energy_kwh=kwh, electricity_usd=kwh * assumptions.electricity_usd_per_kwh,
                  co2_kg=kwh * assumptions.grid_kg_co2_per_kwh)


# ---- a cluster over a year (`dc power`, `plan`, TCO) ----------------------------------------------

@dataclass(frozen=True)
class PowerEstimate:
    """A cluster of whole nodes at its busy activity, and idle, over a year."""

    nodes: int
    activity_fraction: float
    node_power_kw: float  # one node at the busy activity (nameplate maximum at 1.0)
    nodes_power_kw: float
    switches: int
    switch_power_kw: float
    storage_power_kw: float
    it_power_kw: float
    idle_it_power_kw: float  # the same cluster at activity 0
    pue: float
    facility_power_kw: float
    annual_energy_kwh: float  # facility power at the busy activity, all year
    electricity_usd_per_kwh: float
    annual_cost_usd: float
    it_only_annual_cost_usd: float  # nodes + switches + storage at PUE 1 (the seed's view)
    grid_kg_co2_per_kwh: float
    annual_co2_tonnes: float
    # the stated average draw (module docstring): utilisation, loaded fraction of nameplate, the draw and its year
    utilization: float
    loaded_power_fraction_of_nameplate: float
    loaded_it_power_kw: float  # every node at L x nameplate, + switches + storage
    average_it_power_kw: float
    average_facility_power_kw: float
    average_annual_energy_kwh: float
    average_annual_cost_usd: float
    average_annual_co2_tonnes: float


def loaded_activity_scale(system: System, gpu: Gpu, assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> float:
    """The activity at which a node draws the measured loaded power L x nameplate (module docstring):
    node_w is linear in a, so k = (L x node_w(1) - node_w(0)) / (node_w(1) - node_w(0)), in [0, 1].
    A workload at math-kernel activity a then draws node_w(k a) = node_w(0) + (L node_w(1) - node_w(0)) a:
    full activity is the measured loaded draw, not nameplate."""
    top, idle = node_power_w(system, gpu, 1.0, assumptions), node_power_w(system, gpu, 0.0, assumptions)
    if top <= idle:
        return 1.0
    return min(1.0, max(0.0, (assumptions.loaded_power_fraction_of_nameplate * top - idle) / (top - idle)))


def estimate_power(
    system: System,
    gpu: Gpu,
    nodes: int,
    switches: int = 0,
    *,
    include_fabric: bool = True,
    include_storage: bool = True,
    activity: float | None = None,
    utilization: float | None = None,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> PowerEstimate:
    """`nodes` whole nodes (+ switches, + storage) at `activity` (default busy_activity_fraction) all
    year, and at the average draw of `utilization` (default energy_utilization_fraction; module docstring)."""
    if nodes < 1:
        raise InputError(f"nodes: must be >= 1, got {nodes}", field="nodes")
    a = assumptions.busy_activity_fraction if activity is None else activity
    switches = switches if include_fabric else 0
    gpus = nodes * system.gpus_per_node
    busy = power_draw(system, gpu, gpus, a, switches=switches, include_storage=include_storage, assumptions=assumptions)
    idle = power_draw(system, gpu, gpus, 0.0, switches=switches, include_storage=include_storage, assumptions=assumptions)
    year = energy(busy.facility_power_w, HOURS_PER_YEAR, assumptions)
    nodes_w = busy.gpus_power_w + busy.node_overheads_power_w
    u = assumptions.energy_utilization_fraction if utilization is None else utilization
    if not (math.isfinite(u) and 0.0 <= u <= 1.0):
        raise InputError(f"utilization: must be in [0, 1], got {u}", field="utilization")
    loaded_w = power_draw(system, gpu, gpus, loaded_activity_scale(system, gpu, assumptions), switches=switches,
                          include_storage=include_storage, assumptions=assumptions).it_power_w
    average_w = idle.it_power_w + (loaded_w - idle.it_power_w) * u
    average_year = energy(average_w * assumptions.pue, HOURS_PER_YEAR, assumptions)
    return PowerEstimate(
        nodes=nodes, activity_fraction=a, node_power_kw=nodes_w / nodes / 1e3, nodes_power_kw=nodes_w / 1e3,
        switches=switches, switch_power_kw=busy.switches_power_w / 1e3, storage_power_kw=busy.storage_power_w / 1e3,
        it_power_kw=busy.it_power_w / 1e3, idle_it_power_kw=idle.it_power_w / 1e3, pue=assumptions.pue,
        facility_power_kw=busy.facility_power_w / 1e3, annual_energy_kwh=year.energy_kwh,
        electricity_usd_per_kwh=assumptions.electricity_usd_per_kwh, annual_cost_usd=year.electricity_usd,
        it_only_annual_cost_usd=busy.it_power_w / 1e3 * HOURS_PER_YEAR * assumptions.electricity_usd_per_kwh,
        grid_kg_co2_per_kwh=assumptions.grid_kg_co2_per_kwh, annual_co2_tonnes=year.co2_tonnes,
        utilization=u, loaded_power_fraction_of_nameplate=assumptions.loaded_power_fraction_of_nameplate,
        loaded_it_power_kw=loaded_w / 1e3, average_it_power_kw=average_w / 1e3,
        average_facility_power_kw=average_w * assumptions.pue / 1e3, average_annual_energy_kwh=average_year.energy_kwh,
        average_annual_cost_usd=average_year.electricity_usd, average_annual_co2_tonnes=average_year.co2_tonnes,
    )
