"""Shared fixtures: the repository's ../shared folder (validation CSVs, model configs) when present."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

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
