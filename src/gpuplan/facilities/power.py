"""Power, energy, electricity cost and CO2 of a cluster.

    it_power_kw       = nodes * node_kw  (+ switches * switch_kw)  (+ nodes * storage_kw_per_node)
    facility_power_kw = it_power_kw * PUE
    annual_energy_kwh = facility_power_kw * 8760 h * load_fraction
    annual_cost_usd   = annual_energy_kwh * $/kWh
    annual_co2_tonnes = annual_energy_kwh * kg CO2/kWh / 1000

8760 = 24 h x 365 d (the seed module's own arithmetic). node_kw is the system's maximum power
(catalog `system_power_w`, DGX H100 10.2 kW); `load_fraction` defaults to the
`busy_power_fraction` assumption (1.0: nameplate maximum, as the seed does). Each term is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumptions

HOURS_PER_YEAR = 24 * 365  # 8760


@dataclass(frozen=True)
class PowerEstimate:
    nodes: int
    node_power_kw: float
    nodes_power_kw: float
    switches: int
    switch_power_kw: float
    storage_power_kw: float
    it_power_kw: float
    pue: float
    facility_power_kw: float
    load_fraction: float
    annual_energy_kwh: float
    electricity_usd_per_kwh: float
    annual_cost_usd: float
    it_only_annual_cost_usd: float  # nodes + switches + storage at PUE 1 (the seed's view)
    grid_kg_co2_per_kwh: float
    annual_co2_tonnes: float


def annual_energy_kwh(power_kw: float, load_fraction: float = 1.0) -> float:
    """kWh in one year at `power_kw` drawn `load_fraction` of the time: kW x 8760 h x fraction."""
    return power_kw * HOURS_PER_YEAR * load_fraction


def estimate_power(
    nodes: int,
    node_power_kw: float,
    switches: int = 0,
    *,
    include_fabric: bool = True,
    include_storage: bool = True,
    load_fraction: float | None = None,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> PowerEstimate:
    if nodes < 1:
        raise InputError(f"nodes: must be >= 1, got {nodes}", field="nodes")
    if assumptions.pue < 1:
        raise InputError(f"pue: must be >= 1.0, got {assumptions.pue}", field="pue")
    load = assumptions.busy_power_fraction if load_fraction is None else load_fraction
    if not 0 <= load <= 1:
        raise InputError(f"load-fraction: must be in [0, 1], got {load}", field="load_fraction")
    nodes_kw = nodes * node_power_kw
    switch_kw = switches * assumptions.switch_power_w / 1e3 if include_fabric else 0.0
    storage_kw = nodes * assumptions.storage_power_kw_per_node if include_storage else 0.0
    it_kw = nodes_kw + switch_kw + storage_kw
    facility_kw = it_kw * assumptions.pue
    energy = annual_energy_kwh(facility_kw, load)
    price = assumptions.electricity_usd_per_kwh
    return PowerEstimate(
        nodes=nodes, node_power_kw=node_power_kw, nodes_power_kw=nodes_kw, switches=switches if include_fabric else 0,
        switch_power_kw=switch_kw, storage_power_kw=storage_kw, it_power_kw=it_kw, pue=assumptions.pue,
        facility_power_kw=facility_kw, load_fraction=load, annual_energy_kwh=energy, electricity_usd_per_kwh=price,
        annual_cost_usd=energy * price, it_only_annual_cost_usd=annual_energy_kwh(it_kw, load) * price,
        grid_kg_co2_per_kwh=assumptions.grid_kg_co2_per_kwh,
        annual_co2_tonnes=energy * assumptions.grid_kg_co2_per_kwh / 1e3,
    )
