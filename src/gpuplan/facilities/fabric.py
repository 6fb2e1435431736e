"""Compute-fabric bill of materials: a rail-optimised fat tree, as NVIDIA's DGX SuperPOD builds it.

Construction (DGX SuperPOD H100 RA-11333-001 V11 and the B200 RA, hardware.md section 5):

- **Rails.** NIC k of every node connects to the leaf switches of rail k ("each group of 32 nodes
  is rail-aligned ... traffic per rail is always one hop away from the other 31 nodes in a SU").
  A scalable unit (SU) is 32 eight-GPU nodes, i.e. one leaf per rail per SU.
- **Leaf.** A radix-k switch gives `down = floor(k * o / (1 + o))` ports to nodes and
  `up = k - down` to spines, for oversubscription `o` (1 = non-blocking: 32 down / 32 up);
  1 <= o <= k - 1 (a leaf keeps at least one uplink).
  leaves = rails * ceil((node ports + management ports) / (rails * down)). Below one SU several rails
  share a leaf (rails per leaf = floor(down / nodes)); if every port fits on one switch, one tier.
- **Two tiers** while every spine can reach every leaf. Spines S = the smallest power of two
  >= ceil(leaves * uplinks per leaf / k) for which each leaf sends the same number of links to every
  spine (uplinks per leaf rounded up to a multiple of S, at most k - down). This gives the RA's
  4 / 8 / 16 / 16 spines for 1-4 SUs (3 SUs need 12 by port count; 12 does not spread 32 uplinks
  evenly: 16) and the B200 RA's 8 / 16 / 32 for 2 / 4 / 8 SUs.
- **Three tiers** beyond that (B200 RA from 16 SUs): each spine has k/2 ports down and k/2 up;
  spines = ceil(leaf uplinks / (k/2)), cores = ceil(spines * k/2 / k). 16 SUs -> 128 / 128 / 64.
  Capacity k^3/4 endpoints (65,536 for k = 64); more is Infeasible (four tiers are not modelled).
- **Cables** per tier: node-leaf = node ports + management ports; leaf-spine = leaves * up_per_leaf;
  spine-core = spines * k/2. **Transceivers** = 2 ends per cable / ports per transceiver
  (twin-port OSFP: 2).
- **Bisection bandwidth** = (endpoints / 2) * line rate / o (a fat tree's full bisection).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.errors import Infeasible, InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumptions
from gpuplan.specs import Gpu, System

#: GPUs per scalable unit for 8-GPU nodes: 32 DGX H100 / B200 (H100 RA Table 4; B200 RA)
SU_GPUS_8GPU_NODES = 256
#: nodes (racks) per SU for rack-scale NVL72 systems: GB200 SuperPOD RA, SU = 8 racks (576 GPUs)
SU_NODES_RACK_SCALE = 8


@dataclass(frozen=True)
class FabricTier:
    name: str  # "node-leaf", "leaf-spine", "spine-core"
    cables: int
    transceivers: int


@dataclass(frozen=True)
class FabricDesign:
    system_id: str
    nodes: int
    gpus: int
    rails: int
    scalable_units: float
    nodes_per_scalable_unit: int
    switch_radix_ports: int
    oversubscription: float
    tiers_count: int
    leaf_switches: int
    spine_switches: int
    core_switches: int
    switches: int
    leaf_down_ports: int
    leaf_up_ports_used: int
    management_ports: int
    node_leaf_cables: int
    leaf_spine_cables: int
    spine_core_cables: int
    cables: int
    transceivers: int
    nic_gbit_s: float
    bisection_tbit_s: float
    bisection_tbps: float  # terabytes/s (project convention: *_gbps = GB/s, so *_tbps = TB/s)
    scaleout_gbps_per_gpu: float
    cluster_peak_pflops: dict[str, dict[str, float | None]]
    tiers: tuple[FabricTier, ...]


def scalable_unit_nodes(system: System) -> int:
    """Nodes per scalable unit: 32 eight-GPU nodes (256 GPUs), or 8 racks of a rack-scale system."""
    if system.gpus_per_node >= 36:
        return SU_NODES_RACK_SCALE
    return max(1, SU_GPUS_8GPU_NODES // system.gpus_per_node)


def _spine_count(leaves: int, up_wanted: int, up_max: int, radix: int) -> tuple[int, int] | None:
    """(spines, uplinks per leaf) for two tiers, or None if two tiers cannot serve `leaves`.

    Spines S = the smallest power of two >= ceil(leaves * up_wanted / radix) such that every leaf can
    send the same number of links to every spine: uplinks per leaf = ceil(up_wanted / S) * S <= up_max,
    and each spine's ports suffice: leaves * uplinks per leaf / S <= radix."""
    s = 1
    while s < math.ceil(leaves * up_wanted / radix):
        s *= 2
    while s <= up_max:
        per_leaf = math.ceil(up_wanted / s) * s
        if per_leaf <= up_max and leaves * per_leaf // s <= radix:
            return s, per_leaf
        s *= 2
    return None


def cluster_peak_pflops(gpu: Gpu, gpus: int) -> dict[str, dict[str, float | None]]:
    """Peak PFLOP/s of the cluster per dtype: gpus * peak TFLOP/s / 1000, dense and (separately) sparse."""
    return {
        dtype: {"dense": gpus * p.dense / 1e3, "sparse": None if p.sparse is None else gpus * p.sparse / 1e3}
        for dtype, p in gpu.peak_tflops.items()
    }


