"""80% error bands from cross-validated residuals (gpuplan.interfaces.validation.error_bands)."""

from __future__ import annotations

import json
import math

import pytest

from gpuplan.cli.main import app
from gpuplan.interfaces.validation.error_bands import (
    MIN_ROWS, band_for, family_out_coverage, fit_bands, oriented_residual, regime_keys,
)


def test_regime_keys_most_specific_first():
    assert regime_keys("training", "time", True, "fsdp") == [
        "training/time/moe/fsdp", "training/time/moe", "training/time"]
    assert regime_keys("inference", "latency") == ["inference/latency"]


def test_residual_orientation():
    # time metric: measured 12 s, predicted 10 s -> the model is 20% optimistic: r = log(1.2)
    assert oriented_residual("training", "iteration_time_s", 12.0, 10.0) == pytest.approx(math.log(1.2))
    # the same run as throughput: measured 100 tokens/s, predicted 120 -> time ratio 1.2, same r
    assert oriented_residual("training", "tokens_per_s_per_gpu", 100.0, 120.0) == pytest.approx(math.log(1.2))
    # memory and serving metrics keep their own unit: log(measured / predicted)
    assert oriented_residual("training", "peak_mem_gib", 50.0, 40.0) == pytest.approx(math.log(1.25))


def test_percentiles_and_fallback_by_hand():
    # ten residuals 0.0, 0.1, ..., 0.9 in one specific regime: numpy's linear percentiles give
    # q10 = 0.09 and q90 = 0.81 (position 0.9 and 8.1 of 0..9)
    res = [i / 10 for i in range(10)]
    keys = [["training/time/dense", "training/time"]] * 10
    table = fit_bands(res, keys)
    assert table["training/time/dense"]["q10"] == pytest.approx(0.09)
    assert table["training/time/dense"]["q90"] == pytest.approx(0.81)
    # a MoE prediction has no rows of its own: it borrows the parent's band and says so
    band = band_for(table, ["training/time/moe", "training/time"])
    assert band.regime == "training/time" and not band.validated
    lo, hi = band.interval(100.0)
    assert (lo, hi) == pytest.approx((100 * math.exp(0.09), 100 * math.exp(0.81)))
    # a throughput under a time band: inversely
    assert band.interval(100.0, inverse=True) == pytest.approx((100 * math.exp(-0.81), 100 * math.exp(-0.09)))
    # fewer than MIN_ROWS residuals: no band of their own
    assert "x" not in fit_bands([0.0] * (MIN_ROWS - 1), [["x"]] * (MIN_ROWS - 1))


def test_family_out_coverage_counts_rows_outside_bands_fit_without_them():
    # family a: residuals near 0; family b: far off. Bands fit on a alone cannot hold b's rows and
    # bands fit on b alone cannot hold a's: coverage 0 (each family judged by the other)
    res = [0.01 * i for i in range(10)] + [1.0 + 0.01 * i for i in range(10)]
    keys = [["k"]] * 20
    fams = ["a"] * 10 + ["b"] * 10
    assert family_out_coverage(res, keys, fams) == 0.0
    # one family with itself out has nothing to fit on: no rows scored
    assert family_out_coverage(res[:10], keys[:10], fams[:10]) is None



def test_family_out_coverage_of_some_families_still_fits_on_all_others():
    # a, b: residuals 0.00 .. 0.09; c: 1.00 .. 1.09. Scoring only c: its band is fit on a and b
    # (q10..q90 inside 0.0..0.09), so none of c's rows is inside -> 0.0. Scoring only a: the band is
    # fit on b and c together, whose q10..q90 (20 points 0.0..0.09 and 1.0..1.09) spans a's rows
    # from about 0.02 up: a's residuals 0.00 and 0.01 fall below q10 and the rest inside -> 0.8.
    res = [0.01 * i for i in range(10)] * 2 + [1.0 + 0.01 * i for i in range(10)]
    keys = [["k"]] * 30
    fams = ["a"] * 10 + ["b"] * 10 + ["c"] * 10
    assert family_out_coverage(res, keys, fams, scored=lambda f: f == "c") == 0.0
    # q10 of b+c (linear interpolation, numpy default) = 0.019, q90 = 1.071: a's 0.02 .. 0.09 inside = 8 of 10
    assert family_out_coverage(res, keys, fams, scored=lambda f: f == "a") == pytest.approx(0.8)


