"""One row per sweep point: `train` points run `gpuplan.api.train` (the best plan, its step time,
MFU, days, GPU-hours, energy, cost), `serve` points `gpuplan.api.serve_plan` (the cheapest layout
meeting the latency objectives). This is the only code a worker runs (`evaluate_chunk`), on a
process pool or a Ray cluster alike; it reads nothing but its arguments (resolved specs travel
with the task, so a worker needs no catalog of its own and user catalogs reach it).

Derived columns (units in the names):
    usd_per_million_tokens (train) = cost_usd / tokens x 1e6
    usd_per_million_tokens (serve) = GPUs x $/GPU-hour / (3600 x rate x output_len) x 1e6
                                     (workloads.inference.plan.capacity)
    meets_constraints              = status ok and every bound of [constraints] holds
A point that cannot run (does not fit, degrees do not divide, no layout meets the objectives) is
a row with status "infeasible" and the reason; a failure of gpuplan itself is status "error".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.errors import GpuplanError
from gpuplan.interfaces.sweep.hardware import Hardware

TRAIN_COLUMNS = (
    "point", "model", "hardware", "system", "gpu", "num_gpus", "seq_len", "tokens", "status", "reason",
    "tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "recompute", "sharding",
    "sequence_parallel", "step_time_s", "tokens_per_s", "mfu_pct", "memory_per_gpu_gib", "days", "gpu_hours",
    "energy_kwh", "co2_kg", "usd_per_gpu_hour", "cost_usd", "usd_per_million_tokens", "meets_constraints",
)
SERVE_COLUMNS = (
    "point", "model", "hardware", "system", "gpu", "input_len", "output_len", "rate_rps", "ttft_slo_ms",
    "tpot_slo_ms", "status", "reason", "tp", "concurrency", "replicas", "num_gpus", "ttft_p90_ms", "tpot_p90_ms",
    "replica_output_tokens_per_s", "usd_per_gpu_hour", "usd_per_million_tokens", "cost_usd_per_day",
    "energy_kwh_per_day", "kwh_per_million_tokens", "meets_constraints",
)


def columns(goal: str) -> tuple[str, ...]:
    return TRAIN_COLUMNS if goal == "train" else SERVE_COLUMNS


@dataclass(frozen=True)
class Context:
    """What every point of one sweep shares: resolved models and hardware, options, constraints."""

    goal: str
    models: dict[str, Any]  # spec label -> ModelSpec
    hardware: dict[str, Hardware]
    train: dict = field(default_factory=dict)
    serve: dict = field(default_factory=dict)
    constraints: dict = field(default_factory=dict)
    #: knob overrides in effect where the sweep was started (`--calibration`, `--memory-headroom`, ...):
    #: re-applied in every worker, since knob scopes do not cross process boundaries
    knob_overrides: dict = field(default_factory=dict)


def _meets(row: dict, bounds: dict) -> bool:
    if row["status"] != "ok":
        return False
    checks = (("max_days", "days", 1), ("max_cost_usd", "cost_usd", 1), ("min_mfu_pct", "mfu_pct", -1),
              ("max_gpus", "num_gpus", 1), ("max_usd_per_million_tokens", "usd_per_million_tokens", 1))
    for bound, col, sign in checks:
        limit = bounds.get(bound)
        if limit is None or col not in row:
            continue
        value = row[col]
        if value is None or sign * (value - limit) > 0:
            return False
    return True


def train_row(ctx: Context, p: dict) -> dict:
    from gpuplan.interfaces import api
    from gpuplan.interfaces.api._common import default_seq_len
    from gpuplan.interfaces.api.training import DEFAULT_TOKENS
    from gpuplan.units import parse_count

    model, hw = ctx.models[p["model"]], ctx.hardware[p["hardware"]]
    seq = p["seq_len"] or default_seq_len(model)
    tokens = parse_count(p["tokens"] if p["tokens"] is not None else DEFAULT_TOKENS, field="axes.tokens")
    row = dict.fromkeys(TRAIN_COLUMNS)
    row.update(point=p["point"], model=p["model"], hardware=hw.name, system=hw.system.id, gpu=hw.gpu.id,
               num_gpus=p["gpus"], seq_len=seq, tokens=tokens, status="ok", reason="")
    opts = ctx.train
    try:
        d = api.train(model, hw.system, p["gpus"], gpu=hw.gpu, tokens=tokens, seq_len=seq,
                      global_batch=opts.get("global_batch"), precision=opts.get("precision", "bf16"),
                      framework=opts.get("framework", "megatron"), usd_per_gpu_hour=hw.usd_per_gpu_hour, top=1).to_dict()
    except GpuplanError as exc:
        row.update(status="infeasible", reason=str(exc))
        return row
    plan = d["best_plan"]
    row.update({k: plan[k] for k in ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch",
                                     "recompute", "sharding", "sequence_parallel")})
    row.update({k: d.get(k) for k in ("step_time_s", "tokens_per_s", "mfu_pct", "memory_per_gpu_gib", "days", "gpu_hours",
                                      "energy_kwh", "co2_kg", "usd_per_gpu_hour", "cost_usd")})
    if row["cost_usd"] is not None:
        row["usd_per_million_tokens"] = row["cost_usd"] / tokens * 1e6
    return row


def serve_row(ctx: Context, p: dict) -> dict:
    from gpuplan.interfaces import api

    model, hw = ctx.models[p["model"]], ctx.hardware[p["hardware"]]
    opts = ctx.serve
    row = dict.fromkeys(SERVE_COLUMNS)
    row.update(point=p["point"], model=p["model"], hardware=hw.name, system=hw.system.id, gpu=hw.gpu.id,
               input_len=p["seq_len"] or api.DEFAULT_INPUT_LEN, output_len=p["output_len"] or api.DEFAULT_OUTPUT_LEN,
               rate_rps=p["rate"] or api.DEFAULT_RATE, ttft_slo_ms=opts.get("ttft_ms", api.DEFAULT_TTFT_MS),
               tpot_slo_ms=opts.get("tpot_ms", api.DEFAULT_TPOT_MS), status="ok", reason="")
    try:
        r = api.serve_plan(model, [hw.gpu], rate=row["rate_rps"], ttft_ms=row["ttft_slo_ms"], tpot_ms=row["tpot_slo_ms"],
                           input_len=row["input_len"], output_len=row["output_len"],
                           weight_dtype=opts.get("weight_dtype", "bf16"), kv_dtype=opts.get("kv_dtype", "bf16"),
                           system=hw.system, usd_per_gpu_hour=hw.usd_per_gpu_hour)
    except GpuplanError as exc:
        row.update(status="infeasible", reason=str(exc))
        return row
    b = r.plan.best
    row.update(tp=b.tp, concurrency=b.concurrency, replicas=b.replicas, num_gpus=b.gpus, ttft_p90_ms=b.ttft_p90_ms,
               tpot_p90_ms=b.tpot_p90_ms, replica_output_tokens_per_s=b.replica_output_tokens_per_s,
               usd_per_gpu_hour=b.usd_per_gpu_hour, usd_per_million_tokens=b.usd_per_million_output_tokens,
               kwh_per_million_tokens=r.kwh_per_million_output_tokens)
    day = r.serving_day
    if day is not None:
        row["cost_usd_per_day"] = day.cost_usd
        row["energy_kwh_per_day"] = day.energy.energy_kwh if day.energy is not None else None
    return row


def evaluate_point(ctx: Context, p: dict) -> dict:
    """The row of one point (module docstring), values plain Python (JSON-ready, NaN -> None)."""
    from gpuplan.interfaces.api._common import to_jsonable

    try:
        row = train_row(ctx, p) if ctx.goal == "train" else serve_row(ctx, p)
    except Exception as exc:  # noqa: BLE001 - a bug at one point must not lose the sweep's others
        row = dict.fromkeys(columns(ctx.goal))
        row.update(point=p["point"], model=p["model"], hardware=p["hardware"], status="error",
                   reason=f"{type(exc).__name__}: {exc}")
    row["meets_constraints"] = _meets(row, ctx.constraints)
    return to_jsonable(row)


def evaluate_chunk(ctx: Context, points: list[dict]) -> list[dict]:
    """Rows of a chunk of points, in the order given (the worker's task), under the driver's knob
    overrides (`Context.knob_overrides`)."""
    from gpuplan import knobs
    from gpuplan.interfaces.fitting.knob_catalog import load_all

    if ctx.knob_overrides:
        load_all()  # a spawned worker has not imported every module that declares a knob yet
    with knobs.overridden(ctx.knob_overrides):
        return [evaluate_point(ctx, p) for p in points]