def design_fabric(
    system: System,
    gpu: Gpu,
    nodes: int | None = None,
    *,
    scalable_units: float | None = None,
    oversubscription: float = 1.0,
    management_ports: int = 0,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> FabricDesign:
    """Build the compute fabric for `nodes` nodes (or `scalable_units` SUs) of `system`. See module doc."""
    su_nodes = scalable_unit_nodes(system)
    if nodes is None:
        if scalable_units is None:
            raise InputError("nodes: give --nodes or --scalable-units", field="nodes")
        if scalable_units <= 0:
            raise InputError(f"scalable-units: must be > 0, got {scalable_units}", field="scalable_units")
        nodes = int(math.ceil(scalable_units * su_nodes))
    if nodes < 1:
        raise InputError(f"nodes: must be >= 1, got {nodes}", field="nodes")
    if management_ports < 0:
        raise InputError("management-ports: must be >= 0", field="management_ports")
    radix = int(assumptions.switch_radix_ports)
    if radix < 4 or radix % 2:
        raise InputError(f"switch_radix_ports: must be an even number >= 4, got {radix}", field="switch_radix_ports")
    # down:up of a leaf: at least one uplink, so at most (radix - 1):1
    if not 1 <= oversubscription <= radix - 1:
        raise InputError(f"oversubscription: must be >= 1 and <= {radix - 1} (leaf down:up ports; a radix-{radix} leaf "
                         f"keeps at least one uplink), got {oversubscription:g}", field="oversubscription",
                         allowed=f">= 1 and <= {radix - 1}")
    ports_per_xcvr = max(1.0, assumptions.ports_per_transceiver)
    rails = system.nics_per_node
    gpus = nodes * system.gpus_per_node
    nic = system.nic_gbit_s or 0.0
    peaks = cluster_peak_pflops(gpu, gpus)
    su = nodes / su_nodes

    if nodes == 1 or rails == 0:  # one node, or no scale-out NICs: no compute fabric
        return FabricDesign(
            system.id, nodes, gpus, rails, su, su_nodes, radix, oversubscription, 0, 0, 0, 0, 0, 0, 0,
            management_ports, 0, 0, 0, 0, 0, nic, 0.0, 0.0, system.scaleout_gbps_per_gpu, peaks, (),
        )

    down = int(math.floor(radix * oversubscription / (1 + oversubscription)))
    up = radix - down
    node_ports = nodes * rails + management_ports
    if node_ports <= down:  # everything on one switch: a single-tier fabric
        leaves = 1
    elif nodes + math.ceil(management_ports / rails) < down:  # small: several rails share a leaf
        rails_per_leaf = max(1, min(rails, down // (nodes + math.ceil(management_ports / rails))))
        leaves = math.ceil(rails / rails_per_leaf)
    else:
        leaves = rails * math.ceil(node_ports / (rails * down))
    used_down_per_leaf = min(down, math.ceil(node_ports / leaves))
    up_wanted = 0 if leaves == 1 else min(up, math.ceil(used_down_per_leaf / oversubscription))
    two_tier = _spine_count(leaves, up_wanted, up, radix) if leaves > 1 else None

    if leaves == 1:
        spines, cores, spine_core, tiers, up_per_leaf = 0, 0, 0, 1, 0
    elif two_tier is not None:
        (spines, up_per_leaf), cores, spine_core, tiers = two_tier, 0, 0, 2
    else:  # three tiers
        half = radix // 2
        if leaves > radix * half:
            raise Infeasible(
                f"nodes: {nodes} nodes need {leaves} leaf switches, beyond a three-tier fat tree of radix {radix} "
                f"({radix * half} leaves); four tiers are not modelled"
            )
        up_per_leaf = up_wanted
        spines = math.ceil(leaves * up_per_leaf / half)
        cores = math.ceil(spines * half / radix)
        spine_core = spines * half
        tiers = 3

    leaf_uplinks = leaves * up_per_leaf
    node_leaf = node_ports
    cable_tiers = [("node-leaf", node_leaf)] + ([("leaf-spine", leaf_uplinks)] if tiers >= 2 else [])
    cable_tiers += [("spine-core", spine_core)] if tiers == 3 else []
    tier_rows = tuple(FabricTier(name, c, int(math.ceil(2 * c / ports_per_xcvr))) for name, c in cable_tiers)
    cables = sum(t.cables for t in tier_rows)
    bisection_tbit = nodes * rails / 2 * nic / oversubscription / 1e3
    return FabricDesign(
        system_id=system.id, nodes=nodes, gpus=gpus, rails=rails, scalable_units=su, nodes_per_scalable_unit=su_nodes,
        switch_radix_ports=radix, oversubscription=oversubscription, tiers_count=tiers,
        leaf_switches=leaves, spine_switches=spines, core_switches=cores, switches=leaves + spines + cores,
        leaf_down_ports=down, leaf_up_ports_used=up_per_leaf, management_ports=management_ports,
        node_leaf_cables=node_leaf, leaf_spine_cables=leaf_uplinks, spine_core_cables=spine_core, cables=cables,
        transceivers=sum(t.transceivers for t in tier_rows), nic_gbit_s=nic,
        bisection_tbit_s=bisection_tbit, bisection_tbps=bisection_tbit / 8,
        scaleout_gbps_per_gpu=system.scaleout_gbps_per_gpu / oversubscription if nodes > 1 else 0.0,
        cluster_peak_pflops=peaks, tiers=tier_rows,
    )
