"""`gpuplan calibrate import KIND FILE`: turn the output of the tools users already run into rows of
../shared/validation/SCHEMA.md (and matmul rows, docs/calibration.md) that `calibrate fit` consumes.

One module per tool, each with `parse(text, config, prefix) -> list[row dict]` and the format it
reads (with its source) in its docstring:

| KIND | tool output | rows |
|---|---|---|
| `nccl-tests` | all_reduce_perf & co. stdout | collectives: busbw_gbps per size (out-of-place) |
| `mamf` | mamf-finder.py log | matmul: matmul_tflops per MxNxK shape |
| `vllm` | `benchmark_serving.py --save-result` / `vllm bench serve` JSON | inference: throughput, TTFT, TPOT, E2E |
| `sglang` | `sglang.bench_serving --output-file` JSONL | inference: one set per line |
| `trtllm` | `tensorrt_llm.serve.scripts.benchmark_serving --save-result` JSON | inference: as `vllm`, engine tensorrt-llm |
| `torchtitan` | training log (`step: .. tps: .. tflops: .. mfu: ..`) | training: tokens/s/GPU, TFLOP/s, MFU, reserved memory |
| `megatron` | Megatron-LM training log | training: iteration time, TFLOP/s/GPU, max allocated memory |
| `nemo` | NeMo 2 progress lines (`train_step_timing in s: ..`) | training: iteration time |
| `maxtext` | MaxText `completed step: .., seconds: .., TFLOP/s/device: .., Tokens/s/device: ..` | training: iteration time, TFLOP/s, tokens/s per GPU |

What the log does not say (the model's shape, the system, the parallel layout) comes from the run
configuration: a small TOML (`--config run.toml`, keys = SCHEMA.md column names) and/or
`--set column=value`. Row ids are `PREFIX-N` (PREFIX: `--id-prefix`, default the file's stem), so
one file is one family.
"""

from __future__ import annotations

import csv
import importlib
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from gpuplan.errors import InputError

#: KIND -> module under gpuplan.interfaces.calibration.importers
IMPORTERS = {
    "nccl-tests": "nccl_tests",
    "mamf": "mamf",
    "vllm": "vllm_bench",
    "sglang": "sglang_bench",
    "trtllm": "trtllm_bench",
    "torchtitan": "torchtitan_log",
    "megatron": "megatron_log",
    "nemo": "nemo_log",
    "maxtext": "maxtext_log",
}

COMMON = ("id", "source", "confidence", "notes")
TRAINING = ("model", "layers", "hidden", "heads", "kv_heads", "ffn", "ffn_kind", "vocab", "seq_len", "moe_experts",
            "moe_topk", "moe_ffn", "moe_shared_experts", "moe_dense_layers", "hf_config", "system", "num_gpus", "tp",
            "pp", "dp", "cp", "ep", "vpp", "micro_batch", "global_batch", "recompute", "sequence_parallel",
            "precision", "sharding", "framework")
INFERENCE = ("model", "layers", "hidden", "heads", "kv_heads", "ffn", "ffn_kind", "vocab", "moe_experts", "moe_topk",
             "moe_ffn", "moe_shared_experts", "moe_dense_layers", "hf_config", "system", "num_gpus", "tp", "pp", "ep",
             "attention_dp", "weight_dtype", "kv_dtype", "engine", "batch", "concurrency", "max_load", "request_rate",
             "input_len", "output_len")
COLLECTIVES = ("system", "num_gpus", "nodes", "collective", "size_bytes", "algorithm")
MATMUL = ("system", "m", "n", "k", "dtype")
#: Run-configuration keys that are not columns.
OPTIONS = ("id_prefix", "skip_steps", "notes")


@dataclass(frozen=True)
class ImportResult:
    kind: str
    path: str
    rows: list[dict[str, str]]

    def csv_text(self) -> str:
        return rows_csv(self.rows)


def parse_config(config_path: str | Path | None, sets: Sequence[str] = ()) -> dict[str, str]:
    """The run configuration: the TOML file's top-level keys, then each `column=value` of `sets`
    (later wins). Values become strings (booleans `true`/`false`)."""
    from gpuplan.input_files import MAX_SETTINGS_BYTES, read_input_text
    from gpuplan.validation_rules import load_toml_text

    out: dict[str, str] = {}
    if config_path is not None:
        p = Path(config_path)
        data = load_toml_text(read_input_text(p, "config", max_bytes=MAX_SETTINGS_BYTES, what="TOML file"),
                              f"config: {p.name}", "config")
        for key, value in data.items():
            if isinstance(value, (dict, list)):
                raise InputError(f"config: {p.name}: key {key} must be a plain value (a column of SCHEMA.md)",
                                 field="config")
            out[key] = _checked(key, _text(value), "config")
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"set: '{item}' must look like column=value", field="set")
        out[key.strip()] = _checked(key.strip(), value.strip(), "set")
    return out


