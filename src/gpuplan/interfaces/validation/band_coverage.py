"""How often the 80% bands hold the measurements they were not fit on: the honest coverage of the
band procedure of `interfaces.validation.error_bands`, and the table that procedure ships.

The inputs are the rows of a `validate --cv regime` report (interfaces.validation.cross_validation),
one `BandRecord` per scored, predicted row: its family, its regime, its family-out residual and
its leave-one-regime-out residuals (one per grouping: the regime tuple, each axis).

Two estimates, each judging a row with a band fit without it:

- `arrival_coverage`: each family in turn arrives as new data. The public rows without it give
  the inventory (which regimes are validated) and the band table (family-out and regime-out
  residuals of the remaining rows); each of its rows gets the band `error_bands.novelty_band`
  gives it against that inventory (a family on hardware or with an engine no other family has
  gets the unseen-hardware or unseen-engine width), and counts as inside when its family-out
  residual (its error when the knobs never saw its family) lies in the band. This is the
  procedure a new measurement meets.
- `regime_out_coverage`: each regime tuple in turn is new: its rows, predicted with the regime
  left out (their "regime" residual), against the band their novelty gets from the other regimes.

- `axis_out_coverage`: each value of one axis (a hardware generation, an engine) new in turn, the same
  way: its rows' axis-out residuals against the band the other values' rows give them.

`family_out_coverage` (error_bands) is the older figure: every row against the family-out band of
the other families, novelty ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from gpuplan.interfaces.validation.error_bands import (
    UNSEEN_GROUPINGS, fit_bands, fit_unseen_bands, metric_class, novelty_band, oriented_residual, row_regime_keys,
)
from gpuplan.interfaces.validation.regimes import Regime, inventory


@dataclass(frozen=True)
class BandRecord:
    """One scored, predicted row: what the band procedure needs of it."""

    family: str
    kind: str  # "training" or "inference"
    keys: tuple[str, ...]  # family-out regime keys, most specific first (error_bands.row_regime_keys)
    regime: Regime
    residual: float  # oriented log residual of the family-out CV prediction
    #: oriented log residuals of the leave-one-regime-out predictions, by grouping (None: not predicted)
    held_out: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def cls(self) -> str:
        """`<kind>/<class>`: the last (broadest) key."""
        return self.keys[-1]


def records_from_cv(cv_rows: Iterable, raw_rows: Sequence[Mapping[str, str]], tag: str = "") -> list[BandRecord]:
    """BandRecords of the scored, predicted training / inference rows of a `--cv regime` report
    (`CvRow`s with their source rows); `tag` prefixes the family (keeps families of two files apart)."""
    out = []
    for cv_row, raw in zip(cv_rows, raw_rows):
        if (not cv_row.scored or cv_row.predicted_cv is None or cv_row.kind not in ("training", "inference")
                or cv_row.regime is None):
            continue
        metric = (raw.get("metric") or "").strip()
        keys = row_regime_keys(raw, cv_row.kind)
        if not keys or metric_class(cv_row.kind, metric) is None:
            continue

        def res(p):
            return None if p is None else oriented_residual(cv_row.kind, metric, cv_row.measured, p)

        out.append(BandRecord(f"{tag}{cv_row.family}", cv_row.kind, tuple(keys), cv_row.regime,
                              res(cv_row.predicted_cv),
                              {g: res(cv_row.predicted_held_out.get(g)) for g in UNSEEN_GROUPINGS}))
    return out


def band_table(records: Sequence[BandRecord]) -> dict[str, dict]:
    """The band table of `records`: the family-out bands (error_bands.fit_bands over their keys,
    each family weighing the same) and the unseen-<grouping> bands (error_bands.fit_unseen_bands
    over their regime-out residuals, each held-out regime or axis value weighing the same)."""
    table = fit_bands([r.residual for r in records], [list(r.keys) for r in records], [r.family for r in records])
    table.update(fit_unseen_bands({g: [r.held_out.get(g) for r in records] for g in UNSEEN_GROUPINGS},
                                  [r.cls for r in records],
                                  {g: [r.regime.key if g == "regime" else r.regime.value(g) for r in records]
                                   for g in UNSEEN_GROUPINGS}))
    return dict(sorted(table.items()))


def inventories(records: Iterable[BandRecord]) -> dict[str, dict[str, list[str]]]:
    """{kind: regimes.inventory of the records of that kind}."""
    by_kind: dict[str, list[Regime]] = {}
    for r in records:
        by_kind.setdefault(r.kind, []).append(r.regime)
    return {k: inventory(v) for k, v in sorted(by_kind.items())}


def _inside(band, r: float | None) -> bool | None:
    if band is None or r is None or not math.isfinite(r):
        return None
    return band.q10 <= r <= band.q90


@dataclass(frozen=True)
class Coverage:
    """Rows judged, rows inside their band, and the same split by the band's novelty."""

    rows: int
    inside: int
    by_novelty: Mapping[str, tuple[int, int]]  # novelty -> (rows, inside)

    @property
    def fraction(self) -> float | None:
        return self.inside / self.rows if self.rows else None

    def to_dict(self) -> dict:
        return {"rows": self.rows, "inside": self.inside, "coverage": self.fraction,
                "by_novelty": {k: {"rows": n, "inside": i, "coverage": i / n if n else None}
                               for k, (n, i) in sorted(self.by_novelty.items())}}


