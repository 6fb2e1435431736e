"""`gpuplan.api` for serving: `serve_run` (one deployment under one load), `serve_plan` (fewest GPUs
meeting latency objectives), `serve_frontier` (throughput vs interactivity).

Hardware rule (one for the three, `_common.system_and_gpu`): `--system` names the node and its
GPU; with only `--gpu` (default h100-sxm5-80gb) the GPU's widest catalog system
(`Catalog.widest_system_for`) supplies the tensor-parallel fabric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import (
    DEFAULT_GPU, Result, positive, resolve_gpu, resolve_model, resolve_system, system_and_gpu, widest_system,
)
from gpuplan.specs import Gpu, ModelSpec, System

DEFAULT_INPUT_LEN = 2048
DEFAULT_OUTPUT_LEN = 256
#: serving objectives shared by `serve plan` and `plan --goal serve`
DEFAULT_RATE = 10.0
DEFAULT_TTFT_MS = 2000.0
DEFAULT_TPOT_MS = 50.0


#: Served / offered requests per second below which an open-loop run is reported as overloaded.
OVERLOAD_FRACTION = 0.95


@dataclass(frozen=True)
class ServeResult(Result):
    """`serve_run`: `report` is the workload's ServeReport."""

    report: Any  # gpuplan.workloads.inference.service.ServeReport
    offered_rate: float | None = None  # requests/s offered by an open-loop (Poisson) load
    moe: bool = False  # the served model has routed experts (selects the error band's regime)

    @property
    def warnings(self) -> list[str]:
        """Overload: an open loop offered more requests/s than the replica completes (queues grow
        without bound, so the latencies depend on how long the run is, not on the deployment)."""
        r = self.report
        if self.offered_rate is not None and r.requests_per_s < OVERLOAD_FRACTION * self.offered_rate:
            return [f"overloaded: {self.offered_rate:g} requests/s offered, {r.requests_per_s:.3g} served; "
                    f"latencies grow with the queue (add replicas or GPUs: `gpuplan serve plan`)"]
        return []

    def json_data(self) -> Any:
        from gpuplan.interfaces.api._common import to_jsonable

        from gpuplan.interfaces.error_bands import serving_bands

        out = to_jsonable(self.report)
        out["band_80pct"] = serving_bands(out, self.moe)
        out["warnings"] = self.warnings
        return out


