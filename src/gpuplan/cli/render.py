"""Rendering shared by every command: JSON for scripts, tables for people, CSV / Markdown for both.

`--format table|md|csv|json` (cli/output_options.py adds it to every command with `--json`; `--json`
is the short form of `--format json`) picks how `console.print(table(...))` renders. The ONE
rendering function is `emit_table`; commands never branch on the format themselves:

- `table`: a rich table. It is never narrower than its cells: when stdout is not a terminal
  (piped, redirected) each row is one line at the table's natural width; on a narrow terminal the
  table is at least as wide as its longest word per column, so ids and numbers are never cut
  (the terminal wraps long lines instead).
- `md`: a GitHub pipe table (`| a | b |`), cells as shown in the table format, every column whole.
- `csv`: RFC 4180 rows (header first) with the raw values (full precision, empty for none);
  titles, notes and other text go to stderr so stdout is only CSV; a command printing several
  tables separates them by a blank line.
- `json`: the command prints its `--json` document (`print_json`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from typing import Any, Iterable

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from gpuplan.api import to_jsonable

#: `--format` values, the default first
FORMATS: tuple[str, ...] = ("table", "md", "csv", "json")
_FORMAT = ["table"]
_TABLES_EMITTED = [0]  # tables printed in this invocation (CSV blocks after the first start with a blank line)


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
    _TABLES_EMITTED[0] = 0


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

    def print_wide(self, table: Table) -> None:
        """A table at a width that cuts no cell (module docstring)."""
        measure = Measurement.get(self, self.options.update_width(1_000_000), table)
        needed = measure.maximum if not self.is_terminal else max(self.width, measure.minimum)
        old = self._width
        self._width = max(self.width, needed)
        try:
            super().print(table)
        finally:
            self._width = old


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
    title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]], keep_whole: int = 0, **kwargs: Any
) -> Table:
    """A table for `console.print`: first column left-aligned, numbers right-aligned; the first
    `keep_whole` columns (ids) are never wrapped. The raw values ride along for `--format csv`."""
    t = Table(title=title, **kwargs)
    cols = list(columns)
    for i, c in enumerate(cols):
        whole = i < keep_whole
        t.add_column(c, justify="left" if i == 0 else "right", no_wrap=whole, overflow="ignore" if whole else "fold")  # numbers wrap, never cut
    raw = [list(row) for row in rows]
    for row in raw:
        t.add_row(*[fmt(v) for v in row])
    t.gpuplan_raw = (cols, raw)  # type: ignore[attr-defined]
    return t


def _cells(t: Table) -> tuple[list[str], list[list[Any]]]:
    """(header, rows) of a table: the raw values when `table()` built it, else the cell text."""
    raw = getattr(t, "gpuplan_raw", None)
    if raw is not None:
        return raw
    header = [str(c.header) for c in t.columns]
    columns = [[str(cell) for cell in c._cells] for c in t.columns]
    return header, [list(r) for r in zip(*columns)]


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
    header, rows = _cells(t)
    title = str(t.title) if t.title else None
    _TABLES_EMITTED[0] += 1
    if fmt == "csv":
        if _TABLES_EMITTED[0] > 1:
            sys.stdout.write("\n")  # a blank line between the tables of one command
        if title:
            sys.stderr.write(f"# {title}\n")
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([_csv_value(v) for v in row] for row in rows)
        sys.stdout.write(buf.getvalue())
    elif fmt == "md":
        lines = [f"**{_md_cell(title)}**", ""] if title else []
        lines.append("| " + " | ".join(_md_cell(h) for h in header) + " |")
        lines.append("|" + "|".join(":---" if i == 0 else "---:" for i in range(len(header))) + "|")
        lines += ["| " + " | ".join(_md_cell(fmt_cell(v)) for v in row) + " |" for row in rows]
        sys.stdout.write("\n".join(lines) + "\n\n")
    else:
        console.print_wide(t)


def fmt_cell(value: Any) -> str:
    """A cell's text: strings as they are, values through `fmt`."""
    return value if isinstance(value, str) else fmt(value)


def fmt(value: Any, digits: int = 4) -> str:
    """Human formatting of a cell: None -> '-', floats to `digits` significant figures with thousands separators."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value == 0:
            return "0"
        if abs(value) >= 10 ** digits:
            return f"{value:,.0f}"
        return f"{value:,.{digits}g}" if abs(value) >= 1e-3 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
