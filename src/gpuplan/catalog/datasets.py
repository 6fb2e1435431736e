"""Serving benchmark datasets' request lengths (catalog/data/datasets.toml), with their sources.

`get_dataset(name)` resolves an id or an alias; `find_dataset_in_text(text)` names the dataset a
free-text description (a validation row's notes / source) mentions by one of its aliases, or None
(the first alias, in file order, that occurs as a whole word).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from gpuplan.catalog import DATA_DIR
from gpuplan.errors import InputError
from gpuplan.validation_rules import load_toml_text


@dataclass(frozen=True)
class Dataset:
    id: str
    title: str
    input: str
    output: str
    input_source: str
    output_source: str
    aliases: tuple[str, ...] = ()
    requests: int | None = None
    shape: str = ""  # "mean-only": the sources state means, not the spread (lengths.dataset_lengths)


@lru_cache(maxsize=1)
def datasets() -> dict[str, Dataset]:
    raw = load_toml_text((DATA_DIR / "datasets.toml").read_text(encoding="utf-8"), "datasets.toml", "lengths")
    out = {}
    for key, d in raw.get("dataset", {}).items():
        out[key] = Dataset(key, d["title"], d["input"], d["output"], d["input_source"], d["output_source"],
                           tuple(a.lower() for a in d.get("aliases", ())), d.get("requests"), d.get("shape", ""))
    return out


def get_dataset(name: str, field: str = "lengths") -> Dataset:
    key = str(name).strip().lower()
    table = datasets()
    if key in table:
        return table[key]
    for d in table.values():
        if key in d.aliases:
            return d
    raise InputError(f"{field}: '{name}' is neither a .csv file nor a known dataset; allowed: a CSV of "
                     f"input_len,output_len pairs or one of {', '.join(sorted(table))}", field=field)


def requests_in_text(text: str, ds: Dataset) -> int | None:
    """A request count stated next to the dataset's name: "200 ShareGPT prompts", "ShareGPT 200
    prompts", "OpenOrca 24,576 samples" (a number right before the name, or right after it when
    followed by prompts / requests / samples / queries); None if there is none."""
    low = (text or "").lower()
    for alias in (ds.id, *ds.aliases):
        a = re.escape(alias)
        m = re.search(r"(?<![\d.,])(\d[\d,]*)\s+" + a + r"(?![a-z0-9])", low) or \
            re.search(r"(?<![a-z0-9])" + a + r"\s+(\d[\d,]*)\s+(?:prompts|requests|samples|queries)\b", low)
        if m:
            return int(m.group(1).replace(",", ""))
    return None


def find_dataset_in_text(text: str) -> Dataset | None:
    low = (text or "").lower()
    for d in datasets().values():
        for alias in (d.id, *d.aliases):
            if re.search(r"(?<![a-z0-9])" + re.escape(alias) + r"(?![a-z0-9])", low):
                return d
    return None
