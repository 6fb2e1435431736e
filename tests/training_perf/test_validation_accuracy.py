"""The training predictor over ../shared/validation/training.csv must keep its accuracy.

Thresholds are the figures reached when this test was written plus a little slack; raising a
figure past them fails the suite (STYLE.md: validation that can fail).
"""

from __future__ import annotations

import csv
from collections import defaultdict

import pytest

from gpuplan.interfaces.validation_types import SkipRow
from gpuplan.workloads.training.validation import predict_row


def _family(row_id: str) -> str:
    return row_id.rsplit("-", 1)[0]


def _spearman(x, y):
    import numpy as np

    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1])


_CACHE: dict = {}


@pytest.fixture
def results(shared_dir):
    if "rows" in _CACHE:
        return _CACHE["rows"]
    rows = list(csv.DictReader(open(shared_dir / "validation" / "training.csv", encoding="utf-8")))
    out = []
    for r in rows:
        try:
            p = predict_row(r)
        except SkipRow:
            continue
        out.append((r, p.value, float(r["value"])))
    _CACHE["rows"] = out
    return out


def _mape(items):
    return sum(abs(p - m) / m for _, p, m in items) / len(items) * 100


def test_memory_rows_within_5pct(results):
    mem = [x for x in results if x[0]["metric"].startswith(("peak_mem", "mem_"))]
    assert mem and _mape(mem) <= 5.0


def test_time_mape_per_family(results):
    time_rows = [x for x in results if not x[0]["metric"].startswith(("peak_mem", "mem_"))]
    fam = defaultdict(list)
    for x in time_rows:
        fam[_family(x[0]["id"])].append(x)
    # reached (MAPE %) after domain channels scaled to the link rate (A100 21), interleaved p2p overlap
    # (Megatron-core), TE TP-comm overlap on fp8 rows, channels/SMs contention of overlapped DP
    # collectives and Composer's fp32 gathers: meg21 2.8, korth-t5 5.3, korth-abs 7.4, vtrain 10.2,
    # nemo 8.5, mpt-a100 7.05, mpt-h100 8.8, tt-a100 10.4, megft (time rows) 34.0, all time rows
    # 9.06; fp16 for empty-precision megatron/deepspeed rows: vtrain 9.1, korth-abs 6.8, all 8.68;
    # bubble without the output head + torchtitan's fp32 gradient reduce: vtrain 8.8, korth-t5 5.1,
    # korth-abs 6.3, tt-a100 9.7, all 8.55; output head in bf16 in FP8 runs: nemo 5.7; torchtitan's
    # eager elementwise ops counted by operator + FSDP2 copy-in/out: tt-a100 1.75, all 7.95
    # -> limits with ~10-15% relative slack.
    limits = {"meg21-t1": 3.2, "korth-t5": 5.8, "korth-abs": 7.2, "vtrain": 9.8, "nemo2407": 6.5,
              "mpt-a100": 8.0, "mpt-h100": 10.0, "tt-a100": 2.5, "megft": 38.0}
    for name, items in fam.items():
        assert _mape(items) <= limits.get(name, 30.0), (name, _mape(items))
    assert _mape(time_rows) <= 8.7


def test_vtrain_strategy_ranking(results):
    groups = defaultdict(list)
    for r, p, m in results:
        if r["source"].startswith("Bang"):
            groups[(r["model"], r["num_gpus"])].append((p, m))
    rhos = [_spearman([p for p, _ in g], [m for _, m in g]) for g in groups.values() if len(g) >= 4]
    # reached: 3.6B 0.94, 18.4B 0.32, 39.1B 0.66, 175B 0.83 (mean 0.69). The 18.4B group's measured
    # times span 10.43-11.03 s except the tp16 row, so its rank order is within a few percent of
    # noise; the 39.1B group's tp=2 rows run 1.3-1.5x slower than any modelled cost explains.
    # Target is >= 0.8 per group (not met for those two).
    assert rhos and min(rhos) >= 0.3 and sum(rhos) / len(rhos) >= 0.66
