"""The README's Quickstart from Python, as a new user runs it: in a clean working folder with no
../shared beside it. `gpuplan plan` on its defaults through the CLI and through gpuplan.api, and
`gpuplan validate --builtin` (the measurements ship with the package). Every file opened while they
run is watched: none may lie in a ../shared folder (the one beside the repository or beside the
working folder)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app

REPO = Path(__file__).resolve().parents[1]

#: while a test watches: the ../shared folders it forbids, and the forbidden paths opened
_WATCH: dict[str, list] = {"roots": [], "opened": []}


def _audit(event: str, args: tuple) -> None:
    """sys.addaudithook: the "open" event (builtins.open, io.open, os.open) carries the path first."""
    if event != "open" or not _WATCH["roots"] or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.path.abspath(os.fsdecode(args[0]))
    if any(path == root or path.startswith(root + os.sep) for root in _WATCH["roots"]):
        _WATCH["opened"].append(path)


sys.addaudithook(_audit)  # an audit hook cannot be removed: it records only while _WATCH has roots


@pytest.fixture
def fresh_folder(tmp_path, monkeypatch):
    """A clean working folder with no ../shared beside it; fails the test if anything opens a file
    under ../shared (of the repository or of this folder) meanwhile."""
    work = tmp_path / "checkout"
    work.mkdir()
    monkeypatch.chdir(work)
    assert not (work.parent / "shared").exists()
    roots = [os.path.abspath(REPO.parent / "shared"), os.path.abspath(work.parent / "shared")]
    _WATCH["roots"], _WATCH["opened"] = roots, []
    try:
        yield work
        assert _WATCH["opened"] == [], f"read from ../shared at run time: {_WATCH['opened'][:3]}"
    finally:
        _WATCH["roots"], _WATCH["opened"] = [], []


def _check_seed_answer(d: dict) -> None:
    """What the seed question's answer must satisfy, from its inputs and definitions."""
    # the defaults (README Quickstart): GPT-3 175B on DGX H100, 300B tokens, within `--days 30`
    assert (d["goal"], d["model"], d["system"]) == ("train", "gpt3-175b", "dgx-h100")
    assert 0 < d["days"] <= 30
    # a DGX H100 holds 8 GPUs (NVIDIA DGX H100 datasheet): whole nodes
    assert d["gpus"] == 8 * d["nodes"]
    # GPU-hours = GPUs x days x 24 h (definition)
    assert d["gpu_hours"] == pytest.approx(d["gpus"] * d["days"] * 24, rel=1e-9)
    # training FLOPs ~ 6 N D (Kaplan et al. 2020 sec. 2.1; attention adds 12 n_layer n_ctx d_model per token,
    # 12 x 96 x 2048 x 12288 / (6 x 174.6e9) = 2.8% for GPT-3 175B) = time x GPUs x 989.4 dense BF16
    # TFLOP/s (H100 SXM datasheet) x MFU. N = 12 x 96 x 12288^2 (blocks) + 50257 x 12288 (embedding)
    # + 2048 x 12288 (positions) = 174.6e9 (Brown et al. 2020 Table 2.1: 96 layers, d_model 12288)
    mfu = d["workload_details"]["mfu_pct"] / 100
    flops_done = d["days"] * 86400 * d["gpus"] * 989.4e12 * mfu
    assert flops_done == pytest.approx(6 * 174.6e9 * 300e9 * 1.028, rel=0.03)


def test_quickstart_gpuplan_plan_cli(fresh_folder):
    runner = CliRunner()
    out = runner.invoke(app, ["plan"])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("Train gpt3-175b on ") and "dgx-h100" in out.stdout
    as_json = runner.invoke(app, ["plan", "--json"])
    assert as_json.exit_code == 0, as_json.output
    _check_seed_answer(json.loads(as_json.stdout))


def test_quickstart_gpuplan_plan_api(fresh_folder):
    d = api.plan().to_dict()
    _check_seed_answer(d)
    assert d["answer"].startswith("Train gpt3-175b on ")


def test_quickstart_validate_builtin(fresh_folder):
    # the README's line for the shipped measurements: no file of the user's, no ../shared
    out = CliRunner().invoke(app, ["validate", "--builtin", "collectives", "--summary"])
    assert out.exit_code == 0, out.output
    # collectives.csv (2026-11-28): 26 rows, none skipped
    assert out.stdout.splitlines()[-1].startswith("overall                      n=26   skipped=0")


def test_the_watch_sees_a_read_of_shared(tmp_path, monkeypatch):
    # the fixture's watch is real: opening a file under the forbidden folder is recorded
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "x.csv").write_text("id\n")
    monkeypatch.chdir(tmp_path)
    _WATCH["roots"], _WATCH["opened"] = [os.path.abspath(tmp_path / "shared")], []
    try:
        Path("shared/x.csv").read_text()
        assert _WATCH["opened"] == [os.path.abspath(tmp_path / "shared" / "x.csv")]
    finally:
        _WATCH["roots"], _WATCH["opened"] = [], []
