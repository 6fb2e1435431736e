"""Rendering shared by every command: JSON for scripts, tables for people, CSV / Markdown for both.

`--format table|md|csv|json` (cli/output_options.py adds it to every command with `--json`; `--json`
is the short form of `--format json`) picks how `console.print(table(...))` renders. The ONE
rendering function is `emit_table`; commands never branch on the format themselves:

- `table`: a rich table within 100 columns (or the terminal's width when narrower): secondary
  columns left out, then cells wrapped at spaces, never a cell cut or a word broken
  (cli/table_layout.py); `--wide` prints every column with each row on one line.
- `md`: a GitHub pipe table (`| a | b |`), cells as shown in the table format, every column whole.
- `csv`: ONE table, RFC 4180 rows (header first) with the raw values (full precision, empty for
  none): the command's main table (`table(..., main=True)`, else the first it prints), or the one
  `--table NAME` picks; its name, title and the other tables' names go to stderr, as do notes and
  other text, so stdout is only CSV. The table is written when the command ends (`finish_invocation`).
- `json`: the command prints its `--json` document (`print_json`).

Every table has a name (`table(..., name=...)`, "main" when a command prints one table); `--table
NAME` prints only that table in every format but json, and an unknown NAME is an error listing
the names of the tables the command printed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

from gpuplan.jsonable import to_jsonable
from gpuplan.cli.table_layout import MAX_TABLE_WIDTH, TableSpec, build, layout, width_of
from gpuplan.errors import InputError

#: `--format` values, the default first
FORMATS: tuple[str, ...] = ("table", "md", "csv", "json")
_FORMAT = ["table"]


class _Invocation:
    """What this invocation asked of its tables (`--wide`, `--table NAME`) and what it printed."""

    def __init__(self) -> None:
        self.wide = False
        self.table: str | None = None
        self.seen: list[str] = []  # names of the tables the command printed, in order
        self.csv: list[TableSpec] = []  # --format csv: the tables, written at the end (finish_invocation)


_RUN = [_Invocation()]


def output_format() -> str:
    """The format of the command running now (`--format`; `table` when not given)."""
    return _FORMAT[0]


def set_output_format(name: str) -> None:
    """Set the format of this invocation (the `--format` / `--json` option callbacks; the root
    command resets it to `table` before each invocation)."""
    if name not in FORMATS:
        from gpuplan.errors import InputError

        raise InputError(f"--format: must be one of {', '.join(FORMATS)}, got {name!r}", field="--format",
                         allowed=", ".join(FORMATS))
    _FORMAT[0] = name


def begin_invocation() -> None:
    """Reset the output state before a command line runs (an earlier in-process one may have set it)."""
    _FORMAT[0] = "table"
    _RUN[0] = _Invocation()


def set_wide(wide: bool) -> None:
    """`--wide`: tables show every column, each row on one line."""
    _RUN[0].wide = bool(wide)


def set_table_choice(name: str | None) -> None:
    """`--table NAME`: print only the table of that name."""
    _RUN[0].table = None if name is None else name.strip()


def finish_invocation() -> None:
    """After a command ran: write the one CSV table, and refuse a `--table NAME` that named no table."""
    run = _RUN[0]
    _RUN[0] = _Invocation()  # written once, even when this raises
    names = list(dict.fromkeys(run.seen))
    if run.table is not None and run.table not in names and output_format() != "json":
        listed = ", ".join(names) if names else "none: this command prints no table"
        raise InputError(f"--table: must name a table of this command ({listed}), got {run.table!r}",
                         field="--table", allowed=", ".join(names) or None)
    if output_format() == "csv" and run.csv:
        spec = next((t for t in run.csv if t.main), run.csv[0]) if run.table is None else \
            next(t for t in run.csv if t.name == run.table)
        _write_csv(spec, [n for n in names if n != spec.name])


class _FormatConsole(Console):
    """A rich Console whose `print` renders a Table in the current `--format` (`emit_table`);
    under `csv` any other text goes to stderr (stdout stays CSV)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:  # noqa: A003 - rich's name
        if self.stderr:
            return super().print(*objects, **kwargs)
        fmt = output_format()
        if not self.is_terminal:  # piped / redirected: a line of text stays one line (grep, diff)
            kwargs.setdefault("soft_wrap", True)
        if not any(isinstance(o, Table) for o in objects):
            if fmt == "csv":
                return err_console.print(*objects, **kwargs)
            return super().print(*objects, **kwargs)
        for obj in objects:
            if isinstance(obj, Table):
                emit_table(obj, fmt)
            elif fmt == "csv":
                err_console.print(obj, **kwargs)
            else:
                super().print(obj, **kwargs)

    def print_table(self, table: Table) -> None:
        """A table within the width limit, or every column with `--wide` (cli/table_layout.py)."""
        limit = min(MAX_TABLE_WIDTH, self.width) if self.is_terminal else MAX_TABLE_WIDTH
        spec = getattr(table, "gpuplan_spec", None)
        hidden: list[str] = []
        if spec is not None:
            table, width, hidden = layout(self, spec, fmt_cell, limit=limit, wide=_RUN[0].wide)
        else:
            width = width_of(self, table, limit=limit, wide=_RUN[0].wide)
        old = self._width
        self._width = max(width, 1)
        try:
            super().print(table)
        finally:
            self._width = old
        if hidden:
            super().print(f"(not shown: {', '.join(hidden)}; --wide shows every column)", soft_wrap=True)

    def on_broken_pipe(self) -> None:
        """stdout closed early (`gpuplan ... | head`): the CLI's error path exits 0 quietly (cli/errors.py);
        rich's own handler would exit 1."""
        raise BrokenPipeError


