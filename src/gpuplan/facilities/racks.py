"""Racks: how many nodes fit in one rack, and how many racks a cluster needs.

nodes_per_rack = min(floor(rack_power_limit_kw / node_kw), floor(rack_usable_units / node_rack_units)),
node_kw = the node's maximum power (`facilities.power.node_power_w` at activity 1),
at least 1 (a node above the rack power limit is a rack-scale system and gets a rack of its own).
Fabric switches go in network racks: ceil(switches * switch_rack_units / rack_usable_units).
With defaults (45 kW, 42U): DGX H100 (10.2 kW, 8U) -> min(4, 5) = 4 per rack, as the H100 SuperPOD RA.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumptions
from gpuplan.facilities.cooling import CoolingClass, cooling_class
from gpuplan.facilities.power import node_power_w
from gpuplan.specs import Gpu, System


@dataclass(frozen=True)
class RackLayout:
    nodes: int
    node_power_kw: float
    node_rack_units: int | None
    nodes_per_rack: int
    limited_by: str  # "power", "space", "rack-scale system"
    compute_racks: int
    network_racks: int
    racks: int
    compute_rack_kw: float  # nodes_per_rack x node power (+ storage share)
    cooling: CoolingClass


def rack_layout(
    system: System, gpu: Gpu, nodes: int, switches: int = 0, assumptions: Assumptions = DEFAULT_ASSUMPTIONS
) -> RackLayout:
    if nodes < 1:
        raise InputError(f"nodes: must be >= 1, got {nodes}", field="nodes")
    node_kw = node_power_w(system, gpu, 1.0, assumptions) / 1e3  # nameplate maximum (facilities.power)
    by_power = int(math.floor(assumptions.rack_power_limit_kw / node_kw)) if node_kw > 0 else nodes
    units = system.rack_units
    by_space = int(math.floor(assumptions.rack_usable_units / units)) if units else by_power
    if by_power < 1 or by_space < 1:
        per_rack, limited = 1, "rack-scale system"
    elif by_power <= by_space:
        per_rack, limited = by_power, "power"
    else:
        per_rack, limited = by_space, "space"
    per_rack = min(per_rack, nodes)
    compute_racks = math.ceil(nodes / per_rack)
    network_racks = math.ceil(switches * assumptions.switch_rack_units / assumptions.rack_usable_units) if switches else 0
    rack_kw = per_rack * (node_kw + assumptions.storage_power_kw_per_node)
    return RackLayout(
        nodes=nodes, node_power_kw=node_kw, node_rack_units=units, nodes_per_rack=per_rack, limited_by=limited,
        compute_racks=compute_racks, network_racks=network_racks, racks=compute_racks + network_racks,
        compute_rack_kw=rack_kw, cooling=cooling_class(rack_kw, assumptions),
    )
