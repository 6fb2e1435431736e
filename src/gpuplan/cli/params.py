"""Numeric CLI options checked at the boundary, for every command at once.

`guard_numeric_options(command)` walks a click command tree (the root group calls it once) and
wraps every int / float option and argument with a check from gpuplan.validation_rules:

The rules themselves (`POSITIVE`, `CAPS`, `NEGATIVE_ALLOWED`, `check_option`) live in
gpuplan.validation_rules, so gpuplan.api applies the same ones, with the same messages, to its
keyword arguments:

- every number is finite (NaN and inf are refused: `x <= 0` is False for NaN);
- every integer fits in int64;
- no number is negative, unless the option is in `NEGATIVE_ALLOWED`;
- an option in `POSITIVE` must be > 0 (it divides something, or counts things that must exist);
- an option in `CAPS` has an upper bound, stated with its reason;
- the text given is ASCII without underscores (`--gpus １６`, `--gpus ٣` and `--nodes 1_6` are
  refused: Python's and pydantic's number parsers accept other scripts' digits and underscores).

Options are matched by their long name, so a command adopts the rules by naming its option the
way the others do; a new rule is one line here. A command that needs its own check can use
`number_callback(gt=..., le=...)` as a typer `callback=`.

The message is one line naming the option and what is allowed:
`--pue: must be a finite number > 0, got nan`.
"""

from __future__ import annotations

import typing
from typing import Any, Callable

from gpuplan.errors import InputError
from gpuplan.validation_rules import CAPS, NEGATIVE_ALLOWED, POSITIVE, check_number, check_option, show  # noqa: F401 - re-exported
from gpuplan.validation_rules import MAX_NUMBER_CHARS


def _option_name(param: Any) -> str:
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return opts[0] if opts else (getattr(param, "opts", None) or [param.name])[0]


def _numeric_kind(param: Any) -> type | None:
    desc = getattr(param, "type_descriptor", None)
    ann = getattr(desc, "annotation", None)
    if typing.get_origin(ann) in (list, tuple):
        args = [a for a in typing.get_args(ann) if a is not Ellipsis]
        ann = args[0] if len(set(args)) == 1 else None
    if ann is bool:
        return None
    return ann if ann in (int, float) else None


def number_callback(*, gt: float | None = None, ge: float | None = None, le: float | None = None,
                    lt: float | None = None, integer: bool = False) -> Callable:
    """A typer `callback=` checking one numeric option: finite, int64 when `integer`, in range."""

    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return value
        return check_number(value, _option_name(param), gt=gt, ge=ge, le=le, lt=lt, integer=integer)

    return callback


def _wrap(param: Any, kind: type) -> None:
    if getattr(param, "_gpuplan_guarded", False):
        return
    name = _option_name(param)
    original = param.callback
    integer = kind is int

    def guarded(ctx: Any, p: Any, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            value = type(value)(check_option(name, v, integer) for v in value)
        else:
            value = check_option(name, value, integer)
        return original(ctx, p, value) if original is not None else value

    param.callback = guarded
    original_process = param.process_value

    def ascii_only(ctx: Any, value: Any) -> Any:
        for raw in value if isinstance(value, (list, tuple)) else (value,):
            # the text rules of parse_number: ASCII digits, no underscores, at most MAX_NUMBER_CHARS characters
            if isinstance(raw, str) and (not raw.isascii() or "_" in raw or len(raw.strip()) > MAX_NUMBER_CHARS):
                allowed = f"{'an integer' if integer else 'a number'} written with ASCII digits 0-9 " \
                          f"(at most {MAX_NUMBER_CHARS} characters)"
                raise InputError(f"{name}: must be {allowed}, got {show(raw)}", field=name, allowed=allowed)
        return original_process(ctx, value)

    param.process_value = ascii_only
    param._gpuplan_guarded = True


def guard_numeric_options(command: Any) -> None:
    """Wrap every numeric option of `command` and its subcommands (idempotent)."""
    stack = [command]
    while stack:
        cmd = stack.pop()
        for param in getattr(cmd, "params", []):
            kind = _numeric_kind(param)
            if kind is not None:
                _wrap(param, kind)
        stack.extend(getattr(cmd, "commands", {}).values())
