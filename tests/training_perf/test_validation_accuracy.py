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
    # reached (MAPE %), after FlashAttention v1 for llm-foundry rows and torchtitan's half-forward
    # selective recompute: meg21 2.0, korth-t5 7.8, korth-abs 8.8, vtrain 14.2, nemo 13.2,
    # mpt-a100 7.0, mpt-h100 10.3, tt-a100 11.7, megft (time rows) 32.9, all time rows 11.2
    # -> limits with ~10-15% relative slack. After the channel-aware Simple fill in collectives
    # (n_1/2 = 2 channels per NIC x 4 MiB across nodes): vtrain 11.5, nemo 12.5, all time rows 10.0.
    limits = {"meg21-t1": 3.0, "korth-t5": 9.0, "korth-abs": 10.0, "vtrain": 13.0, "nemo2407": 14.0,
              "mpt-a100": 8.5, "mpt-h100": 12.0, "tt-a100": 13.5, "megft": 36.0}
    for name, items in fam.items():
        assert _mape(items) <= limits.get(name, 30.0), (name, _mape(items))
    assert _mape(time_rows) <= 11.0


def test_vtrain_strategy_ranking(results):
    groups = defaultdict(list)
    for r, p, m in results:
        if r["source"].startswith("Bang"):
            groups[(r["model"], r["num_gpus"])].append((p, m))
    rhos = [_spearman([p for p, _ in g], [m for _, m in g]) for g in groups.values() if len(g) >= 4]
    # reached: 3.6B 0.95, 18.4B 0.21, 39.1B 0.52, 175B 0.87 (mean 0.64). The 18.4B group dropped from
    # 0.36 with the channel-aware collective fill: its measured times span 10.43-11.03 s except the tp16
    # row, so its rank order is within a few percent of noise. Known regression, target is >= 0.8.
    assert rhos and min(rhos) >= 0.18 and sum(rhos) / len(rhos) >= 0.6
