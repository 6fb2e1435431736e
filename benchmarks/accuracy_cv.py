"""Cross-validated accuracy of record on ../shared/validation, and the 80% error bands.

Runs `validate --cv regime` on training.csv and inference.csv: each family predicted with the fitted
knobs refit without it, and each regime (hardware generation, engine, architecture), hardware
generation, engine, architecture class and precision predicted with the knobs refit without all
of its rows. Prints per-class CV MAPE over the scored rows, fits the 80% bands
(`gpuplan.interfaces.validation.error_bands`: family-out bands for validated regimes, regime-out
bands for unvalidated ones, `interfaces.validation.band_coverage.band_table`) and reports their
coverage estimated honestly (`interfaces.validation.band_coverage`): each family arriving as new
data against bands fit without it (the procedure a new measurement meets), each regime new in turn,
the older family-out figure (novelty ignored), and each hardware generation new in turn (its rows'
hardware-out residuals against the band the other generations give them: `axis_out_coverage`).
Then `validate --cv row` on each file: every row predicted with the knobs refit without that row
alone, the interpolation figure (a new row of a family whose other rows are known; issue 32).

    python benchmarks/accuracy_cv.py            # print the figures
    python benchmarks/accuracy_cv.py --write    # also write src/gpuplan/catalog/data/error_bands.json

Prints its figures last, one per line (`name: value unit`).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np

from gpuplan import __version__
from gpuplan.catalog.validation_sets import validation_dir
from gpuplan.interfaces.validation.band_coverage import (
    arrival_coverage, axis_out_coverage, band_table, inventories, records_from_cv, regime_out_coverage,
)
from gpuplan.interfaces.validation.cross_validation import cross_validate
from gpuplan.interfaces.validation.error_bands import bands_from_cv_rows, family_out_coverage, write_bands
from gpuplan.interfaces.validation.validate import read_rows

SHARED = validation_dir()  # the packaged copy of ../shared/validation


def _mape(pairs) -> float:
    e = [abs(p - m) / m for p, m in pairs]
    return 100.0 * float(np.mean(e)) if e else float("nan")


def _pct(c) -> str:
    return "nan" if c is None else f"{100.0 * c:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the shipped error-band table")
    ap.add_argument("--shared", type=Path, default=SHARED, help="folder of training.csv / inference.csv")
    ap.add_argument("--files", default="training.csv,inference.csv", help="comma-separated files of --shared")
    args = ap.parse_args()
    t0 = time.perf_counter()
    residuals, regimes, families, records = [], [], [], []
    figures: dict[str, list] = {"time": [], "memory": [], "moe": [], "inference": [], "inference_moe": [],
                                "inference_regime_out": [], "time_regime_out": [], "time_row_out": [],
                                "memory_row_out": [], "inference_row_out": []}
    for name in args.files.split(","):
        raw = read_rows(args.shared / name)
        report = cross_validate(raw, mode="regime")
        r, g, f = bands_from_cv_rows(report.rows, raw)
        residuals += r
        regimes += g
        families += [f"{name}:{x}" for x in f]
        records += records_from_cv(report.rows, raw, f"{name}:")
        for cv_row, raw_row in zip(report.rows, raw):
            if not cv_row.scored or cv_row.predicted_cv is None or cv_row.regime is None:
                continue
            pair = (cv_row.predicted_cv, cv_row.measured)
            held = cv_row.predicted_held_out.get("regime")
            moe = cv_row.regime.architecture == "moe"
            if cv_row.kind == "inference":
                figures["inference"].append(pair)
                if held is not None:
                    figures["inference_regime_out"].append((held, cv_row.measured))
                if moe:
                    figures["inference_moe"].append(pair)
                continue
            metric = (raw_row.get("metric") or "").strip()
            cls = "memory" if metric.startswith(("peak_mem", "mem_")) else "time"
            figures[cls].append(pair)
            if cls == "time":
                if held is not None:
                    figures["time_regime_out"].append((held, cv_row.measured))
                if moe:
                    figures["moe"].append(pair)
        for cv_row, raw_row in zip(cross_validate(raw, mode="row").rows, raw):
            if not cv_row.scored or cv_row.predicted_cv is None or cv_row.kind not in ("training", "inference"):
                continue
            metric = (raw_row.get("metric") or "").strip()
            cls = "inference" if cv_row.kind == "inference" else (
                "memory" if metric.startswith(("peak_mem", "mem_")) else "time")
            figures[f"{cls}_row_out"].append((cv_row.predicted_cv, cv_row.measured))
    table = band_table(records)
    seen = inventories(records)
    old = family_out_coverage(residuals, regimes, families)
    arrival = arrival_coverage(records)
    by_kind = {k: arrival_coverage(records, lambda r, k=k: r.kind == k) for k in ("training", "inference")}
    regime_out = {k: regime_out_coverage(records, lambda r, k=k: r.kind == k) for k in ("training", "inference")}
    old_by_kind = {k: family_out_coverage(residuals, regimes, families, lambda f, n=n: f.startswith(n + ":"))
                   for k, n in (("training", "training.csv"), ("inference", "inference.csv"))}
    hardware_out = axis_out_coverage(records, "hardware")
    for key, e in table.items():
        print(f"band {key:<40} rows {e['rows']:4d}  x{np.exp(e['q10']):.3f} .. x{np.exp(e['q90']):.3f}")
    for kind in ("training", "inference"):
        for nov, d in by_kind[kind].to_dict()["by_novelty"].items():
            print(f"arrival {kind:<9} {nov:<22} rows {d['rows']:4d}  inside {_pct(d['coverage'])} %")
    for kind, by_value in hardware_out.items():
        for value, c in by_value.items():
            print(f"hardware-out {kind:<9} {value:<18} rows {c.rows:4d}  inside {_pct(c.fraction)} %")
    if args.write:
        path = write_bands(table, {
            "written": datetime.date.today().isoformat(),
            "gpuplan_version": __version__,
            "source": "leave-one-family-out and leave-one-regime-out CV residuals of ../shared/validation "
                      f"{args.files.replace(',', ' and ')} (benchmarks/accuracy_cv.py --write)",
            "rows": len(records),
            "family_out_coverage": old,
            "arrival_coverage": arrival.to_dict(),
            "arrival_coverage_by_kind": {k: c.to_dict() for k, c in by_kind.items()},
            "regime_out_coverage_by_kind": {k: c.to_dict() for k, c in regime_out.items()},
            "hardware_out_coverage_by_kind": {k: {v: c.to_dict() for v, c in d.items()}
                                              for k, d in hardware_out.items()},
        }, seen)
        print(f"wrote {path}", file=sys.stderr)
    print(f"run_time_s: {time.perf_counter() - t0:.1f} s")
    print(f"cv_mape_time_pct: {_mape(figures['time']):.2f} %")
    print(f"cv_mape_memory_pct: {_mape(figures['memory']):.2f} %")
    print(f"cv_mape_moe_pct: {_mape(figures['moe']):.2f} %")  # training MoE time rows
    print(f"cv_mape_inference_pct: {_mape(figures['inference']):.2f} %")
    print(f"cv_mape_inference_moe_pct: {_mape(figures['inference_moe']):.2f} %")
    print(f"regime_out_mape_time_pct: {_mape(figures['time_regime_out']):.2f} %")
    print(f"regime_out_mape_inference_pct: {_mape(figures['inference_regime_out']):.2f} %")
    print(f"row_out_mape_time_pct: {_mape(figures['time_row_out']):.2f} %")
    print(f"row_out_mape_memory_pct: {_mape(figures['memory_row_out']):.2f} %")
    print(f"row_out_mape_inference_pct: {_mape(figures['inference_row_out']):.2f} %")
    for kind in ("training", "inference"):
        if kind not in hardware_out:  # --files without this kind's file
            continue
        print(f"hardware_out_coverage_{kind}_pct: {_pct(hardware_out[kind]['overall'].fraction)} %")
        print(f"interval_coverage_{kind}_pct: {_pct(old_by_kind[kind])} %")  # family-out, novelty ignored
        print(f"regime_out_coverage_{kind}_pct: {_pct(regime_out[kind].fraction)} %")
        print(f"arrival_coverage_{kind}_pct: {_pct(by_kind[kind].fraction)} %")
    print(f"interval_coverage_pct: {_pct(old)} %")
    print(f"arrival_coverage_pct: {_pct(arrival.fraction)} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
