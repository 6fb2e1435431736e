"""Calibration on alternate rows: for each family of ../shared/validation (SCHEMA.md: the id
without its final -N) whose default MAPE is above 10%, calibrate on the odd-numbered rows
(`gpuplan calibrate fit`'s code path: interfaces.calibration.calibrate_rows, every knob the rows'
predictions read) and predict the even-numbered ones. Rows of confidence `low` are left out, as
validation scoring does.

Columns: the even rows' MAPE with the defaults; after the hierarchical fit on the odd rows (the
default method, with the parameters it fitted) and its relative cut; after the flat fit (every
informed knob free: the method before the hierarchy; `--no-flat` skips it, the slow part); and the
*floor*: the even rows' own in-sample MAPE after the flat fit (every knob they read free) on the
even rows themselves: a calibration on other rows is not expected to beat fitting the scored rows
themselves with every knob, so where the floor is not a 40% cut the error of those rows is not in
the knobs.

Prints a markdown table (docs/calibration.md) and, last, the number of families with a relative
MAPE cut of at least 40%.

    python benchmarks/calibration_odd_even.py [../shared/validation] [--no-flat]
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

from gpuplan.errors import GpuplanError
from gpuplan.interfaces.calibration.fit import calibrate_rows, holdout_errors, split_odd_even
from gpuplan.interfaces.validation.cross_validation import schema_family
from gpuplan.interfaces.validation.validate import read_rows, validate_rows

THRESHOLD_PCT = 10.0


def _params(h: dict) -> str:
    return ", ".join(f"{k.removeprefix('site.')} {v:.3g}" for k, v in h["parameters"].items())


def main(folder: str, flat: bool = True) -> None:
    t0 = time.perf_counter()
    families: dict[str, list[dict]] = defaultdict(list)
    for name in ("training", "inference", "collectives"):
        for r in read_rows(Path(folder) / f"{name}.csv"):
            if r.get("confidence", "").strip().lower() != "low":
                families[schema_family(r["id"])].append(r)
    print("| family | rows odd / even | default MAPE, even rows | hierarchical fit on odd rows: MAPE (cut) | "
          "parameters fitted | flat fit (cut) | floor: flat fit on the even rows themselves |")
    print("|---|---|---|---|---|---|---|")
    passed = considered = passed_flat = 0
    for fam, rows in families.items():
        report = validate_rows(rows)
        errs = [abs(x.error_pct) for x in report.rows if not x.skipped]
        if not errs or sum(errs) / len(errs) <= THRESHOLD_PCT:
            continue
        odd, even = split_odd_even(rows)
        try:
            h = holdout_errors(odd, even)
        except GpuplanError as exc:
            print(f"| {fam} | {len(odd)} / {len(even)} | - | refused: {exc} | - | - | - |")
            continue
        before = h["mape_before_pct"]
        if before is None or before <= THRESHOLD_PCT:
            print(f"| {fam} | {len(odd)} / {len(even)} | {before or 0:.1f}% | {h['mape_after_pct'] or 0:.1f}% "
                  f"(even rows within 10% already) | {_params(h)} | - | - |")
            continue
        considered += 1
        cut = 1 - h["mape_after_pct"] / before
        passed += cut >= 0.4
        flat_cell = "-"
        if flat:
            f = holdout_errors(odd, even, method="flat")
            fcut = 1 - f["mape_after_pct"] / before
            passed_flat += fcut >= 0.4
            flat_cell = f"{f['mape_after_pct']:.1f}% ({fcut * 100:+.0f}%)"
        try:
            floor = calibrate_rows(even, method="flat").error_block()["mape_after_pct"]
            floor_cell = f"{floor:.1f}% ({(1 - floor / before) * 100:+.0f}%)"
        except GpuplanError:
            floor_cell = "-"
        print(f"| {fam} | {h['train_rows']} / {h['test_rows']} | {before:.1f}% | {h['mape_after_pct']:.1f}% "
              f"({cut * 100:+.0f}%) | {_params(h)} | {flat_cell} | {floor_cell} |", flush=True)
    print(f"\nfamilies_with_40pct_cut: {passed} of {considered}" + (f" (flat fit: {passed_flat})" if flat else ""))
    print(f"run_time: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    from gpuplan.catalog.validation_sets import validation_dir  # the packaged copy of ../shared/validation

    main(args[0] if args else str(validation_dir()),
         flat="--no-flat" not in sys.argv)