def _coverage(pairs: Iterable[tuple[object, float | None]]) -> Coverage:
    rows = inside = 0
    split: dict[str, list[int]] = {}
    for band, r in pairs:
        hit = _inside(band, r)
        if hit is None:
            continue
        rows += 1
        inside += hit
        cell = split.setdefault(band.novelty, [0, 0])
        cell[0] += 1
        cell[1] += hit
    return Coverage(rows, inside, {k: (v[0], v[1]) for k, v in split.items()})


def arrival_coverage(records: Sequence[BandRecord], scored: Callable[[BandRecord], bool] | None = None) -> Coverage:
    """Each family arriving as new data (module docstring). `scored(record)`: judge only the rows it
    accepts (e.g. one kind); the bands are still fit on every other family's rows."""
    pairs = []
    for fam in dict.fromkeys(r.family for r in records):
        mine = [r for r in records if r.family == fam and (scored is None or scored(r))]
        if not mine:
            continue
        rest = [r for r in records if r.family != fam]
        table, seen = band_table(rest), inventories(rest)
        pairs += [(novelty_band(table, seen.get(r.kind, {}), r.keys, r.regime), r.residual) for r in mine]
    return _coverage(pairs)


def regime_out_coverage(records: Sequence[BandRecord],
                        scored: Callable[[BandRecord], bool] | None = None) -> Coverage:
    """Each regime tuple new in turn (module docstring): its rows' regime-out residuals against the
    band their novelty gets from the other regimes' rows."""
    pairs = []
    for key in dict.fromkeys((r.kind, r.regime.key) for r in records):
        mine = [r for r in records if (r.kind, r.regime.key) == key and (scored is None or scored(r))]
        if not mine:
            continue
        rest = [r for r in records if (r.kind, r.regime.key) != key]
        table, seen = band_table(rest), inventories(rest)
        pairs += [(novelty_band(table, seen.get(r.kind, {}), r.keys, r.regime), r.held_out.get("regime"))
                  for r in mine]
    return _coverage(pairs)


def axis_out_coverage(records: Sequence[BandRecord], axis: str) -> dict[str, dict[str, Coverage]]:
    """{kind: {value: Coverage, ..., "overall": Coverage}}: each value of `axis` (a hardware
    generation, an engine, ...) new in turn (module docstring): its rows' `axis`-out residuals (the
    knobs refit without every row of that value) against the band their novelty gets from the rows
    of every other value. The value is removed from both kinds: a new GPU generation has no training
    rows and no serving rows, and the pooled unseen-hardware band reads both."""
    out: dict[str, dict[str, list]] = {}
    for value in sorted({r.regime.value(axis) for r in records}):
        rest = [r for r in records if r.regime.value(axis) != value]
        table, seen = band_table(rest), inventories(rest)
        for r in records:
            if r.regime.value(axis) == value:
                pair = (novelty_band(table, seen.get(r.kind, {}), r.keys, r.regime), r.held_out.get(axis))
                out.setdefault(r.kind, {}).setdefault(value, []).append(pair)
    result: dict[str, dict[str, Coverage]] = {}
    for kind, by_value in sorted(out.items()):
        result[kind] = {v: _coverage(p) for v, p in by_value.items()}
        result[kind]["overall"] = _coverage([p for ps in by_value.values() for p in ps])
    return result


__all__ = ["BandRecord", "Coverage", "arrival_coverage", "axis_out_coverage", "band_table", "inventories",
           "records_from_cv", "regime_out_coverage"]
