"""Predictor for collectives.csv rows (../shared/validation/SCHEMA.md): busbw_gbps or time_us of
one collective, from `gpuplan.primitives.collectives`.

Documented defaults for empty cells: algorithm -> auto; size_bytes -> the large-message
(asymptotic) busbw, for busbw rows only; num_gpus -> the whole scale-up domain of the system
(nodes x domain when nodes is given); nodes -> packed (GPUs fill each scale-up domain).
"""

from __future__ import annotations

from gpuplan.errors import InputError, UnknownIdError
from gpuplan.interfaces.row_types import Prediction, SkipRow
from gpuplan.validation_rules import parse_number, parse_row_cell

METRICS = ("busbw_gbps", "time_us")


def _number(row: dict[str, str], column: str) -> float | None:
    text = (row.get(column) or "").strip()
    if not text:
        return None
    try:
        parse_number(text, column)  # ASCII digits only (validation_rules.parse_number)
    except (ValueError, OverflowError):
        raise InputError(f"row {row.get('id', '?')}: column {column}: '{text}' is not a number", field=column) from None
    try:  # a number outside the range of the CLI option of the same quantity (--gpus, --nodes): this row is skipped
        return float(parse_row_cell(column, text, integer=column in ("num_gpus", "nodes")))
    except InputError as exc:
        raise SkipRow(str(exc)) from None


def predict_row(row: dict[str, str]) -> Prediction:
    """Predict one collectives row; raises SkipRow when it cannot be expressed."""
    from gpuplan.catalog import load_catalog
    from gpuplan.primitives.collectives import Collective, asymptotic_busbw_gbps, collective_time

    metric = (row.get("metric") or "").strip()
    if metric not in METRICS:
        raise SkipRow(f"metric '{metric}' is not a collectives metric ({', '.join(METRICS)})")
    catalog = load_catalog()
    try:
        system = catalog.system(row.get("system", "").strip())
    except UnknownIdError as exc:
        raise SkipRow(f"system not in the catalog: {exc}") from None
    gpu = catalog.gpu(system.gpu)
    try:
        op = Collective(row.get("collective", "").strip())
    except ValueError:
        raise SkipRow(f"collective '{row.get('collective')}' is not modelled") from None
    algorithm = (row.get("algorithm") or "").strip() or "auto"
    notes = []
    nodes = _number(row, "nodes")
    num_gpus = _number(row, "num_gpus")
    if num_gpus is None:
        num_gpus = system.scaleup_domain_gpus * (int(nodes) if nodes else 1)
        notes.append(f"num_gpus empty: {int(num_gpus)} (whole scale-up domain)")
    num_gpus = int(num_gpus)
    per_domain = None
    if nodes:
        per_domain = min(system.scaleup_domain_gpus, max(1, -(-num_gpus // int(nodes))))
    size = _number(row, "size_bytes")
    try:
        if size is None:
            if metric != "busbw_gbps":
                raise SkipRow("size_bytes empty: a time cannot be predicted without a size")
            notes.append("size_bytes empty: large-message (asymptotic) busbw")
            return Prediction(asymptotic_busbw_gbps(op, system, num_gpus, algorithm, gpu), "; ".join(notes))
        result = collective_time(op, size, system, num_gpus, algorithm, gpu, gpus_per_domain=per_domain)
    except InputError as exc:
        raise SkipRow(f"not expressible: {exc}") from None
    notes.append(f"{result.algorithm.value}/{result.protocol.value}")
    value = result.busbw_gbps if metric == "busbw_gbps" else result.time_s * 1e6
    return Prediction(value, "; ".join(notes))
