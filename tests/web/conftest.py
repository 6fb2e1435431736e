"""Fixtures of the web tests: the app on a TestClient, and the CLI's --json for a command line."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
HOST, PORT = "127.0.0.1", 8000


@pytest.fixture(scope="session")
def client():
    from fastapi.testclient import TestClient

    from gpuplan.web.app import create_app

    return TestClient(create_app(HOST, PORT), base_url=f"http://{HOST}:{PORT}", raise_server_exceptions=False)


def cli(args: list[str]):
    """typer's CliRunner on `gpuplan ARGS` (the `gpuplan` word dropped)."""
    from typer.testing import CliRunner

    from gpuplan.cli.main import app

    return CliRunner().invoke(app, args)


def cli_json(command_line: str):
    """The JSON printed by a `gpuplan ... --json` line (as the page and the X-Gpuplan-Command header write it)."""
    words = shlex.split(command_line)
    assert words[0] == "gpuplan" and words[-1] == "--json", command_line
    res = cli(words[1:])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def drop_timing(data):
    """`train --json` reports the search's own wall time (search.elapsed_s): the one key that differs run to run."""
    if isinstance(data, dict) and isinstance(data.get("search"), dict):
        data = {**data, "search": {k: v for k, v in data["search"].items() if k != "elapsed_s"}}
    return data
