"""Fixtures of the sweep tests: the docs' first spec, and one local Ray instance per session
(2 CPUs, bound to 127.0.0.1, no dashboard: backends.local_ray_options)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sweeps.md"


def docs_toml_blocks() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)


@pytest.fixture(scope="session")
def docs_spec_path(tmp_path_factory) -> Path:
    """docs/sweeps.md's first ```toml block, as a file."""
    path = tmp_path_factory.mktemp("spec") / "first.toml"
    path.write_text(docs_toml_blocks()[0], encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance for the session (the sweep's Ray backend uses it as it finds it)."""
    import ray  # installed by the `test` extra (gpuplan[sweep,ray]): never skipped
    from gpuplan.interfaces.sweep.backends import local_ray_options

    ray.init(**local_ray_options(2))
    yield ray
    ray.shutdown()
