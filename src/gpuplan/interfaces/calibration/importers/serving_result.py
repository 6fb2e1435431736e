"""One serving-benchmark result (a dict of vLLM's or SGLang's result keys) -> inference rows of
SCHEMA.md, one per metric the result holds:

| result key (vLLM / SGLang) | row metric |
|---|---|
| output_throughput | output_tokens_per_s |
| total_token_throughput / total_throughput (else input_throughput + output_throughput) | total_tokens_per_s |
| request_throughput | requests_per_s |
| mean_ttft_ms | ttft_ms |
| mean_tpot_ms | tpot_ms |
| mean_e2el_ms / mean_e2e_latency_ms | e2e_latency_ms |

The load: `max_concurrency` -> concurrency; a finite `request_rate` -> request_rate (Poisson, an
open loop); neither -> max_load = true. Request lengths: `random_input_len` / `random_output_len`
when the benchmark fixed them, else the mean of the completed requests (total tokens / completed).
The config gives what the result does not (model shape, system, tp, dtypes) and wins over it.
"""

from __future__ import annotations

import json
import math
from typing import Mapping

from gpuplan.errors import InputError
from gpuplan.interfaces.calibration.importers import INFERENCE, base_row, check_config, number_text

REQUIRED = ["system", ("hf_config", "layers+hidden")]
_METRICS = (
    ("output_tokens_per_s", ("output_throughput",)),
    ("total_tokens_per_s", ("total_token_throughput", "total_throughput")),
    ("requests_per_s", ("request_throughput",)),
    ("ttft_ms", ("mean_ttft_ms",)),
    ("tpot_ms", ("mean_tpot_ms",)),
    ("e2e_latency_ms", ("mean_e2el_ms", "mean_e2e_latency_ms")),
)


def _num(result: Mapping, key: str) -> float | None:
    v = result.get(key)
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f


def _positive(result: Mapping, key: str) -> float | None:
    f = _num(result, key)
    return f if f is not None and math.isfinite(f) and f > 0 else None


def looks_like_result(obj) -> bool:
    return isinstance(obj, dict) and any(k in obj for _, keys in _METRICS for k in keys)


def load_results(text: str, filename: str, tool: str) -> list[dict]:
    """JSON object, JSON list of objects, or JSON lines; InputError when none is a result, or when
    the text nests deeper than MAX_JSON_DEPTH (checked before the recursive parser sees it)."""
    from gpuplan.validation_rules import check_json_nesting

    text = text.strip()
    check_json_nesting(text, filename, "file")
    try:
        data = json.loads(text)
        items = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        items = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"{filename} line {n}: not JSON ({exc.msg}); expected {tool} result JSON",
                                 field="file") from None
    return [r for r in items if looks_like_result(r)]


def result_rows(result: Mapping, config: Mapping[str, str], engine: str, tool: str, filename: str,
                prefix: str, start: int) -> list[dict[str, str]]:
    """The rows of one result (module docstring), ids PREFIX-start, PREFIX-start+1, ..."""
    load: dict[str, str] = {"engine": engine}
    conc = _positive(result, "max_concurrency")
    rate = _num(result, "request_rate")
    if conc is not None:
        load["concurrency"] = number_text(conc)
    if rate is not None and math.isfinite(rate) and rate > 0:
        load["request_rate"] = number_text(rate)
    elif conc is None:
        load["max_load"] = "true"
    completed = _positive(result, "completed")
    for col, fixed, total in (("input_len", "random_input_len", "total_input_tokens"),
                              ("output_len", "random_output_len", "total_output_tokens")):
        f = _positive(result, fixed)
        t = _positive(result, total)
        if f is not None:
            load[col] = str(int(round(f)))
        elif t is not None and completed:
            load[col] = str(int(round(t / completed)))
    values = {}
    for metric, keys in _METRICS:
        for key in keys:
            v = _positive(result, key)
            if v is not None:
                values[metric] = v
                break
    if "total_tokens_per_s" not in values:
        i, o = _positive(result, "input_throughput"), _positive(result, "output_throughput")
        if i is not None and o is not None:
            values["total_tokens_per_s"] = i + o
    rows = []
    for n, (metric, value) in enumerate(values.items(), start=start):
        row = base_row(f"{prefix}-{n}", tool, filename, config, INFERENCE)
        for col, v in load.items():
            row.setdefault(col, v)
        row["metric"] = metric
        row["value"] = number_text(value)
        rows.append(row)
    return rows


def check(config: Mapping[str, str], tool: str) -> None:
    check_config(config, INFERENCE, REQUIRED, tool)
