"""How the CLI reports an error: one line (or one JSON object), an exit code, no traceback.

Exit codes (documented in docs/cli.md):
  0  success (also: output pipe closed early, e.g. `| head`)
  1  internal error: a bug in gpuplan; rerun with --debug and report the traceback
  2  bad input (names the field and what is allowed) or an infeasible request (says why); also
     output that cannot be written (`> /dev/full`: no space left), one line on stderr
130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import traceback
from typing import Any, Iterator

from typer import Abort, Exit
from typer._click.exceptions import BadParameter, ClickException, NoArgsIsHelpError

from gpuplan.errors import GpuplanError, Infeasible, InputError

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class OutputClosed(Exception):
    """stdout was closed by its reader (EPIPE, `gpuplan ... | head`). Raised in place of the OSError so
    that typer, which turns an EPIPE into exit code 1, lets it through to `exit_on_error` (exit 0)."""


def one_line(text: str) -> str:
    """Collapse a multi-line message into one line."""
    parts = [p.strip() for p in str(text).splitlines() if p.strip()]
    return "; ".join(parts)


def _pydantic_payload(exc: Any) -> dict:
    errs = exc.errors(include_url=False)
    first = errs[0] if errs else {}
    field = ".".join(str(p) for p in first.get("loc", ())) or None
    ctx = first.get("ctx") or {}
    allowed = "; ".join(f"{k} {v}" for k, v in ctx.items() if k in ("gt", "ge", "lt", "le", "pattern", "expected")) or None
    msg = first.get("msg", str(exc))
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    title = getattr(exc, "title", "")
    where = f"{title}." if title else ""
    return {"field": field, "allowed": allowed,
            "message": one_line(f"{where}{field}: {msg}, got {_short(first.get('input'))}{more}")}


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_validation_error(exc: BaseException) -> bool:
    """Whether `exc` is a pydantic ValidationError (bad input to a spec), without importing pydantic:
    one can only have been raised once pydantic_core is loaded (`gpuplan --help` never loads it)."""
    core = sys.modules.get("pydantic_core")
    return core is not None and isinstance(exc, core.ValidationError)


def error_payload(exc: BaseException) -> dict:
    """The error object `{"field", "allowed", "message"}` for a user-facing error."""
    if is_validation_error(exc):
        return _pydantic_payload(exc)
    if isinstance(exc, InputError):
        return {"field": exc.field, "allowed": getattr(exc, "allowed", None), "message": one_line(str(exc))}
    if isinstance(exc, Infeasible):
        return {"field": getattr(exc, "field", None), "allowed": None, "message": one_line(str(exc))}
    if isinstance(exc, BadParameter):
        field = exc.param.opts[0] if exc.param is not None and getattr(exc.param, "opts", None) else exc.param_hint
        return {"field": field if isinstance(field, str) else None, "allowed": None,
                "message": one_line(exc.format_message())}
    if isinstance(exc, ClickException):
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        return {"field": None, "allowed": None, "message": one_line(exc.format_message()) + hint}
    return {"field": None, "allowed": None, "message": one_line(str(exc))}


def report(exc: BaseException, *, as_json: bool) -> None:
    """Print the error: JSON on stdout under --json, else `error: ...` on stderr."""
    payload = error_payload(exc)
    if as_json and _write_stdout(json.dumps({"error": payload}, indent=2) + "\n"):
        return
    sys.stderr.write(f"error: {payload['message']}\n")


def _write_stdout(text: str) -> bool:
    """Write and flush `text` on stdout; False (stdout pointed at /dev/null) when it cannot be
    written, so the caller says it on stderr instead."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    except (OSError, ValueError):
        _quiet_broken_pipe()
        return False


def _quiet_broken_pipe() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


#: errors of writing the output (stdout or a file) that are not a bug: the destination refused it
_OUTPUT_ERRNOS = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EROFS", "EBADF",
                                                              "EACCES", "EPERM", "ENXIO") if hasattr(errno, name))


def flush_stdout() -> None:
    """Flush stdout now, so a write error (`> /dev/full`) is raised inside `exit_on_error` and
    reported in one line, not at interpreter exit as a traceback."""
    sys.stdout.flush()


def _output_error(exc: OSError) -> None:
    """Stdout (or a file) could not be written: one line on stderr, exit 2; stdout is pointed at
    /dev/null so the interpreter's final flush does not fail again."""
    _quiet_broken_pipe()
    sys.stderr.write(f"error: cannot write the output: {exc.strerror or exc}\n")
    sys.exit(EXIT_BAD_INPUT)


@contextlib.contextmanager
def exit_on_error(*, as_json: bool, debug: bool) -> Iterator[None]:
    """Run a command; turn every exception into the exit code and message of the module doc."""
    try:
        yield
    except SystemExit:
        try:
            flush_stdout()
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                _quiet_broken_pipe()
                sys.exit(EXIT_OK)
            _output_error(exc)
        raise
    except Exit as exc:
        try:
            flush_stdout()
        except OSError as flush_exc:
            if flush_exc.errno == errno.EPIPE:
                _quiet_broken_pipe()
                sys.exit(EXIT_OK)
            _output_error(flush_exc)
        sys.exit(exc.exit_code)
    except NoArgsIsHelpError as exc:  # `gpuplan hw`: show the help, as click does
        exc.show()
        sys.exit(exc.exit_code)
    except (GpuplanError, ClickException) as exc:
        _bad_input(exc, as_json=as_json, debug=debug)
    except (BrokenPipeError, OutputClosed):
        _quiet_broken_pipe()
        sys.exit(EXIT_OK)
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            _quiet_broken_pipe()
            sys.exit(EXIT_OK)
        if exc.errno in _OUTPUT_ERRNOS:
            if debug:
                traceback.print_exc()
            _output_error(exc)
        _internal(exc, as_json=as_json, debug=debug)
    except (KeyboardInterrupt, Abort):
        sys.stderr.write("error: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:  # a bug: say so in one line, show the traceback under --debug
        if is_validation_error(exc):  # pydantic's (a ValueError): bad input to a spec
            _bad_input(exc, as_json=as_json, debug=debug)
        _internal(exc, as_json=as_json, debug=debug)


def _bad_input(exc: BaseException, *, as_json: bool, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    report(exc, as_json=as_json)
    sys.exit(EXIT_BAD_INPUT)


def _internal(exc: BaseException, *, as_json: bool, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    msg = one_line(f"internal error: {type(exc).__name__}: {exc}")
    hint = "" if debug else " (run with --debug or GPUPLAN_DEBUG=1 for the traceback, and report it)"
    if as_json:
        _write_stdout(json.dumps({"error": {"field": None, "allowed": None, "message": msg}}) + "\n")
    sys.stderr.write(msg[:300] + hint + "\n")
    sys.exit(EXIT_INTERNAL)
