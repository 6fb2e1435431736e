"""80% error bands from cross-validated residuals: how far off the model is, per regime.

Every prediction carries a band (DESIGN.md). The band of a regime is the 10th and 90th percentile of
the *cross-validated* residuals of the public rows in that regime (`interfaces.validation.cross_validation`:
each family predicted with knobs refit without it), so it estimates the error on workloads the model
was not tuned on.

Residuals are oriented so that one band serves every metric of a class:

- training time class (iteration_time_s, tokens_per_s_per_gpu, tflops_per_gpu_model, mfu_pct,
  gpu_hours_per_1t_tokens): r = log(measured time / predicted time), where a throughput metric's
  time ratio is predicted / measured. A step time t has the band [t e^q10, t e^q90]; days and cost
  scale with it.
- training memory class and the serving metrics: r = log(measured / predicted) in the metric's unit.

Bands that widen with novelty. A prediction is placed in its regime (interfaces.validation.regimes:
hardware generation, engine or framework, dense / MoE, weight precision) and compared with the
public rows (the table's `inventory`, `regimes.novelty`):

- *validated regime* (public rows of its hardware generation, engine and architecture together, and
  of its precision): the band of the leave-one-**family**-out residuals, most specific key first (a
  key with fewer than MIN_ROWS scored rows falls back to its parent):
  `training/time/<dense|moe>/<stack>` (stack: megatron for Megatron-core / DeepSpeed / other, fsdp
  for FSDP / torchtitan) -> `training/time/<dense|moe>` -> `training/time`; `training/memory` ...;
  `inference/<latency|throughput>/<dense|moe>` -> `inference/<latency|throughput>`. Fine-tuning
  (LoRA / QLoRA, another optimizer, offload, pure low precision: a row's fine-tuning columns, a
  plan's `fine_tuning`) puts `training/<time|memory>/finetune` first: its bands come from the
  fine-tuning families' family-out residuals, in every regime; where the regime is unvalidated the
  band is the union of that band and the unseen-* band below (`_fine_tuning_band`).
- *unvalidated regime*: the band of the leave-one-**regime**-out residuals
  (interfaces.validation.cross_validation, `--cv regime`) of the most novel part it falls in:
  for each axis whose value no public row has, `<kind>/<class>/unseen-<axis>` (the residuals of every
  row predicted with every row of its own value of that axis left out: its hardware generation, its
  engine, ...), the widest of those when several axes are new; when every value was seen but never
  together, `<kind>/<class>/unseen-regime` (every row of its (hardware, engine, architecture) tuple
  left out). The band says which (`novelty`, `reason`) and `validated: false`.
  The unseen-hardware band (a GPU vendor and generation no public row of the kind has) pools the
  hardware-out residuals of every class of both kinds, each held-out generation of each kind
  weighing the same, in one orientation (`pessimism_sign`: > 0 where the real run needs more than
  predicted), uncentred, so it keeps the bias held-out hardware shows (`pooled_unseen_band`).

Weights: a new measurement arrives as a new source table (a family) and, in an unvalidated regime,
as a new regime; its error is a sample of those units, not of rows. So in the shipped table each
family weighs the same within a family-out key, and each held-out value within an unseen key
(`fit_bands(units=...)`, `fit_unseen_bands`, `weighted_percentiles`): the public rows crowd into a
few families and regimes that engine rules and knobs were tuned on (79 of 127 serving rows are
Hopper, 20 are one TensorRT-LLM table), and row weights would let those set the width.

The shipped table (`catalog/data/error_bands.json`) is written by `benchmarks/accuracy_cv.py
--write` from the public files; its provenance (date, gpuplan version, rows, the coverage of the
procedure on the public rows: interfaces.validation.band_coverage) is in the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from gpuplan.interfaces.validation.regimes import AXES, Regime, describe, novelty

#: Scored rows a regime needs for its own percentiles (else its parent's band is used).
MIN_ROWS = 8
#: The band's coverage: the 10th and 90th percentiles of the residuals.
LOWER_Q, UPPER_Q = 10.0, 90.0

TRAINING_TIME_METRICS = ("iteration_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu_model", "mfu_pct",
                         "gpu_hours_per_1t_tokens")
#: metrics whose value is inversely proportional to the time (their time ratio is predicted / measured)
THROUGHPUT_METRICS = ("tokens_per_s_per_gpu", "tflops_per_gpu_model", "mfu_pct")
INFERENCE_LATENCY_METRICS = ("ttft_ms", "tpot_ms", "e2e_latency_ms")
BANDS_FILE = "catalog/data/error_bands.json"
#: the leave-one-regime-out groupings a band can come from (cross_validation.HELD_OUT_GROUPINGS)
UNSEEN_GROUPINGS = ("regime", *AXES)
#: groupings whose unseen band pools every class of both kinds (`pooled_unseen_band`)
POOLED_GROUPINGS = ("hardware",)


def regime_keys(kind: str, metric_class: str, moe: bool | None = None, stack: str | None = None,
                finetune: bool = False) -> list[str]:
    """Regime keys of a prediction, most specific first (module docstring)."""
    keys = [f"{kind}/{metric_class}"]
    if moe is not None:
        keys.insert(0, f"{keys[0]}/{'moe' if moe else 'dense'}")
        if stack is not None:
            keys.insert(0, f"{keys[0]}/{stack}")
    if finetune:
        keys.insert(0, f"{kind}/{metric_class}/finetune")
    return keys


def stack_of(framework: str) -> str:
    """`fsdp` for PyTorch FSDP stacks (fsdp, torchtitan), `megatron` for the rest."""
    return "fsdp" if framework in ("fsdp", "torchtitan") else "megatron"


def metric_class(kind: str, metric: str) -> str | None:
    if kind == "training":
        return "time" if metric in TRAINING_TIME_METRICS else "memory"
    if kind == "inference":
        return "latency" if metric in INFERENCE_LATENCY_METRICS else "throughput"
    return None


def oriented_residual(kind: str, metric: str, measured: float, predicted: float) -> float:
    """r of the module docstring: log(measured time / predicted time) for training time metrics,
    log(measured / predicted) otherwise."""
    r = math.log(measured / predicted)
    return -r if kind == "training" and metric in THROUGHPUT_METRICS else r


def unseen_key(kind: str, metric_class: str, grouping: str) -> str:
    """The band key of a prediction new along `grouping` ("regime" or an axis): `<kind>/<class>/unseen-<grouping>`."""
    return f"{kind}/{metric_class}/unseen-{grouping}"


def row_regime_keys(row: Mapping[str, str], kind: str) -> list[str]:
    """Regime keys of a validation row (MoE from its model; stack from its framework column)."""
    cls = metric_class(kind, (row.get("metric") or "").strip())
    if cls is None:
        return []
    moe = None
    try:
        from gpuplan.models import model_from_arch_row

        moe = model_from_arch_row(dict(row)).moe is not None
    except Exception:  # noqa: BLE001 - a row whose model cannot be built has no finer regime
        moe = None
    stack = stack_of((row.get("framework") or "megatron").strip().lower()) if kind == "training" and cls == "time" else None
    return regime_keys(kind, cls, moe, stack, finetune=kind == "training" and _fine_tuning_row(row))


def _fine_tuning_row(row: Mapping[str, str]) -> bool:
    """Whether a training row's fine-tuning columns leave ordinary training (SCHEMA.md)."""
    from gpuplan.interfaces.row_types import SkipRow
    from gpuplan.interfaces.validation.fine_tuning_row import fine_tuning_from_row

    try:
        return not fine_tuning_from_row(dict(row))[0].ordinary
    except SkipRow:
        return False


