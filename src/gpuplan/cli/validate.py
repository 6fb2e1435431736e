"""CLI: `gpuplan validate FILE.csv | --builtin training|inference|collectives [--json] [--summary]
[--cv family|regime|row]` - predicted vs measured per row, and error statistics per source family and overall
(gpuplan.interfaces.validation.validate); with `--cv family` the leave-one-family-out cross-validated
errors, with `--cv regime` also the leave-one-regime-out errors per held-out regime, hardware
generation, engine, architecture and precision, with `--cv row` the leave-one-row-out errors (each row
predicted with the knobs refit without it: interpolation) (gpuplan.interfaces.validation.cross_validation).
`--builtin NAME` reads the public set shipped with gpuplan (gpuplan.catalog.validation_sets) instead of a FILE."""

from __future__ import annotations

import typer

from gpuplan import api
from gpuplan.cli.progress import progress_bar
from gpuplan.cli.render import console, echo, fmt, output_format, print_json, table


def _summary_lines(summary: dict) -> list[str]:
    def line(name: str, b: dict) -> str:
        rho = b.get("spearman_mean")
        return (f"{name:<28} n={b['count']:<4} skipped={b['skipped']:<4} MAPE={fmt(b['mape_pct'], 3)}% "
                f"median={fmt(b['median_abs_error_pct'], 3)}% max={fmt(b['max_abs_error_pct'], 3)}% "
                f"spearman={fmt(rho, 3)}")

    out = [line(f, b) for f, b in summary["families"].items()]
    out.append(line("overall", summary["overall"]))
    return out


def _summary_table(summary: dict):
    """The per-family summary (overall last) as a table, for `--format md|csv`."""
    blocks = [*summary["families"].items(), ("overall", summary["overall"])]
    return table("summary per family", ["family", "n", "skipped", "MAPE %", "median abs error %", "max abs error %",
                                        "spearman"],
                 [(f, b["count"], b["skipped"], b["mape_pct"], b["median_abs_error_pct"], b["max_abs_error_pct"],
                   b.get("spearman_mean")) for f, b in blocks], keep_whole=1, name="summary")


def _cv_line(name: str, b: dict) -> tuple:
    frac = b["predicted_fraction"]
    return (name, b["n"], b["low_confidence_rows"], None if frac is None else 100.0 * frac, b["mape_pct"],
            b["median_ape_pct"], b["in_sample_mape_pct"], b["default_mape_pct"])


def _print_cv(cv: dict) -> None:
    """Per-family table (n: scored rows; low: low-confidence rows, listed in --json, not scored), overall
    last, then the knobs refit and notes."""
    rows = [_cv_line(f, b) for f, b in cv["families"].items()]
    rows.append(_cv_line("overall", cv["overall"]))
    what = "leave-one-row-out" if cv["mode"] == "row" else "leave-one-family-out"
    console.print(table(f"{what} cross-validation (low-confidence rows not scored)",
                        ["family", "n", "low", "pred %", "CV MAPE %", "CV median %", "in-sample MAPE %",
                         "default MAPE %"], rows, keep_whole=1))
    for k in cv["knobs_refit"]:
        unc = "" if k["uncertainty"] is None else f" +- {fmt(k['uncertainty'], 2)}"
        state = "refit" if k["informed"] else "not informed by these rows"
        echo(f"knob {k['name']}: default {fmt(k['default'])}, all families {fmt(k['in_sample_value'])}{unc} "
                   f"{k['unit']} ({state})")
    for grouping, block in (cv.get("regimes") or {}).items():
        rows = [_cv_line(v, b) for v, b in block.items() if v != "overall"]
        rows.append(_cv_line("overall", block["overall"]))
        console.print(table(f"leave-one-{grouping}-out: each {grouping} predicted with the knobs refit without it",
                            [grouping, "n", "low", "pred %", "CV MAPE %", "CV median %", "in-sample MAPE %",
                             "default MAPE %"], rows, keep_whole=1))
    for note in cv["notes"]:
        echo(f"note: {note}")
    echo(f"cv run time: {fmt(cv['run_time_s'], 3)} s")


def register(app: typer.Typer) -> None:
    """Add `gpuplan validate`."""

    @app.command("validate")
    def validate(
        file: str = typer.Argument(None, help="CSV of SCHEMA.md rows (training, inference, collectives); "
                                               "or --builtin NAME instead."),
        builtin: str = typer.Option(None, "--builtin", metavar="|".join(api.VALIDATION_SETS),
                                    help="Validate the public set shipped with gpuplan (the measurements of "
                                         "docs/accuracy.md) instead of a FILE."),
        as_json: bool = typer.Option(False, "--json", help="JSON: {rows: [...], summary: {...}}."),
        summary_only: bool = typer.Option(False, "--summary", help="Only the compact per-family table; overall last."),
        cv: str = typer.Option(None, "--cv", help="'family': refit the fitted knobs leaving each family (id without "
                                                  "its final -N) out; report CV, in-sample and default errors. "
                                                  "'regime': also leave out each regime (hardware generation, "
                                                  "engine, architecture) and each single axis value as a whole. "
                                                  "'row': refit leaving each row out alone (interpolation)."),
    ) -> None:
        """Predict every row of FILE (or of the shipped set --builtin NAME) and compare with the measurement."""
        name = f"--builtin {builtin.strip().lower()}" if builtin else file
        if cv is not None:
            with progress_bar("cross-validation") as bar:
                cv_result = api.validate_cv(file, cv, progress=bar, builtin=builtin)
            if as_json:
                print_json(cv_result.to_dict())
            else:
                _print_cv(cv_result.to_dict()["cv"])
            return
        with progress_bar("validate rows") as bar:
            result = api.validate(file, progress=bar, builtin=builtin)
        if as_json:
            print_json(result.to_dict())
            return
        report = result.report
        if not summary_only:
            rows = [(r.id, r.metric, r.measured, r.predicted, r.error_pct,
                     ("SKIPPED: " + r.reason) if r.skipped else r.notes[:60]) for r in report.rows]
            console.print(table(f"validate {name}", ["id", "metric", "measured", "predicted", "error_pct", "notes"],
                                rows, keep_whole=1, name="rows", secondary=["notes"]))
        if output_format() == "table":
            for text in _summary_lines(report.summary):
                typer.echo(text)
        else:  # md / csv: the same figures as a table
            console.print(_summary_table(report.summary))
