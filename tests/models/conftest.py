"""Adapter (temporary, owned here): the installed typer vendors click as `typer._click`, while
gpuplan.cli.main does `import click`. Alias it so the CLI can be imported in these tests."""

import sys

try:
    import click  # noqa: F401
except ModuleNotFoundError:  # pragma: no cover - depends on the environment
    import typer._click as _click

    sys.modules["click"] = _click