@dataclass(frozen=True)
class Band:
    """An 80% band: the prediction times exp(q10) .. exp(q90) (oriented: module docstring)."""

    regime: str  # the key whose percentiles are used
    requested: str  # the most specific key of the prediction
    q10: float
    q90: float
    rows: int  # scored rows behind the percentiles
    #: "seen" (family-out residuals) or "unseen-<grouping>" (the regime-out residuals used)
    novelty: str = "seen"
    reason: str = ""  # for people: validated regime, or what no public row has

    @property
    def validated(self) -> bool:
        """Whether the prediction's regime had public rows and its own key a band (False: an
        unvalidated regime, or a band borrowed from a parent key)."""
        return self.novelty == "seen" and self.regime == self.requested

    def interval(self, predicted: float, inverse: bool = False) -> tuple[float, float]:
        """(low, high) of `predicted`; `inverse` for a quantity inversely proportional to the
        oriented one (a throughput under a time band)."""
        if inverse:
            return predicted * math.exp(-self.q90), predicted * math.exp(-self.q10)
        return predicted * math.exp(self.q10), predicted * math.exp(self.q90)

    @property
    def width(self) -> float:
        return self.q90 - self.q10

    def to_dict(self) -> dict:
        return {"regime": self.regime, "validated": self.validated, "q10_log": self.q10, "q90_log": self.q90,
                "rows": self.rows, "novelty": self.novelty, "reason": self.reason}


