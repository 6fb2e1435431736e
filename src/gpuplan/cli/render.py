"""Rendering helpers shared by every command: JSON for scripts, rich tables for people."""

from __future__ import annotations

import json
import math
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

from gpuplan.api import to_jsonable

#: markup and emoji codes are off: every string printed (ids, paths, names from user files) is shown as written, so
#: a path like `x[/y]` can neither crash rich nor restyle the output. Style with `style=` instead.
console = Console(markup=False, emoji=False)
err_console = Console(stderr=True, markup=False, emoji=False)


def print_json(data: Any) -> None:
    """Write `data` (e.g. `result.to_dict()`) as indented JSON to stdout (no rich markup, no wrapping).
    While a calibration profile is applied, a dict gets its `calibration: {profile, knobs}` key."""
    import sys

    from gpuplan.interfaces.calibration_profile import calibration_block

    block = calibration_block()
    if block is not None and isinstance(data, dict) and "calibration" not in data:
        data = {**data, "calibration": block}
    # allow_nan=False: NaN/inf never reach the output as a quantity (to_jsonable maps them to null).
    sys.stdout.write(json.dumps(to_jsonable(data), indent=2, sort_keys=False, allow_nan=False) + "\n")


def table(
    title: str | None, columns: Iterable[str], rows: Iterable[Iterable[Any]], keep_whole: int = 0, **kwargs: Any
) -> Table:
    """A rich table, first column left-aligned, numbers right-aligned; the first `keep_whole`
    columns (ids) are never wrapped or truncated."""
    t = Table(title=title, **kwargs)
    cols = list(columns)
    for i, c in enumerate(cols):
        whole = i < keep_whole
        t.add_column(c, justify="left" if i == 0 else "right", no_wrap=whole, overflow="ignore" if whole else "fold")  # numbers wrap, never cut
    for row in rows:
        t.add_row(*[fmt(v) for v in row])
    return t


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
