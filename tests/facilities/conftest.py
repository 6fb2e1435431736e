"""CLI app for the facilities tests: the real root app."""

from __future__ import annotations

import pytest


@pytest.fixture
def cli_app():
    from gpuplan.cli.main import app

    return app, True
