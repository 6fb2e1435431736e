"""Typed exceptions. Library code raises these; the CLI turns them into one-line messages.

- `InputError`: the user gave something invalid (unknown id, malformed file, impossible
  parallelism). The message names the field and what is allowed. CLI exit code 2.
- `Infeasible`: the input is valid but the plan cannot run (does not fit in memory, degrees do
  not divide). Searches catch it; a single-plan command reports it (exit code 2 as well).
"""

from __future__ import annotations


class GpuplanError(Exception):
    """Base of every error gpuplan raises on purpose."""


class InputError(GpuplanError, ValueError):
    """Bad input. `field` names what was wrong; the message says what is allowed; `allowed`
    (optional) is that rule alone, for the JSON error object `{"error": {field, allowed, message}}`."""

    def __init__(self, message: str, *, field: str | None = None, allowed: str | None = None):
        super().__init__(message)
        self.field = field
        self.allowed = allowed


class UnknownIdError(InputError, KeyError):
    """An id that is not in a catalog; the message lists the closest known ids."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0] if self.args else ""


class Infeasible(GpuplanError):
    """A valid request that cannot be satisfied (e.g. the model does not fit)."""


def closest_ids(wanted: str, known: list[str], n: int = 3) -> list[str]:
    """The `n` known ids closest to `wanted` (difflib ratio), for 'did you mean' messages."""
    import difflib

    hits = difflib.get_close_matches(wanted.lower(), known, n=n, cutoff=0.3)
    if not hits:
        hits = [k for k in known if wanted.lower()[:3] in k][:n]
    return hits


def unknown_id(kind: str, wanted: str, known: list[str]) -> UnknownIdError:
    """Build the standard unknown-id error: `unknown GPU 'h10': closest: h100-sxm5-80gb, ...`."""
    shown = wanted if wanted.isprintable() else wanted.encode("unicode_escape", "backslashreplace").decode("ascii")
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    close = closest_ids(wanted[:100], known)  # difflib is quadratic in the length: an id is short
    hint = f"; closest: {', '.join(close)}" if close else ""
    return UnknownIdError(f"unknown {kind} '{shown}'{hint} (see `gpuplan {kind_cmd(kind)} list`)", field=kind)


def kind_cmd(kind: str) -> str:
    return {"GPU": "hw", "system": "systems", "interconnect": "hw interconnects", "model": "model"}.get(kind, kind)
