"""Parallel-group helpers of primitives.collectives (the training step's view of a collective)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.errors import InputError
from gpuplan.primitives.collectives import Collective, collective_time
from gpuplan.primitives.parallel_groups import collective_seconds, collective_seconds_array, group_per_node


def test_group_per_node_follows_megatron_rank_order():
    # 8 GPUs per node. TP (stride 1) of 4: all 4 on one node; DP of 64 with stride tp=8: each node
    # holds 8 // 8 = 1 member; CP of 4 with stride tp=2: 8 // 2 = 4 members per node.
    assert group_per_node(4, 1, 8) == 4
    assert group_per_node(64, 8, 8) == 1
    assert group_per_node(4, 2, 8) == 4
    assert list(group_per_node(np.array([2, 16]), np.array([1, 1]), 8)) == [2, 8]


def test_p2p_is_the_send_recv_member():
    # the step model's pipeline send is NCCL send_recv (nccl-tests sendrecv_perf); one member, two names
    assert Collective.P2P is Collective.SEND_RECV
    assert Collective("p2p") is Collective.SEND_RECV


def test_a_two_gpu_group_on_an_xgmi_mesh_uses_one_of_seven_links():
    # MI300X platform: 8 GPUs fully connected by xGMI, 448 GB/s per GPU over 7 peer links (catalog),
    # i.e. 64 GB/s per link. A 2-rank ring uses the one link between its GPUs at the NVLink-class
    # efficiency 0.8: 64 x 0.8 = 51.2 GB/s. all_reduce bus bytes for n = 2: S x 2(2-1)/2 = S.
    # For S = 1e12 B the latency and buffer fill are negligible: t = 1e12 / 51.2e9 = 19.53 s.
    system = load_catalog().system("mi300x-platform")
    t = collective_seconds(Collective.ALL_REDUCE, 1e12, 2, 2, system)
    assert t == pytest.approx(1e12 / 51.2e9, rel=1e-3)


@pytest.mark.parametrize("system_id", ["dgx-h100", "dgx-a100-80gb"])
def test_group_time_is_the_collective_with_its_ranks_per_domain(system_id):
    # a DP group of 32 with one member per node (stride 8) crosses 32 domains, one rank in each
    system = load_catalog().system(system_id)
    got = float(collective_seconds_array(Collective.ALL_REDUCE, 1e9, 32, 1, system))
    want = collective_time("all_reduce", 1e9, system, 32, gpus_per_domain=1).time_s
    assert got == want


def test_group_cache_is_invalidated_by_knob_overrides(monkeypatch):
    import gpuplan.workloads.training.step.assembly  # noqa: F401 - registers the training knobs

    calls = []
    from gpuplan.primitives import parallel_groups

    real = parallel_groups._group_collective_seconds

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(parallel_groups, "_group_collective_seconds", counting)
    monkeypatch.setattr(parallel_groups, "_GROUP_CACHE", {})
    system = load_catalog().system("dgx-h100")
    first = collective_seconds(Collective.ALL_GATHER, 3e8, 8, 8, system)
    assert collective_seconds(Collective.ALL_GATHER, 3e8, 8, 8, system) == first
    assert len(calls) == 1  # the second call is a cache hit
    # a knob the collective reads (the registry's first knob depends on import order)
    name, knob = next((n, k) for n, k in knobs.REGISTRY.items() if n.startswith("collectives."))
    with knobs.overridden({name: knob.high}):
        collective_seconds(Collective.ALL_GATHER, 3e8, 8, 8, system)
    assert len(calls) == 2  # under an override the cached figure is not reused


def test_group_time_with_the_gpu_spec_equals_the_catalog_default():
    # collective_time(gpu=None) resolves the system's GPU from the catalog; passing that spec
    # (what a caller that holds the Gpu does) must give the same figure
    catalog = load_catalog()
    system = catalog.system("dgx-h100")
    gpu = catalog.gpu(system.gpu)
    sizes = np.array([1e6, 1e8, 1e9])
    with_gpu = collective_seconds_array(Collective.REDUCE_SCATTER, sizes, 64, 1, system, gpu)
    without = collective_seconds_array(Collective.REDUCE_SCATTER, sizes, 64, 1, system)
    assert list(with_gpu) == list(without)


# ----------------------------------------------------------------------------- the batched fast path
# collective_seconds_array times the groups missing from the memo in one vectorised call
# (_group_seconds_batch); it must give the scalar path's values bit for bit (the brute-force check of
# a fast path, STYLE.md) on every fabric: NVSwitch domains, xGMI meshes, NVL72, TPU tori, and
# NIC-less PCIe boxes (groups that would leave the box are costed inside it).
_FABRICS = ["dgx-h100", "dgx-a100-80gb", "hgx-h100-roce", "aws-p5", "gb200-nvl72", "dgx-b200", "mi300x-platform",
            "tpu-v5p-pod", "tpu-v6e-pod", "rtx-a6000", "rtx-4090"]


def _scalar_seconds(op, sizes, ns, per_node, system):
    from gpuplan.primitives.parallel_groups import _group_collective_seconds

    return np.array([_group_collective_seconds(op, float(s), int(n), int(p), system, None)
                     for s, n, p in zip(sizes, ns, per_node)])


@pytest.mark.parametrize("system_id", _FABRICS)
def test_batched_group_times_equal_the_scalar_path_bit_for_bit(system_id):
    from gpuplan.catalog import get_system
    from gpuplan.primitives.parallel_groups import _group_seconds_batch

    system = get_system(system_id)
    rng = np.random.default_rng(35)
    for op in Collective:
        ns = rng.choice([2, 3, 4, 8, 16, 64, 72, 256, 1024, 8192], 40)
        per_node = np.minimum(ns, rng.choice([1, 2, 4, 8, 72], 40))
        sizes = 10 ** rng.uniform(1, 12, 40)  # 10 B .. 1 TB: LL, LL128 and Simple regimes
        try:
            expected = _scalar_seconds(op, sizes, ns, per_node, system)
        except InputError as exc:  # the batch refuses exactly as the first refused group does
            with pytest.raises(InputError, match=str(exc).split(";")[0][:40]):
                _group_seconds_batch(op, sizes, ns.astype(float), per_node.astype(float), system, None)
            continue
        got = _group_seconds_batch(op, sizes, ns.astype(float), per_node.astype(float), system, None)
        assert np.array_equal(got, expected), (op, np.flatnonzero(got != expected)[:5])


def test_array_of_groups_equals_one_call_per_group_on_a_cold_memo(monkeypatch):
    from gpuplan.primitives import parallel_groups

    monkeypatch.setattr(parallel_groups, "_GROUP_CACHE", {})
    system = load_catalog().system("dgx-h100")
    sizes = np.array([[1e3, 4e6], [2.5e8, 0.0]])
    ns = np.array([[8, 64], [1, 512]])
    per_node = np.array([[8, 1], [1, 8]])
    got = collective_seconds_array(Collective.ALL_REDUCE, sizes, ns, per_node, system)
    monkeypatch.setattr(parallel_groups, "_GROUP_CACHE", {})
    expected = [[collective_seconds(Collective.ALL_REDUCE, float(s), int(n), int(p), system)
                 for s, n, p in zip(sizes[i], ns[i], per_node[i])] for i in range(2)]
    assert got.tolist() == expected
    assert got[1, 0] == got[1, 1] == 0.0  # a group of one GPU and an empty message take no time


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.5e6, 1e9, 3.3e9]), st.integers(1, 4096), st.integers(1, 72)),
                min_size=1, max_size=60))
def test_unique_triples_is_numpy_unique_over_rows(rows):
    # collective_seconds_array's dedup must give np.unique(axis=0)'s rows (lexicographic) and inverse
    from gpuplan.primitives.parallel_groups import _unique_triples

    size = np.array([r[0] for r in rows])
    n = np.array([r[1] for r in rows], np.int64)
    pn = np.array([r[2] for r in rows], np.int64)
    ref, ref_inv = np.unique(np.stack([size, n, pn], axis=1), axis=0, return_inverse=True)
    s, g, p, inv = _unique_triples(size, n, pn)
    np.testing.assert_array_equal(np.stack([s, g, p], axis=1), ref)
    np.testing.assert_array_equal(inv, ref_inv.ravel())
