"""Cross-validated accuracy of record on ../shared/validation, and the 80% error bands.

Runs `validate --cv family` on training.csv and inference.csv (each family predicted with the fitted
knobs refit without it), prints per-class CV MAPE over the scored rows, fits the 80% bands per regime
from those CV residuals (`gpuplan.interfaces.validation.error_bands`) and reports their coverage estimated
honestly: each family's rows against bands fit without that family.

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
from gpuplan.interfaces.validation.cross_validation import cross_validate
from gpuplan.interfaces.validation.error_bands import bands_from_cv_rows, family_out_coverage, fit_bands, write_bands
from gpuplan.interfaces.validation.validate import read_rows

SHARED = validation_dir()  # the packaged copy of ../shared/validation


def _mape(pairs) -> float:
    e = [abs(p - m) / m for p, m in pairs]
    return 100.0 * float(np.mean(e)) if e else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the shipped error-band table")
    ap.add_argument("--shared", type=Path, default=SHARED, help="folder of training.csv / inference.csv")
    args = ap.parse_args()
    t0 = time.perf_counter()
    residuals, regimes, families = [], [], []
    figures: dict[str, list] = {"time": [], "memory": [], "moe": [], "inference": [], "inference_moe": []}
    for name in ("training.csv", "inference.csv"):
        raw = read_rows(args.shared / name)
        report = cross_validate(raw)
        r, g, f = bands_from_cv_rows(report.rows, raw)
        residuals += r
        regimes += g
        families += [f"{name}:{x}" for x in f]
        for cv_row, row in zip(report.rows, raw):
            if not cv_row.scored or cv_row.predicted_cv is None:
                continue
            pair = (cv_row.predicted_cv, cv_row.measured)
            if cv_row.kind == "inference":
                figures["inference"].append(pair)
                from gpuplan.models import model_from_arch_row

                if model_from_arch_row(row).moe is not None:  # a predicted row's architecture resolves
                    figures["inference_moe"].append(pair)
                continue
            metric = (row.get("metric") or "").strip()
            cls = "memory" if metric.startswith(("peak_mem", "mem_")) else "time"
            figures[cls].append(pair)
            if cls == "time" and (row.get("moe_experts") or row.get("hf_config") or "").strip():
                from gpuplan.models import model_from_arch_row

                if model_from_arch_row(row).moe is not None:
                    figures["moe"].append(pair)
    table = fit_bands(residuals, regimes)
    coverage = family_out_coverage(residuals, regimes, families)
    coverage_by_file = {name: family_out_coverage(residuals, regimes, families, lambda f, n=name: f.startswith(n + ":"))
                        for name in ("training.csv", "inference.csv")}
    for key, e in table.items():
        print(f"band {key:<36} rows {e['rows']:4d}  x{np.exp(e['q10']):.3f} .. x{np.exp(e['q90']):.3f}")
    if args.write:
        path = write_bands(table, {
            "written": datetime.date.today().isoformat(),
            "gpuplan_version": __version__,
            "source": "leave-one-family-out CV residuals of ../shared/validation training.csv and inference.csv",
            "rows": len(residuals),
            "family_out_coverage": coverage,
        })
        print(f"wrote {path}", file=sys.stderr)
    print(f"run_time_s: {time.perf_counter() - t0:.1f} s")
    print(f"cv_mape_time_pct: {_mape(figures['time']):.2f} %")
    print(f"cv_mape_memory_pct: {_mape(figures['memory']):.2f} %")
    print(f"cv_mape_moe_pct: {_mape(figures['moe']):.2f} %")  # training MoE time rows
    print(f"cv_mape_inference_pct: {_mape(figures['inference']):.2f} %")
    print(f"cv_mape_inference_moe_pct: {_mape(figures['inference_moe']):.2f} %")
    for name, kind in (("training.csv", "training"), ("inference.csv", "inference")):
        c = coverage_by_file[name]
        print(f"interval_coverage_{kind}_pct: {100.0 * c:.1f} %" if c is not None else f"interval_coverage_{kind}_pct: nan %")
    print(f"interval_coverage_pct: {100.0 * coverage:.1f} %" if coverage is not None else "interval_coverage_pct: nan %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
