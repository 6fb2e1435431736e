"""Cost per row of `gpuplan validate`, whole process: the marginal seconds per row between a file of
the public training rows (the shipped training.csv) and a file of COPIES copies of them (ids made
unique, each in its original's family: `copy_id`), (t[copies] - t[1]) / ((copies - 1) x rows), as issue 35 measures it;
and, in-process, the milliseconds per distinct row of the shipped training and inference sets.

Each whole-process figure is the median of RUNS runs of `python -m gpuplan.cli.main validate FILE
--json` (bytecode cached, as benchmarks/startup.py). Target (issue 35): marginal cost at most 0.13 ms
per row. A copied row repeats an earlier one but for its id: `validate` predicts it once
(interfaces.validation.row_memo); the in-process figure is the cost of rows that are all different.
With `--cv`, also the whole-process seconds of `validate --builtin training|inference --cv family --json`
(one run each, caches warm from the runs before: `--cv` refits the knobs, so it predicts each row about 30 times at
other knob values; interfaces.validation.row_memo predicts a row again only when a knob it reads changed).
Prints its figures last, one per line (`name: value unit`).

    python benchmarks/validate_rows.py [--copies 16] [--runs 3] [--cv] [--src OTHER_CHECKOUT/src]
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def copy_id(row_id: str, copy: int) -> str:
    """The id of copy `copy` (0: the original) of a row, unique and in the original's SCHEMA.md
    family: 'meg21-t2-7' -> 'meg21-t2-7002' for copy 2 (family 'meg21-t2'), so the summary has as
    many families as the original file."""
    if copy == 0:
        return row_id
    match = re.fullmatch(r"(.*-)(\d+)", row_id)
    return f"{match.group(1)}{match.group(2)}{copy:03d}" if match else f"{row_id}-{copy:03d}"


def copies_file(source: Path, copies: int, folder: Path) -> tuple[Path, int]:
    """A CSV of `copies` copies of `source`'s rows (ids suffixed after the first copy); (path, rows per copy)."""
    with source.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header, rows = reader.fieldnames, list(reader)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for c in range(copies):
        for row in rows:
            writer.writerow({**row, "id": copy_id(row["id"], c)})
    path = folder / f"training_x{copies}.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path, len(rows)


def whole_process_s(src: Path, csv_path: Path | None, runs: int, extra: tuple[str, ...] = (),
                    warm_up: bool = True) -> float:
    """Median seconds of `validate FILE --json` (or of `validate EXTRA... --json` without a file), after a
    warm-up run that fills the bytecode and numba caches (`warm_up`)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "gpuplan-startup-pycache")
    argv = [sys.executable, "-m", "gpuplan.cli.main", "validate", *([str(csv_path)] if csv_path else []), *extra,
            "--json"]
    if warm_up:
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def in_process_ms_per_row(src: Path) -> dict[str, float]:
    code = (
        "import time\n"
        "from gpuplan.catalog.validation_sets import validation_set_path\n"
        "from gpuplan.interfaces.validation.validate import read_rows, validate_rows\n"
        "from gpuplan.workloads.inference import jit\n"
        "jit.compile_kernels()\n"  # serving kernels compiled outside the timing (jit.py)
        "for name in ('training', 'inference'):\n"
        "    rows = read_rows(validation_set_path(name))\n"
        "    validate_rows(rows[:3])\n"  # imports, catalog, numba cache outside the timing
        "    t0 = time.perf_counter(); validate_rows(rows); dt = time.perf_counter() - t0\n"
        "    print(name, 1e3 * dt / len(rows))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines() if line.strip()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cv", action="store_true", help="also time `validate --builtin NAME --cv family`")
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    args = ap.parse_args()
    src = args.src.resolve()
    source = src / "gpuplan" / "catalog" / "data" / "validation" / "training.csv"
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        one, rows = copies_file(source, 1, Path(tmp))
        many, _ = copies_file(source, args.copies, Path(tmp))
        t1 = whole_process_s(src, one, args.runs)
        tn = whole_process_s(src, many, args.runs)
    per_row = in_process_ms_per_row(src)
    cv = {name: whole_process_s(src, None, 1, ("--builtin", name, "--cv", "family"), warm_up=False)
          for name in (("training", "inference") if args.cv else ())}
    print(f"validate_whole_process_s[training x1, {rows} rows]: {t1:.2f} s")
    print(f"validate_whole_process_s[training x{args.copies}, {rows * args.copies} rows]: {tn:.2f} s")
    for name, ms in per_row.items():
        print(f"validate_in_process_ms_per_distinct_row[{name}]: {ms:.2f} ms")
    for name, seconds in cv.items():
        print(f"validate_cv_family_whole_process_s[{name}]: {seconds:.2f} s")
    print(f"validate_marginal_ms_per_row: {1e3 * (tn - t1) / ((args.copies - 1) * rows):.3f} ms")


if __name__ == "__main__":
    main()
