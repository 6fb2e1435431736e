"""`gpuplan validate`: predicted vs measured over any CSV of ../shared/validation/SCHEMA.md.

Each row is routed by its columns: a non-empty `collective` -> collectives predictor (here);
inference columns (`engine`, `input_len`, `output_len`, `weight_dtype`, `batch`, `concurrency`)
-> `gpuplan.interfaces.validation.inference.predict_row`; transformer shape columns (`layers`,
`hidden`) -> `gpuplan.interfaces.validation.training.predict_row`. Predictors return a
`Prediction` or raise `SkipRow(reason)`; a missing predictor module, or an unexpected error inside
one, also skips the row with the reason. Nothing is dropped silently.

Per row: id, kind, metric, measured, predicted, error_pct = (predicted - measured) / measured x 100,
family = the first token of `source` (e.g. 'mosaicml/llm-foundry', 'Narayanan').
Summary per family and overall: count, skipped, MAPE, median and max absolute error %, and
Spearman rank correlation of predicted vs measured within groups sharing (model, num_gpus, metric)
of at least 3 rows (collectives rows: model = system/collective).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.interfaces.validation.stats import error_pct, error_summary, spearman
from gpuplan.interfaces.row_types import Prediction, SkipRow
from gpuplan.validation_rules import decode_utf8, parse_number

REQUIRED_COLUMNS = ("id", "metric", "value")
MIN_SPEARMAN_GROUP = 3
INFERENCE_COLUMNS = ("engine", "input_len", "output_len", "weight_dtype", "concurrency", "max_load")
TRAINING_COLUMNS = ("layers", "hidden")
MATMUL_COLUMNS = ("m", "n", "k")  # one GEMM (validation_matmul.py): mamf-finder and `gpuplan bench` rows
def _predictors() -> dict[str, Callable[[dict], Prediction]]:
    """Row kind -> the workload's predictor (imported on first use: the workloads are heavy)."""
    from gpuplan.interfaces.validation.collectives import predict_row as collectives
    from gpuplan.interfaces.validation.inference import predict_row as inference
    from gpuplan.interfaces.validation.matmul import predict_row as matmul
    from gpuplan.interfaces.validation.training import predict_row as training

    return {"collectives": collectives, "training": training, "inference": inference, "matmul": matmul}


@dataclass(frozen=True)
class RowResult:
    id: str
    kind: str  # training / inference / collectives / unknown
    family: str
    metric: str
    measured: float
    predicted: float | None
    error_pct: float | None
    skipped: bool
    reason: str = ""  # why skipped
    notes: str = ""  # defaults the predictor used
    group: str = ""  # Spearman group key
    confidence: str = ""  # high / medium / low, as the file states
    predicted_low: float | None = None  # the 80% band (interfaces.validation.error_bands), None when no regime has one
    predicted_high: float | None = None
    band_regime: str = ""


@dataclass(frozen=True)
class ValidationReport:
    rows: list[RowResult]
    summary: dict = field(default_factory=dict)


def source_family(source: str) -> str:
    """First whitespace token of `source` without trailing punctuation ('Narayanan et al.' -> 'Narayanan')."""
    token = (source or "").strip().split()[0] if (source or "").strip() else "unknown"
    return token.rstrip(",;:.") or "unknown"


def row_kind(row: dict[str, str]) -> str:
    """training / inference / collectives / matmul / unknown, from which columns the row fills."""
    def filled(col: str) -> bool:
        return bool((row.get(col) or "").strip())

    if filled("collective"):
        return "collectives"
    if all(filled(c) for c in MATMUL_COLUMNS) and not any(filled(c) for c in TRAINING_COLUMNS):
        return "matmul"
    if any(filled(c) for c in INFERENCE_COLUMNS):
        return "inference"
    if any(filled(c) for c in TRAINING_COLUMNS):
        return "training"
    return "unknown"


def schema_family(row_id: str) -> str:
    """SCHEMA.md family: the id without its final `-N` ('meg21-t2-7' -> 'meg21-t2')."""
    import re

    return re.sub(r"-\d+$", "", (row_id or "").strip())


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """Rows of a SCHEMA.md CSV as dicts of stripped strings; InputError names a missing column or
    a non-numeric / empty `value` (with the row id and line)."""
    from gpuplan.input_files import MAX_DATA_BYTES, read_input_bytes

    path = Path(path)
    return parse_rows(read_input_bytes(path, "file", max_bytes=MAX_DATA_BYTES, what="CSV file"), path.name)


