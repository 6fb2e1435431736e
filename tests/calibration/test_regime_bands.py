"""Bands that widen with novelty: regimes (interfaces.validation.regimes), unseen-<axis> bands from
leave-one-regime-out residuals (error_bands.fit_unseen_bands, novelty_band), their honest coverage
(interfaces.validation.band_coverage) and `validate --cv regime` (cross_validation)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.cli.main import app
from gpuplan.interfaces.validation.band_coverage import BandRecord, arrival_coverage, band_table
from gpuplan.interfaces.validation.error_bands import (
    MIN_ROWS, fit_unseen_bands, novelty_band, weighted_percentiles,
)
from gpuplan.interfaces.validation.regimes import (
    AXES, Regime, describe, hardware_generation, inventory, novelty, precision_class,
)

from .conftest import SGF, measured_at, synthetic_training_rows

H100_TRT = Regime("nvidia/hopper", "tensorrt-llm", "dense", "fp8")


def test_hardware_generation_from_the_catalog_architecture():
    # vendor lower-cased, first word of the architecture; Blackwell Ultra and Grace parts are Blackwell;
    # TPUs keep their version
    assert hardware_generation("nvidia", "Hopper GH100") == "nvidia/hopper"
    assert hardware_generation("nvidia", "Blackwell Ultra + Grace") == "nvidia/blackwell"
    assert hardware_generation("nvidia", "Ada Lovelace AD102") == "nvidia/ada"
    assert hardware_generation("AMD", "CDNA3") == "amd/cdna3"
    assert hardware_generation("google", "TPU v6e") == "google/tpu-v6e"
    assert hardware_generation("nvidia", "Ampere (Orin SoC)") == "nvidia/ampere"


def test_precision_class_merges_the_sixteen_bit_formats():
    assert precision_class("bf16") == precision_class("fp16") == precision_class("") == "16-bit"
    assert precision_class("FP8") == "fp8" and precision_class("nvfp4") == "nvfp4"


def test_novelty_names_each_unseen_axis_and_an_unseen_combination():
    seen = inventory([H100_TRT, Regime("amd/cdna3", "vllm", "dense", "fp8"),
                      Regime("nvidia/blackwell", "tensorrt-llm", "moe", "nvfp4")])
    assert novelty(H100_TRT, seen).validated
    # MI355X with SGLang: two axes no public row has
    new = novelty(Regime("amd/cdna4", "sglang", "dense", "fp8"), seen)
    assert new.unseen_axes == ("hardware", "engine") and not new.validated
    # every value seen, never together: Hopper with vLLM
    combo = novelty(Regime("nvidia/hopper", "vllm", "dense", "fp8"), seen)
    assert combo.unseen_axes == () and combo.unseen_regime and not combo.validated
    assert describe(Regime("amd/cdna4", "sglang", "dense", "fp8"), new) == (
        "unvalidated regime: no public row with hardware amd/cdna4, engine sglang")
    assert describe(H100_TRT, novelty(H100_TRT, seen)).startswith("validated regime")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(*(st.sampled_from(["a", "b", "c"]) for _ in AXES)), min_size=1, max_size=8))
def test_a_regime_is_validated_against_any_inventory_that_holds_it(items):
    regimes = [Regime(*t) for t in items]
    seen = inventory(regimes)
    assert all(novelty(r, seen).validated for r in regimes)
    assert all(set(novelty(r, inventory([])).unseen_axes) == set(AXES) for r in regimes)


def test_weighted_percentiles_by_hand():
    # values 0, 10, 20 with weights 2, 1, 1 (total 4): Hazen positions (cumulative - w/2) / 4 =
    # 0.25, 0.625, 0.875; the median interpolates 0 .. 10 at (0.5 - 0.25) / 0.375 = 2/3 -> 6.667;
    # q10 lies below the first position: clamped to 0; q90 above the last: 20
    assert weighted_percentiles([20, 0, 10], [1, 2, 1], (10, 50, 90)) == pytest.approx([0.0, 20 / 3, 20.0])
    # equal weights: Hazen positions 0.25, 0.75 for two values; q50 halfway
    assert weighted_percentiles([0, 1], [1, 1], (50,)) == pytest.approx([0.5])


def test_family_out_bands_weigh_each_family_the_same():
    # key k: family a has 9 rows at 0.0, family b one row at 1.0. By row, numpy's linear q90 sits at
    # position 8.1 of 0..9: 0 + 0.1 x (1 - 0) = 0.1. By family, each half the mass: a's rows at Hazen
    # positions up to (1 - 1/18) / 2 = 0.472, b's at (2 - 0.5) / 2 = 0.75, so q90 (0.9) clamps to 1.0
    from gpuplan.interfaces.validation.error_bands import fit_bands

    res, keys = [0.0] * 9 + [1.0], [["k"]] * 10
    assert fit_bands(res, keys)["k"]["q90"] == pytest.approx(0.1)
    assert fit_bands(res, keys, ["a"] * 9 + ["b"])["k"]["q90"] == pytest.approx(1.0)
    assert fit_bands(res, keys, ["a"] * 9 + ["b"])["k"]["q10"] == pytest.approx(0.0)


def test_unseen_bands_weigh_each_held_out_value_the_same():
    # class inference/throughput: 8 rows of group A with residual 0, 2 rows of group B with residual 1.
    # Each group weighs 1/2: sorted positions (cumulative - w/2) / 2 with w = 1/8 for A's rows and
    # 1/4 for B's: A's eight at 1/32, 3/32, ..., 15/32; B's two at 0.625 and 0.875. q10 = 0 (among
    # A's); q90 = 1 (above B's last position, clamped). Unweighted, B's two rows would be 20% of the
    # mass and q90 = 0.9 x 1 by numpy's linear rule; weighted, a new group is as likely to be B as A.
    res = [0.0] * 8 + [1.0] * 2
    table = fit_unseen_bands({"hardware": res}, ["inference/throughput"] * 10,
                             {"hardware": ["A"] * 8 + ["B"] * 2})
    e = table["inference/throughput/unseen-hardware"]
    assert (e["q10"], e["q90"], e["rows"], e["groups"]) == (pytest.approx(0.0), pytest.approx(1.0), 10, 2)
    # one held-out value only, or fewer than MIN_ROWS residuals: no band
    assert fit_unseen_bands({"hardware": res}, ["inference/throughput"] * 10, {"hardware": ["A"] * 10}) == {}
    short = res[:MIN_ROWS - 2] + [1.0]
    assert fit_unseen_bands({"hardware": short}, ["x/y"] * len(short),
                            {"hardware": ["A"] * (len(short) - 1) + ["B"]}) == {}


def test_unseen_hardware_band_pools_every_class_of_both_kinds():
    # Hardware-out residuals: training/time rows of generation X at 0.2 (4 rows) and of Y at 0.0 (4
    # rows); inference/throughput rows of X at -0.4 (4 rows: measured 0.67x the predicted
    # throughput, i.e. predicted too fast, pessimism residual +0.4: error_bands.pessimism_sign).
    # Pooled groups training:X, training:Y, inference:X, each 4 rows, so every row weighs the same:
    # Hazen positions (i - 0.5) / 12 of the sorted pessimism residuals 0 x4, 0.2 x4, 0.4 x4. q10 (0.1)
    # lies between positions 1 and 2 (both 0.0): 0.0; q90 (0.9) between 11 and 12 (both 0.4): 0.4.
    # The training time band is [0, 0.4]; the throughput band the same turned around, [-0.4, 0].
    # Per class the throughput rows (one held-out value) would have no band at all.
    res = [0.2] * 4 + [0.0] * 4 + [-0.4] * 4
    classes = ["training/time"] * 8 + ["inference/throughput"] * 4
    groups = {"hardware": ["X"] * 4 + ["Y"] * 4 + ["X"] * 4}
    table = fit_unseen_bands({"hardware": res}, classes, groups)
    t, i = table["training/time/unseen-hardware"], table["inference/throughput/unseen-hardware"]
    assert (t["q10"], t["q90"], t["rows"], t["groups"]) == (pytest.approx(0.0), pytest.approx(0.4), 12, 3)
    assert (i["q10"], i["q90"]) == (pytest.approx(-0.4), pytest.approx(0.0))
    # the same residuals per class (pooled=()): the training band spans only its own two generations
    # (0 .. 0.2), and the throughput class has one held-out value: no band
    per_class = fit_unseen_bands({"hardware": res}, classes, groups, pooled=())
    assert per_class["training/time/unseen-hardware"]["q90"] == pytest.approx(0.2)
    assert "inference/throughput/unseen-hardware" not in per_class


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-2, 2), st.sampled_from(["training/time", "training/memory",
                                                             "inference/latency", "inference/throughput"]),
                          st.sampled_from(["a", "b", "c"])), min_size=MIN_ROWS, max_size=40,
                unique_by=lambda t: abs(t[0])))
def test_pooled_unseen_band_is_one_band_in_every_orientation(items):
    # invariants of the pooled band: every class present gets the same band, the throughput class
    # turned around (pessimism_sign); its edges lie within the pessimism residuals; order-free (for
    # distinct |residuals|: tied values of unequal weight take their Hazen positions in input order)
    res, classes, groups = [r for r, _, _ in items], [c for _, c, _ in items], [g for _, _, g in items]
    table = fit_unseen_bands({"hardware": res}, classes, {"hardware": groups})
    kinds_groups = {f"{c.split('/')[0]}:{g}" for c, g in zip(classes, groups)}
    if len(kinds_groups) < 2:
        assert table == {}
        return
    pess = [-r if c == "inference/throughput" else r for r, c in zip(res, classes)]
    assert set(table) == {f"{c}/unseen-hardware" for c in classes}
    for key, e in table.items():
        q10, q90 = (-e["q90"], -e["q10"]) if key.startswith("inference/throughput") else (e["q10"], e["q90"])
        assert min(pess) - 1e-12 <= q10 <= q90 <= max(pess) + 1e-12
        assert (e["rows"], e["groups"]) == (len(res), len(kinds_groups))
    flipped = fit_unseen_bands({"hardware": res[::-1]}, classes[::-1], {"hardware": groups[::-1]})
    assert {k: (pytest.approx(v["q10"]), pytest.approx(v["q90"])) for k, v in flipped.items()} == {
        k: (v["q10"], v["q90"]) for k, v in table.items()}


def test_axis_out_coverage_holds_each_generation_out_in_turn():
    # Three generations A, B, C, ten inference throughput rows each, hardware-out residuals A and B
    # 0.00 .. 0.09, C 1.00 .. 1.09 (engine, architecture and precision shared). A held out: the
    # unseen-hardware band pools B and C (20 rows, each group 1/2, every row 1/20): pessimism
    # residuals -r sorted, Hazen positions (i - 0.5) / 20; q10 at i = 2.5, halfway between -1.08 and
    # -1.07 = -1.075; q90 at i = 18.5, between -0.02 and -0.01 = -0.015; turned around the
    # throughput band is [0.015, 1.075]: A's 0.02 .. 0.09 inside, 8 of 10 (B the same). C held out:
    # A and B give -0.09 x2, -0.08 x2, ..., 0.00 x2: q10 between -0.09 and -0.08 = -0.085, q90 between
    # -0.01 and 0.00 = -0.005: band [0.005, 0.085], none of C's rows inside. Overall 16 of 30.
    from gpuplan.interfaces.validation.band_coverage import axis_out_coverage

    recs = []
    for hw, base in (("amd/a", 0.0), ("nvidia/b", 0.0), ("nvidia/c", 1.0)):
        regime = Regime(hw, "vllm", "dense", "16-bit")
        recs += [_record(f"fam-{hw}", regime, base + 0.01 * i) for i in range(10)]
    cov = axis_out_coverage(recs, "hardware")["inference"]
    assert [(cov[v].rows, cov[v].inside) for v in ("amd/a", "nvidia/b", "nvidia/c")] == [(10, 8), (10, 8), (10, 0)]
    assert (cov["overall"].rows, cov["overall"].inside) == (30, 16)
    assert cov["overall"].by_novelty == {"unseen-hardware": (30, 16)}


def _table() -> dict:
    return {
        "inference/throughput": {"q10": -0.1, "q90": 0.1, "rows": 50},
        "inference/throughput/dense": {"q10": -0.05, "q90": 0.05, "rows": 40},
        "inference/throughput/unseen-hardware": {"q10": -0.5, "q90": 0.2, "rows": 50},
        "inference/throughput/unseen-engine": {"q10": -0.3, "q90": 0.3, "rows": 50},
        "inference/throughput/unseen-regime": {"q10": -0.2, "q90": 0.15, "rows": 50},
    }


def test_novelty_band_takes_the_most_novel_part():
    seen = inventory([H100_TRT, Regime("nvidia/ampere", "vllm", "dense", "fp8")])
    keys = ["inference/throughput/dense", "inference/throughput"]
    # a validated regime: the family-out band of its most specific key
    b = novelty_band(_table(), seen, keys, H100_TRT)
    assert (b.regime, b.q10, b.q90, b.novelty, b.validated) == ("inference/throughput/dense", -0.05, 0.05, "seen", True)
    # new hardware and a new engine: the wider of the two unseen bands (hardware 0.7 > engine 0.6)
    b = novelty_band(_table(), seen, keys, Regime("amd/cdna3", "sglang", "dense", "fp8"))
    assert (b.regime, b.novelty, b.validated) == ("inference/throughput/unseen-hardware", "unseen-hardware", False)
    assert b.interval(100.0) == pytest.approx((100 * math.exp(-0.5), 100 * math.exp(0.2)))
    assert "hardware amd/cdna3, engine sglang" in b.reason
    # seen values never together: the unseen-regime band
    b = novelty_band(_table(), seen, keys, Regime("nvidia/ampere", "tensorrt-llm", "dense", "fp8"))
    assert (b.q10, b.q90, b.novelty) == (-0.2, 0.15, "unseen-regime")
    # no regime given: the family-out band, as before regimes
    assert novelty_band(_table(), seen, keys, None).regime == "inference/throughput/dense"


def _record(family: str, regime: Regime, residual: float) -> BandRecord:
    held = {g: residual for g in ("regime", *AXES)}
    return BandRecord(family, "inference", ("inference/throughput",), regime, residual, held)


def test_arrival_coverage_judges_each_family_against_bands_fit_without_it():
    # Two Hopper TRT-LLM families (residuals 0.00..0.09 each) and one MI300X vLLM family (1.00..1.09).
    # When MI300X arrives its hardware and engine are new; the unseen bands are fit on the Hopper
    # rows only, from one held-out value, so no unseen band exists and the family-out band of the
    # Hopper rows (about 0.005..0.085) stands in: none of its rows inside. When a Hopper family
    # arrives its regime is seen; the family-out band of the other 20 rows (one Hopper family and
    # MI300X, each weighing half: Hazen positions (i - 0.5) / 20, q10 between the 2nd and 3rd sorted
    # values 0.01 and 0.02 = 0.015, q90 between 1.07 and 1.08 = 1.075) holds its rows from 0.02 up:
    # 8 of 10 each.
    hopper, amd = H100_TRT, Regime("amd/cdna3", "vllm", "dense", "fp8")
    recs = [_record("h1", hopper, 0.01 * i) for i in range(10)]
    recs += [_record("h2", hopper, 0.01 * i) for i in range(10)]
    recs += [_record("mi", amd, 1.0 + 0.01 * i) for i in range(10)]
    cov = arrival_coverage(recs)
    assert (cov.rows, cov.inside) == (30, 16)
    assert cov.by_novelty["seen"] == (20, 16)
    assert cov.by_novelty["unseen-hardware"] == (10, 0)
    table = band_table(recs)
    # on all rows: the unseen-hardware band weighs Hopper and MI300X the same
    assert table["inference/throughput/unseen-hardware"]["groups"] == 2


def test_cv_regime_leaves_out_a_hardware_generation_as_a_whole():
    # Twelve synthetic Megatron rows, A100 (DGX A100) measured as the model predicts with
    # sustained_gemm_fraction 0.75 and H100 (DGX H100) rows as with 0.95, split into two families
    # that each hold both generations. Leaving a family out still fits both generations' rows
    # (the compromise near 0.85 the in-sample fit finds); leaving Hopper out fits the A100 rows
    # alone (near 0.75): Hopper rows are then predicted too slow, so the held-out hardware error
    # exceeds the family-out error.
    from gpuplan.interfaces.validation.cross_validation import cross_validate

    base = synthetic_training_rows()
    rows = []
    for i, r in enumerate(base):
        value = 0.95 if r["system"] == "dgx-h100" else 0.75
        (m,) = measured_at([r], {SGF: value})
        rows.append({**m, "id": f"{'meg21-t1' if i % 2 else 'korth-abs'}-{i}"})
    report = cross_validate(rows, mode="regime")
    cv = report.to_dict()["cv"]
    assert cv["mode"] == "regime"
    hw = cv["regimes"]["hardware"]
    assert set(hw) == {"nvidia/ampere", "nvidia/hopper", "overall"}
    hopper_rows = [r for r in report.rows if r.regime.hardware == "nvidia/hopper"]
    assert len(hopper_rows) == 4  # rows 3, 6, 9, 12 run on DGX H100
    assert hw["nvidia/hopper"]["mape_pct"] > cv["overall"]["mape_pct"] + 2.0
    # the held-out predictions are too slow: the rows' metric is model TFLOP/s per GPU, below the
    # measurement made as if at 0.95
    for r in hopper_rows:
        assert r.predicted_held_out["hardware"] < r.measured
    assert set(cv["regimes"]) == {"regime", "hardware", "engine", "architecture", "precision"}


def test_validate_cv_regime_cli_and_bad_mode(runner, tmp_path):
    import csv

    from .test_cross_validation import COLUMNS

    rows = [{**r, "id": f"fam{'ab'[i % 2]}-{i}"} for i, r in
            enumerate(measured_at(synthetic_training_rows()[:4], {SGF: 0.8}))]
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    res = runner.invoke(app, ["validate", str(path), "--cv", "regime"])
    assert res.exit_code == 0, res.output
    assert "leave-one-hardware-out" in res.output and "nvidia/ampere" in res.output
    res = runner.invoke(app, ["validate", str(path), "--cv", "regime", "--json"])
    row = json.loads(res.stdout)["rows"][0]
    assert row["regime"]["hardware"] in ("nvidia/ampere", "nvidia/hopper")
    assert set(row["predicted_held_out"]) == {"regime", "hardware", "engine", "architecture", "precision"}
    bad = runner.invoke(app, ["validate", str(path), "--cv", "rows"])
    assert bad.exit_code == 2 and "cv: unknown mode 'rows'; allowed: family, regime, row" in bad.output


def test_serve_run_names_an_unvalidated_regime(runner):
    # No public inference row runs on CDNA4 (MI355X): the band comes from the unseen-hardware (or a
    # wider unseen) residuals and says so; a Hopper TensorRT-LLM dense fp8 deployment is validated
    out = runner.invoke(app, ["serve", "run", "llama-3-8b", "--gpu", "mi355x", "--engine", "vllm",
                              "--concurrency", "8", "--json"])
    assert out.exit_code == 0, out.output
    band = json.loads(out.stdout)["band_80pct"]
    thr = band["regimes"]["throughput"]
    assert thr["validated"] is False and thr["novelty"].startswith("unseen-")
    assert "unvalidated regime" in thr["reason"] and "amd/cdna4" in thr["reason"]
    assert band["prediction_regime"] == {"hardware": "amd/cdna4", "engine": "vllm", "architecture": "dense",
                                         "precision": "16-bit"}
    out = runner.invoke(app, ["serve", "run", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--engine", "tensorrt-llm",
                              "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--concurrency", "8", "--json"])
    thr = json.loads(out.stdout)["band_80pct"]["regimes"]["throughput"]
    assert thr["novelty"] == "seen" and thr["reason"].startswith("validated regime")
    # the table says it in words
    text = runner.invoke(app, ["serve", "run", "llama-3-8b", "--gpu", "mi355x", "--engine", "vllm",
                               "--concurrency", "8"])
    assert "unvalidated regime: no public row with hardware amd/cdna4" in text.output


def test_serve_plan_reports_the_best_layouts_regime(runner):
    # MI355X with gpuplan's own default engine: neither the hardware generation nor the engine has a
    # public serving row
    out = runner.invoke(app, ["serve", "plan", "llama-3-8b", "--gpu", "mi355x", "--rate", "1", "--json"])
    assert out.exit_code == 0, out.output
    regime = json.loads(out.stdout)["best_regime"]
    assert regime["validated"] is False and regime["unseen_axes"][:2] == ["hardware", "engine"]
    assert regime["reason"].startswith("unvalidated regime: no public row with hardware amd/cdna4, engine generic")


def test_shipped_unseen_hardware_band_is_one_pooled_band():
    # benchmarks/accuracy_cv.py --write ships the pooled band (error_bands.pooled_unseen_band) under
    # every class: the same edges for times, latencies and memory, mirrored for throughput
    from gpuplan.interfaces.validation.error_bands import load_bands

    t = load_bands()["regimes"]
    base = t["training/time/unseen-hardware"]
    for cls in ("training/memory", "inference/latency"):
        assert (t[f"{cls}/unseen-hardware"]["q10"], t[f"{cls}/unseen-hardware"]["q90"]) == (base["q10"], base["q90"])
    thr = t["inference/throughput/unseen-hardware"]
    assert (thr["q10"], thr["q90"]) == (-base["q90"], -base["q10"])
    assert base["pooled"] is True and base["groups"] >= 2
