"""The date of a validation row's source document, read from its `source` cell: one reader for every
rule that dates a run by its document (torchtitan's compiled loss, DeepSpeed's release).

- an arXiv identifier of the 2007 scheme, `arXiv:YYMM.NNNNN`: year and month;
- a year-month in a document name, `..._202412_...`, `.../2025-06.md` (torchtitan names its benchmark
  files so): `source_name_month`;
- else the first four-digit year written in the cell ("Narayanan et al. 2021"), month unknown.

`source_day` reads the latest ISO date or month-and-year a cell states ("2024-07-16", "Feb-Mar 2024": a
month read as its last day); `latest_source_month` prefers it to `source_date`. `stated_torch_version`
reads the PyTorch release a row's notes state ("torch 1.12", "PyTorch `2.9", "pytorch v2.1"): the one
reader of every era rule that a stated release decides.
"""

from __future__ import annotations

import re

#: an arXiv identifier of the new scheme (2007 on): YYMM.NNNN or YYMM.NNNNN
_ARXIV_ID = re.compile(r"\barxiv[:\s]*(\d{2})(\d{2})\.\d{4,5}\b", re.IGNORECASE)
#: a year-month in a document name: `_202412_`, `/2025-06.`
_NAME_MONTH = re.compile(r"[_/-](20\d\d)-?(0[1-9]|1[0-2])[_.-]")
#: a year written as four digits, 1990 .. 2099
_YEAR = re.compile(r"\b(199\d|20\d\d)\b")
#: an ISO date, and a month name followed by a year
_ISO_DATE = re.compile(r"\b(20\d\d)-(\d\d)-(\d\d)\b")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_YEAR = re.compile(r"\b(" + "|".join(_MONTHS) + r")[a-z]*\.?\s+(20\d\d)\b", re.IGNORECASE)
#: a PyTorch release stated in notes: "torch 1.12", "PyTorch `2.9", "pytorch version: v2.1"
_STATED_TORCH = re.compile(r"\b(?:torch|pytorch)(?: version)?[ :=]+[`v]?(\d+)\.(\d+)", re.IGNORECASE)


def source_name_month(source: str) -> tuple[int, int] | None:
    """(year, month) written in a document name of the source cell, or None."""
    m = _NAME_MONTH.search(source)
    return (int(m.group(1)), int(m.group(2))) if m else None


def source_date(source: str) -> tuple[int, int | None] | None:
    """(year, month or None) of a source document (module docstring), or None when the cell states
    no date."""
    m = _ARXIV_ID.search(source)
    if m:
        month = int(m.group(2))
        if 1 <= month <= 12:
            return 2000 + int(m.group(1)), month
    month_named = source_name_month(source)
    if month_named is not None:
        return month_named
    y = _YEAR.search(source)
    return (int(y.group(1)), None) if y else None


def source_day(source: str) -> tuple[int, int, int] | None:
    """The latest date `source` states as ISO dates or month and year (module docstring), a month and
    year read as that month's last day (`Feb-Mar 2024` -> the year follows the last month named)."""
    dates = [(int(y), int(m), int(d)) for y, m, d in _ISO_DATE.findall(source)]
    text = re.sub(r"(" + "|".join(_MONTHS) + r")[a-z]*\s*-\s*(?=(" + "|".join(_MONTHS) + r"))", "", source,
                  flags=re.IGNORECASE)  # 'Feb-Mar 2024' -> 'Mar 2024'
    dates += [(int(y), _MONTHS.index(m[:3].lower()) + 1, 31) for m, y in _MONTH_YEAR.findall(text)]
    return max(dates) if dates else None


def latest_source_month(source: str) -> tuple[int, int | None] | None:
    """(year, month or None): the month of `source_day` where the cell states a day or a month and year,
    else `source_date` (an arXiv id, a document name's month, a year)."""
    day = source_day(source)
    return day[:2] if day else source_date(source)


def stated_torch_version(notes: str) -> tuple[int, int] | None:
    """(major, minor) of the PyTorch release the notes state, or None (module docstring)."""
    m = _STATED_TORCH.search(notes)
    return (int(m.group(1)), int(m.group(2))) if m else None
