"""Collectives on the fabrics that are not NVSwitch: AMD's switchless xGMI full mesh, PCIe boxes of
GPUs, and TPU slices on an ICI torus (primitives.full_mesh, primitives.torus_collectives).

Catalog figures used: mi300x-platform 8 GPUs x 448 GB/s per direction over 7 links (64 each);
rtx-4090 / rtx-a6000 as a system = PCIe 4.0 x16 box (32 GB/s per direction, A100 page 'PCIe Gen4:
64 GB/s' bidirectional); tpu-v5p-pod ICI 1,200 GB/s bidirectional per chip = 600 per direction over
3 axes; tpu-v6e-pod 800 bidirectional = 400 per direction over 2 axes, DCN 100 Gb/s per chip; knobs
collectives.nvlink_efficiency 0.80 (every scale-up link), nic_efficiency.default 0.90 (DCN)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import get_system
from gpuplan.errors import InputError
from gpuplan.primitives.collectives import asymptotic_busbw_gbps, collective_time
from gpuplan.primitives.full_mesh import mesh_ring_links
from gpuplan.primitives.torus_collectives import slice_shape, torus_collective, wraparound

GIB = 2**30
MI300 = get_system("mi300x-platform")
V5P = get_system("tpu-v5p-pod")
V6E = get_system("tpu-v6e-pod")


def test_mesh_ring_links():
    # RCCL rome_model_79: the whole 8-GPU mesh keeps all 7 links busy; subsets: Walecki 2 floor((r-1)/2), >= 1
    assert [float(mesh_ring_links(r, 8)) for r in (2, 3, 4, 5, 6, 7, 8)] == [1, 2, 2, 4, 4, 6, 7]


def test_mesh_asymptotic_busbw_by_hand():
    # 8 GPUs ring all-reduce: 7 links x 64 GB/s x 0.8 = 358.4 GB/s busbw (MLE measured 312.9 at 4 GiB)
    assert asymptotic_busbw_gbps("all_reduce", MI300, 8) == pytest.approx(358.4, rel=1e-6)
    # one pair: one link, 64 x 0.8 = 51.2 (ml-engineering measured 47.7 on 2 MI300X)
    assert asymptotic_busbw_gbps("all_reduce", MI300, 2) == pytest.approx(51.2, rel=1e-6)
    # all-to-all: every rank sends to its 7 peers on their 7 direct links at once: 7 x 64 x 0.8
    assert asymptotic_busbw_gbps("all_to_all", MI300, 8) == pytest.approx(358.4, rel=1e-6)
    # 4 of the 8 in an all-to-all: 3 peer links of 64 x 0.8 = 153.6 (a ring over 4 keeps only 2 busy: 102.4)
    assert asymptotic_busbw_gbps("all_to_all", MI300, 4) == pytest.approx(153.6, rel=1e-6)
    assert asymptotic_busbw_gbps("all_gather", MI300, 4) == pytest.approx(102.4, rel=1e-6)


def test_amd_platforms_reach_across_nodes():
    # 8 x 400 Gb/s RoCE per node (ROCm MoRI docs, 1:1 GPU-NIC): 50 GB/s per GPU x 0.93 (RoCE knob) = 46.5 busbw
    # for a rail ring over 8 nodes, one GPU per node
    for system_id in ("mi300x-platform", "mi325x-platform", "mi355x-platform"):
        r = collective_time("all_reduce", 1e13, get_system(system_id), 8, gpus_per_domain=1)
        assert r.domains == 8 and r.busbw_gbps == pytest.approx(46.5, rel=1e-3)


def test_pcie_box_by_hand():
    # PCIe 4.0 x16: 32 GB/s per direction x 0.8 = 25.6 GB/s busbw at any box size (tinygrad measured
    # 24.5 GB/s busbw on six RTX 4090s with the P2P-patched driver)
    box = get_system("rtx-a6000")
    for n in (2, 8):
        assert asymptotic_busbw_gbps("all_reduce", box, n) == pytest.approx(25.6, rel=1e-6)
    # GeForce (no driver P2P): NCCL's SHM transport writes every byte to host memory and reads it
    # back, r ranks at once: host memory / (2 r), the PCIe box's host being the workstation default
    # training.offload.host_memory_bytes_s = 40 GB/s: 2 GPUs 40 / 4 = 10 GB/s, 8 GPUs 40 / 16 = 2.5;
    # and the staged card-to-card path measured through the host bridge (level1techs t/185531,
    # bidirectional 4.88, 4.98, 7.50, 6.82 GB/s): (4.88 + 4.98 + 7.50 + 6.82) / 4 / 2 = 3.0225 GB/s
    # per rank and direction. Pair: min(25.6, 10, 3.0225) = 3.0225; eight: min(2.5, 3.0225) = 2.5
    for system_id in ("rtx-4090", "rtx-3090"):
        box = get_system(system_id)
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            assert asymptotic_busbw_gbps(op, box, 2) == pytest.approx(3.0225, rel=1e-6)
            assert asymptotic_busbw_gbps(op, box, 8) == pytest.approx(2.5, rel=1e-6)
    with pytest.raises(InputError, match="num_gpus"):
        collective_time("all_reduce", GIB, get_system("rtx-4090"), 9)  # 8 x16 slots, no NICs


def test_nicless_box_groups_that_would_leave_it_are_costed_inside():
    # a plan search on 8 GPUs of a PCIe box also scores plans with more GPUs than the box (tp 8 x pp 2),
    # which plan validity drops; their groups (one rank per node) are costed inside the box instead of
    # refusing the whole search ("2 GPUs span 2 scale-up domains", the train error on rtx-a6000 x 8)
    from gpuplan.primitives.collectives import Collective
    from gpuplan.primitives.parallel_groups import collective_seconds

    box = get_system("rtx-a6000")
    for op in (Collective.ALL_REDUCE, Collective.SEND_RECV):
        assert collective_seconds(op, 1e6, 2, 1, box) == collective_seconds(op, 1e6, 2, 2, box) > 0
    assert collective_seconds(Collective.ALL_REDUCE, 1e6, 16, 8, box) == collective_seconds(Collective.ALL_REDUCE, 1e6, 8, 8, box)


def test_slice_shapes_and_wraparound():
    # Google's shapes: v5p 16x16x16 (4096), 16x16x24 (6144, the largest slice); v5e/v6e 2x4, 4x8, 16x16
    assert slice_shape(4096, 3) == (16, 16, 16) and slice_shape(6144, 3) == (16, 16, 24)
    assert slice_shape(8, 2) == (2, 4) and slice_shape(32, 2) == (4, 8) and slice_shape(256, 2) == (16, 16)
    assert slice_shape(128, 2) == (8, 16) and slice_shape(7, 2) == (1, 7)
    # scaling book: v5e/v6e wrap only an axis of length 16 (8x16 wraps its long axis); v5p whole 4x4x4 cubes
    assert wraparound((8, 16), 16) == (False, True) and wraparound((16, 16), 16) == (True, True)
    assert wraparound((4, 4, 8), 4) == (True, True, True) and wraparound((2, 4, 4), 4) == (False, False, False)


def test_v5p_all_reduce_4096_by_hand():
    # 4096 chips = 16x16x16, every axis wraps. W_ICI per axis = 600 / 3 = 200 GB/s bidirectional (2 links of
    # 100 each way), x 0.8 = 160; 3 axes -> 480 GB/s. Scaling book: AllReduce = 2 V / (W_ICI n_axes), exact
    # ring volume (n-1)/n: 2 x 2^30 x 4095/4096 / 480e9 = 4.472832 ms; latency 2 x 24 hops x 1 us = 48 us < that
    r = collective_time("all_reduce", GIB, V5P, 4096)
    assert r.time_s == pytest.approx(2 * GIB * 4095 / 4096 / 480e9, rel=1e-12)
    assert (r.domains, r.gpus_per_domain, r.latency_s) == (1, 4096, 0.0)
    # a 1 KiB all-reduce is latency bound: 2 x (16/2 x 3) hops x 1 us = 48 us
    assert collective_time("all_reduce", 1024, V5P, 4096).time_s == pytest.approx(48e-6, rel=1e-12)


def test_v6e_lines_and_multislice_by_hand():
    # 32 chips = 4x8: no axis of 16, both are lines: W per axis = 400/2 x 0.8 / 2 = 80 -> 160 GB/s;
    # AllGather of 1 GiB: 2^30 x 31/32 / 160e9
    r = collective_time("all_gather", GIB, V6E, 32)
    assert r.time_s == pytest.approx(GIB * 31 / 32 / 160e9, rel=1e-12)
    # 512 chips = 2 slices of 16x16 (256 per slice): ICI 2 x 2^30 x 255/256 / (2 x 160e9), then DCN AllReduce of
    # the 1/256 shard across 2 slices: 2 x 1/2 x 2^30/256 / (100/8 GB/s x 0.9)
    r = collective_time("all_reduce", GIB, V6E, 512)
    ici = 2 * GIB * 255 / 256 / 320e9
    dcn = 2 * 0.5 * GIB / 256 / (12.5e9 * 0.9)
    assert (r.domains, r.gpus_per_domain) == (2, 256)
    assert r.time_s == pytest.approx(ici + dcn, rel=1e-12)


def test_torus_without_dcn_refuses_multislice():
    lonely = V6E.model_copy(update={"nics_per_node": 0, "nic_gbit_s": None, "nic_kind": "none"})
    with pytest.raises(InputError, match="slices"):
        collective_time("all_reduce", GIB, lonely, 512)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10_000), st.sampled_from([2, 3]))
def test_slice_shape_factorises(chips, axes):
    shape = slice_shape(chips, axes)
    assert len(shape) == axes and math.prod(shape) == chips and list(shape) == sorted(shape)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]),
       st.floats(1e3, 1e11), st.floats(1.01, 50.0), st.sampled_from([2, 8, 64, 256, 512, 4096]),
       st.sampled_from(["tpu-v5e-pod", "tpu-v6e-pod", "tpu-v5p-pod", "tpu7x-pod"]))
def test_torus_time_monotone_and_bounded(op, size, growth, n, system_id):
    system = get_system(system_id)
    a = torus_collective(op, size, system, n, 0.9)
    b = torus_collective(op, size * growth, system, n, 0.9)
    assert 0 < a.time_s <= b.time_s
    assert a.time_s == pytest.approx(a.latency_s + a.bandwidth_s, rel=1e-12) and a.latency_s >= 0


def test_host_staged_boxes_are_bounded_by_host_memory_and_by_the_link():
    from gpuplan import knobs

    box = get_system("rtx-4090")
    fast_bridge = {"collectives.staged_card_to_card_bytes_s": 1e11}
    # a host with 1 TB/s of memory bandwidth and a fast bridge: the PCIe link (25.6) binds again
    with knobs.overridden({"training.offload.host_memory_bytes_s": 1e12, **fast_bridge}):
        assert asymptotic_busbw_gbps("all_gather", box, 2) == pytest.approx(25.6, rel=1e-6)
    # 80 GB/s (quad-channel DDR4-3200 x 0.8): 80 / (2 x 2) = 20 GB/s for a pair
    with knobs.overridden({"training.offload.host_memory_bytes_s": 80e9, **fast_bridge}):
        assert asymptotic_busbw_gbps("all_gather", box, 2) == pytest.approx(20.0, rel=1e-6)
    # the default bridge: 3.0225 GB/s per rank (level1techs t/185531, see test_pcie_box_by_hand) binds
    # below both, whatever the host memory
    with knobs.overridden({"training.offload.host_memory_bytes_s": 1e12}):
        assert asymptotic_busbw_gbps("all_gather", box, 2) == pytest.approx(3.0225, rel=1e-6)
    # a bridge at 4 GB/s per rank: 4 for a pair, and 40 / 16 = 2.5 (host memory) for eight
    with knobs.overridden({"collectives.staged_card_to_card_bytes_s": 4e9}):
        assert asymptotic_busbw_gbps("all_gather", box, 2) == pytest.approx(4.0, rel=1e-6)
        assert asymptotic_busbw_gbps("all_gather", box, 8) == pytest.approx(2.5, rel=1e-6)


def test_staged_card_to_card_default_is_half_the_mean_measured_bidirectional_rate():
    from gpuplan import knobs
    from gpuplan.primitives.host_memory import STAGED_BIDIRECTIONAL_MEASURED_GBPS

    # level1techs t/185531: p2pBandwidthLatencyTest bidirectional matrix, UMA 4.88 / 4.98, NUMA 7.50 / 6.82 GB/s
    assert STAGED_BIDIRECTIONAL_MEASURED_GBPS == (4.88, 4.98, 7.50, 6.82)
    # 24.18 / 4 = 6.045 GB/s both ways; a ring rank sends and receives at once: 3.0225 GB/s each way
    assert knobs.REGISTRY["collectives.staged_card_to_card_bytes_s"].default == pytest.approx(3.0225e9)
    assert not knobs.REGISTRY["collectives.staged_card_to_card_bytes_s"].fitted


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 8), size=st.floats(1e3, 1e11))
def test_no_p2p_box_is_never_faster_than_a_p2p_box_of_the_same_link(n, size):
    # rtx-4090 and rtx-a6000 boxes share PCIe 4.0 x16; staging through host memory only adds a bound
    staged = collective_time("all_gather", size, get_system("rtx-4090"), n).time_s
    direct = collective_time("all_gather", size, get_system("rtx-a6000"), n).time_s
    assert staged >= direct * (1 - 1e-9)


@settings(max_examples=25, deadline=None)
@given(staged=st.floats(1e8, 1e11), host=st.floats(1e9, 5e12), n=st.integers(2, 8))
def test_staged_box_busbw_is_the_least_of_link_bridge_and_host_memory(staged, host, n):
    from gpuplan import knobs

    # PCIe 4.0 x16 at 0.8 = 25.6 GB/s; the bridge's per-rank rate; host memory over 2 accesses x n ranks
    with knobs.overridden({"collectives.staged_card_to_card_bytes_s": staged,
                           "training.offload.host_memory_bytes_s": host}):
        busbw = asymptotic_busbw_gbps("all_gather", get_system("rtx-4090"), n)
    assert busbw == pytest.approx(min(25.6, staged / 1e9, host / 1e9 / (2 * n)), rel=1e-6)
