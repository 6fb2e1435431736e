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


#: Families that ../shared/validation gained in its third split (2026-11-28; SCHEMA.md, SYSTEMS.md and
#: the round's issues name them): the families measured in the previous round, now public, and the
#: fine-tuning and TPU families. The accuracy gates of record were set before them and cover the rows
#: the model claimed then; each new family gets its gate in the issue that owns its regime (training
#: and MoE: "Training predictions within 9%"; serving: "Serving predictions that hold"; fine-tuning:
#: "Fine-tuning and memory-saving training"; TPU and new ids: "Every accelerator").
THIRD_SPLIT_FAMILIES: dict[str, frozenset[str]] = {
    "training": frozenset({
        "nemo-lseq", "tao", "tth200", "ttasync", "automodel", "dsv2", "tpurec-v6e",
        "ttflags", "ltres", "aai3090", "hf1gpu", "peftds", "zoff",
    }),
    "inference": frozenset({
        "rocmvllm-mi300x", "dcrh200", "trtllm-dsr1bp", "trtllm-h200blog", "sglang-ep96", "dsv3awq",
    }),
    "collectives": frozenset(),
}


def row_family(row_id: str) -> str:
    """SCHEMA.md: a family is the id without its final `-N`."""
    return row_id.rsplit("-", 1)[0]


def rows_of_record(shared: Path, file: str) -> list[dict[str, str]]:
    """The rows of ../shared/validation/{file}.csv in the families the gates of record cover."""
    import csv

    with open(shared / "validation" / f"{file}.csv", encoding="utf-8", newline="") as f:
        return [r for r in csv.DictReader(f) if row_family(r["id"]) not in THIRD_SPLIT_FAMILIES[file]]


@pytest.fixture
def record_rows(shared_dir):
    """rows_of_record bound to ../shared (skips where it is absent)."""
    return lambda file: rows_of_record(shared_dir, file)