def serve_run(
    model: str | ModelSpec,
    gpu: str | Gpu | None = None,
    *,
    system: str | System | None = None,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    attention_dp: int = 1,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    rate: float | None = None,
    concurrency: int | None = None,
    batch: int | None = None,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    scheduler: str = "chunked",
) -> ServeResult:
    """TTFT, TPOT, throughput and memory of one replica of `model` on tp x pp GPUs (simulated); `ep`
    experts split over ep GPUs, `attention_dp` attention data-parallel groups (Deployment)."""
    from gpuplan.workloads.inference.deployment import Deployment
    from gpuplan.workloads.inference.schedulers import SchedulerConfig, SchedulerKind
    from gpuplan.workloads.inference.service import serve_estimate

    try:
        kind = SchedulerKind(scheduler)
    except ValueError:
        raise InputError(f"scheduler: unknown '{scheduler}'; allowed: static, continuous, chunked", field="scheduler") from None
    positive(tp, "tp")
    positive(pp, "pp")
    positive(ep, "ep")
    positive(attention_dp, "attention_dp")
    spec = resolve_model(model)
    sys_spec, gpu_spec = system_and_gpu(system, gpu, replica_gpus=tp * pp)
    dep = Deployment(spec, gpu_spec, sys_spec, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp,
                     weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    return ServeResult(serve_estimate(dep, input_len=input_len, output_len=output_len, rate=rate,
                                      concurrency=concurrency, batch=batch, scheduler=SchedulerConfig(kind=kind)),
                       rate if concurrency is None and batch is None else None, spec.moe is not None)


serve = serve_run  # `gpuplan serve MODEL ...` is `gpuplan serve run MODEL ...`


@dataclass(frozen=True)
class CapacityResult(Result):
    """`serve_plan`: `plan` is the workload's CapacityPlan (best + every candidate)."""

    plan: Any  # gpuplan.workloads.inference.capacity.CapacityPlan
    serving_day: Any = None  # gpuplan.facilities.run_cost.RunCost of the best layout for one day
    kwh_per_million_output_tokens: float | None = None
    assumptions: Any = None  # gpuplan.facilities.assumptions.Assumptions

    def json_data(self) -> Any:
        from gpuplan.facilities.run_cost import run_cost_dict
        from gpuplan.interfaces.api._common import to_jsonable

        out = to_jsonable(self.plan)
        if self.serving_day is not None:
            out["best_serving_day"] = run_cost_dict(self.serving_day)
            out["best_kwh_per_million_output_tokens"] = self.kwh_per_million_output_tokens
        if self.assumptions is not None:
            values = self.assumptions.values()
            out["assumptions"] = {k: values[k] for k in ("pue", "grid_kg_co2_per_kwh", "electricity_usd_per_kwh",
                                                        "busy_activity_fraction")}
        return out


def gpu_list(gpus: str | Gpu | Sequence[str | Gpu]) -> list[Gpu]:
    """GPUs from one id, a comma-separated string, specs, or a list of any of them (duplicates kept once)."""
    items = [gpus] if isinstance(gpus, (str, Gpu)) else list(gpus)
    out: list[Gpu] = []
    for item in items:
        for part in ([p.strip() for p in item.split(",") if p.strip()] if isinstance(item, str) else [item]):
            g = resolve_gpu(part)
            if all(g.id != o.id for o in out):
                out.append(g)
    if not out:
        raise InputError("gpu: give at least one GPU id", field="gpu")
    return out


def serve_plan(
    model: str | ModelSpec,
    gpus: str | Gpu | Sequence[str | Gpu] = DEFAULT_GPU,
    *,
    rate: float = DEFAULT_RATE,
    ttft_ms: float = DEFAULT_TTFT_MS,
    tpot_ms: float = DEFAULT_TPOT_MS,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    pue: float | None = None,
    overrides=None,
    system: str | System | None = None,
    usd_per_gpu_hour: float | None = None,
    progress=None,
) -> CapacityResult:
    """Fewest GPUs (type from `gpus`, and TP) serving `rate` req/s within p90 TTFT / TPOT, with cost
    (facilities.pricing.gpu_hour_price per GPU type) and the best layout's energy for one day of
    serving (facilities.run_cost, under one assumptions set: `pue`, `overrides`). `system`: the node
    whose scale-up fabric every GPU type is served on (default: each GPU's widest catalog system);
    `usd_per_gpu_hour`: the price of every GPU type (default: gpu_hour_price). `gpuplan sweep` passes
    both for hypothetical hardware variants. `progress(stage, fraction)` before each (GPU, tp)."""
    from gpuplan.facilities.assumptions import assumptions_from_options, memory_scope
    from gpuplan.facilities.pricing import gpu_hour_price
    from gpuplan.facilities.run_cost import kwh_per_million_output_tokens, serving_day_cost
    from gpuplan.workloads.inference.capacity import plan_capacity

    pairs = [f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, dict) else overrides
    a = assumptions_from_options(pairs, pue=pue)
    cands, systems = [], {}
    node = resolve_system(system) if system is not None else None
    for g in gpu_list(gpus):
        price = gpu_hour_price(g, usd_per_gpu_hour, required=False)
        systems[g.id] = (g, node if node is not None else widest_system(g))
        cands.append((g, systems[g.id][1], price.value if price is not None else None))
    with memory_scope(a):  # `--set usable_memory_fraction=` (workloads.memory_headroom)
        res = plan_capacity(resolve_model(model), cands, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                            input_len=input_len, output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                            progress=progress)
    g, sys_spec = systems[res.best.gpu]
    day = serving_day_cost(sys_spec, g, res.best.gpus, assumptions=a, usd_per_gpu_hour=usd_per_gpu_hour)
    return CapacityResult(res, day, kwh_per_million_output_tokens(day, rate * output_len), a)


@dataclass(frozen=True)
class FrontierResult(Result):
    """`serve_frontier`: every simulated (tp, concurrency) point."""

    points: tuple

    def json_data(self) -> dict:
        return {"points": list(self.points)}


def serve_frontier(
    model: str | ModelSpec,
    gpu: str | Gpu | None = None,
    *,
    system: str | System | None = None,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    progress=None,
) -> FrontierResult:
    """Tokens/s per GPU against tokens/s per user over TP and closed-loop concurrency;
    `progress(stage, fraction)` before each tp."""
    from gpuplan.workloads.inference.capacity import frontier

    sys_spec, gpu_spec = system_and_gpu(system, gpu)
    return FrontierResult(tuple(frontier(resolve_model(model), gpu_spec, sys_spec, input_len=input_len,
                                         output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                                         progress=progress)))


