"""CLI: `gpuplan calibrate knobs [--json] [--fitted]` - the registry of efficiency knobs: name, unit,
default and its source, the value in effect, the range physics allows, what it scales, and the
validation families a fitted knob was chosen on (gpuplan.knobs, gpuplan.interfaces.knob_catalog)."""

from __future__ import annotations

import typer

from gpuplan import api
from gpuplan.cli.render import fmt, print_json

calibrate_app = typer.Typer(
    help="Efficiency knobs and calibration: list the registry of knobs every prediction reads.",
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
    typer.echo(f"efficiency knobs: {len(items)} ({sum(k.fitted for k in items)} fitted to validation rows)")
    for k in items:
        value = k.to_dict()["value"]
        changed = "" if value == k.default else f" (default {fmt(k.default)})"
        typer.echo(f"\n{k.name} = {fmt(value)} {k.unit}{changed}   range {fmt(k.low)} .. {fmt(k.high)}")
        typer.echo(f"    scales: {k.scales}")
        typer.echo(f"    source: {k.source}")
        if k.fitted:
            typer.echo(f"    fitted on: {', '.join(k.fitted_on)}")


def register(app: typer.Typer) -> None:
    """Add `gpuplan calibrate ...` to the root app."""
    app.add_typer(calibrate_app, name="calibrate")
