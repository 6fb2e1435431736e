"""Shared fixtures: the repository's ../shared folder (validation CSVs, model configs) when present."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings
from typer.testing import CliRunner

# No per-example deadline: speed is measured by benchmarks/, never asserted in tests, and on a
# loaded 2-core machine a first example that imports or JIT-compiles exceeds hypothesis's 200 ms
# default (a FlakyFailure seen in the full suite). Tests that need their own settings still set them.
settings.register_profile("gpuplan", deadline=None)
settings.load_profile("gpuplan")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not beside the repository")
    return SHARED
