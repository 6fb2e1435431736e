"""How `calibration.site_prior_width` (the prior width of every site factor of the hierarchical
calibration, interfaces/calibration_hierarchy.py) was chosen: once, for every family.

For each public family of ../shared/validation (SCHEMA.md: the id without its final -N; rows of
confidence `low` left out) with 3 usable rows or more: the rows' robust log residuals r and their
Jacobian J at the defaults (the screen of `calibrate fit`: every knob the rows read); then, for each
width w of a grid, every row i in turn is left out, the *whole procedure* is run on the others
(site factors and single knobs chosen by `select_params` with the site factors' prior width w; the
selected parameters fitted by the regularised linear step, clipped to their ranges) and row i is
predicted: e_i = r_i + J_i theta_(-i). The criterion is the mean of e_i^2 over every row of every
family (the robust squared log error; selection is repeated per left-out row, so a width that
lets the selection chase a few rows pays for it). The width with the lowest pooled figure is the
knob's default.

Linearised at the defaults (as the selection itself is): the figures rank widths; they are not
the MAPE of the nonlinear fit (benchmarks/calibration_odd_even.py gives that for the odd/even split).

    python benchmarks/calibration_prior_width.py [../shared/validation]      (about 2 min on 2 cores)
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from gpuplan.interfaces.calibration.fit import knobs_read_by
from gpuplan.interfaces.calibration.hierarchy import Param, candidate_params, select_params
from gpuplan.interfaces.validation.cross_validation import row_predictor, schema_family
from gpuplan.interfaces.fitting.least_squares import KnobFitter
from gpuplan.interfaces.validation.validate import read_rows

WIDTHS = (0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
MIN_ROWS = 3


def _column(p: Param, jac: np.ndarray, index: dict[str, int]) -> np.ndarray:
    return sum((jac[:, index[m]] for m in p.members), np.zeros(jac.shape[0]))


def loo_errors(r: np.ndarray, jac: np.ndarray, names: list[str], sites: list[Param], fine: list[Param],
               width: float) -> np.ndarray:
    """e_i of the module docstring for every row (the whole procedure rerun without row i)."""
    index = {n: j for j, n in enumerate(names)}
    sites_w = [dataclasses.replace(p, width=width) for p in sites]
    out = np.empty(len(r))
    for i in range(len(r)):
        keep = np.arange(len(r)) != i
        chosen, _ = select_params(r[keep], jac[keep], names, sites_w, fine, 1.0)
        x = np.column_stack([_column(p, jac, index) for p in chosen])
        prior = np.array([1.0 / (p.width or 1.0) ** 2 for p in chosen])
        lo = np.array([math.log(p.low / p.start) if p.low > 0 else -np.inf for p in chosen])
        hi = np.array([math.log(p.high / p.start) for p in chosen])
        theta = -np.linalg.solve(x[keep].T @ x[keep] + np.diag(prior), x[keep].T @ r[keep])
        out[i] = r[i] + x[i] @ np.clip(theta, lo, hi)
    return out


def main(folder: str) -> None:
    t0 = time.perf_counter()
    families: dict[str, list[dict]] = defaultdict(list)
    for name in ("training", "inference", "collectives"):
        for row in read_rows(Path(folder) / f"{name}.csv"):
            if row.get("confidence", "").strip().lower() != "low":
                families[schema_family(row["id"])].append(row)
    predictor = row_predictor()
    pooled = {w: [] for w in WIDTHS}
    none: list[float] = []
    used = []
    print("| family | rows | none fitted | " + " | ".join(f"w = {w:g}" for w in WIDTHS) + " |")
    print("|---|---|---|" + "---|" * len(WIDTHS))
    for fam, rows in families.items():
        if len(rows) < MIN_ROWS:
            continue
        fitter = KnobFitter(rows, predictor, knobs_read_by(rows, predictor))
        usable = fitter.usable_rows()
        informed_mask, r0, jac = fitter.screened(usable)
        informed = [n for n, ok in zip(fitter.names, informed_mask) if ok]
        if not informed or usable.sum() < MIN_ROWS:
            continue
        sites, fine = candidate_params(informed, {n: float(v) for n, v in zip(fitter.names, fitter.start)})
        r, j = np.nan_to_num(r0[usable]), jac[usable]
        used.append(fam)
        none.extend(r**2)
        cells = []
        for w in WIDTHS:
            e2 = loo_errors(r, j, fitter.names, sites, fine, w) ** 2
            pooled[w].extend(e2)
            cells.append(f"{e2.mean():.4f}")
        print(f"| {fam} | {len(r)} | {np.mean(r**2):.4f} | " + " | ".join(cells) + " |", flush=True)
    figures = {w: float(np.mean(v)) for w, v in pooled.items()}
    best = min(figures, key=figures.get)
    print(f"\npooled over {len(none)} rows of {len(used)} families: none fitted {np.mean(none):.5f}; "
          + ", ".join(f"w={w:g}: {v:.5f}" for w, v in figures.items()))
    print(f"best_width: {best:g}")
    print(f"families: {', '.join(used)}")
    print(f"run_time: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    from gpuplan.catalog.validation_sets import validation_dir

    default = validation_dir()  # the packaged copy of ../shared/validation
    main(sys.argv[1] if len(sys.argv) > 1 else str(default))
