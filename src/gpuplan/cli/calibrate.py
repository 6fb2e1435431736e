"""CLI: `gpuplan calibrate ...` (parse + render only; the work is in gpuplan.api / interfaces):

- `knobs [--json] [--fitted]`: the registry of efficiency knobs: name, unit, default and its source,
  the value in effect, the range physics allows, what it scales, and the validation families a
  fitted knob was chosen on (gpuplan.knobs, gpuplan.interfaces.fitting.knob_catalog);
- `fit ROWS.csv [...] --out profile.toml [--knobs a,b] [--plot fit.png] [--json]`: fit the knobs
  the rows inform and write a profile (interfaces.calibration.fit; docs/calibration.md);
- `import KIND FILE [--out rows.csv] [--json]`: turn a tool's output into rows (interfaces.calibration.importers).
"""

from __future__ import annotations

import typer

from gpuplan import api
from gpuplan.cli.progress import progress_bar
from typing import List, Optional

from gpuplan.cli.render import console, fmt, output_format, print_json, table

calibrate_app = typer.Typer(
    help="Efficiency knobs and calibration: list the knobs, fit them to your measurements, import tool logs.",
    no_args_is_help=True,
)


@calibrate_app.command("knobs")
def knobs_command(
    as_json: bool = typer.Option(False, "--json", help="JSON: {count, fitted_count, knobs: [{name, unit, default, "
                                                       "value, source, low, high, scales, fitted_on}]}."),
    fitted: bool = typer.Option(False, "--fitted", help="Only the knobs fitted to validation rows (fitted_on)."),
) -> None:
    """List every efficiency knob (the one registry; `validate --cv family` refits the fitted ones)."""
    result = api.calibrate_knobs(fitted)
    items = result.knobs
    if as_json:
        print_json(result.to_dict())
        return
    if output_format() != "table":  # md / csv: one row per knob, every field whole
        console.print(table(f"efficiency knobs: {len(items)}", ["name", "value", "unit", "default", "low", "high",
                                                                "fitted_on", "scales", "source"],
                            [(k.name, k.to_dict()["value"], k.unit, k.default, k.low, k.high, " ".join(k.fitted_on),
                              k.scales, k.source) for k in items], keep_whole=1))
        return
    typer.echo(f"efficiency knobs: {len(items)} ({sum(k.fitted for k in items)} fitted to validation rows)")
    for k in items:
        value = k.to_dict()["value"]
        changed = "" if value == k.default else f" (default {fmt(k.default)})"
        typer.echo(f"\n{k.name} = {fmt(value)} {k.unit}{changed}   range {fmt(k.low)} .. {fmt(k.high)}")
        typer.echo(f"    scales: {k.scales}")
        typer.echo(f"    source: {k.source}")
        if k.fitted:
            typer.echo(f"    fitted on: {', '.join(k.fitted_on)}")


