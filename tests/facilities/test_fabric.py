"""Fabric bill of materials against NVIDIA's DGX SuperPOD reference-architecture tables."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.errors import Infeasible, InputError
from gpuplan.facilities.fabric import design_fabric
from gpuplan.facilities.racks import rack_layout


def _fabric(system_id, nodes=None, **kw):
    cat = load_catalog()
    s = cat.system(system_id)
    return design_fabric(s, cat.gpu(s.gpu), nodes, **kw)


# DGX SuperPOD H100 RA-11333-001 V11 Table 4 (hardware.md section 5):
# SUs, nodes, GPUs, leaf, spine, compute+UFM cables, spine-leaf cables. The RA populates 32*SU - 1 nodes
# (one slot per SU design goes to UFM) and cables 4 UFM ports into the leaves.
H100_TABLE4 = [
    (1, 31, 248, 8, 4, 252, 256),
    (2, 63, 504, 16, 8, 508, 512),
    (3, 95, 760, 24, 16, 764, 768),
    (4, 127, 1016, 32, 16, 1020, 1024),
]


@pytest.mark.parametrize("su,nodes,gpus,leaf,spine,node_cables,spine_cables", H100_TABLE4)
def test_dgx_h100_superpod_table4(su, nodes, gpus, leaf, spine, node_cables, spine_cables):
    f = _fabric("dgx-h100", nodes, management_ports=4)
    assert (f.gpus, f.leaf_switches, f.spine_switches, f.core_switches) == (gpus, leaf, spine, 0)
    assert (f.node_leaf_cables, f.leaf_spine_cables) == (node_cables, spine_cables)


@pytest.mark.parametrize("su,leaf,spine", [(1, 8, 4), (2, 16, 8), (3, 24, 16), (4, 32, 16)])
def test_scalable_units_give_the_ra_switch_counts(su, leaf, spine):
    f = _fabric("dgx-h100", scalable_units=su)
    assert f.nodes == 32 * su  # SU = 32 DGX H100 (RA)
    assert (f.leaf_switches, f.spine_switches) == (leaf, spine)


# DGX SuperPOD B200 RA larger-configuration table (hardware.md section 5):
# SUs, nodes, GPUs, leaf, spine, core, cables per level
B200_TABLE = [
    (2, 64, 512, 16, 8, 0, 512),
    (4, 128, 1024, 32, 16, 0, 1024),
    (8, 256, 2048, 64, 32, 0, 2048),
    (16, 512, 4096, 128, 128, 64, 4096),
    (32, 1024, 8192, 256, 256, 128, 8192),
    (64, 2048, 16384, 512, 512, 256, 16384),
]


@pytest.mark.parametrize("su,nodes,gpus,leaf,spine,core,per_level", B200_TABLE)
def test_dgx_b200_superpod_table(su, nodes, gpus, leaf, spine, core, per_level):
    f = _fabric("dgx-b200", scalable_units=su)
    assert (f.nodes, f.gpus, f.leaf_switches, f.spine_switches, f.core_switches) == (nodes, gpus, leaf, spine, core)
    assert f.node_leaf_cables == per_level and f.leaf_spine_cables == per_level
    assert f.spine_core_cables == (per_level if core else 0)


def test_bisection_of_4_su():
    # 128 nodes x 8 NICs x 400 Gb/s / 2 = 204,800 Gb/s = 204.8 Tb/s = 25.6 TB/s (non-blocking fat tree)
    f = _fabric("dgx-h100", 128)
    assert f.bisection_tbit_s == pytest.approx(204.8)
    assert f.bisection_tbps == pytest.approx(25.6)
    # twin-port OSFP: 2 ports per transceiver, 2 ends per cable -> transceivers == cables
    assert f.transceivers == f.cables == 2048


def test_oversubscription_halves_uplinks_and_bisection():
    # 2:1 leaf: floor(64*2/3) = 42 down, 22 up; 128 nodes -> 8 rails * ceil(1024/(8*42)) = 32 leaves,
    # 32 ports used per leaf -> ceil(32/2) = 16 uplinks per leaf; bisection 204.8 / 2 = 102.4 Tb/s
    f = _fabric("dgx-h100", 128, oversubscription=2.0)
    assert f.leaf_spine_cables == 32 * 16
    assert f.bisection_tbit_s == pytest.approx(102.4)


def test_small_clusters_share_leaves_across_rails():
    # 4 DGX H100 = 32 NIC ports: one 64-port switch (32 down) holds them all, no spine
    f = _fabric("dgx-h100", 4)
    assert (f.leaf_switches, f.spine_switches, f.tiers_count) == (1, 0, 1)
    assert _fabric("dgx-h100", 1).switches == 0  # one node: NVLink only


def test_cluster_peak_separates_dense_and_sparse():
    # 32 DGX H100 = 256 H100; fp8 dense 1978.9 TFLOP/s (catalog) -> 506.6 PFLOP/s dense, 1013 sparse:
    # the seed's "1 exaFLOP FP8" for a DGX H100 POD is the sparse figure.
    f = _fabric("dgx-h100", 32)
    assert f.cluster_peak_pflops["fp8"]["dense"] == pytest.approx(256 * 1978.9 / 1e3)
    assert f.cluster_peak_pflops["fp8"]["sparse"] == pytest.approx(256 * 3957.8 / 1e3)


def test_beyond_three_tiers_is_infeasible_and_bad_input_is_rejected():
    with pytest.raises(Infeasible):
        _fabric("dgx-h100", 9000)  # 72,000 ports > 64^3/4 = 65,536
    with pytest.raises(InputError):
        _fabric("dgx-h100", 0)
    with pytest.raises(InputError):
        _fabric("dgx-h100", 8, oversubscription=0.5)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=2000))
def test_fabric_invariants(nodes):
    f = _fabric("dgx-h100", nodes)
    radix = f.switch_radix_ports
    assert f.cables == f.node_leaf_cables + f.leaf_spine_cables + f.spine_core_cables
    assert f.switches == f.leaf_switches + f.spine_switches + f.core_switches
    assert f.leaf_switches * f.leaf_down_ports >= f.node_leaf_cables  # every NIC has a leaf port
    if f.spine_switches:  # spine ports suffice for the leaf uplinks (+ core uplinks in 3 tiers)
        assert f.spine_switches * radix >= f.leaf_spine_cables + f.spine_core_cables
    if f.core_switches:
        assert f.core_switches * radix >= f.spine_core_cables
    g = _fabric("dgx-h100", nodes + 1)
    assert g.switches >= f.switches and g.cables >= f.cables  # more nodes never need less fabric


def test_racks_dgx_h100_four_per_rack():
    # 45 kW / 10.2 kW = 4.4 -> 4 (power); 42U / 8U = 5 (space): 4 per rack as the H100 RA; 127 nodes -> 32 racks
    cat = load_catalog()
    s = cat.system("dgx-h100")
    r = rack_layout(s, cat.gpu(s.gpu), 127, switches=48)
    assert (r.nodes_per_rack, r.limited_by, r.compute_racks, r.network_racks) == (4, "power", 32, 2)
    # 4 x (10.2 + 0.25 storage) = 41.8 kW: above 30 kW air, below 50 kW -> assisted air
    assert r.compute_rack_kw == pytest.approx(41.8)
    assert r.cooling.name == "ASSISTED_AIR"
