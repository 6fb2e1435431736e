"""`gpuplan bench` collectives (interfaces/bench/collectives.py): nccl-tests' algbw / busbw, buffer
sizes, rank plans, rows that `calibrate fit` consumes, and a real gloo run over 2 spawned ranks
when torch is installed."""

from __future__ import annotations

import pytest

from gpuplan.interfaces.calibration.bench import local_system
from gpuplan.interfaces.calibration.bench.backend import torch_or_none
from gpuplan.interfaces.calibration.bench.collectives import (COLLECTIVES, CollectivePoint, bus_factor, collective_rows,
                                                  element_counts, free_port, plan_ranks, run_collectives)
from gpuplan.interfaces.validation.validate import row_kind


@pytest.mark.parametrize("collective, ranks, factor", [
    # nccl-tests doc/PERFORMANCE.md "Bus bandwidth": all_reduce 2(n-1)/n, all_gather / reduce_scatter
    # (n-1)/n, broadcast 1; src/alltoall.cu AlltoAllGetBw: (n-1)/n
    ("all_reduce", 8, 2 * 7 / 8), ("all_reduce", 2, 1.0), ("all_gather", 8, 7 / 8), ("reduce_scatter", 4, 3 / 4),
    ("all_to_all", 2, 1 / 2), ("all_to_all", 16, 15 / 16), ("broadcast", 8, 1.0), ("all_reduce", 1, 0.0),
])
def test_bus_factor_is_nccl_tests(collective, ranks, factor):
    assert bus_factor(collective, ranks) == pytest.approx(factor)


def test_bus_factor_bad_input():
    with pytest.raises(ValueError, match="collective"):
        bus_factor("all_scatter", 8)
    with pytest.raises(ValueError, match="ranks"):
        bus_factor("all_reduce", 0)


def test_algbw_and_busbw_of_a_point():
    # 1 GB all_reduce over 8 ranks in 10 ms: algbw = 1e9 B / 0.01 s = 100 GB/s; busbw = 100 x 1.75 = 175
    p = CollectivePoint("all_reduce", 10**9, 8, 0.01)
    assert p.algbw_gbps == pytest.approx(100.0) and p.busbw_gbps == pytest.approx(175.0)
    d = p.to_dict()
    assert d["time_us"] == pytest.approx(10_000.0) and set(d) >= {"algbw_gbps", "busbw_gbps", "size_bytes"}


@pytest.mark.parametrize("collective, size, ranks, expected", [
    # fp32 (4 B): S = 1 MiB -> 262144 elements; all_gather sends S / n, receives S (nccl-tests all_gather.cu)
    ("all_reduce", 2**20, 2, (262144, 262144)), ("all_gather", 2**20, 2, (131072, 262144)),
    ("all_to_all", 2**20, 4, (262144, 262144)),
    ("all_gather", 100, 8, (3, 24)),  # 100 B = 25 elements, rounded down to a multiple of 8: 24 gathered, 3 sent
])
def test_element_counts(collective, size, ranks, expected):
    assert element_counts(collective, size, ranks, 4) == expected


def test_rank_plans():
    assert plan_ranks("cpu", 0) == ("gloo", 2, "")
    assert plan_ranks("cuda", 8) == ("nccl", 8, "")
    assert plan_ranks("rocm", 4) == ("nccl", 4, "")
    backend, ranks, why = plan_ranks("cuda", 1)
    assert backend is None and "2 or more" in why
    assert plan_ranks("mps", 1)[0] is None
    with pytest.raises(ValueError):
        plan_ranks("tpu", 8)


def test_free_port_is_bindable():
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # free right after: binding again succeeds
    assert 0 < port < 65536