def parse_rows(raw_bytes: bytes, name: str) -> list[dict[str, str]]:
    """`read_rows` of a file's bytes (`name` for messages)."""
    text = decode_utf8(raw_bytes, name, "file")  # UTF-8 (a byte-order mark is tolerated)
    try:
        return _csv_rows(text, name)
    except csv.Error as exc:
        raise InputError(f"{name}: not a readable CSV file ({exc})", field="file") from None


def _csv_rows(text: str, name: str) -> list[dict[str, str]]:
    path = Path(name)
    with io.StringIO(text, newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise InputError(f"{path.name}: missing required column(s) {', '.join(missing)}; "
                             f"need {', '.join(REQUIRED_COLUMNS)} (see SCHEMA.md)", field=missing[0])
        rows = []
        for line, raw in enumerate(reader, start=2):
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k is not None}
            rid = row.get("id") or f"line {line}"
            try:
                value = parse_number(row["value"], "value")
            except InputError:
                raise InputError(f"{path.name} line {line} (row {rid}): column value: '{row['value'][:40]}' is not a "
                                 "number (ASCII digits 0-9)", field="value") from None
            if not math.isfinite(value) or value == 0:
                raise InputError(f"{path.name} line {line} (row {rid}): column value: must be a finite non-zero number",
                                 field="value")
            rows.append(row)
    return rows


def _predictor(kind: str) -> tuple[Callable[[dict], Prediction] | None, str]:
    from gpuplan.interfaces.validation.row_memo import memoised

    fn = _predictors().get(kind)
    if fn is None:
        return None, "cannot tell the row kind (no collective, transformer-shape or inference columns)"
    return memoised(fn), ""  # a row repeating an earlier one but for its id is predicted once


def _group_key(row: dict[str, str], kind: str) -> str:
    model = row.get("model") or (f"{row.get('system', '')}/{row.get('collective', '')}" if kind == "collectives" else "")
    return f"{model}|{row.get('num_gpus', '')}|{row.get('metric', '')}"


def _band(row: dict[str, str], kind: str, value: float) -> tuple[float | None, float | None, str]:
    """(low, high, regime) of the row's 80% band from the shipped CV-residual table: the band of its
    regime, widened where the public rows never saw its regime (error_bands.novelty_band)."""
    from gpuplan.interfaces.validation.error_bands import THROUGHPUT_METRICS, row_regime_keys, shipped_band
    from gpuplan.interfaces.validation.regimes import row_regime

    keys = row_regime_keys(row, kind)
    band = shipped_band(kind, keys, row_regime(row, kind)) if keys else None
    if band is None:
        return None, None, ""
    low, high = band.interval(value, inverse=kind == "training" and row.get("metric", "") in THROUGHPUT_METRICS)
    if band.novelty != "seen":
        return low, high, f"{band.regime} ({band.reason})"
    return low, high, band.regime + ("" if band.validated else f" (borrowed for {band.requested})")


