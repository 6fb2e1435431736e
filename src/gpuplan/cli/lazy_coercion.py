"""Option values coerced without pydantic where coercion cannot change them.

typer (>= 0.2x) coerces every parameter value of the invoked command and of the root group through
a pydantic TypeAdapter, built on first use (typer/_coercion.py `build_runtime_param`): importing
pydantic and building the adapters costs about 0.1 CPU-s on a 2-core machine, paid even by
`gpuplan train --help` (the root's options are coerced before the subcommand reads `--help`).

`defer_coercion(root)` gives every typer parameter of the tree a runtime parameter that builds
typer's own adapter only for a value that needs it. A value passes through unchanged, as the
adapter would return it, when it is
- None (typer's `RuntimeParam.coerce` returns None or () before any adapter is consulted), or
- exactly a `str`, `int` or `float` whose annotation is that same type, with no parser, no path
  checks, no choices and no range (the adapters of typer/_adapters.py for those annotations
  return such a value as it is: `str(value)`, pydantic's int and float validators), or
- a member of the Enum that is its annotation, with no parser (an enum option's default: typer's
  choice adapter, `_build_choice_adapter`, returns a value that `is` one of the enum's members as
  it is, typer/_param_types.py `coerce_cli_choice`).
Every other value (text typed on the command line for a number or an enum, a list, a ranged
option) goes through typer's adapter, so errors and conversions stay typer's.
If this typer has no such hook (`_runtime_param`, `type_descriptor`), nothing is changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

try:  # typer's private coercion layer (typer/_coercion.py); absent in older releases
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # pragma: no cover - older typer coerces through click types, nothing to defer
    RuntimeParam = None  # type: ignore[assignment,misc]


def _passes_through(descriptor: Any, value: Any) -> bool:
    annotation = descriptor.annotation
    info = descriptor.parameter_info
    if isinstance(annotation, type) and issubclass(annotation, Enum) and type(value) is annotation:
        return info.parser is None
    if annotation not in (str, int, float) or type(value) is not annotation:
        return False
    return (info.parser is None and not descriptor.is_path and not descriptor.is_choice
            and not descriptor.is_ranged and not getattr(info, "clamp", False))


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class DeferredRuntimeParam(RuntimeParam):
        """typer's runtime parameter, built when a value first needs it (module docstring)."""

        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if _passes_through(self.descriptor, value):
                return value
            real = build_runtime_param(self.descriptor)
            param._runtime_param = real  # later values go straight to typer's adapter
            return real._coerce_value(value, param=param, ctx=ctx)


def _defer(param: Any) -> bool:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "_runtime_param", False) is not None:
        return False
    param._runtime_param = DeferredRuntimeParam(parameter_info=descriptor.parameter_info,
                                                annotation=descriptor.annotation, descriptor=descriptor)
    return True


def _deferring_help_option(get_help_option):
    """A command's `get_help_option`, whose option (made on first use, per command) is deferred too."""
    def wrapper(ctx):
        option = get_help_option(ctx)
        if option is not None:
            _defer(option)
        return option

    return wrapper


def defer_coercion(root: Any) -> int:
    """Install `DeferredRuntimeParam` on every typer parameter of the command tree, and on each
    command's `--help` option when it is made; the count of parameters deferred now."""
    if RuntimeParam is None:
        return 0
    count = 0
    stack = [root]
    while stack:
        cmd = stack.pop()
        stack.extend(getattr(cmd, "commands", {}).values())
        count += sum(_defer(param) for param in getattr(cmd, "params", ()))
        if hasattr(cmd, "get_help_option") and "get_help_option" not in vars(cmd):
            cmd.get_help_option = _deferring_help_option(cmd.get_help_option)
    return count
