"""Evidence beside a training number (interfaces.planning.evidence): the published runs nearest a plan."""

from __future__ import annotations

import csv

import pytest

from gpuplan import api
from gpuplan.catalog import DATA_DIR
from gpuplan.interfaces.planning.evidence import comparable_runs, mfu_evidence, published_runs


def test_index_holds_the_packaged_mfu_rows():
    # every high/medium mfu_pct row of the packaged training.csv on a catalog system is in the index
    with open(DATA_DIR / "validation" / "training.csv", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["metric"] == "mfu_pct" and r["confidence"] != "low"]
    ids = {r.id for r in published_runs()}
    assert rows and {r["id"] for r in rows if r["id"] in ids}
    by_id = {r.id: r for r in published_runs()}
    for r in rows:
        if r["id"] in by_id:  # the MFU is the row's own value, untouched
            assert by_id[r["id"]].mfu_pct == pytest.approx(float(r["value"]))


def test_comparable_runs_share_generation_and_class():
    # a 175B-class dense model (12 x 96 x 12288^2 = 1.74e11 block parameters) on 1024 Hopper GPUs
    runs, close = comparable_runs("hopper", False, 12 * 96 * 12288**2, 1024)
    assert runs and all(r.generation == "hopper" and not r.moe for r in runs)
    assert len(runs) <= 5


def test_verdicts():
    runs, _ = comparable_runs("hopper", False, 1.7e11, 1024)
    lo, hi = min(r.mfu_pct for r in runs), max(r.mfu_pct for r in runs)
    assert "above every" in mfu_evidence("hopper", False, 1.7e11, 1024, hi + 10)["note"]
    assert "below every" in mfu_evidence("hopper", False, 1.7e11, 1024, lo / 2)["note"]
    assert "inside" in mfu_evidence("hopper", False, 1.7e11, 1024, (lo + hi) / 2)["note"]
    none = mfu_evidence("no-such-generation", False, 1e9, 8, 40.0)
    assert none["rows"] == [] and "outside what was ever measured" in none["note"]


def test_train_and_plan_carry_the_evidence():
    d = api.train().to_dict()
    ev = d["comparable_published_mfu_pct"]
    assert ev["rows"] and ev["low"] <= ev["high"]
    p = api.plan().to_dict()
    assert p["comparable_published_mfu_pct"]["rows"]


def test_beside_band_says_why_a_plan_is_outside_the_range():
    from gpuplan.interfaces.planning.evidence import beside_band

    ev = {"low": 42.0, "high": 47.0, "rows": [], "note": "above"}
    # inside the range: the note is unchanged, the band is added
    inside = beside_band(ev, 45.0, [30.0, 60.0])
    assert inside["note"] == "above" and inside["band_mfu_pct"] == [30.0, 60.0]
    # 52% above 47%, but its band 27-60% reaches 42-47%: within the model's measured error
    reach = beside_band(ev, 52.0, [27.2, 59.7])
    assert "within the model's measured error" in reach["note"]
    # 70% with a band 60-80% misses 42-47% entirely: the model is likely optimistic there
    miss = beside_band(ev, 70.0, [60.0, 80.0])
    assert "likely optimistic" in miss["note"]
    assert "likely pessimistic" in beside_band(ev, 20.0, [15.0, 30.0])["note"]
    assert beside_band(ev, 52.0, None) is ev  # no band: nothing added
