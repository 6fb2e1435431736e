"""Fixtures for the catalog tests."""

from __future__ import annotations

import pytest


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