#: markup and emoji codes are off: every string printed (ids, paths, names from user files) is shown as written, so
#: a path like `x[/y]` can neither crash rich nor restyle the output. Style with `style=` instead.
console = _FormatConsole(markup=False, emoji=False)
err_console = Console(stderr=True, markup=False, emoji=False)


def echo(text: str = "") -> None:
    """A line of text for people: stdout, or stderr under `--format csv` (stdout stays CSV)."""
    stream = sys.stderr if output_format() == "csv" else sys.stdout
    stream.write(f"{text}\n")


def print_json(data: Any) -> None:
    """Write `data` (e.g. `result.to_dict()`) as indented JSON to stdout (no rich markup, no wrapping).
    While a calibration profile is applied, a dict gets its `calibration: {profile, knobs}` key."""
    from gpuplan.interfaces.calibration.profile import calibration_block

    block = calibration_block()
    if block is not None and isinstance(data, dict) and "calibration" not in data:
        data = {**data, "calibration": block}
    # allow_nan=False: NaN/inf never reach the output as a quantity (to_jsonable maps them to null).
    sys.stdout.write(json.dumps(to_jsonable(data), indent=2, sort_keys=False, allow_nan=False) + "\n")


def table(
    title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]], keep_whole: int = 0, *,
    name: str = "main", main: bool = False, secondary: Iterable[str] = (), **kwargs: Any
) -> Table:
    """A table for `console.print`: first column left-aligned, numbers right-aligned; the first
    `keep_whole` columns (ids) are never wrapped. `name` is what `--table NAME` picks (a command
    printing several tables names each); `main`: the one `--format csv` writes by default;
    `secondary`: columns left out first when the table is wider than the limit (cli/table_layout.py).
    The raw values ride along for `--format csv`."""
    spec = TableSpec(title=title, columns=tuple(columns), rows=tuple(tuple(r) for r in rows), name=name, main=main,
                     keep_whole=keep_whole, secondary=tuple(secondary), kwargs=dict(kwargs))
    t = build(spec, range(len(spec.columns)), fmt_cell)
    t.gpuplan_spec = spec  # type: ignore[attr-defined]
    return t


def _spec_of(t: Table) -> TableSpec:
    """The spec of a table: the raw values when `table()` built it, else the cell text."""
    spec = getattr(t, "gpuplan_spec", None)
    if spec is not None:
        return spec
    header = tuple(str(c.header) for c in t.columns)
    columns = [[str(cell) for cell in c._cells] for c in t.columns]
    return TableSpec(title=str(t.title) if t.title else None, columns=header, rows=tuple(zip(*columns)))


def _write_csv(spec: TableSpec, others: list[str]) -> None:
    """One table as CSV on stdout; its name and title, and the other tables' names, on stderr."""
    title = f": {spec.title}" if spec.title else ""
    more = f" (other tables: {', '.join(others)}; --table NAME)" if others else ""
    sys.stderr.write(f"# {spec.name}{title}{more}\n")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(spec.columns)
    writer.writerows([_csv_value(v) for v in row] for row in spec.rows)
    sys.stdout.write(buf.getvalue())


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    if hasattr(value, "value") and not isinstance(value, (int, str)):  # an Enum
        return value.value
    return value


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def emit_table(t: Table, fmt: str | None = None) -> None:
    """Print one table in `fmt` (default: the current `--format`); see the module docstring."""
    fmt = fmt or output_format()
    spec = _spec_of(t)
    run = _RUN[0]
    run.seen.append(spec.name)
    if run.table is not None and spec.name != run.table:
        return  # --table NAME: only that table
    header, rows, title = spec.columns, spec.rows, spec.title
    if fmt == "csv":
        run.csv.append(spec)  # one table is written when the command ends (finish_invocation)
    elif fmt == "md":
        lines = [f"**{_md_cell(title)}**", ""] if title else []
        lines.append("| " + " | ".join(_md_cell(h) for h in header) + " |")
        lines.append("|" + "|".join(":---" if i == 0 else "---:" for i in range(len(header))) + "|")
        lines += ["| " + " | ".join(_md_cell(fmt_cell(v)) for v in row) + " |" for row in rows]
        sys.stdout.write("\n".join(lines) + "\n\n")
    else:
        console.print_table(t)


def fmt_cell(value: Any) -> str:
    """A cell's text: strings as they are, values through `fmt`."""
    return value if isinstance(value, str) else fmt(value)


def fmt(value: Any, digits: int = 4) -> str:
    """Human formatting of a cell: None -> '-', floats to `digits` significant figures with thousands
    separators (from 1e15 up in exponent form)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value == 0:
            return "0"
        if abs(value) >= 1e15:  # beyond a quadrillion, digits stop being readable: 3.403e+38
            return f"{value:.{digits}g}"
        if abs(value) >= 10 ** digits:
            return f"{value:,.0f}"
        return f"{value:,.{digits}g}" if abs(value) >= 1e-3 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