#: columns (and options) holding a count: an integer >= 0 written with ASCII digits
INTEGER_COLUMNS = frozenset({
    "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len", "moe_experts", "moe_topk", "moe_ffn",
    "moe_shared_experts", "moe_dense_layers", "num_gpus", "nodes", "tp", "pp", "dp", "cp", "ep", "vpp",
    "micro_batch", "global_batch", "attention_dp", "batch", "concurrency", "input_len", "output_len", "size_bytes",
    "m", "n", "k", "skip_steps",
})
#: columns holding a rate: a finite number >= 0
NUMBER_COLUMNS = frozenset({"request_rate"})


def _checked(key: str, value: str, field: str) -> str:
    """`value` of column `key` as given, once a numeric column's value is a number written with ASCII
    digits (gpuplan.validation_rules.parse_number); InputError naming the column otherwise. An empty
    value means 'not given' (SCHEMA.md)."""
    from gpuplan.validation_rules import ROW_COLUMN_OPTIONS, check_option, parse_number

    if value == "" or key not in INTEGER_COLUMNS | NUMBER_COLUMNS:
        return value
    integer = key in INTEGER_COLUMNS
    number = parse_number(value, f"{field} {key}", integer=integer, ge=0)
    if key in ROW_COLUMN_OPTIONS:  # the rules `validate` applies to the row (num_gpus=0 is no row)
        check_option(ROW_COLUMN_OPTIONS[key], number, integer, label=f"{field} {key}")
    return str(number) if integer else value


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def check_config(config: Mapping[str, str], allowed: Sequence[str], required: Sequence[str | tuple], kind: str) -> None:
    """InputError for a key that is not an allowed column, or a missing required one (a tuple:
    any one of its alternatives sets)."""
    allowed_set = set(allowed) | set(OPTIONS)
    unknown = sorted(k for k in config if k not in allowed_set)
    if unknown:
        raise InputError(f"config: {kind}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}",
                         field="config")
    for need in required:
        if isinstance(need, tuple):
            if not any(all(config.get(c) for c in alt.split("+")) for alt in need):
                raise InputError(f"config: {kind}: needs {' or '.join(need)} (give --config run.toml or --set)",
                                 field="config")
        elif not config.get(need):
            raise InputError(f"config: {kind}: needs {need} (give --config run.toml or --set {need}=...)", field="config")


def prefix_for(path: Path, config: Mapping[str, str]) -> str:
    """Row-id prefix: `id_prefix` of the config, else the file's stem made id-safe."""
    raw = config.get("id_prefix") or path.stem
    prefix = re.sub(r"[^A-Za-z0-9_.]+", "-", raw).strip("-").lower() or "import"
    return re.sub(r"-\d+$", "", prefix)  # a trailing -N would be read as a row number


def number_text(value: float) -> str:
    """A measured number as CSV text (repr of the float; integers without .0)."""
    if not math.isfinite(value):
        raise ValueError(value)
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def import_file(kind: str, path: str | Path, config: Mapping[str, str] | None = None) -> ImportResult:
    """Parse `path` with the importer of `kind` (IMPORTERS). InputError, one line, when the kind is
    unknown, the file is missing or unreadable, or nothing in it has the tool's format."""
    if kind not in IMPORTERS:
        raise InputError(f"kind: unknown '{kind}'; allowed: {', '.join(IMPORTERS)}", field="kind")
    from gpuplan.input_files import MAX_DATA_BYTES, read_input_text

    p = Path(path)
    text = read_input_text(p, "file", max_bytes=MAX_DATA_BYTES, what=f"{kind} output file")
    module = importlib.import_module(f"gpuplan.interfaces.calibration.importers.{IMPORTERS[kind]}")
    config = dict(config or {})
    rows = module.parse(text, config, prefix_for(p, config), p.name)
    if not rows:
        raise InputError(f"{p.name}: no {kind} results found ({module.EXPECTED})", field="file")
    return ImportResult(kind, str(p), rows)


def rows_csv(rows: Sequence[Mapping[str, str]]) -> str:
    """CSV text of `rows`: the columns in first-seen order, every row under every column."""
    columns: list[str] = []
    for r in rows:
        for c in r:
            if c not in columns:
                columns.append(c)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({c: r.get(c, "") for c in columns})
    return buf.getvalue()


def base_row(rid: str, kind: str, filename: str, config: Mapping[str, str], columns: Sequence[str]) -> dict[str, str]:
    """id, source, confidence, notes, then the config's values for `columns`."""
    row = {"id": rid, "source": f"{kind} output {filename} (gpuplan calibrate import)", "confidence": "high",
           "notes": config.get("notes", "")}
    for c in columns:
        if config.get(c):
            row[c] = config[c]
    return row


__all__ = ["IMPORTERS", "ImportResult", "base_row", "check_config", "import_file", "parse_config", "prefix_for",
           "rows_csv"]
