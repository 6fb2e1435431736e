"""Pareto fronts of a sweep's rows: cost against time and cost against GPUs, as PNG plots and a table.

A row is on the front of (x, y), both to be minimised, when no other row is at least as good on both
and better on one. Only rows with status ok that meet the constraints take part. What x and y are:

    goal    cost                     time                 GPUs
    train   cost_usd                 days                 num_gpus
    serve   usd_per_million_tokens   tpot_p90_ms          num_gpus
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuplan.errors import InputError

AXES = {
    "train": {"cost": "cost_usd", "time": "days", "gpus": "num_gpus"},
    "serve": {"cost": "usd_per_million_tokens", "time": "tpot_p90_ms", "gpus": "num_gpus"},
}
#: columns of the frontier table, per goal
TABLE = {
    "train": ("point", "model", "hardware", "num_gpus", "seq_len", "tp", "pp", "dp", "step_time_s", "mfu_pct", "days",
              "cost_usd", "usd_per_million_tokens"),
    "serve": ("point", "model", "hardware", "rate_rps", "tp", "replicas", "num_gpus", "ttft_p90_ms", "tpot_p90_ms",
              "usd_per_million_tokens"),
}


#: the plots `--out DIR` receives: pareto_<name>.png
AXES_PLOTS = ("cost_vs_time", "cost_vs_gpus")


def pareto_front(rows: list[dict], x: str, y: str) -> list[dict]:
    """Rows not dominated on (x, y), both minimised, sorted by x then y (ties: the lower point first)."""
    pts = [r for r in rows if r.get(x) is not None and r.get(y) is not None]
    pts.sort(key=lambda r: (r[x], r[y], r["point"]))
    front, best_y = [], float("inf")
    for r in pts:
        if r[y] < best_y:
            front.append(r)
            best_y = r[y]
    return front


def goal_of(rows: list[dict]) -> str:
    if not rows:
        raise InputError("results: the file has no rows", field="results")
    missing = [c for c in ("point", "status") if c not in rows[0]]
    if missing:  # not what `sweep run` writes: a report of it would be empty, not an answer
        raise InputError(f"results: no {' or '.join(missing)} column; give the CSV or Parquet file `gpuplan sweep run "
                         f"--out` wrote (columns: {', '.join(list(rows[0])[:8])})", field="results")
    return "train" if "days" in rows[0] else "serve"


@dataclass(frozen=True)
class SweepReport:
    goal: str
    rows: int
    eligible: int  # status ok and meeting the constraints
    fronts: dict  # "cost_vs_time" / "cost_vs_gpus" -> list of rows
    plots: dict  # name -> PNG path (when an output folder was given)

    def to_dict(self) -> dict:
        cols = TABLE[self.goal]
        return {"goal": self.goal, "rows": self.rows, "eligible_rows": self.eligible,
                "axes": AXES[self.goal], "plots": self.plots,
                "fronts": {k: [{c: r.get(c) for c in cols} for r in v] for k, v in self.fronts.items()}}


def _plot(rows: list[dict], front: list[dict], x: str, y: str, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpuplan.output_files import atomic_output

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for hw in sorted({r["hardware"] for r in rows}):
        mine = [r for r in rows if r["hardware"] == hw and r.get(x) is not None and r.get(y) is not None]
        ax.scatter([r[x] for r in mine], [r[y] for r in mine], s=18, alpha=0.7, label=hw)
    ax.step([r[x] for r in front], [r[y] for r in front], where="post", color="black", lw=1.2, label="Pareto front")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        with atomic_output(path, "--out") as tmp:
            fig.savefig(tmp, format="png", dpi=110)
    finally:
        plt.close(fig)


def sweep_report(results: str | Path, out_dir: str | Path | None = None) -> SweepReport:
    """Pareto fronts of a sweep output file; PNG plots in `out_dir` when given (a folder, created
    when missing; an existing file there is refused before any work, gpuplan.output_files)."""
    from gpuplan.interfaces.sweep.store import read_rows
    from gpuplan.output_files import check_output_folder, check_output_path, make_output_folder

    if out_dir is not None:
        folder = check_output_folder(out_dir, "--out")
        if folder.is_dir():  # an earlier report's plots are replaced; a device or FIFO in their place is not
            for name in AXES_PLOTS:
                check_output_path(folder / f"pareto_{name}.png", "--out")
    rows = read_rows(results)
    goal = goal_of(rows)
    axes = AXES[goal]
    eligible = [r for r in rows if r.get("status") == "ok" and r.get("meets_constraints") in (True, None)]
    fronts = {
        "cost_vs_time": pareto_front(eligible, axes["time"], axes["cost"]),
        "cost_vs_gpus": pareto_front(eligible, axes["gpus"], axes["cost"]),
    }
    plots = {}
    if out_dir is not None:
        d = make_output_folder(out_dir, "--out")
        for name, front in fronts.items():
            x = axes["time"] if name == "cost_vs_time" else axes["gpus"]
            path = d / f"pareto_{name}.png"
            _plot(eligible, front, x, axes["cost"], path, f"{Path(results).name}: {axes['cost']} vs {x}")
            plots[name] = str(path)
    return SweepReport(goal, len(rows), len(eligible), fronts, plots)
