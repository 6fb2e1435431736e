"""Pictures of the kernel analyses (matplotlib, Agg backend: no display needed).

- occupancy vs threads per block, registers per thread and shared memory per block (three panels,
  each varying one input around the given configuration, computed by `occupancy.block_limits`);
- roofline: attainable TFLOP/s vs arithmetic intensity (log-log), one line per memory ceiling,
  with the placed workloads.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from gpuplan.output_files import PLOT_SUFFIXES, atomic_output, check_output_path
from gpuplan.kernel.compute_capability import ComputeCapabilityLimits
from gpuplan.kernel.occupancy import block_limits
from gpuplan.kernel.roofline import Roofline, RooflinePoint


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _check_path(path: str | Path) -> Path:
    return check_output_path(path, "plot", PLOT_SUFFIXES)


def occupancy_curves(limits: ComputeCapabilityLimits, threads: int, regs: int, smem_bytes: int) -> dict[str, tuple]:
    """(x, occupancy) arrays when varying threads (32..1024), registers (0..255) and smem (0..opt-in max)."""
    max_warps = limits.max_warps_per_sm

    def occ(t, r, s):
        bl = block_limits(limits, t, r, s)
        return bl.active_blocks * bl.warps_per_block / max_warps

    t = np.arange(limits.warp_size, limits.max_threads_per_block + 1, limits.warp_size)
    r = np.arange(0, limits.max_registers_per_thread + 1)
    s = np.arange(0, limits.smem_per_block_optin_bytes + 1, 256)
    return {
        "threads_per_block": (t, occ(t, regs, smem_bytes)),
        "registers_per_thread": (r, occ(threads, r, smem_bytes)),
        "smem_per_block_kib": (s / 1024, occ(threads, regs, s)),
    }


def plot_occupancy(path: str | Path, limits: ComputeCapabilityLimits, threads: int, regs: int, smem_bytes: int) -> Path:
    path = _check_path(path)
    plt = _pyplot()
    curves = occupancy_curves(limits, threads, regs, smem_bytes)
    current = {"threads_per_block": threads, "registers_per_thread": regs, "smem_per_block_kib": smem_bytes / 1024}
    fig, axes = plt.subplots(1, 3, figsize=(14, 4), sharey=True)
    for ax, (name, (x, y)) in zip(axes, curves.items()):
        ax.step(x, y, where="post")
        ax.axvline(current[name], color="red", linestyle="--", linewidth=1)
        ax.set_xlabel({"threads_per_block": "threads per block", "registers_per_thread": "registers per thread",
                       "smem_per_block_kib": "shared memory per block (KiB)"}[name])
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("occupancy (active warps / max warps)")
    fig.suptitle(f"CC {limits.compute_capability}: {threads} threads x {regs} regs, {smem_bytes} B smem per block")
    fig.tight_layout()
    with atomic_output(path, "plot") as tmp:
        fig.savefig(tmp)
    plt.close(fig)
    return path


def plot_roofline(path: str | Path, roof: Roofline, points: list[RooflinePoint]) -> Path:
    path = _check_path(path)
    plt = _pyplot()
    intensities = [p.intensity_flop_per_byte for p in points] + [c.ridge_flop_per_byte for c in roof.ceilings]
    lo = min([0.1] + [i / 4 for i in intensities])
    hi = max([1e4] + [i * 4 for i in intensities])
    x = np.logspace(np.log10(lo), np.log10(hi), 400)
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for c in roof.ceilings:
        ax.loglog(x, np.minimum(roof.peak_tflops, x * c.bandwidth_gbps / 1e3), label=f"{c.name} {c.bandwidth_gbps:,.0f} GB/s"
                  f" (ridge {c.ridge_flop_per_byte:.3g} FLOP/B)")
    for i, p in enumerate(points):
        ax.scatter([p.intensity_flop_per_byte], [p.attainable_tflops], marker="o", zorder=3)
        ax.annotate(p.name, (p.intensity_flop_per_byte, p.attainable_tflops), fontsize=7,
                    textcoords="offset points", xytext=(4, -10 - 9 * (i % 3)))
        if p.achieved_tflops is not None:
            ax.scatter([p.intensity_flop_per_byte], [p.achieved_tflops], marker="x", color="red" if p.above_roof else "k",
                       zorder=3)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable TFLOP/s")
    kind = "sparse" if roof.sparse else "dense"
    ax.set_title(f"{roof.gpu} {roof.dtype} ({kind} peak {roof.peak_tflops:g} TFLOP/s)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_output(path, "plot") as tmp:
        fig.savefig(tmp)
    plt.close(fig)
    return path
