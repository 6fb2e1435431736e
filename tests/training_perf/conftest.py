"""Fixtures shared by the training performance tests."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_catalog


@pytest.fixture(scope="module")
def h100():
    """(system, gpu) of the catalog's DGX H100."""
    c = load_catalog()
    system = c.system("dgx-h100")
    return system, c.gpu(system.gpu)
