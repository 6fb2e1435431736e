"""`serve plan --plot FILE` and `serve frontier --plot FILE`: latency-throughput plots (matplotlib, Agg).

Plan: two panels side by side, output tokens/s per GPU (y) against p90 TPOT (left) and p90 TTFT
(right), one line per serving option: its curve at 0.25x .. 2x the planned rate with its GPU
counts fixed (co-located solid, disaggregated dashed), its operating point at the planned rate
marked with a star, the objectives as vertical lines. An option is usable where its line lies
left of both lines; higher is cheaper per token.

Frontier: tokens/s per GPU against tokens/s per user, one line per tp.

Files are written atomically (output_files.atomic_output): a failed draw leaves nothing behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from gpuplan.output_files import PLOT_SUFFIXES, atomic_output, check_output_path


def check_plot_file(path: str | Path) -> Path:
    """InputError (before any work) unless `path` ends in .png/.svg/.pdf and can be written."""
    return check_output_path(path, "plot", PLOT_SUFFIXES)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_plan(path: str | Path, options: Sequence, *, ttft_slo_ms: float, tpot_slo_ms: float, title: str) -> Path:
    """Draw the plan figure (module docstring). `options`: objects with `layout`, `mode` (an enum
    whose value is 'colocated' or 'disaggregated'), `latency_curve` (points with
    output_tokens_per_s_per_gpu, ttft_p90_ms, tpot_p90_ms, requests_per_s), `output_tokens_per_s_per_gpu`,
    `ttft_p90_ms`, `tpot_p90_ms`, `why_not_best`."""
    p = check_plot_file(path)
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.8), sharey=True)
    cmap = plt.get_cmap("tab10")
    drawn = [o for o in options if o.latency_curve]
    for i, o in enumerate(drawn):
        colour = cmap(i % 10)
        mode = getattr(o.mode, "value", o.mode)
        style = "-" if mode == "colocated" else "--"
        tag = "co-located" if mode == "colocated" else "disagg."
        label = f"{tag}: {o.layout}" + (" (best)" if o.why_not_best == "best" else "")
        ys = [c.output_tokens_per_s_per_gpu for c in o.latency_curve]
        for ax, key in ((axes[0], "tpot_p90_ms"), (axes[1], "ttft_p90_ms")):
            ax.plot([getattr(c, key) for c in o.latency_curve], ys, style, marker="o", ms=3.5, color=colour,
                    lw=2.2 if o.why_not_best == "best" else 1.3, label=label if ax is axes[0] else None)
            if o.output_tokens_per_s_per_gpu is not None and getattr(o, key) is not None:
                ax.plot([getattr(o, key)], [o.output_tokens_per_s_per_gpu], marker="*", ms=13, color=colour,
                        markeredgecolor="black", linestyle="none")
    for ax, slo, name in ((axes[0], tpot_slo_ms, "TPOT"), (axes[1], ttft_slo_ms, "TTFT")):
        ax.axvline(slo, color="red", lw=1.2, ls=":")
        ax.text(slo, 0.98, f" {name} objective {slo:g} ms", color="red", fontsize=8, va="top",
                transform=ax.get_xaxis_transform())
        ax.set_xlabel(f"p90 {name} (ms)")
        ax.grid(True, alpha=0.3)
        ax.set_xlim(0, max(ax.get_xlim()[1], 1.3 * slo))  # room for the objective's label
    axes[0].set_ylim(bottom=0)
    axes[0].set_ylabel("output tokens/s per GPU")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(title + "\nlines: 0.25x-2x the planned rate with the GPU counts fixed; stars: at the planned rate", fontsize=10)
    fig.tight_layout(rect=(0, 0.05 + 0.028 * ((len(drawn) + 1) // 2), 1, 1))
    with atomic_output(p, "plot") as tmp:
        fig.savefig(tmp, dpi=130, format=p.suffix.lstrip(".").lower())
    plt.close(fig)
    return p


def plot_frontier(path: str | Path, points: Sequence, *, title: str) -> Path:
    """Tokens/s per GPU against tokens/s per user, one line per tp (points: FrontierPoint)."""
    p = check_plot_file(path)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for tp in sorted({pt.tp for pt in points}):
        pts = sorted((pt for pt in points if pt.tp == tp), key=lambda x: x.tokens_per_s_per_user)
        ax.plot([x.tokens_per_s_per_user for x in pts], [x.tokens_per_s_per_gpu for x in pts], marker="o", ms=4,
                label=f"tp={tp}")
        for x in pts:
            ax.annotate(str(x.concurrency), (x.tokens_per_s_per_user, x.tokens_per_s_per_gpu), fontsize=6,
                        textcoords="offset points", xytext=(3, 3))
    ax.set_xlabel("output tokens/s per user (1000 / mean TPOT ms)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title + "\n(labels: closed-loop concurrency)", fontsize=10)
    fig.tight_layout()
    with atomic_output(p, "plot") as tmp:
        fig.savefig(tmp, dpi=130, format=p.suffix.lstrip(".").lower())
    plt.close(fig)
    return p
