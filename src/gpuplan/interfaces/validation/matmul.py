"""Predictor for `matmul` rows: one GEMM C[m, n] = A[m, k] B[k, n] on one GPU, as mamf-finder and
`gpuplan bench` measure it (docs/calibration.md; an extension of ../shared/validation/SCHEMA.md).

Columns: id, source, confidence, system (a catalog GPU id, or a system id: its GPU), m, n, k,
dtype (`bf16`, `fp16`, `fp8`, `fp32`, ...; empty = bf16), metric, value. Metrics:
`matmul_tflops` (achieved TFLOP/s = 2 m n k / time / 1e12) and `time_us`. The prediction is
`primitives.op_cost.gemm_time` (roofline x `efficiency.matmul_ceiling.*` knobs x shape factor), so
these rows inform the matmul ceilings of the GPU and `efficiency.gemm_k_overhead`.
"""

from __future__ import annotations

from gpuplan.errors import InputError, UnknownIdError
from gpuplan.interfaces.row_types import Prediction, SkipRow
from gpuplan.validation_rules import parse_number

METRICS = ("matmul_tflops", "time_us")
#: Columns that make a row a matmul row (validate.row_kind).
COLUMNS = ("m", "n", "k")


def _dim(row: dict[str, str], column: str) -> int:
    text = (row.get(column) or "").strip()
    try:
        value = int(float(parse_number(text, column)))  # ASCII digits only (validation_rules.parse_number)
    except (ValueError, OverflowError):
        raise InputError(f"row {row.get('id', '?')}: column {column}: '{text}' is not a whole number", field=column) from None
    if value < 1 or value != float(text):
        raise InputError(f"row {row.get('id', '?')}: column {column}: must be a whole number >= 1, got '{text}'",
                         field=column)
    return value


def predict_row(row: dict[str, str]) -> Prediction:
    """Predict one matmul row; SkipRow when its GPU is not in the catalog or its metric is unknown."""
    from gpuplan.catalog import load_catalog
    from gpuplan.primitives.op_cost import gemm_time

    metric = (row.get("metric") or "").strip()
    if metric not in METRICS:
        raise SkipRow(f"metric '{metric}' is not a matmul metric ({', '.join(METRICS)})")
    catalog = load_catalog()
    where = (row.get("system") or "").strip()
    if where in catalog.gpus:
        gpu = catalog.gpu(where)
    else:
        try:
            gpu = catalog.gpu(catalog.system(where).gpu)
        except UnknownIdError:
            raise SkipRow(f"system '{where}' is neither a catalog GPU nor a catalog system") from None
    m, n, k = (_dim(row, c) for c in COLUMNS)
    dtype = (row.get("dtype") or "").strip().lower() or "bf16"
    notes = "" if (row.get("dtype") or "").strip() else "dtype empty: bf16"
    try:
        cost = gemm_time(gpu, m, n, k, dtype)
    except InputError as exc:
        raise SkipRow(f"not expressible: {exc}") from None
    value = cost.flops / cost.time_s / 1e12 if metric == "matmul_tflops" else cost.time_s * 1e6
    return Prediction(value, notes)


__all__ = ["COLUMNS", "METRICS", "predict_row"]
