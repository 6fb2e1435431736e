"""Runs docs/seed-questions.md: every `$ gpuplan ...` command, every `- check` against its hand derivation."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

DOC = Path(__file__).resolve().parents[1] / "docs" / "seed-questions.md"
_CHECK = re.compile(r"^- check `([^`]+)` = (\"[^\"]*\"|true|false|[-0-9.eE+]+)(?: ±([0-9.]+)%)?")


def _cases():
    cases, cmd, question = [], None, ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            question = line[3:].split(".")[0]
        elif line.startswith("$ gpuplan "):
            cmd = line[len("$ gpuplan "):]
        else:
            m = _CHECK.match(line)
            if m and cmd:
                cases.append(pytest.param(cmd, m.group(1), m.group(2), m.group(3), id=f"{question}:{m.group(1)}"))
    return cases


def _app():
    from gpuplan.cli.main import app

    return app


def _get(data, path):
    for part in path.split("."):
        data = data[part]
    return data


def test_document_has_every_question():
    text = DOC.read_text(encoding="utf-8")
    assert all(f"## Q{i}." in text for i in range(1, 11))


@pytest.mark.parametrize("cmd,key,expected,tol_pct", _cases())
def test_seed_question(cmd, key, expected, tol_pct):
    args = shlex.split(cmd)
    result = CliRunner().invoke(_app(), args)
    data = json.loads(result.stdout)
    # an infeasible request exits 2 (docs/cli-errors.md) while its JSON still says why
    assert result.exit_code == (2 if data.get("feasible") is False else 0), result.output
    value = _get(data, key)
    if expected.startswith('"'):
        assert value == expected.strip('"')
    elif expected in ("true", "false"):
        assert value is (expected == "true")
    else:
        rel = float(tol_pct) / 100 if tol_pct else 1e-6
        assert value == pytest.approx(float(expected), rel=rel)