def fit_bands(residuals: Sequence[float], regimes: Sequence[Sequence[str]],
              units: Sequence[str] | None = None) -> dict[str, dict]:
    """{regime key: {q10, q90, rows}} for every key with at least MIN_ROWS residuals. `units`
    (e.g. each row's family): each unit weighs the same within a key (`weighted_percentiles`,
    module docstring); None: every row the same (numpy's linear percentiles)."""
    by_key: dict[str, list[tuple[float, str]]] = {}
    for i, (r, keys) in enumerate(zip(residuals, regimes)):
        if r is None or not math.isfinite(r):
            continue
        for k in keys:
            by_key.setdefault(k, []).append((float(r), "" if units is None else units[i]))
    out = {}
    for k, pairs in sorted(by_key.items()):
        if len(pairs) < MIN_ROWS:
            continue
        v = [r for r, _ in pairs]
        if units is None:
            q10, q90 = float(np.percentile(v, LOWER_Q)), float(np.percentile(v, UPPER_Q))
        else:
            counts: dict[str, int] = {}
            for _, u in pairs:
                counts[u] = counts.get(u, 0) + 1
            q10, q90 = weighted_percentiles(v, [1.0 / counts[u] for _, u in pairs], (LOWER_Q, UPPER_Q))
        out[k] = {"q10": q10, "q90": q90, "rows": len(v)}
    return out


def band_for(table: Mapping[str, Mapping], keys: Sequence[str]) -> Band | None:
    """The band of the most specific key in `table` (None when no key of the prediction has one)."""
    for k in keys:
        if k in table:
            e = table[k]
            return Band(k, keys[0], float(e["q10"]), float(e["q90"]), int(e["rows"]))
    return None


def novelty_band(table: Mapping[str, Mapping], seen: Mapping[str, Sequence[str]], keys: Sequence[str],
                 regime: Regime | None) -> Band | None:
    """The band of a prediction whose family-out regime keys are `keys` (most specific first, the
    last `<kind>/<class>`) and whose regime is `regime` (module docstring): the family-out band
    when `seen` (an `inventory` of the public rows) has its regime; else the widest band of its unseen
    axes, or the unseen-regime band. `regime` None: the family-out band, as before regimes."""
    if not keys:
        return None
    if keys[0].endswith("/finetune") and (tuned := band_for(table, keys[:1])) is not None:
        return _fine_tuning_band(tuned, novelty_band(table, seen, keys[1:], regime))
    if regime is None:
        return band_for(table, keys)
    nov = novelty(regime, seen)
    reason = describe(regime, nov)
    if nov.validated:
        band = band_for(table, keys)
        return None if band is None else _with(band, "seen", reason)
    groupings = nov.unseen_axes if nov.unseen_axes else ("regime",)
    kind, cls = keys[-1].split("/", 1)
    candidates = [b for g in groupings
                  if (b := band_for(table, [unseen_key(kind, cls, g)])) is not None]
    if not candidates:  # no regime-out residuals shipped: the family-out band, marked unvalidated
        band = band_for(table, keys)
        return None if band is None else _with(band, unseen_key(kind, cls, groupings[0]).rsplit("/", 1)[1], reason)
    widest = max(candidates, key=lambda b: b.width)
    return _with(Band(widest.regime, keys[0], widest.q10, widest.q90, widest.rows), widest.regime.rsplit("/", 1)[1],
                 reason)


def _fine_tuning_band(tuned: Band, general: Band | None) -> Band:
    """A fine-tuning prediction's band: the fine-tuning families' family-out residuals (`tuned`);
    where its regime is unvalidated (`general`, the band the same prediction would get without
    fine-tuning, is an unseen-* band), the union of the two, so that novelty still widens it."""
    if general is None or general.novelty == "seen":
        reason = general.reason if general is not None else ""
        return _with(tuned, "seen", reason)
    return Band(f"{tuned.regime}+{general.novelty}", tuned.requested, min(tuned.q10, general.q10),
                max(tuned.q90, general.q90), tuned.rows, general.novelty, general.reason)


