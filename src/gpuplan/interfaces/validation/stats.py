"""Error statistics for the validation report: signed error, MAPE, median / max absolute error,
and Spearman rank correlation (average ranks for ties; numpy only)."""

from __future__ import annotations

import numpy as np


def error_pct(predicted: float, measured: float) -> float:
    """Signed relative error in percent: (predicted - measured) / measured x 100."""
    return (predicted - measured) / measured * 100.0


def rankdata(values) -> np.ndarray:
    """Ranks 1..n of `values`, tied values sharing the average of their ranks
    (e.g. [10, 20, 20, 30] -> [1, 2.5, 2.5, 4])."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ordinal = np.empty(len(x), dtype=np.float64)
    ordinal[order] = np.arange(1, len(x) + 1)
    _, inverse = np.unique(x, return_inverse=True)
    sums = np.bincount(inverse, weights=ordinal)
    counts = np.bincount(inverse)
    return (sums / counts)[inverse]


def spearman(a, b) -> float | None:
    """Spearman's rho = Pearson correlation of the average ranks; None if either side is constant
    or fewer than 2 values."""
    if len(a) < 2:
        return None
    ra, rb = rankdata(a), rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    if denom == 0.0:
        return None
    return float((ra * rb).sum() / denom)


def error_summary(errors_pct) -> dict:
    """count, mape_pct (mean |error|), median_abs_error_pct, max_abs_error_pct, mean_error_pct (bias)."""
    e = np.asarray(list(errors_pct), dtype=np.float64)
    if e.size == 0:
        return {"count": 0, "mape_pct": None, "median_abs_error_pct": None, "max_abs_error_pct": None,
                "mean_error_pct": None}
    a = np.abs(e)
    return {"count": int(e.size), "mape_pct": float(a.mean()), "median_abs_error_pct": float(np.median(a)),
            "max_abs_error_pct": float(a.max()), "mean_error_pct": float(e.mean())}
