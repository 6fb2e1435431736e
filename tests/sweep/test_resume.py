"""Kill a running sweep, rerun it: no finished point lost, none computed twice, the output the same
as an uninterrupted run's, and never a half-written output file. A changed spec is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuplan.errors import InputError
from gpuplan.interfaces.sweep import run_sweep
from gpuplan.interfaces.sweep.store import read_rows

SPEC = """
name = "resume"
goal = "train"
[axes]
models = ["llama-3-8b"]
hardware = ["dgx-h100"]
gpus = [8, 16, 32, 64, 128, 256, 512, 1024]
seq_len = [2048, 4096]
tokens = ["1T"]
[train]
global_batch = 1024
"""


#: the Ctrl-C test needs a sweep that cannot finish between two polls: 48 points, some of them
#: 175B searches (seconds each), so the interrupt always lands mid-run
SPEC_LONG = SPEC.replace('models = ["llama-3-8b"]', 'models = ["llama-3-8b", "gpt3-175b", "llama-3-70b"]')


def _part_rows(parts: Path) -> dict[int, dict]:
    rows = {}
    for p in parts.glob("part-*.json"):
        for r in json.loads(p.read_text())["rows"]:
            assert r["point"] not in rows  # no point in two parts
            rows[r["point"]] = r
    return rows


def test_kill_and_resume(tmp_path):
    spec = tmp_path / "resume.toml"
    spec.write_text(SPEC)
    out = tmp_path / "resume.csv"
    parts = tmp_path / "resume.csv.parts"
    # one point per chunk, one worker: 16 chunks, each a part file as it finishes
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan.cli.main", "sweep", "run", str(spec), "--out", str(out),
                             "--workers", "1", "--chunk-points", "1", "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(parts.glob("part-*.json"))) < 3:
            assert proc.poll() is None, "the sweep finished before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its pool worker, at once
        proc.wait()
    before = _part_rows(parts)
    assert 3 <= len(before) < 16
    assert not out.exists()  # interrupted: no output file at all, rather than a partial one

    summary, rows = run_sweep(spec, out, workers=1)
    assert summary.resumed == len(before) and summary.computed == 16 - len(before)
    assert [r["point"] for r in rows] == list(range(16))  # every point once
    assert all(rows[i] == r for i, r in before.items())  # finished rows kept as they were
    assert _part_rows(parts).keys() == set(range(16))

    clean, clean_rows = run_sweep(spec, tmp_path / "clean.csv", workers=1)
    assert clean.resumed == 0 and clean_rows == rows
    assert read_rows(out) == read_rows(tmp_path / "clean.csv")

    # the same --out for another spec is refused, naming what differs
    spec.write_text(SPEC.replace("gpus = [8,", "gpus = [4, 8,"))
    with pytest.raises(InputError, match="another spec"):
        run_sweep(spec, out, workers=1)


def test_ctrl_c_keeps_finished_chunks(tmp_path):
    # Ctrl-C (SIGINT to the whole process group, as a terminal sends it): exit 130, one line on
    # stderr, no output file, the finished parts kept for the rerun.
    spec = tmp_path / "resume.toml"
    spec.write_text(SPEC_LONG)
    out = tmp_path / "resume.parquet"
    parts = tmp_path / "resume.parquet.parts"
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan.cli.main", "sweep", "run", str(spec), "--out", str(out),
                             "--workers", "1", "--chunk-points", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while len(list(parts.glob("part-*.json"))) < 2:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    lines = [ln for ln in err.decode().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("interrupted: finished chunks are kept in"), lines
    assert not out.exists()
    kept = _part_rows(parts)
    summary, rows = run_sweep(spec, out, workers=1)
    assert summary.resumed == len(kept) >= 2 and [r["point"] for r in rows] == list(range(48))