@calibrate_app.command("fit")
def fit_command(
    measurements: List[str] = typer.Argument(..., help="CSV file(s) of measured rows (SCHEMA.md: training, "
                                                       "inference, collectives; matmul rows of the importers)."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the profile (TOML) here, atomically."),
    knob_names: Optional[str] = typer.Option(None, "--knobs", help="Comma-separated knob names to fit (default: "
                                                                  "every knob the rows' predictions read)."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Predicted vs measured before/after (.png/.svg/.pdf)."),
    method: str = typer.Option("auto", "--method", help="hierarchical (site factors, then single knobs, chosen "
                                                        "by leave-one-out error), flat (every informed knob "
                                                        "free) or auto (hierarchical unless --knobs names knobs)."),
    as_json: bool = typer.Option(False, "--json", help="JSON: {method, knobs, values, parameters, selection, "
                                                       "not_informed, error, rows, sources, ...}."),
) -> None:
    """Fit the efficiency knobs your measurements inform; print value +- uncertainty and the error before/after."""
    with progress_bar("calibrate fit") as bar:
        result = api.calibrate_fit(measurements, out, knobs=knob_names, plot=plot, method=method, progress=bar)
    if as_json:
        print_json(result.to_dict())
        return
    cal = result.calibration
    err = cal.error_block()
    d = cal.to_dict()
    if cal.method == "hierarchical":
        typer.echo(f"parameters fitted ({err['rows_used']} rows used; site factors first, then single knobs, "
                   "chosen by leave-one-out error):")
        for k in cal.fit.knobs:
            if k.informed:
                typer.echo(f"  {k.name} = {fmt(k.value)} +- {fmt(k.uncertainty)} {k.unit} (start {fmt(k.start)})")
    typer.echo(f"fitted knobs ({err['rows_used']} rows used): value +- 1 sigma (start)")
    for k in d["knobs"]:
        if k["informed"]:
            bound = "  [at its bound]" if k["at_bound"] else ""
            via = f"  via {', '.join(k['via'])}" if k.get("via") else ""
            typer.echo(f"  {k['name']} = {fmt(k['value'])} +- {fmt(k['uncertainty'])} {k['unit']} "
                       f"(start {fmt(k['start'])}){via}{bound}")
    if d["not_selected"]:
        typer.echo(f"informed, but not worth a parameter of their own (leave-one-out): {', '.join(d['not_selected'])}")
    if d["not_informed"]:
        typer.echo(f"not informed by these rows (left as they were): {', '.join(d['not_informed'])}")
    typer.echo(f"MAPE on the rows used: {fmt(err['mape_before_pct'])}% before -> {fmt(err['mape_after_pct'])}% after")
    typer.echo(f"leave-one-out (per {err['loo_mode']}) MAPE: {fmt(err['loo_mape_before_pct'])}% before -> "
               f"{fmt(err['loo_mape_after_pct'])}% after")
    if cal.fit.rows_skipped:
        typer.echo(f"rows skipped: {len(cal.fit.rows_skipped)} (first: {cal.fit.rows_skipped[0][0]}: "
                   f"{cal.fit.rows_skipped[0][1]})")
    if result.profile_path:
        typer.echo(f"profile written: {result.profile_path}  (use: gpuplan --calibration {result.profile_path} ...)")
    if result.plot_path:
        typer.echo(f"plot written: {result.plot_path}")


@calibrate_app.command("import")
def import_command(
    kind: str = typer.Argument(..., help="nccl-tests, mamf, vllm, sglang, trtllm, torchtitan, megatron, nemo or maxtext."),
    file: str = typer.Argument(..., help="The tool's output: stdout log, result JSON / JSONL."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the rows here as CSV (atomically)."),
    config: Optional[str] = typer.Option(None, "--config", help="Run configuration TOML (keys = SCHEMA.md columns: "
                                                                "system, num_gpus, layers, hidden, tp, ...)."),
    sets: Optional[List[str]] = typer.Option(None, "--set", help="column=value, repeatable (wins over --config)."),
    as_json: bool = typer.Option(False, "--json", help="JSON: {kind, file, count, rows, out_path}."),
) -> None:
    """Turn a tool's output into measured rows that `calibrate fit` and `validate` read."""
    result = api.calibrate_import(kind, file, out, config=config, sets=sets or ())
    if as_json:
        print_json(result.to_dict())
        return
    typer.echo(f"{len(result.rows)} row(s) from {kind} output {file}:")
    for r in result.rows:
        where = " ".join(f"{c}={r[c]}" for c in ("system", "collective", "size_bytes", "m", "n", "k", "concurrency",
                                                  "request_rate", "num_gpus") if r.get(c))
        typer.echo(f"  {r['id']}: {r['metric']} = {r['value']}   {where}")
    if result.out_path:
        typer.echo(f"rows written: {result.out_path}  (next: gpuplan calibrate fit {result.out_path} --out profile.toml)")


def register(app: typer.Typer) -> None:
    """Add `gpuplan calibrate ...` to the root app."""
    app.add_typer(calibrate_app, name="calibrate")
