"""CLI: `gpuplan sweep run SPEC.toml` and `gpuplan sweep report RESULTS` (gpuplan.interfaces.sweep;
docs/sweeps.md). Parse, call, render."""

from __future__ import annotations

from typing import Optional

import typer

from gpuplan.cli.progress import progress_bar
from gpuplan.cli.render import console, fmt, print_json, table


def register(app: typer.Typer) -> None:
    """Add `gpuplan sweep run` and `gpuplan sweep report`."""
    sweep_app = typer.Typer(help="Co-design and what-if sweeps: many searches, local or on Ray, resumable (docs/sweeps.md).",
                            no_args_is_help=True)
    app.add_typer(sweep_app, name="sweep")

    @sweep_app.command("run")
    def run(
        spec: str = typer.Argument(..., help="Sweep spec (TOML; docs/sweeps.md)."),
        backend: str = typer.Option("local", "--backend", help="local (process pool) or ray."),
        address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local instance on 127.0.0.1)."),
        workers: Optional[int] = typer.Option(None, "--workers", help="Parallel workers (default: CPUs)."),
        out: Optional[str] = typer.Option(None, "--out", help="results.parquet or results.csv; reruns resume from OUT.parts/."),
        chunk_points: Optional[int] = typer.Option(None, "--chunk-points",
                                                    help="Points per task (default: sized to ~2 s of work)."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the point count and an ETA; run nothing."),
        as_json: bool = typer.Option(False, "--json", help="JSON summary."),
    ) -> None:
        """Run every point of SPEC; rows stream to OUT.parts/ as chunks finish, then OUT."""
        import os

        from gpuplan.errors import InputError
        from gpuplan.interfaces import sweep

        for name, value in (("workers", workers), ("chunk_points", chunk_points)):
            if value is not None and value < 1:
                raise InputError(f"--{name.replace('_', '-')} must be >= 1", field=name)
        prep = sweep.prepare(spec, out, create=not dry_run)
        if dry_run:
            d = sweep.dry_run(prep, workers or os.cpu_count() or 1)
            if as_json:
                print_json(d.to_dict())
                return
            console.print(f"{d.points} points ({d.sampler}), {d.finished} finished, {d.pending} to run; "
                          f"{fmt(d.seconds_per_point, 3)} s per point -> ETA {fmt(d.eta_s, 3)} s on {d.workers} workers")
            return
        try:
            with progress_bar("sweep points") as bar:
                summary, _ = sweep.run(prep, backend, workers, address, progress=bar, chunk_points=chunk_points)
        except KeyboardInterrupt:
            typer.echo(f"interrupted: finished chunks are kept in {prep.store.dir if prep.store else '(no --out)'}; "
                       "rerun the same command to resume", err=True)
            raise typer.Exit(code=130) from None
        if as_json:
            print_json(summary.to_dict())
            return
        s = summary
        console.print(f"{s.points} points: {s.resumed} from earlier parts, {s.computed} computed in {fmt(s.elapsed_s, 3)} s "
                      f"({fmt(s.points_per_s, 3)} points/s, {s.backend}, {s.workers} workers); "
                      f"{s.infeasible} infeasible, {s.errors} errors" + (f"; wrote {s.out}" if s.out else ""))

    @sweep_app.command("report")
    def report(
        results: str = typer.Argument(..., help="A sweep's output (.parquet or .csv)."),
        out: Optional[str] = typer.Option(None, "--out", help="Folder for the Pareto plots (PNG)."),
        as_json: bool = typer.Option(False, "--json", help="JSON: the fronts and plot paths."),
    ) -> None:
        """Pareto fronts: cost vs time and cost vs GPUs (plots with --out) and the frontier table."""
        from gpuplan.interfaces import sweep
        from gpuplan.interfaces.sweep.report import AXES, TABLE

        rep = sweep.sweep_report(results, out)
        if as_json:
            print_json(rep.to_dict())
            return
        cols = TABLE[rep.goal]
        for name, front in rep.fronts.items():
            x = AXES[rep.goal]["time" if name == "cost_vs_time" else "gpus"]
            console.print(table(f"Pareto front: {AXES[rep.goal]['cost']} vs {x} ({len(front)} of {rep.eligible} rows)",
                                list(cols), [[r.get(c) for c in cols] for r in front], name=name))
        for name, path in rep.plots.items():
            console.print(f"{name}: {path}")
