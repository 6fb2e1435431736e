"""The DeepSpeed release of a training.csv row (specs.execution.DeepSpeedRelease), read from the
row's own facts, the same rule for every row:

1. notes that state a DeepSpeed version ("DeepSpeed v0.5.8", "deepspeed==0.14.2", "DeepSpeed
   version 0.4.0"): that version (below 0.6: the 2021 engine);
2. else a source document dated before DeepSpeed v0.6.0 (tag v0.6.0 on commit a32e9b3 of
   2022-03-07, deepspeedai/DeepSpeed; the coalesced ZeRO-3 gathers of PR #1453 were merged on
   2022-01-20, after v0.5.10 of 2022-01-14): the 2021 engine, which is all such a run could use.
   The date is the source cell's arXiv identifier (YYMM.NNNNN: year and month), else a year-month
   in a document name (`..._202412_...`, `..._2025-06_...`: the form torchtitan's compiled-loss rule
   reads, `training.torchtitan_run_month`; one reader, `source_dates`), else the first year written in it ("Narayanan et al.
   2021"); a year alone is before v0.6.0 only when it is 2021 or earlier (a 2022 document may
   postdate March);
3. else the current engine (the default of `TrainPlan.deepspeed_release`).

Only `deepspeed` rows have a release; the rule reads no row id, family or source name.
"""

from __future__ import annotations

import re

from gpuplan.interfaces.row_types import SkipRow
from gpuplan.interfaces.validation import source_dates
from gpuplan.specs.execution import DEEPSPEED_CURRENT_ENGINE_DATE, DeepSpeedRelease, Framework, deepspeed_release_of

#: a DeepSpeed version stated in the notes: "DeepSpeed 0.5.8", "DeepSpeed v0.4", "deepspeed==0.14.2",
#: "DeepSpeed version 0.3.16", "DeepSpeed release: 0.5.10"
_STATED_VERSION = re.compile(
    r"\bdeepspeed\b(?:\s*(?:==|=|:|\bversion\b|\brelease\b))*\s*(v?\d+\.\d+(?:\.\d+)?)\b", re.IGNORECASE)
def stated_deepspeed_version(row: dict[str, str]) -> str | None:
    """The DeepSpeed version the row's notes state ("0.5.8"), or None."""
    m = _STATED_VERSION.search(row.get("notes") or "")
    return m.group(1) if m else None


def source_date(row: dict[str, str]) -> tuple[int, int | None] | None:
    """(year, month or None) of the row's source document (`source_dates.source_date`), or None."""
    return source_dates.source_date(row.get("source") or "")


def dated_before_current_engine(date: tuple[int, int | None] | None) -> bool:
    """Whether a source date is surely before DeepSpeed v0.6.0 (2022-03-07): an earlier year, or an
    earlier month of 2022; a year alone of 2022 is not."""
    if date is None:
        return False
    year, month = date
    first_year, first_month, _ = DEEPSPEED_CURRENT_ENGINE_DATE
    if year != first_year:
        return year < first_year
    return month is not None and month < first_month


def deepspeed_release_from_row(row: dict[str, str], framework: Framework) -> tuple[DeepSpeedRelease, str | None]:
    """(release, note) of a row (module docstring): the note says why a deepspeed row runs the 2021
    engine or a stated version (None otherwise; non-deepspeed rows get CURRENT, which they never
    read). A stated version that is not one: SkipRow naming the notes."""
    if framework is not Framework.DEEPSPEED:
        return DeepSpeedRelease.CURRENT, None
    version = stated_deepspeed_version(row)
    if version is not None:
        try:
            release = deepspeed_release_of(version)
        except ValueError as exc:  # the pattern only matches versions; kept for a clear message
            raise SkipRow(f"notes: DeepSpeed {exc}") from None
        return release, f"deepspeed_release={release.value} (notes state DeepSpeed {version})"
    date = source_date(row)
    if dated_before_current_engine(date):
        when = f"{date[0]}" + (f"-{date[1]:02d}" if date[1] else "")
        return DeepSpeedRelease.V0_5, f"deepspeed_release=0.5 (source dated {when}, before DeepSpeed v0.6.0 of 2022-03-07)"
    return DeepSpeedRelease.CURRENT, None


__all__ = ["dated_before_current_engine", "deepspeed_release_from_row", "source_date", "stated_deepspeed_version"]
