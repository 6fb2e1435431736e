"""CLI app for the facilities tests: the real root app, or (if it cannot be imported in this
environment) a stand-in holding only this area's command groups."""

from __future__ import annotations

import pytest


def facilities_app():
    try:
        from gpuplan.cli.main import app

        return app, True
    except ImportError:  # root CLI not importable here: test our groups on their own
        import typer

        from gpuplan.cli import datacenter, mig, plan

        app = typer.Typer()

        @app.callback()
        def _root() -> None:
            pass

        for module in (datacenter, mig, plan):
            module.register(app)
        return app, False


@pytest.fixture
def cli_app():
    return facilities_app()