def test_validate_rows_carry_bands_around_the_prediction(runner, validation_dir):
    out = runner.invoke(app, ["validate", str(validation_dir / "training.csv"), "--json"])
    assert out.exit_code == 0, out.output
    rows = [r for r in json.loads(out.stdout)["rows"] if not r["skipped"]]
    banded = [r for r in rows if r["predicted_low"] is not None]
    assert len(banded) >= 0.9 * len(rows)
    assert all(r["predicted_low"] <= r["predicted"] * 1.5 and r["predicted_low"] < r["predicted_high"] for r in banded)
    inside = sum(r["predicted_low"] <= r["measured"] <= r["predicted_high"] for r in banded) / len(banded)
    # the shipped bands were fit on these rows' CV residuals: in-sample coverage near 80%; the honest
    # (family-out) figure is reported by benchmarks/accuracy_cv.py
    assert 0.65 <= inside <= 0.95


def test_train_json_band_brackets_its_figures(runner):
    out = runner.invoke(app, ["train", "gpt3-175b", "--gpus", "64", "--tp", "8", "--pp", "8", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    band = d["band_80pct"]
    lo, hi = band["step_time_s"]
    # the band is the step time times exp(q10) .. exp(q90) of the regime: it must bracket days and
    # step time in the same ratio
    assert lo / d["step_time_s"] == pytest.approx(band["days"][0] / d["days"], rel=1e-9)
    assert hi / d["step_time_s"] == pytest.approx(band["days"][1] / d["days"], rel=1e-9)
    assert band["regime"].startswith("training/time")


def _shipped_regime(name: str) -> dict:
    from gpuplan.interfaces.validation.error_bands import load_bands

    return load_bands()["regimes"][name]


def test_serve_run_json_carries_the_regimes_bands(runner):
    # Mixtral is MoE: its throughput takes the inference/throughput/moe band, its latencies the
    # inference/latency band (the public MoE latency rows are too few for their own key); a band is
    # the prediction times exp(q10) .. exp(q90) of that regime in the shipped table. TensorRT-LLM on
    # Hopper with MoE models and 16-bit weights has public rows: a validated regime (gpuplan's own
    # `generic` engine has none: tests/calibration/test_regime_bands.py)
    out = runner.invoke(app, ["serve", "run", "mixtral-8x7b", "--gpu", "h100-sxm5-80gb", "--tp", "2",
                              "--engine", "tensorrt-llm", "--concurrency", "16", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    band = d["band_80pct"]
    assert band["regimes"]["throughput"]["regime"] == "inference/throughput/moe"
    thr = _shipped_regime(band["regimes"]["throughput"]["regime"])
    lo, hi = band["output_tokens_per_s"]
    assert lo == pytest.approx(d["output_tokens_per_s"] * math.exp(thr["q10"]), rel=1e-9)
    assert hi == pytest.approx(d["output_tokens_per_s"] * math.exp(thr["q90"]), rel=1e-9)
    lat = _shipped_regime(band["regimes"]["latency"]["regime"])
    assert band["ttft_p90_ms"][1] == pytest.approx(d["ttft_p90_ms"] * math.exp(lat["q90"]), rel=1e-9)
    # a dense model's throughput uses the dense key
    out = runner.invoke(app, ["serve", "run", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--engine", "tensorrt-llm",
                              "--concurrency", "8", "--json"])
    assert json.loads(out.stdout)["band_80pct"]["regimes"]["throughput"]["regime"] == "inference/throughput/dense"


def test_fit_train_json_carries_the_memory_band(runner):
    # Llama 3 8B, 8 GPUs, ZeRO-3: the band is total GiB per GPU times exp(q10) .. exp(q90) of the
    # shipped training/memory/dense regime, and `fits_at_band_high` compares its top with capacity
    out = runner.invoke(app, ["fit", "train", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--gpus", "8",
                              "--sharding", "zero3", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    band = d["band_80pct"]
    assert band["regime"] == "training/memory/dense"
    mem = _shipped_regime("training/memory/dense")
    lo, hi = band["per_gpu_gib"]
    assert lo == pytest.approx(d["per_gpu_gib"]["total"] * math.exp(mem["q10"]), rel=1e-9)
    assert hi == pytest.approx(d["per_gpu_gib"]["total"] * math.exp(mem["q90"]), rel=1e-9)
    assert band["fits_at_band_high"] == (hi <= d["capacity_gib"])