def validate_rows(rows: list[dict[str, str]], progress: Callable[[int, int], None] | None = None) -> ValidationReport:
    """Predict every row and summarise (see module doc); `progress(rows done, rows)` before each row."""
    from gpuplan.interfaces.validation.row_memo import row_key

    predictors: dict[str, tuple] = {}
    bands: dict[tuple, tuple] = {}  # a row repeating an earlier one but for its id has its band
    results = []
    for done, row in enumerate(rows):
        if progress:
            progress(done, len(rows))
        kind = row_kind(row)
        if kind not in predictors:
            predictors[kind] = _predictor(kind)
        fn, why = predictors[kind]
        base = dict(id=row["id"], kind=kind, family=schema_family(row["id"]), metric=row.get("metric", ""),
                    measured=float(row["value"]), group=_group_key(row, kind), confidence=row.get("confidence", ""))
        if fn is None:
            results.append(RowResult(**base, predicted=None, error_pct=None, skipped=True, reason=why))
            continue
        cells = row_key(row)
        try:
            pred = fn(row, cells)
        except SkipRow as exc:
            results.append(RowResult(**base, predicted=None, error_pct=None, skipped=True, reason=exc.reason))
            continue
        except InputError as exc:
            raise InputError(f"row {row['id']}: {exc}", field=exc.field) from None
        except ValidationError as exc:  # a value past a spec's range or cap (e.g. 1e9 layers): skip, say why
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err["loc"])
            results.append(RowResult(**base, predicted=None, error_pct=None, skipped=True,
                                     reason=f"out of range: {exc.title}.{where}: {err['msg']}"))
            continue
        except Exception as exc:  # a predictor bug must not hide the other rows; reported, never silent
            results.append(RowResult(**base, predicted=None, error_pct=None, skipped=True,
                                     reason=f"predictor error {type(exc).__name__}: {exc}"))
            continue
        value = float(pred.value)
        if not math.isfinite(value):
            results.append(RowResult(**base, predicted=None, error_pct=None, skipped=True,
                                     reason="predictor returned a non-finite value", notes=pred.notes))
            continue
        band_key = (kind, value, cells)
        if band_key not in bands:
            bands[band_key] = _band(row, kind, value)
        low, high, regime = bands[band_key]
        results.append(RowResult(**base, predicted=value, error_pct=error_pct(value, base["measured"]),
                                 skipped=False, notes=pred.notes, predicted_low=low, predicted_high=high,
                                 band_regime=regime))
    return ValidationReport(rows=results, summary=summarize(results))


def _block(rows: list[RowResult]) -> dict:
    done = [r for r in rows if not r.skipped]
    out = error_summary(r.error_pct for r in done)
    out["skipped"] = len(rows) - len(done)
    groups: dict[str, list[RowResult]] = defaultdict(list)
    for r in done:
        groups[r.group].append(r)
    rhos = []
    for key, members in sorted(groups.items()):
        if len(members) >= MIN_SPEARMAN_GROUP:
            rho = spearman([m.measured for m in members], [m.predicted for m in members])
            rhos.append({"group": key, "rows": len(members), "spearman": rho})
    valid = [g["spearman"] for g in rhos if g["spearman"] is not None]
    out["spearman_groups"] = rhos
    out["spearman_mean"] = float(sum(valid) / len(valid)) if valid else None
    return out


def summarize(results: list[RowResult]) -> dict:
    """{"families": {family: block}, "kinds": {kind: block}, "overall": block}; a block has count,
    skipped, mape_pct, median_abs_error_pct, max_abs_error_pct, mean_error_pct, spearman_groups, spearman_mean."""
    by_family: dict[str, list[RowResult]] = defaultdict(list)
    by_kind: dict[str, list[RowResult]] = defaultdict(list)
    for r in results:
        by_family[r.family].append(r)
        by_kind[r.kind].append(r)
    return {
        "families": {f: _block(rs) for f, rs in sorted(by_family.items())},
        "kinds": {k: _block(rs) for k, rs in sorted(by_kind.items())},
        "overall": _block(results),
    }


def validate_file(path: str | Path, progress: Callable[[int, int], None] | None = None) -> ValidationReport:
    """Read a SCHEMA.md CSV and validate every row (InputError for a malformed file)."""
    return validate_rows(read_rows(path), progress)


def report_json(report: ValidationReport) -> dict:
    """The stable JSON shape: {"rows": [{id, kind, family, metric, measured, predicted, error_pct,
    skipped, reason, notes, confidence}], "summary": {...}}."""
    rows = [{"id": r.id, "kind": r.kind, "family": r.family, "metric": r.metric, "measured": r.measured,
             "predicted": r.predicted, "predicted_low": r.predicted_low, "predicted_high": r.predicted_high,
             "band_regime": r.band_regime, "error_pct": r.error_pct, "skipped": r.skipped, "reason": r.reason,
             "notes": r.notes, "confidence": r.confidence} for r in report.rows]
    return {"rows": rows, "summary": report.summary}


__all__ = ["RowResult", "ValidationReport", "read_rows", "report_json", "row_kind", "schema_family", "source_family",
           "summarize",
           "validate_file", "validate_rows"]