def _with(band: Band, novelty_name: str, reason: str) -> Band:
    return Band(band.regime, band.requested, band.q10, band.q90, band.rows, novelty_name, reason)


def weighted_percentiles(values: Sequence[float], weights: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Percentiles `qs` (0-100) of `values` with `weights`: the weighted empirical CDF with Hazen
    plotting positions (Hyndman & Fan 1996, definition 5: value i of n sorted at (i - 0.5) / n),
    each value at the middle of its weight, linearly interpolated, clamped to the extremes."""
    order = np.argsort(np.asarray(values, dtype=np.float64))
    v = np.asarray(values, dtype=np.float64)[order]
    w = np.asarray(weights, dtype=np.float64)[order]
    pos = (np.cumsum(w) - 0.5 * w) / w.sum()
    return [float(np.interp(q / 100.0, pos, v)) for q in qs]


def pessimism_sign(cls: str) -> float:
    """+1 where a class's oriented residual (module docstring) is positive when the real run needs
    more than predicted (more time, more memory, a longer latency), -1 where it is positive when
    the real run does better (`inference/throughput`: log(measured / predicted) > 0 is faster than
    predicted). sign x r is the *pessimism* residual: > 0 means the prediction was optimistic."""
    return -1.0 if cls == "inference/throughput" else 1.0


def fit_unseen_bands(residuals: Mapping[str, Sequence[float | None]], classes: Sequence[str],
                     groups: Mapping[str, Sequence[str]],
                     pooled: Sequence[str] = POOLED_GROUPINGS) -> dict[str, dict]:
    """{`<kind>/<class>/unseen-<grouping>`: {q10, q90, rows, groups}} from the leave-one-regime-out
    residuals (`residuals[grouping][i]`, None where row i has none) of rows of class `classes[i]`
    (`<kind>/<class>`), for each grouping with at least MIN_ROWS residuals in the class from at
    least two held-out values (`groups[grouping][i]`: row i's regime key or axis value).

    Each held-out value weighs the same (its rows share 1 / their count): a regime, not a row, is
    what a new prediction is a sample of, and the public rows crowd into a few regimes that were
    tuned on (module docstring). Percentiles: `weighted_percentiles`.

    A grouping in `pooled` (POOLED_GROUPINGS: hardware) is fit once over every class of every kind
    (`pooled_unseen_band`) and shipped under each class present, turned into its orientation."""
    out: dict[str, dict] = {}
    for grouping, res in residuals.items():
        if grouping in pooled:
            band = pooled_unseen_band(res, classes, groups[grouping])
            if band is not None:
                for c in dict.fromkeys(c for r, c in zip(res, classes) if r is not None and math.isfinite(r)):
                    sign = pessimism_sign(c)
                    q10, q90 = sorted((sign * band["q10"], sign * band["q90"]))
                    out[unseen_key(*c.split("/", 1), grouping)] = {**band, "q10": q10, "q90": q90, "pooled": True}
            continue
        by_class: dict[str, list[tuple[float, str]]] = {}
        for r, c, g in zip(res, classes, groups[grouping]):
            if r is not None and math.isfinite(r):
                by_class.setdefault(c, []).append((float(r), g))
        for c, pairs in by_class.items():
            q = _group_weighted_band(pairs)
            if q is not None:
                out[unseen_key(*c.split("/", 1), grouping)] = q
    return dict(sorted(out.items()))


def _group_weighted_band(pairs: Sequence[tuple[float, str]]) -> dict | None:
    """{q10, q90, rows, groups} of (residual, held-out value) pairs, each value weighing the same;
    None under MIN_ROWS residuals or with one held-out value."""
    counts: dict[str, int] = {}
    for _, g in pairs:
        counts[g] = counts.get(g, 0) + 1
    if len(pairs) < MIN_ROWS or len(counts) < 2:
        return None
    q10, q90 = weighted_percentiles([r for r, _ in pairs], [1.0 / counts[g] for _, g in pairs], (LOWER_Q, UPPER_Q))
    return {"q10": q10, "q90": q90, "rows": len(pairs), "groups": len(counts)}


def pooled_unseen_band(residuals: Sequence[float | None], classes: Sequence[str],
                       groups: Sequence[str]) -> dict | None:
    """{q10, q90, rows, groups} in the pessimism orientation (`pessimism_sign`) of the held-out
    residuals of every class of every kind together, each held-out value of each kind weighing the
    same (`<kind>:<value>`: training's and serving's CVs hold a generation out separately).

    Why pooled (issue 30 build 3): a new GPU generation is one draw of "how far off is the model on
    hardware it never saw", whatever it then runs. Per class, the public rows give two to four
    held-out generations each (serving latency: Ampere, Hopper and CDNA3), too few for a 10th and
    90th percentile, and a class's band then follows whichever generations that class happens to
    have: on the public rows (2026-11-28), each generation held out in turn
    (band_coverage.axis_out_coverage), 57.1% of the training rows and 82.7% of the serving rows
    were inside such per-class bands; pooled, 85.8% and 86.6%. The bias each generation shows (its
    held-out residuals are not centred) is kept: a band that is not symmetric says which way the
    model errs."""
    pairs = []
    for r, c, g in zip(residuals, classes, groups):
        if r is not None and math.isfinite(r):
            pairs.append((pessimism_sign(c) * float(r), f"{c.split('/', 1)[0]}:{g}"))
    return _group_weighted_band(pairs)


def family_out_coverage(residuals: Sequence[float], regimes: Sequence[Sequence[str]],
                        families: Sequence[str], scored: Callable[[str], bool] | None = None) -> float | None:
    """Share of rows inside the band fit WITHOUT their own family (an honest coverage estimate).
    `scored(family)`: count only the rows of families it accepts (e.g. the serving rows); the bands
    are still fit on every other family's rows."""
    inside = total = 0
    res = list(residuals)
    for fam in dict.fromkeys(families):
        if scored is not None and not scored(fam):
            continue
        train = [(r, k) for r, k, f in zip(res, regimes, families) if f != fam]
        table = fit_bands([r for r, _ in train], [k for _, k in train])
        for r, keys, f in zip(res, regimes, families):
            if f != fam or r is None or not math.isfinite(r):
                continue
            b = band_for(table, keys)
            if b is None:
                continue
            total += 1
            inside += b.q10 <= r <= b.q90
    return inside / total if total else None


def _bands_path() -> Path:
    # the package's folder, as importlib.resources.files("gpuplan") gives it for a package on disk
    # (as catalog.DATA_DIR), without importing importlib.resources and its zip reader (~5 ms of a start)
    return Path(__file__).parents[2] / BANDS_FILE


@lru_cache(maxsize=1)
def load_bands() -> dict:
    """The shipped table {"regimes": {...}, "inventory": {...}, "provenance": {...}}; empty when none
    is shipped. Read once per process (validate looks up a band per row)."""
    path = _bands_path()
    if not path.is_file():
        return {"regimes": {}, "inventory": {}, "provenance": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def write_bands(regimes: Mapping[str, Mapping], provenance: Mapping,
                inventory: Mapping[str, Mapping[str, Sequence[str]]] | None = None) -> Path:
    """Write the shipped table atomically (gpuplan.output_files); `inventory`: {kind: the
    regimes.inventory of its public scored rows} (what a prediction's novelty is judged against)."""
    from gpuplan.output_files import write_atomic

    path = _bands_path()
    text = json.dumps({"provenance": dict(provenance), "regimes": dict(regimes), "inventory": dict(inventory or {})},
                      indent=1, sort_keys=True)
    write_atomic(path, text + "\n", "error_bands")
    load_bands.cache_clear()
    return path


def shipped_band(kind: str, keys: Sequence[str], regime: Regime | None) -> Band | None:
    """`novelty_band` in the shipped table, against the shipped inventory of `kind`'s public rows."""
    table = load_bands()
    return novelty_band(table["regimes"], table.get("inventory", {}).get(kind, {}), keys, regime)


def regime_summary(kind: str, regime: Regime) -> dict:
    """{hardware, engine, architecture, precision, validated, reason} of a prediction's regime
    against the shipped inventory of `kind`'s public rows (`regimes.novelty`)."""
    nov = novelty(regime, load_bands().get("inventory", {}).get(kind, {}))
    return {**regime.to_dict(), "validated": nov.validated, "unseen_axes": list(nov.unseen_axes),
            "reason": describe(regime, nov)}


def training_time_band(moe: bool, framework: str, finetune: bool = False,
                       regime: Regime | None = None) -> Band | None:
    """The shipped 80% band of a training step time (keys from the model, the stack and fine-tuning;
    `regime`: the prediction's, for the unvalidated-regime widths)."""
    return shipped_band("training", regime_keys("training", "time", moe, stack_of(framework), finetune), regime)


def training_memory_band(moe: bool, finetune: bool = False, regime: Regime | None = None) -> Band | None:
    return shipped_band("training", regime_keys("training", "memory", moe, finetune=finetune), regime)


def serving_band(metric: str, moe: bool, regime: Regime | None = None) -> Band | None:
    cls = metric_class("inference", metric)
    return shipped_band("inference", regime_keys("inference", cls, moe), regime) if cls else None


#: serve-run outputs and the validation metric whose band each one takes (percentile latencies take
#: the band of the mean latency of the same kind: the public rows give means)
SERVING_BAND_KEYS = {
    "ttft_ms": "ttft_ms", "ttft_p50_ms": "ttft_ms", "ttft_p90_ms": "ttft_ms", "ttft_p99_ms": "ttft_ms",
    "tpot_ms": "tpot_ms", "tpot_p50_ms": "tpot_ms", "tpot_p90_ms": "tpot_ms", "tpot_p99_ms": "tpot_ms",
    "e2e_p50_ms": "e2e_latency_ms", "e2e_p90_ms": "e2e_latency_ms", "e2e_p99_ms": "e2e_latency_ms",
    "output_tokens_per_s": "output_tokens_per_s", "requests_per_s": "requests_per_s",
}


def serving_bands(values: Mapping[str, float], moe: bool, regime: Regime | None = None) -> dict:
    """The 80% bands of a serving prediction's latencies and throughputs (`values`: the keys of
    SERVING_BAND_KEYS that are present): the latency band for latencies, the throughput band for
    throughputs, each from `inference/<latency|throughput>/<dense|moe>` when public rows of the
    prediction's `regime` exist, else from the leave-one-regime-out residuals of its most novel
    part (module docstring). `validated: false` for an unvalidated regime (`reason` says what no
    public row has) or a band borrowed from a parent key."""
    out: dict = {}
    regimes: dict = {}
    for key, metric in SERVING_BAND_KEYS.items():
        v = values.get(key)
        band = serving_band(metric, moe, regime)
        if v is None or band is None or not math.isfinite(float(v)):
            continue
        out[key] = list(band.interval(float(v)))
        regimes[metric_class("inference", metric)] = {"regime": band.regime, "validated": band.validated,
                                                       "rows": band.rows, "novelty": band.novelty,
                                                       "reason": band.reason}
    if out:
        out["regimes"] = regimes
        if regime is not None:
            out["prediction_regime"] = regime.to_dict()
    return out


def training_band(est, moe: bool, run=None, regime: Regime | None = None) -> dict:
    """The 80% band (interfaces.validation.error_bands: cross-validated residuals of the public rows of this
    regime) of the step time and what scales with it (days, GPU-hours, cost, energy; tokens/s
    inversely), and of the memory per GPU. `validated: false` marks an unvalidated regime (`reason`)
    or a key without rows of its own."""
    out: dict = {}
    finetune = not est.plan.fine_tuning.ordinary
    time_band = training_time_band(moe, est.step.framework.value, finetune, regime)
    if time_band is not None:
        def scaled(v):
            return None if v is None else list(time_band.interval(v))

        out.update({
            "regime": time_band.regime, "validated": time_band.validated, "rows": time_band.rows,
            "novelty": time_band.novelty, "reason": time_band.reason,
            "step_time_s": scaled(est.step.step_time_s), "days": scaled(est.days), "gpu_hours": scaled(est.gpu_hours),
            "tokens_per_s": list(time_band.interval(est.step.tokens_per_s, inverse=True)),
            "mfu_pct": list(time_band.interval(est.step.mfu_pct, inverse=True)),
            "cost_usd": scaled(getattr(run, "cost_usd", None)),
            "energy_mwh": scaled(run.energy.energy_mwh) if run is not None and run.energy is not None else None,
        })
    mem_band = training_memory_band(moe, finetune, regime)
    if mem_band is not None:
        out["memory_per_gpu_gib"] = list(mem_band.interval(est.memory_per_gpu_gib))
        out["memory_regime"] = mem_band.regime
    return out


def bands_from_cv_rows(rows: Iterable, raw_rows: Sequence[Mapping[str, str]]) -> tuple[list, list, list]:
    """(residuals, regimes, families) of the scored, predicted rows of a CV report (`CvRow`s with
    their source rows): the inputs of `fit_bands` and `family_out_coverage`."""
    residuals, regimes, families = [], [], []
    for cv_row, raw in zip(rows, raw_rows):
        if not cv_row.scored or cv_row.predicted_cv is None or cv_row.kind not in ("training", "inference"):
            continue
        metric = (raw.get("metric") or "").strip()
        residuals.append(oriented_residual(cv_row.kind, metric, cv_row.measured, cv_row.predicted_cv))
        regimes.append(row_regime_keys(raw, cv_row.kind))
        families.append(cv_row.family)
    return residuals, regimes, families


__all__ = ["Band", "POOLED_GROUPINGS", "UNSEEN_GROUPINGS", "band_for", "bands_from_cv_rows", "family_out_coverage", "fit_bands",
           "fit_unseen_bands", "load_bands", "weighted_percentiles", "novelty_band", "oriented_residual", "pessimism_sign", "pooled_unseen_band", "regime_keys", "regime_summary", "row_regime_keys",
           "serving_band", "shipped_band", "training_memory_band", "training_band", "training_time_band",
           "unseen_key", "write_bands"]


#: the central probability of the shipped bands (their LOWER_Q .. UPPER_Q percentiles)
SHIPPED_BAND_LEVEL = (UPPER_Q - LOWER_Q) / 100.0


def check_confidence(level: float | None) -> float | None:
    """`level` if it is a band level the shipped table holds (SHIPPED_BAND_LEVEL), or None (plan on
    the point prediction); InputError naming `confidence` otherwise."""
    from gpuplan.errors import InputError

    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not math.isclose(
            float(level), SHIPPED_BAND_LEVEL, abs_tol=1e-9):
        raise InputError(f"confidence: the shipped error bands are {SHIPPED_BAND_LEVEL:g} bands (10th-90th "
                         f"percentile of cross-validated residuals): give {SHIPPED_BAND_LEVEL:g}, or omit it to plan "
                         f"on the point prediction; got {level!r}", field="confidence")
    return float(level)


def serving_latency_margin(moe: bool, regime: Regime | None) -> tuple[float, Band | None]:
    """(f, band): the factor a serving latency objective is divided by so that the prediction's
    pessimistic band edge meets it. The latency band's upper edge is predicted x exp(q90) (residual
    r = log(measured / predicted), module docstring), so a p90 latency L meets an objective O at that
    edge when L x exp(q90) <= O, i.e. L <= O / f with f = exp(q90). f is at least 1: a band whose
    upper edge lies below the point prediction does not loosen the objective. The TTFT and TPOT
    objectives share the latency class's band (serving_band)."""
    band = serving_band("ttft_ms", moe, regime)
    return (max(1.0, math.exp(band.q90)) if band is not None else 1.0), band


def confidence_margins(gpus: Sequence, engine: str, moe: bool, weight_dtype: str, level: float,
                       ttft_ms: float, tpot_ms: float) -> dict:
    """{level, by_gpu: {gpu id: {latency_factor, ttft_objective_ms, tpot_objective_ms, band_regime,
    validated, reason}}}: per GPU type, the serving latency band of its regime and the objectives its
    predicted p90s must meet so that the band's pessimistic edge meets the user's
    (error_bands.serving_latency_margin)."""
    from gpuplan.interfaces.validation.regimes import serving_regime

    by_gpu = {}
    for g in gpus:
        f, band = serving_latency_margin(moe, serving_regime(g, engine, moe, weight_dtype))
        by_gpu[g.id] = {"latency_factor": f, "ttft_objective_ms": ttft_ms / f, "tpot_objective_ms": tpot_ms / f,
                        "band_regime": band.regime if band else None,
                        "validated": band.validated if band else False,
                        "reason": band.reason if band else "no band for this regime: the point prediction is used"}
    return {"level": level, "by_gpu": by_gpu}
