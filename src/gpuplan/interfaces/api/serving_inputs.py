"""Serving options checked at the boundary, where the CLI's text and the API's values meet the
workloads' types: `--pd-ratio P:D`, `--prefix-hit-rate` and `--lengths` (docs/serving.md)."""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from gpuplan.errors import InputError
from gpuplan.input_files import MAX_DATA_BYTES, path_kind, read_input_bytes, regular_input_file
from gpuplan.output_files import write_atomic
from gpuplan.validation_rules import MAX_GPUS, check_number, parse_number
from gpuplan.workloads.inference.cost.prefix_cache import PrefixCache


def check_pd_ratio(text: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """`--pd-ratio P:D` as (P, D): two integers written with ASCII digits, each 1 .. MAX_GPUS (an
    instance count past ten times the largest cluster is not a plan); InputError naming pd_ratio."""
    if text is None:
        return None
    parts = list(text) if isinstance(text, tuple) else str(text).split(":")
    if len(parts) != 2:
        raise InputError(f"pd_ratio: '{str(text)[:40]}' is not P:D with two integers (e.g. 2:1)", field="pd_ratio",
                         allowed="P:D, integers >= 1")
    p, d = (parse_number(x, "pd_ratio", integer=True, ge=1, le=MAX_GPUS) for x in parts)
    return int(p), int(d)


@dataclass(frozen=True)
class FullPrefixCache(PrefixCache):
    """A prefix cache at hit rate 1: every prompt token but the last is served from the cache
    (`PrefixCache.cached_tokens` caps a hit at L - 1: vLLM recomputes the last token). PrefixCache's
    own check stops below 1 although the option's range is 0-1; once it takes 1, this class goes."""

    def __post_init__(self):
        PrefixCache(0.0, self.pool_tokens)  # the pool's own check
        check_number(self.hit_rate, "prefix_hit_rate", ge=0.0, le=1.0)


def prefix_cache(hit_rate: float, pool_tokens: int | None) -> PrefixCache | None:
    """The cache of `--prefix-hit-rate` (0-1) and `--prefix-cache-tokens`; None at hit rate 0 (an
    InputError for a pool without a hit rate)."""
    check_number(hit_rate, "prefix_hit_rate", ge=0.0, le=1.0)
    if hit_rate == 0:
        if pool_tokens is not None:
            raise InputError("prefix_cache_tokens: needs --prefix-hit-rate > 0", field="prefix_cache_tokens")
        return None
    return PrefixCache(float(hit_rate), pool_tokens) if hit_rate < 1 else FullPrefixCache(1.0, pool_tokens)


@contextmanager
def lengths_file(text: str) -> Iterator[str | None]:
    """The path the pairs reader may open for `--lengths TEXT`, or None when TEXT names a dataset
    (gpuplan.input_files rules): a regular file of at most MAX_DATA_BYTES is read where it is; a pipe
    (`--lengths <(...)`) is copied, bounded, to a private temporary file for the block; a device,
    a folder, a missing .csv file or a name too long to be a path is one InputError naming lengths."""
    kind = path_kind(text)
    if kind is None and not str(text).strip().lower().endswith(".csv"):
        yield None  # a dataset name (the catalog says whether it is one)
        return
    if kind == "file":
        yield str(regular_input_file(text, "lengths", "CSV file", MAX_DATA_BYTES)[0])
        return
    raw = read_input_bytes(text, "lengths", max_bytes=MAX_DATA_BYTES, what="CSV file")  # a pipe, or the reason
    with tempfile.TemporaryDirectory(prefix="gpuplan-lengths-") as folder:
        copy = Path(folder) / "lengths.csv"
        write_atomic(copy, raw, "lengths")
        yield str(copy)
