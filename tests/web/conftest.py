"""Fixtures of the web tests: the app on a TestClient, the CLI's --json for a command line, and the
Chromium the browser tests drive (or why they skip)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
HOST, PORT = "127.0.0.1", 8000

#: where a Chromium is looked for, first found wins: $GPUPLAN_CHROMIUM, then `chromium` /
#: `chromium-browser` on PATH (Debian's package, what `.ci/run` installs), then a browser that
#: `playwright install chromium` downloaded ($PLAYWRIGHT_BROWSERS_PATH or ~/.cache/ms-playwright)
CHROMIUM_NAMES = ("chromium", "chromium-browser")


def find_chromium() -> Path | None:
    """A Chromium executable on this machine, or None (the order of CHROMIUM_NAMES' comment)."""
    candidates = [os.environ.get("GPUPLAN_CHROMIUM")] + [shutil.which(n) for n in CHROMIUM_NAMES]
    cache = Path(os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache" / "ms-playwright")
    candidates += sorted(str(p) for p in cache.glob("chromium-*/chrome-linux*/chrome"))
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    return None


def in_ci() -> bool:
    """CI sets CI=true (GitHub Actions, GitLab, `.ci/run`): there a missing browser is a failure."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def chromium_or_skip() -> Path:
    """The Chromium to drive; without one (or without playwright) the browser tests skip with one line,
    except under CI=true, where they fail."""
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "playwright is not installed (pip install -e '.[test]')"
    path = find_chromium()
    if reason is None and path is None:
        reason = ("no Chromium found (apt-get install chromium, `playwright install chromium`, "
                  "or GPUPLAN_CHROMIUM=/path/to/chrome)")
    if reason is not None:
        if in_ci():
            pytest.fail(f"{reason}; CI=true requires the browser tests to run", pytrace=False)
        pytest.skip(reason)
    return path


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
