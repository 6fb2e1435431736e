"""Calibration on alternate rows: for each family of ../shared/validation (SCHEMA.md: the id
without its final -N) whose default MAPE is above 10%, calibrate on the odd-numbered rows
(`gpuplan calibrate fit`'s code path: interfaces.calibration.calibrate_rows, every knob the rows'
predictions read) and predict the even-numbered ones. Rows of confidence `low` are left out, as
validation scoring does. Prints a markdown table (docs/calibration.md) and, last, the number of
families with a relative MAPE cut of at least 40%.

    python benchmarks/calibration_odd_even.py [../shared/validation]
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

from gpuplan.errors import GpuplanError
from gpuplan.interfaces.calibration import holdout_errors, split_odd_even
from gpuplan.interfaces.cross_validation import schema_family
from gpuplan.interfaces.validate import read_rows, validate_rows

THRESHOLD_PCT = 10.0


def main(folder: str) -> None:
    t0 = time.perf_counter()
    families: dict[str, list[dict]] = defaultdict(list)
    for name in ("training", "inference", "collectives"):
        for r in read_rows(Path(folder) / f"{name}.csv"):
            if r.get("confidence", "").strip().lower() != "low":
                families[schema_family(r["id"])].append(r)
    print("| family | rows odd / even | default MAPE on even rows | calibrated MAPE on even rows | relative cut |")
    print("|---|---|---|---|---|")
    passed = considered = 0
    for fam, rows in families.items():
        report = validate_rows(rows)
        errs = [abs(x.error_pct) for x in report.rows if not x.skipped]
        if not errs or sum(errs) / len(errs) <= THRESHOLD_PCT:
            continue
        odd, even = split_odd_even(rows)
        try:
            h = holdout_errors(odd, even)
        except GpuplanError as exc:
            print(f"| {fam} | {len(odd)} / {len(even)} | - | refused: {exc} | - |")
            continue
        if h["mape_before_pct"] is None or h["mape_before_pct"] <= THRESHOLD_PCT:
            print(f"| {fam} | {len(odd)} / {len(even)} | {h['mape_before_pct'] or 0:.1f}% | "
                  f"{h['mape_after_pct'] or 0:.1f}% | (even rows within 10% already) |")
            continue
        considered += 1
        cut = 1 - h["mape_after_pct"] / h["mape_before_pct"]
        passed += cut >= 0.4
        print(f"| {fam} | {h['train_rows']} / {h['test_rows']} | {h['mape_before_pct']:.1f}% | "
              f"{h['mape_after_pct']:.1f}% | {cut * 100:+.0f}% |")
    print(f"\nfamilies_with_40pct_cut: {passed} of {considered}")
    print(f"run_time: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[1].parent / "shared" / "validation"))
