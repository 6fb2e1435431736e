"""CLI: `gpuplan validate FILE.csv [--json] [--summary]` - predicted vs measured per row, and error
statistics per source family and overall (gpuplan.interfaces.validate)."""

from __future__ import annotations

import typer

from gpuplan import api
from gpuplan.cli.render import console, fmt, print_json, table


def _summary_lines(summary: dict) -> list[str]:
    def line(name: str, b: dict) -> str:
        rho = b.get("spearman_mean")
        return (f"{name:<28} n={b['count']:<4} skipped={b['skipped']:<4} MAPE={fmt(b['mape_pct'], 3)}% "
                f"median={fmt(b['median_abs_error_pct'], 3)}% max={fmt(b['max_abs_error_pct'], 3)}% "
                f"spearman={fmt(rho, 3)}")

    out = [line(f, b) for f, b in summary["families"].items()]
    out.append(line("overall", summary["overall"]))
    return out


def register(app: typer.Typer) -> None:
    """Add `gpuplan validate`."""

    @app.command("validate")
    def validate(
        file: str = typer.Argument(..., help="CSV of ../shared/validation/SCHEMA.md (training, inference, collectives)."),
        as_json: bool = typer.Option(False, "--json", help="JSON: {rows: [...], summary: {...}}."),
        summary_only: bool = typer.Option(False, "--summary", help="Only the compact per-family table; overall last."),
    ) -> None:
        """Predict every row of FILE and compare with the measurement."""
        result = api.validate(file)
        if as_json:
            print_json(result.to_dict())
            return
        report = result.report
        if not summary_only:
            rows = [(r.id, r.metric, r.measured, r.predicted, r.error_pct,
                     ("SKIPPED: " + r.reason) if r.skipped else r.notes[:60]) for r in report.rows]
            console.print(table(f"validate {file}", ["id", "metric", "measured", "predicted", "error_pct", "notes"],
                                rows))
        for text in _summary_lines(report.summary):
            typer.echo(text)
