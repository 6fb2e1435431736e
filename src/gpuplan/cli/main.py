"""`gpuplan` root command. Each command group lives in its own module with a `register(app)`.

Errors: every GpuplanError (bad input, infeasible plan) becomes one line on stderr and exit
code 2; nothing else is printed, no traceback.
"""

from __future__ import annotations

import sys
from typing import List, Optional

import typer
from typer.core import TyperGroup

from gpuplan import __version__
from gpuplan.errors import GpuplanError


class GpuplanGroup(TyperGroup):
    """Root group: a GpuplanError anywhere below becomes `error: ...` on stderr and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GpuplanError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=2) from None


app = typer.Typer(
    cls=GpuplanGroup,
    name="gpuplan",
    help="Model AI workloads on real hardware: what fits, how fast, what it costs, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        print(f"gpuplan {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    catalog: Optional[List[str]] = typer.Option(
        None, "--catalog", help="Extra catalog TOML file(s) adding or overriding GPUs, systems, interconnects, prices."
    ),
    calibration: Optional[str] = typer.Option(
        None, "--calibration", envvar="GPUPLAN_CALIBRATION",
        help="Calibration profile (TOML, from `gpuplan calibrate fit` or `gpuplan bench`) applied to every prediction.",
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    from gpuplan.catalog import load_catalog, set_user_catalogs

    if catalog:
        set_user_catalogs(catalog)
        load_catalog()  # validate the user files now, before any command runs
    if calibration:  # knobs.overridden for the whole command (validated here: bad profile -> exit 2)
        from gpuplan.interfaces.calibration_profile import apply_profile

        ctx.with_resource(apply_profile(calibration))


def _register_all() -> None:
    from gpuplan.cli import (
        comm, datacenter, fit, formats, hw, kernel, mig, model, plan, serve, systems, train, validate,
    )

    for module in (hw, systems, model, fit, comm, train, validate, serve, formats, kernel, datacenter, mig, plan):
        module.register(app)
    from gpuplan.cli import calibrate; calibrate.register(app)  # noqa: E702 - one line, merges cleanly
    from gpuplan.cli import bench; bench.register(app)  # noqa: E702 - one line, merges cleanly


_register_all()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app, turning gpuplan errors into one-line messages (exit 2)."""
    try:
        app(args=argv, standalone_mode=True)
    except GpuplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # `gpuplan ... | head`
        sys.exit(0)


if __name__ == "__main__":
    main()
