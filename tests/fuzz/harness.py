"""Shared checks of the fuzz suite: run one CLI invocation in-process and judge it."""

from __future__ import annotations

import json
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import typer  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from cli_cases import BASE, SKIP_OPTIONS  # noqa: E402

#: a case that runs longer than this hangs (generous: this is not a speed test)
CASE_TIMEOUT_S = 30


class Hang(Exception):
    pass


@contextmanager
def time_limit(seconds: int):
    """SIGALRM-based limit for one in-process case (main thread only; skipped elsewhere)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def _raise(signum, frame):
        raise Hang(f"case ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def app():
    from gpuplan.cli.main import app as gpuplan_app
    # the CLI imports the API lazily (issue 35): import what the commands run here, so that the
    # CASE_TIMEOUT_S alarm times each command's work, not a first command's imports
    from gpuplan.interfaces.api import planning, serving, training  # noqa: F401

    return gpuplan_app


def command_options() -> list[tuple[tuple[str, ...], str]]:
    """(command path, option) for every option of every command in BASE that takes a value."""
    root = typer.main.get_command(app())
    out = []
    for path in BASE:
        cmd = root
        for part in path:
            cmd = cmd.commands[part]
        for p in cmd.params:
            opts = [o for o in getattr(p, "opts", []) if o.startswith("--")]
            if not opts or opts[0] in SKIP_OPTIONS or getattr(p, "is_flag", False):
                continue
            if getattr(p.type_descriptor, "annotation", None) is bool:
                continue
            out.append((path, opts[0]))
    return out


def _no_nan(text: str):
    def bad(name):
        raise AssertionError(f"JSON output holds {name}")

    return json.loads(text, parse_constant=bad)


def judge(args: list[str], result) -> str | None:
    """Why this run is a failure, or None. Rules: exit 0 or 2, no traceback, no internal error,
    JSON stdout (when --json and exit 0) without NaN/Infinity; a JSON error object on exit 2."""
    out = result.output or ""
    if result.exit_code not in (0, 2):
        exc = result.exception
        if "CPUDispatcher" in out:  # the time limit's signal fired inside a numba-compiled loop
            return f"hang: ran past {CASE_TIMEOUT_S} s"
        return f"exit {result.exit_code}: {type(exc).__name__ if exc else ''} {out[-300:]!r}"
    if "Traceback (most recent call last)" in out or "internal error" in out:
        return f"traceback/internal error: {out[-300:]!r}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return f"exception escaped: {type(result.exception).__name__}: {result.exception}"
    if "--json" in args:
        stdout = result.stdout
        if result.exit_code == 0 and stdout.strip().startswith(("{", "[")):
            try:
                _no_nan(stdout)
            except (AssertionError, ValueError) as exc:
                return f"bad JSON: {exc}"
        if result.exit_code == 2 and stdout.strip():
            try:
                data = _no_nan(stdout)
            except (AssertionError, ValueError) as exc:
                return f"bad JSON error: {exc}: {stdout[-200:]!r}"
            if not isinstance(data, dict) or not ("error" in data or "feasible" in data):
                return f"exit 2 without a JSON error object: {stdout[-200:]!r}"
    return None


def run_case(args: list[str]):
    """Invoke the CLI in-process with a time limit; returns the CliRunner result."""
    runner = CliRunner()
    with time_limit(CASE_TIMEOUT_S):
        return runner.invoke(app(), args)


def with_option(path: tuple[str, ...], option: str, value: str) -> list[str]:
    """BASE args of `path` with `option VALUE` replacing any default given there, plus --json."""
    base = list(BASE[path])
    if option in base:
        i = base.index(option)
        del base[i:i + 2]
    return [*path, *base, option, value, "--json"]
