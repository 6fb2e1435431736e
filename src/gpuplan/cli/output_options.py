"""Options every command of a kind shares, added once to the click tree by the root group (like the
numeric guard of cli/params.py), so no command repeats them:

- `--format table|md|csv|json` on every command that has `--json` (cli/render.py renders; `--json`
  stays as the short form of `--format json`). Where a command already uses `--format` for its own
  purpose (`formats encode/decode --format e4m3`) the option is spelled `--output-format` only;
  `--output-format` works everywhere.
- `--table NAME` (print only that table; under csv, the one table written instead of the main one)
  and `--wide` (tables show every column, each row on one line, instead of fitting 100 columns) on
  the same commands (cli/table_layout.py). `--table` with JSON output is refused: the JSON holds all.
- `--memory-headroom FRACTION` on every command whose answer depends on what fits in GPU memory
  (`MEMORY_COMMANDS`): the fraction of each GPU's memory kept free; the command runs with the knob
  `memory.usable_fraction` = 1 - FRACTION (gpuplan.workloads.memory_headroom; default headroom
  0.10). `--set usable_memory_fraction=X` on the commands that take `--set` does the same.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

import typer

from gpuplan.cli.render import FORMATS, output_format, set_output_format, set_table_choice, set_wide
from gpuplan.errors import InputError

#: command paths (below the root) whose answers are memory-feasibility questions
MEMORY_COMMANDS: frozenset[tuple[str, ...]] = frozenset({
    ("train",), ("plan",), ("fit", "train"), ("fit", "max-batch"), ("fit", "max-seq"), ("fit", "min-gpus"),
    ("serve", "run"), ("serve", "plan"), ("serve", "frontier"),
})  # not `sweep run`: its workers are spawned processes, which do not inherit a knob scope


def _format_callback(value: Optional[str]) -> Optional[str]:
    if value is not None:
        set_output_format(value.strip().lower())
    return value


def _wide_callback(value: bool) -> bool:
    if value:
        set_wide(True)
    return value


def _table_callback(value: Optional[str]) -> Optional[str]:
    if value is not None:
        if not value.strip():
            raise InputError("--table: must name a table of the command, got ''", field="--table")
        set_table_choice(value)
    return value


def _headroom_callback(ctx: typer.Context, value: Optional[float]) -> Optional[float]:
    if value is not None:
        from gpuplan.api import memory_headroom

        ctx.with_resource(memory_headroom(value, field="--memory-headroom"))
    return value


def _templates() -> dict[str, Any]:
    """The shared options as click parameters, built once by typer from these signatures."""
    from typer.main import get_command

    def params_of(fn) -> list:
        t = typer.Typer()
        t.command()(fn)
        return get_command(t).params

    help_fmt = f"Output: {', '.join(FORMATS)} (csv/md: every column whole; --json = --format json)."

    def both(output_format: Optional[str] = typer.Option(
            None, "--format", "--output-format", metavar="|".join(FORMATS), is_eager=True, expose_value=False,
            callback=_format_callback, help=help_fmt)) -> None: ...

    def long_only(output_format: Optional[str] = typer.Option(
            None, "--output-format", metavar="|".join(FORMATS), is_eager=True, expose_value=False,
            callback=_format_callback, help=help_fmt)) -> None: ...

    def headroom(memory_headroom: Optional[float] = typer.Option(
            None, "--memory-headroom", metavar="FRACTION", expose_value=False, callback=_headroom_callback,
            help="Fraction of each GPU's memory kept free (CUDA context, NCCL, allocator fragmentation); "
                 "default 0.10, i.e. plans use at most 90%. Same as --set usable_memory_fraction=1-FRACTION "
                 "where --set exists.")) -> None: ...

    def wide(wide: bool = typer.Option(
            False, "--wide", expose_value=False, callback=_wide_callback,
            help="Tables show every column, each row on one line (default: fit 100 columns).")) -> None: ...

    def table_choice(table: Optional[str] = typer.Option(
            None, "--table", metavar="NAME", expose_value=False, callback=_table_callback,
            help="Print only the table NAME (with --format csv: instead of the main one); "
                 "an unknown NAME lists the command's tables.")) -> None: ...

    return {"both": params_of(both)[0], "long_only": params_of(long_only)[0], "headroom": params_of(headroom)[0],
            "wide": params_of(wide)[0], "table": params_of(table_choice)[0]}


def _opts(cmd: Any) -> set[str]:
    return {o for p in getattr(cmd, "params", []) for o in getattr(p, "opts", [])}


def _wrap_json_flag(param: Any) -> None:
    """`--json` also answers True under `--format json`, and sets the format when given."""
    if getattr(param, "_gpuplan_json", False):
        return
    original = param.callback

    def callback(ctx: Any, p: Any, value: Any) -> Any:
        if value:
            set_output_format("json")
        value = bool(value) or output_format() == "json"
        return original(ctx, p, value) if original is not None else value

    param.callback = callback
    param._gpuplan_json = True


def add_shared_options(root: Any) -> None:
    """Add `--format` and `--memory-headroom` where they belong (module docstring); idempotent."""
    templates = _templates()
    stack: list[tuple[tuple[str, ...], Any]] = [((), root)]
    while stack:
        path, cmd = stack.pop()
        subs = getattr(cmd, "commands", None)
        if subs:
            stack.extend(((*path, name), sub) for name, sub in subs.items())
            continue
        opts = _opts(cmd)
        json_params = [p for p in cmd.params if "--json" in getattr(p, "opts", [])]
        if json_params and "--output-format" not in opts:
            _wrap_json_flag(json_params[0])
            template = templates["long_only" if "--format" in opts else "both"]
            cmd.params.append(copy.copy(template))
            cmd.params += [copy.copy(templates[k]) for k, flag in (("wide", "--wide"), ("table", "--table"))
                           if flag not in opts]
        if path in MEMORY_COMMANDS and "--memory-headroom" not in opts:
            cmd.params.append(copy.copy(templates["headroom"]))


def refuse_table_with_json(argv: list[str]) -> None:
    """`--table NAME` picks one table of the people's output; with JSON output (the whole document) it is
    an error, said before the command runs."""
    if wants_json(argv) and any(a == "--table" or a.startswith("--table=") for a in argv):
        raise InputError("--table: picks one table of --format table|md|csv; the JSON output holds every table",
                         field="--table")


def wants_json(argv: list[str]) -> bool:
    """True when the command line asks for JSON output (`--json`, `--format json`, `--output-format=json`),
    so that an error is reported as the JSON error object too."""
    if "--json" in argv:
        return True
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name in ("--format", "--output-format"):
            value = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            if value.strip().lower() == "json":
                return True
    return False
