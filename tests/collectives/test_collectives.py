"""Collectives: nccl-tests definitions (hardware.md section 3.1) and hand-derived alpha-beta times.

Catalog figures used: dgx-h100 = 8 GPUs, NVSwitch, 450 GB/s NVLink per GPU per direction, 8 x 400
Gb/s InfiniBand (50 GB/s per GPU), NVLS; mi300x-platform = 8 GPUs, xGMI full mesh 448 GB/s (7 x 64);
rtx-4090 (a GPU id) = a PCIe box of at most 8 GPUs, no NICs.
Model constants (collectives.py, sourced there): NVLink efficiency 0.80, IB efficiency 0.93,
Simple fill inside a domain = channels x one NCCL step (NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8 = 512 KiB)
with channels = link rate / (450/32 GB/s) (H100 32 -> 16,777,216 B; A100 300 GB/s -> 21); across
domains channels x the whole 4 MiB buffer (collectives.net_fill_steps 8); NCCL latencies (tuning.cc
ring Simple: 8.4 base, 3.4 NVLink step, 14 net step; ring LL128: 14.0, 1.9, 4.0; ring LL: 6.6, 0.6,
2.7; NVLS 25 us); LL128 bandwidth 0.92 x the Simple limit (tuning.cc)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import get_system
from gpuplan.errors import InputError
from gpuplan.primitives.collectives import (
    Algorithm, Collective, Protocol, busbw_factor, collective_time, collective_time_array,
)

DGX = get_system("dgx-h100")
MI300 = get_system("mi300x-platform")
GIB = 2**30
FILL = 2**19 * 32  # Simple n_1/2 in one NVSwitch domain: one 512 KiB step (NCCL_BUFFSIZE / NCCL_STEPS) x 32 channels
# across nodes: the whole 4 MiB buffer x NCCL_NCHANNELS_PER_NET_PEER 2 channels per NIC the group owns in a node
# (dgx-h100: 1 NIC per GPU)
FILL_NET_8 = 4 * 2**20 * 2 * 8  # 8 ranks (8 NICs) per node -> 16 channels = 64 MiB
FILL_NET_1 = 4 * 2**20 * 2 * 1  # 1 rank (1 NIC) per node -> 2 channels = 8 MiB
NVLS_FILL = 4 * 2**20 * 32  # NVLS: the whole 4 MiB buffer x 32 channels (collectives.NVLS_FILL_STEPS)


def test_busbw_factors_nccl_tests():
    # PERFORMANCE.md: all_reduce 2(n-1)/n, all_gather / reduce_scatter / alltoall (n-1)/n, broadcast 1
    assert busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    assert busbw_factor("all_gather", 8) == pytest.approx(0.875)
    assert busbw_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert busbw_factor("all_to_all", 16) == pytest.approx(0.9375)
    assert busbw_factor("broadcast", 8) == 1.0
    assert busbw_factor("send_recv", 2) == 1.0


def test_ring_all_reduce_one_node_by_hand():
    # bus = 2 x 7/8 x 1 GiB = 1,879,048,192 B; limit = 450 x 0.80 = 360 GB/s; alpha = 8.4 + 14 x 3.4 = 56 us
    # t = (1,879,048,192 + 16,777,216) / 360e9 + 56e-6 = 5.3222 ms (LL: bus / 141 GB/s = 13.3 ms; LL128:
    # 40.6 us + bus / (0.92 x 360 GB/s) = 5.714 ms: both slower)
    r = collective_time("all_reduce", GIB, DGX, 8, "ring")
    assert r.protocol is Protocol.SIMPLE
    assert r.time_s == pytest.approx((1_879_048_192 + FILL) / 360e9 + 56e-6, rel=1e-9)
    # nccl-tests: algbw = S / t, busbw = algbw x 2(n-1)/n
    assert r.algbw_gbps == pytest.approx(GIB / r.time_s / 1e9, rel=1e-12)
    assert r.busbw_gbps == pytest.approx(r.algbw_gbps * 1.75, rel=1e-12)
    assert r.busbw_gbps == pytest.approx(353.06, abs=0.01)  # bus / t; nccl-tests 8 x H20 at 1 GiB: 357.7 (Mooncake PR #3484)


def test_a100_domain_has_fewer_channels_and_runs_ll128_at_mid_size():
    # dgx-a100-80gb: NVLink3 300 GB/s per GPU -> round(300 / 14.0625) = 21 channels (NCCL sizes the
    # channel count to the link rate); Simple limit 300 x 0.80 = 240 GB/s, fill 21 x 512 KiB = 11,010,048 B.
    a100 = get_system("dgx-a100-80gb")
    # 64 MiB all_reduce on 8: bus = 1.75 x 67,108,864 = 117,440,512 B. LL128 (tuning.cc: base 14.0 +
    # 14 NVLink steps x 1.9 = 40.6 us; 0.92 x 240 = 220.8 GB/s): 572.49 us; Simple: 56 us +
    # (117,440,512 + 11,010,048) / 240e9 = 591.21 us: LL128 wins, as NCCL picks it on NVLink mid-size.
    r = collective_time("all_reduce", 64 * 2**20, a100, 8, "ring")
    assert r.protocol is Protocol.LL128
    assert r.time_s == pytest.approx(117_440_512 / 220.8e9 + 40.6e-6, rel=1e-9)
    # 1 GiB: Simple, 56 us + (1,879,048,192 + 11,010,048) / 240e9 = 7.9312 ms (LL128: 8.551 ms)
    r = collective_time("all_reduce", GIB, a100, 8, "ring")
    assert r.protocol is Protocol.SIMPLE
    assert r.time_s == pytest.approx((1_879_048_192 + 11_010_048) / 240e9 + 56e-6, rel=1e-9)


def test_mid_size_all_reduce_matches_nccl_tests_on_nvlink4():
    # nccl-tests all_reduce_perf, 8 x H20 (NVLink4, 450 GB/s per GPU and direction, as dgx-h100),
    # kvcache-ai/Mooncake PR #3484 (NCCL 2.30.4), out-of-place busbw: 180.88 / 242.00 / 300.51 /
    # 335.43 GB/s at 8 / 16 / 32 / 128 MiB. The ring model (LL128 up to ~128 MiB, then Simple):
    # 8 MiB: 40.6 us + 14,680,064 / 331.2e9 = 84.92 us -> 172.9 GB/s (-4%); 16 MiB: 129.24 us -> 227.2
    # (-6%); 32 MiB: 217.89 us -> 269.5 (-10%); 128 MiB: 749.8 us -> 313.3 (-7%). Before the fill was one
    # step per channel (whole 4 MiB buffer x 32 channels): 122.6 / 130.8 / 135.8 GB/s at 8 / 16 / 32 MiB.
    measured = {8: 180.88, 16: 242.00, 32: 300.51, 128: 335.43}
    for mib, busbw in measured.items():
        r = collective_time("all_reduce", mib * 2**20, DGX, 8, "ring")
        assert r.busbw_gbps == pytest.approx(busbw, rel=0.12), mib
    assert collective_time("all_reduce", 8 * 2**20, DGX, 8, "ring").time_s == pytest.approx(84.92e-6, rel=1e-3)


def test_ring_all_gather_two_nodes_by_hand():
    # 16 GPUs = 2 nodes x 8: bus = 15/16 x 4 GiB = 4,026,531,840; limit = min(NVLink 360,
    # node egress 8 x 50 x 0.93 = 372) = 360 GB/s; alpha = 8.4 + 14 x 3.4 + 1 x 14 = 70 us
    r = collective_time("all_gather", 4 * GIB, DGX, 16, "ring")
    assert (r.domains, r.gpus_per_domain) == (2, 8)
    assert r.time_s == pytest.approx((4_026_531_840 + FILL_NET_8) / 360e9 + 70e-6, rel=1e-9)


def test_strided_group_is_nic_bound():
    # a data-parallel group with one GPU per node (16 nodes): only that GPU's NIC, 50 x 0.93 = 46.5 GB/s;
    # ring Simple: bus = 2 x 15/16 x 1 GiB = 2,013,265,920; alpha = (8.4 + 30 x 14) x 1.4 = 599.76 us
    r = collective_time("all_reduce", GIB, DGX, 16, "ring", gpus_per_domain=1)
    assert r.domains == 16
    assert r.time_s == pytest.approx((2_013_265_920 + FILL_NET_1) / 46.5e9 + 599.76e-6, rel=1e-9)


def test_small_message_is_latency_bound():
    # 1 KiB all_reduce on 8 GPUs: LL protocol, alpha = 6.6 + 14 x 0.6 = 15 us; bytes add 1792 / 141e9 = 0.013 us
    r = collective_time("all_reduce", 1024, DGX, 8, "ring")
    assert r.protocol is Protocol.LL
    assert r.time_s == pytest.approx(15e-6 + 1792 / 141e9, rel=1e-9)


def test_nvls_one_node_by_hand():
    # NVLS: S (n+1)/n through a link at 450 x 0.80 x 0.85 (Hopper nvlsEfficiency) = 306 GB/s, latency 25 us;
    # 16 GiB: bw term = 16 GiB x 9/8 / 306e9 = 63.161 ms; fill = NVLS_FILL / (achieved algbw x 1.75)
    r = collective_time("all_reduce", 16 * GIB, DGX, 8, "nvls")
    bw = 16 * GIB * 9 / 8 / 306e9
    fill = NVLS_FILL / (16 * GIB / bw * 1.75)
    assert r.time_s == pytest.approx(bw + fill + 25e-6, rel=1e-9)
    assert r.busbw_gbps > 450  # in-switch reduction beats the link rate (ml-engineering: 480 on H200)


def test_mesh_rings_use_every_link_of_the_full_mesh():
    # MI300X: 7 links of 448/7 = 64 GB/s. RCCL rome_model_79 (8 GPUs, nLinks 7) runs 14 rings that use
    # each of the 56 directed links twice -> all 7 links busy: limit = 7 x 64 x 0.80 = 358.4 GB/s;
    # 4 GiB ring: bus = 2 x 7/8 x 4 GiB = 7,516,192,768; channels round(448 / (450/32)) = 32 -> FILL; alpha 56 us
    r = collective_time("all_reduce", 4 * GIB, MI300, 8)
    assert r.time_s == pytest.approx((7_516_192_768 + FILL) / 358.4e9 + 56e-6, rel=1e-9)
    # 4 of the 8 (RCCL's generic search): K4 has 1 Hamiltonian cycle, both ways -> 2 links: 2 x 64 x 0.8 = 102.4
    # bus = 2 x 3/4 x 4 GiB = 6,442,450,944; alpha 8.4 + 6 x 3.4 = 28.8 us
    r4 = collective_time("all_reduce", 4 * GIB, MI300, 4)
    assert r4.time_s == pytest.approx((6_442_450_944 + FILL) / 102.4e9 + 28.8e-6, rel=1e-9)


def test_auto_picks_the_fastest():
    for size in (1e3, 1e6, 1e8, 1e10):
        best = collective_time("all_reduce", size, DGX, 64).time_s
        for algo in ("ring", "tree", "nvls"):
            assert best <= collective_time("all_reduce", size, DGX, 64, algo).time_s


def test_bad_requests():
    with pytest.raises(InputError, match="algorithm"):
        collective_time("all_gather", GIB, DGX, 8, "tree")
    with pytest.raises(InputError, match="nvls"):
        collective_time("all_reduce", GIB, get_system("dgx-a100-80gb"), 8, "nvls")
    with pytest.raises(InputError, match="num_gpus"):
        collective_time("all_reduce", GIB, get_system("rtx-4090"), 16)  # a PCIe box of 8 has no NICs
    with pytest.raises(InputError, match="collective"):
        collective_time("all_sum", GIB, DGX, 8)
    with pytest.raises(InputError, match="size"):
        collective_time("all_reduce", 0, DGX, 8)


def test_array_path_matches_scalar():
    sizes = np.array([1e3, 1e6, 6e7, 1e9, 1e10])
    for op in Collective:
        for n in (2, 8, 32):
            arr = collective_time_array(op, sizes, DGX, n)
            scalar = [collective_time(op, s, DGX, n).time_s for s in sizes]
            assert arr == pytest.approx(scalar, rel=1e-12)
    grid = collective_time_array("reduce_scatter", 1e8, DGX, np.array([1, 2, 8, 64, 512]))
    assert grid[0] == 0.0 and np.all(np.diff(grid[1:]) > 0)


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from([c.value for c in Collective]),
    st.floats(1e2, 1e11),
    st.floats(1.01, 100.0),
    st.sampled_from([2, 4, 8, 16, 64, 256]),
)
def test_time_monotone_in_size_and_busbw_bounded(op, size, growth, n):
    a = collective_time(op, size, DGX, n)
    b = collective_time(op, size * growth, DGX, n)
    assert b.time_s > a.time_s
    # busbw never beats the link: ring/tree at most 450 x 0.8; NVLS reduction at most 2 x the line rate
    cap = 2 * 450 if a.algorithm is Algorithm.NVLS else 450 * 0.8
    assert a.busbw_gbps <= cap * (1 + 1e-9)


def test_aliases():
    assert Collective("p2p") is Collective.SEND_RECV
    assert Collective("allreduce") is Collective.ALL_REDUCE


def test_sharp_reduces_inter_node_bytes():
    # NVLSTree on 8 nodes of dgx-h100 (SHARP in the catalog): each node's NICs carry S (not 2S): S / 372 GB/s,
    # below the NVLS intra term t0 = S x 9/8 / 306 GB/s, so the intra term bounds it; fill = the NVLS fill
    # (32 channels x the whole 4 MiB buffer, NVLS_FILL) / (algbw x 2 x 63/64)
    size = 16 * GIB
    t0 = size * 9 / 8 / 306e9
    r = collective_time("all_reduce", size, DGX, 64, "nvls")
    assert r.bandwidth_s == pytest.approx(t0 + NVLS_FILL / (size / t0 * 126 / 64), rel=1e-9)
    # alpha = 25 us + 2 x log2(8) x 20.9 us = 150.4 us
    assert r.latency_s == pytest.approx(150.4e-6, rel=1e-9)


def test_all_to_all_across_nodes_by_hand():
    # 16 GPUs on 2 nodes, 1 GiB total per rank: NVLink part S x 7/16 / 360 GB/s, NIC part S x 8/16 / 46.5 GB/s
    # (one NIC per GPU at 0.93 x 50) -> NIC-bound t_bw; Simple fill (16 channels: FILL_NET_8) at the same
    # achieved rate (bus = 15/16 S):
    # t_bw x (1 + FILL / bus); alpha = 8.4 + 3.4 + 14 + 15 x 0.5 = 33.3 us
    r = collective_time("all_to_all", GIB, DGX, 16, "ring")
    t_bw = GIB * 8 / 16 / 46.5e9
    assert r.time_s == pytest.approx(t_bw * (1 + FILL_NET_8 / (GIB * 15 / 16)) + 33.3e-6, rel=1e-9)
    assert r.busbw_gbps == pytest.approx(GIB / r.time_s / 1e9 * 15 / 16, rel=1e-12)


def test_tree_one_node_by_hand():
    # Tree Simple: limit 0.92 x 360 = 331.2 GB/s; alpha = 8.4 + 2 x (7 x 4.0) = 64.4 us (tuning.cc)
    r = collective_time("all_reduce", GIB, DGX, 8, "tree")
    assert r.protocol is Protocol.SIMPLE
    assert r.time_s == pytest.approx((1_879_048_192 + FILL) / 331.2e9 + 64.4e-6, rel=1e-9)


def test_hierarchical_by_hand():
    # 2 nodes x 8: reduce-scatter + all-gather in the node (bus S x 7/8 each at 360 GB/s, each with its fill),
    # all-reduce across the 2 nodes on S/8 per GPU over its own NIC (bus 2 x 1/2 x S/8 at 46.5 GB/s, + the
    # 2-channel fill of one NIC, FILL_NET_1);
    # alpha = 2 x (8.4 + 7 x 3.4) + (8.4 + 2 x 14) = 100.8 us
    r = collective_time("all_reduce", GIB, DGX, 16, "hierarchical")
    expected = 2 * (GIB * 7 / 8 + FILL) / 360e9 + (GIB / 8 + FILL_NET_1) / 46.5e9 + 100.8e-6
    assert r.time_s == pytest.approx(expected, rel=1e-9)


def test_ll128_only_where_nccl_enables_it():
    # 16 MiB all_reduce: on 8 x H100 in a node NCCL runs LL128 (NVLink, Hopper); across 2 dgx-h100 nodes
    # over InfiniBand too (tuning.cc: NIC on the GPU's PCIe switch); over AWS EFA never (aws-ofi-nccl
    # platform-aws.c disables LL128); on MI300X (RCCL, xGMI) never.
    size = 16 * 2**20
    assert collective_time("all_reduce", size, DGX, 8, "ring").protocol is Protocol.LL128
    assert collective_time("all_reduce", size, DGX, 16, "ring").protocol is Protocol.LL128
    efa = get_system("aws-p6-b200")
    assert efa.nic_kind == "efa"
    assert collective_time("all_reduce", size, efa, 8, "ring").protocol is Protocol.LL128
    for s in (4e3, 1e6, size, 1e9):
        assert collective_time("all_reduce", s, efa, 32, "ring").protocol is not Protocol.LL128
        assert collective_time("all_reduce", s, MI300, 8, "ring").protocol is not Protocol.LL128
    # point-to-point patterns run LL or Simple only
    for s in (4e3, 1e6, size, 1e9):
        assert collective_time("send_recv", s, DGX, 2).protocol is not Protocol.LL128
        assert collective_time("all_to_all", s, DGX, 8).protocol is not Protocol.LL128