def test_rows_are_collectives_rows_that_calibrate_fit_consumes():
    # A local 8x H100 box (catalog: dgx-h100) measuring all_reduce busbw 20% under the model at
    # 256 MiB and 1 GiB: the rows route as collectives, predict, and inform the NVLink efficiency.
    from gpuplan.interfaces.calibration.fit import calibrate_rows
    from gpuplan.interfaces.validation.collectives import predict_row

    system = local_system("h100-sxm5-80gb", 8)
    assert system == "dgx-h100"  # the first 8-GPU H100 system of the catalog (systems.toml order)
    probe = collective_rows([CollectivePoint("all_reduce", s, 8, 1.0) for s in (2**28, 2**30)], system, "test", "t")
    predicted = [predict_row(r).value for r in probe]  # busbw the model gives these rows
    # measured: 0.8 x the model, written back as the time nccl-tests would print for that busbw
    points = [CollectivePoint("all_reduce", s, 8, s * 1.75 / (0.8 * bw * 1e9)) for s, bw in zip((2**28, 2**30), predicted)]
    rows = collective_rows(points, system, "test", "bench-coll")
    assert [row_kind(r) for r in rows] == ["collectives", "collectives"]
    assert rows[0]["metric"] == "busbw_gbps" and float(rows[0]["value"]) == pytest.approx(0.8 * predicted[0])
    assert rows[0]["num_gpus"] == "8" and rows[1]["size_bytes"] == str(2**30)
    res = calibrate_rows(rows)
    assert "collectives.nvlink_efficiency" in res.values
    assert res.values["collectives.nvlink_efficiency"] < 0.8  # the default 0.8, pulled down by the 20% shortfall
    assert res.error_block()["mape_after_pct"] < res.error_block()["mape_before_pct"]


def test_local_system_without_catalog_gpu():
    assert local_system(None, 2) == ""


@pytest.mark.skipif(torch_or_none() is None, reason="torch not installed (pip install 'gpuplan[bench]')")
def test_gloo_collectives_over_two_spawned_ranks():
    points, why = run_collectives("cpu", quick=True)
    assert why == ""
    assert [p.collective for p in points] == [c for c in COLLECTIVES for _ in range(3)]
    for p in points:
        assert p.ranks == 2 and p.time_s > 0
        # busbw / algbw is nccl-tests' factor for 2 ranks: all_reduce 1, all_gather and all_to_all 1/2
        assert p.busbw_gbps / p.algbw_gbps == pytest.approx(1.0 if p.collective == "all_reduce" else 0.5)
    assert {p.size_bytes for p in points} == {2**16, 2**20, 2**22}


def test_bench_without_torch_says_collectives_are_skipped(monkeypatch):
    import gpuplan.interfaces.calibration.bench as bench
    import gpuplan.interfaces.calibration.bench.backend as backend

    monkeypatch.setattr(backend, "torch_or_none", lambda: None)
    monkeypatch.setitem(bench.GEMM_SIZES, ("quick", "cpu"), (64,))
    monkeypatch.setitem(bench.STREAM_ELEMENTS, "quick", 1024)
    report = bench.run_bench("cpu", quick=True, fit_profile=False)
    assert report.backend == "numpy" and report.collectives == []
    assert "needs torch" in report.skipped["collectives"] and report.to_dict()["collectives"] == []


@pytest.mark.skipif(torch_or_none() is None, reason="torch not installed (pip install 'gpuplan[bench]')")
@pytest.mark.parametrize("quick", [True, False])
def test_bench_reports_collectives_as_rows(monkeypatch, quick):
    # The bench's own wiring, with tiny sweeps and the ranks replaced by two measured points (the
    # real ranks: test_gloo_collectives_over_two_spawned_ranks): --quick on a CPU leaves them out
    # and says why; the full bench reports them and writes them as collectives rows.
    import gpuplan.interfaces.calibration.bench as bench

    for mode in ("quick", "full"):
        monkeypatch.setitem(bench.GEMM_SIZES, (mode, "cpu"), (64,))
        monkeypatch.setitem(bench.STREAM_ELEMENTS, mode, 1024)
    monkeypatch.setattr(bench, "attention", lambda *a, **k: {"prefill_tflops": 1.0})
    fake = [CollectivePoint("all_reduce", 2**20, 2, 1e-3), CollectivePoint("all_to_all", 2**20, 2, 2e-3)]
    monkeypatch.setattr(bench, "run_collectives", lambda device, quick, gpus: (fake, ""))
    report = bench.run_bench("cpu", quick=quick, fit_profile=False)
    d = report.to_dict()
    coll_rows = [r for r in d["rows"] if r.get("collective")]
    if quick:
        assert d["collectives"] == [] and "--quick" in d["skipped"]["collectives"] and not coll_rows
    else:
        assert [c["collective"] for c in d["collectives"]] == ["all_reduce", "all_to_all"]
        assert "collectives" not in d["skipped"]
        # 1 MiB in 1 ms: algbw 1.048576 GB/s; busbw x 1 (all_reduce, 2 ranks), x 1/2 (all_to_all, 2 ms)
        assert [float(r["value"]) for r in coll_rows] == pytest.approx([1.048576, 0.262144])
        assert {r["system"] for r in coll_rows} == {"local-cpu"} and coll_rows[0]["id"] == "bench-coll-local-cpu-1"
