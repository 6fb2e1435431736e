"""How a table is laid out for people (`--format table`): within MAX_TABLE_WIDTH columns by default.

A table built by `render.table()` keeps its raw cells in a `TableSpec`. Laid out at a width limit
(100 columns, or the terminal's width when that is narrower):

1. when its natural width (every row on one line) fits, it is printed as it is;
2. else its secondary columns (`table(..., secondary=[...])`: notes, sources, checks that the JSON and
   CSV carry anyway) are left out, in the order given, until it fits; a line after the table names them;
3. else the remaining cells wrap at spaces inside their columns (`column_widths`: each column gets
   its longest word, and the room left is shared in proportion to how much longer each column's
   longest line is). A cell is never cut and a word never broken: when even the longest words do
   not fit, the table is as wide as they need (the terminal wraps the line instead).

`--wide` prints every column, each row on one line at its natural width (the layout before this
limit). CSV and Markdown always carry every column (render.emit_table).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

#: the default width limit of a table, in terminal columns
MAX_TABLE_WIDTH = 100


@dataclass(frozen=True)
class TableSpec:
    """A table as a command declares it: raw cells (for CSV) and how to lay it out."""

    title: str | None
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    name: str = "main"  # what `--table NAME` picks
    main: bool = False  # the table `--format csv` writes when no --table is given (else the first printed)
    keep_whole: int = 0  # the first keep_whole columns (ids) never wrap
    secondary: tuple[str, ...] = ()  # columns left out first when the table is too wide, in this order
    kwargs: dict = field(default_factory=dict)  # rich Table options (box, show_header, ...)


def _cell_texts(spec: TableSpec, shown: Sequence[int], fmt: Callable[[Any], str]) -> list[list[str]]:
    return [[fmt(row[i]) if i < len(row) else "" for i in shown] for row in spec.rows]


def build(spec: TableSpec, shown: Sequence[int], fmt: Callable[[Any], str],
          widths: Sequence[int] | None = None) -> Table:
    """The rich Table of `spec` with the columns `shown` (indices): the first column and columns of text
    left-aligned, the others (numbers) right-aligned; the first `keep_whole` columns never wrap, the
    others wrap (fold), never cut; `widths`: each shown column's width (default: rich's own layout)."""
    t = Table(title=spec.title, **spec.kwargs)
    for k, i in enumerate(shown):
        whole = i < spec.keep_whole
        t.add_column(spec.columns[i], justify="left" if i == 0 or _is_text(spec, i) else "right", no_wrap=whole,
                     overflow="ignore" if whole else "fold", width=None if widths is None else widths[k])
    for cells in _cell_texts(spec, shown, fmt):
        t.add_row(*cells)
    return t


def _is_text(spec: TableSpec, i: int) -> bool:
    """A column of text: every value given is a string (a number or a missing value makes it numeric)."""
    values = [row[i] for row in spec.rows if i < len(row) and row[i] is not None]
    return bool(values) and all(isinstance(v, str) for v in values)


def column_widths(texts: Sequence[Sequence[str]], whole: Sequence[bool], room: int) -> list[int]:
    """Widths of columns holding `texts` (one list per column, header first) in `room` cells.

    Per column: `longest` = its longest line, `word` = its longest word (the whole line for a column
    kept whole). Every column gets at least `word`; what `room` leaves above the sum of those is shared
    in proportion to (longest - word), the largest remainders rounded up, and no column gets more than
    `longest`. When the words alone need more than `room`, the columns are exactly their words."""
    longest = [max((cell_len(line) for t in col for line in t.splitlines() or [""]), default=0) for col in texts]
    word = [lg if keep else max((cell_len(w) for t in col for w in t.split()), default=0)
            for col, lg, keep in zip(texts, longest, whole)]
    spare = room - sum(word)
    slack = [lg - w for lg, w in zip(longest, word)]
    if spare <= 0 or sum(slack) == 0:
        return word
    if spare >= sum(slack):
        return longest
    shares = [spare * s / sum(slack) for s in slack]
    widths = [w + int(x) for w, x in zip(word, shares)]
    left = spare - sum(int(x) for x in shares)
    for k in sorted(range(len(shares)), key=lambda k: shares[k] - int(shares[k]), reverse=True)[:left]:
        widths[k] += 1
    return widths


def _measure(console: Console, table: Table) -> Measurement:
    return Measurement.get(console, console.options.update_width(1_000_000), table)


def layout(console: Console, spec: TableSpec, fmt: Callable[[Any], str], *, limit: int,
           wide: bool) -> tuple[Table, int, list[str]]:
    """(table, width to print it at, names of the columns left out) under the rules of the module docstring."""
    shown = list(range(len(spec.columns)))
    t = build(spec, shown, fmt)
    m = _measure(console, t)
    if wide:
        return t, m.maximum, []
    hidden: list[str] = []
    for name in spec.secondary:
        if m.maximum <= limit:
            break
        if name in spec.columns and spec.columns.index(name) in shown and len(shown) > 1:
            shown.remove(spec.columns.index(name))
            hidden.append(name)
            t = build(spec, shown, fmt)
            m = _measure(console, t)
    if m.maximum <= limit:
        return t, m.maximum, hidden
    cells = _cell_texts(spec, shown, fmt)
    texts = [[spec.columns[i], *(row[k] for row in cells)] for k, i in enumerate(shown)]
    natural = [max((cell_len(line) for s in col for line in s.splitlines() or [""]), default=0) for col in texts]
    frame = m.maximum - sum(natural)  # borders and padding: what the table adds around its cells
    widths = column_widths(texts, [i < spec.keep_whole for i in shown], limit - frame)
    return build(spec, shown, fmt, widths), sum(widths) + frame, hidden


def width_of(console: Console, table: Table, *, limit: int, wide: bool) -> int:
    """The width to print a table not built by `render.table()` at (no spec: nothing to leave out)."""
    m = _measure(console, table)
    return m.maximum if wide else min(m.maximum, max(limit, m.minimum))


__all__ = ["MAX_TABLE_WIDTH", "TableSpec", "build", "layout", "width_of"]
