"""Real processes (not CliRunner): exit codes, a closed pipe, --debug and GPUPLAN_DEBUG."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

GPUPLAN = [sys.executable, "-m", "gpuplan.cli.main"]


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*GPUPLAN, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_bad_input_exit_2_one_line_no_traceback():
    p = _run("dc", "power", "--pue", "nan")
    assert p.returncode == 2
    assert p.stderr == "error: --pue: must be a finite number > 0, got nan\n" and p.stdout == ""


def test_usage_error_is_one_line_exit_2():
    p = _run("train", "--gpus", "1e9")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--gpus" in p.stderr


def test_json_error_object_on_stdout():
    p = _run("hw", "show", "nope", "--json")
    assert p.returncode == 2
    err = json.loads(p.stdout)["error"]
    assert set(err) == {"field", "allowed", "message"} and err["field"] == "GPU"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_debug_shows_the_traceback(how):
    args, env = (["--debug", "train", "gpt3-125m", "--tp", "0"], None) if how == "flag" else \
        (["train", "gpt3-125m", "--tp", "0"], {"GPUPLAN_DEBUG": "1"})
    p = _run(*args, env=env)
    assert p.returncode == 2 and "Traceback (most recent call last)" in p.stderr
    assert p.stderr.rstrip().endswith("error: --tp: must be an integer > 0, got 0")


def test_closed_pipe_exits_0_quietly():
    # `gpuplan hw list --json | head -c 10`: the reader goes away, gpuplan exits 0 with nothing on stderr
    proc = subprocess.Popen([*GPUPLAN, "hw", "list", "--json"],  # ~80 kB: more than a pipe buffer
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and "Error" not in err and "Traceback" not in err


def test_alias_note_goes_to_stderr():
    p = _run("hw", "show", "h100", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["id"] == "h100-sxm5-80gb"
    assert "note: 'h100' means h100-sxm5-80gb" in p.stderr and "h100-pcie-80gb" in p.stderr
