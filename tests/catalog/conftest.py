"""Fixtures for the catalog tests.

ADAPTER (remove when fixed upstream): the shared venv's typer (0.29) vendors click as
`typer._click` and installs no top-level `click`, which gpuplan/cli/main.py imports. Alias it so
the CLI tests can import the app; this touches nothing outside the test process.
"""

from __future__ import annotations

import importlib
import sys

import pytest

try:  # pragma: no cover - depends on the environment
    import click  # noqa: F401
except ModuleNotFoundError:  # pragma: no cover
    sys.modules["click"] = importlib.import_module("typer._click")


@pytest.fixture(autouse=True)
def _clean_catalog(monkeypatch):
    """Each test starts from the built-in catalog: no GPUPLAN_CATALOG, no --catalog left over."""
    from gpuplan.catalog import set_user_catalogs

    monkeypatch.delenv("GPUPLAN_CATALOG", raising=False)
    set_user_catalogs([])
    yield
    set_user_catalogs([])


@pytest.fixture
def catalog():
    from gpuplan.catalog import load_catalog

    return load_catalog()
