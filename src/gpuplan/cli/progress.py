"""The one progress bar of the CLI: rich.progress on stderr, for work that can exceed a second.

    with progress_bar("validate rows") as bar:      # bar is None when no bar may be shown
        api.validate(file, progress=bar)

Shown only when stderr is a terminal, the output is not JSON (`--json` / `--format json`), and the
work is still running after `delay_s` (1 s), so quick commands and scripts never see it; it is
transient (erased when done) and never touches stdout. The callback takes any of the shapes the
workloads report: `(stage, fraction)`, `(done, total)` or `(stage, done, total)`.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator

from gpuplan.cli.render import err_console, output_format


def bar_allowed() -> bool:
    """A bar may be drawn: stderr is a terminal and the output is not JSON."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and output_format() != "json"


class ProgressBar:
    """A progress callback drawing a rich bar on stderr once the work has run `delay_s` (module doc)."""

    def __init__(self, label: str, delay_s: float = 1.0):
        self.label = label
        self.delay_s = delay_s
        self._t0 = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None

    def __call__(self, *args: Any) -> None:
        stage, fraction = self._parse(args)
        if self._bar is None:
            if time.perf_counter() - self._t0 < self.delay_s:
                return
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                                 TimeElapsedColumn(), console=err_console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=1.0)
        desc = f"{self.label}: {stage}" if stage else self.label
        self._bar.update(self._task, completed=min(1.0, max(0.0, fraction)), description=desc)

    @staticmethod
    def _parse(args: tuple) -> tuple[str, float]:
        if len(args) == 3:  # (stage, done, total)
            stage, done, total = args
            return str(stage), done / total if total else 0.0
        if len(args) == 2 and isinstance(args[0], str):  # (stage, fraction)
            return args[0], float(args[1])
        if len(args) == 2:  # (done, total)
            done, total = args
            return f"{done:,} of {total:,}", done / total if total else 0.0
        return "", 0.0

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


@contextmanager
def progress_bar(label: str, delay_s: float = 1.0) -> Iterator[ProgressBar | None]:
    """A `ProgressBar` for the block, or None where no bar may be shown (`bar_allowed`)."""
    if not bar_allowed():
        yield None
        return
    bar = ProgressBar(label, delay_s)
    try:
        yield bar
    finally:
        bar.close()
