"""The date of a validation row's source document, read from its `source` cell: one reader for every
rule that dates a run by its document (torchtitan's compiled loss, DeepSpeed's release).

- an arXiv identifier of the 2007 scheme, `arXiv:YYMM.NNNNN`: year and month;
- a year-month in a document name, `..._202412_...`, `.../2025-06.md` (torchtitan names its benchmark
  files so): `source_name_month`;
- else the first four-digit year written in the cell ("Narayanan et al. 2021"), month unknown.
"""

from __future__ import annotations

import re

#: an arXiv identifier of the new scheme (2007 on): YYMM.NNNN or YYMM.NNNNN
_ARXIV_ID = re.compile(r"\barxiv[:\s]*(\d{2})(\d{2})\.\d{4,5}\b", re.IGNORECASE)
#: a year-month in a document name: `_202412_`, `/2025-06.`
_NAME_MONTH = re.compile(r"[_/-](20\d\d)-?(0[1-9]|1[0-2])[_.-]")
#: a year written as four digits, 1990 .. 2099
_YEAR = re.compile(r"\b(199\d|20\d\d)\b")


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
