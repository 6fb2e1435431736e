"""`calibrate fit --plot FILE.png`: predicted vs measured, before and after the fit (matplotlib, Agg).

Two log-log panels side by side, one point per row used (before: the start values; after: the
fitted values), coloured by metric, with the y = x line and +-25% lines; each panel's title gives
its MAPE. Predicted / measured is a ratio, so rows of different metrics share one plot. Written
atomically (gpuplan.output_files).
"""

from __future__ import annotations

from pathlib import Path

from gpuplan.output_files import PLOT_SUFFIXES, atomic_output, check_output_path


def check_plot_path(path: str | Path) -> Path:
    """InputError (before any work) unless the path ends in .png/.svg/.pdf and may be written
    (gpuplan.output_files: a new file or a regular one; never a device, FIFO or folder)."""
    return check_output_path(path, "plot", PLOT_SUFFIXES)


def plot_fit(path: str | Path, rows: list[dict], mape_before: float | None, mape_after: float | None) -> Path:
    """Draw the two panels (module docstring) from `CalibrationResult.rows`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = check_plot_path(path)
    used = [r for r in rows if r["used"]]
    metrics = sorted({r["metric"] for r in used})
    cmap = plt.get_cmap("tab10")
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), sharex=True, sharey=True)
    lo = min([r["measured"] for r in used] + [r[k] for r in used for k in ("predicted_before", "predicted_after")])
    hi = max([r["measured"] for r in used] + [r[k] for r in used for k in ("predicted_before", "predicted_after")])
    lo, hi = lo / 1.5, hi * 1.5
    for ax, key, mape, title in ((axes[0], "predicted_before", mape_before, "before (start values)"),
                                 (axes[1], "predicted_after", mape_after, "after (fitted profile)")):
        for i, m in enumerate(metrics):
            pts = [r for r in used if r["metric"] == m]
            ax.scatter([r["measured"] for r in pts], [r[key] for r in pts], s=22, color=cmap(i % 10), label=m)
        ax.plot([lo, hi], [lo, hi], color="black", lw=1)
        for f in (0.75, 1.25):
            ax.plot([lo, hi], [lo * f, hi * f], color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("measured (metric's unit)")
        ax.set_title(f"{title}: MAPE {mape:.1f}%" if mape is not None else title)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("predicted (metric's unit)")
    axes[1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"gpuplan calibrate fit: {len(used)} rows (dashed: +-25%)")
    fig.tight_layout()
    try:
        with atomic_output(p, "plot") as tmp:
            fig.savefig(tmp, dpi=110, format=p.suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return p


__all__ = ["check_plot_path", "plot_fit"]
