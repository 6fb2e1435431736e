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

        out = to_jsonable(self.report)
        out["warnings"] = self.warnings
        return out


def serving_features(*, input_len: int, output_len: int, input_dist: str | None = None, output_dist: str | None = None,
                     lengths: str | None = None, spec_tokens: int = 0, spec_acceptance: float | None = None,
                     draft_model: str | ModelSpec | None = None, mtp: int = 0, prefix_hit_rate: float = 0.0,
                     prefix_cache_tokens: int | None = None):
    """(RequestLengths or None, SpeculativeDecoding or None, PrefixCache or None) from the options
    shared by `serve run` and `serve plan` (docs/serving.md); None where the feature is off."""
    from gpuplan.validation_rules import check_number
    from gpuplan.workloads.inference.lengths import is_pairs_file, request_lengths
    from gpuplan.workloads.inference.prefix_cache import PrefixCache
    from gpuplan.workloads.inference.speculative import SpeculativeDecoding

    lens = None
    if input_dist or output_dist or lengths:
        dataset = None
        if lengths and not is_pairs_file(lengths):
            from gpuplan.catalog.datasets import get_dataset

            dataset, lengths = get_dataset(lengths), None
        lens = request_lengths(input_len, output_len, input_dist=input_dist, output_dist=output_dist, lengths=lengths,
                               dataset=dataset)
    spec = None
    check_number(spec_tokens, "spec_tokens", ge=0, integer=True)
    check_number(mtp, "mtp", ge=0, integer=True)
    if spec_tokens:
        if spec_acceptance is None:
            raise InputError("spec_acceptance: speculative decoding needs the per-token acceptance rate, 0-1 "
                             "(--spec-acceptance)", field="spec_acceptance")
        spec = SpeculativeDecoding(int(spec_tokens), float(spec_acceptance),
                                   draft_model=resolve_model(draft_model) if draft_model is not None else None,
                                   mtp_layers=int(mtp))
    elif draft_model is not None or mtp or spec_acceptance is not None:
        raise InputError("spec_tokens: --draft-model / --mtp / --spec-acceptance need --spec-tokens K >= 1", field="spec_tokens")
    check_number(prefix_hit_rate, "prefix_hit_rate", ge=0.0, lt=1.0)
    cache = PrefixCache(float(prefix_hit_rate), prefix_cache_tokens) if prefix_hit_rate > 0 else None
    if cache is None and prefix_cache_tokens is not None:
        raise InputError("prefix_cache_tokens: needs --prefix-hit-rate > 0", field="prefix_cache_tokens")
    return lens, spec, cache


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
    input_dist: str | None = None,
    output_dist: str | None = None,
    lengths: str | None = None,
    spec_tokens: int = 0,
    spec_acceptance: float | None = None,
    draft_model: str | ModelSpec | None = None,
    mtp: int = 0,
    prefix_hit_rate: float = 0.0,
    prefix_cache_tokens: int | None = None,
) -> ServeResult:
    """TTFT, TPOT, throughput and memory of one replica of `model` on tp x pp GPUs (simulated); `ep`
    experts split over ep GPUs, `attention_dp` attention data-parallel groups (Deployment).
    Length distributions (`input_dist`, `output_dist` or `lengths`), speculative decoding
    (`spec_tokens`, `spec_acceptance`, `draft_model` or `mtp`) and prefix caching
    (`prefix_hit_rate`, `prefix_cache_tokens`): `serving_features`, docs/serving.md."""
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
    lens, specdec, cache = serving_features(
        input_len=input_len, output_len=output_len, input_dist=input_dist, output_dist=output_dist, lengths=lengths,
        spec_tokens=spec_tokens, spec_acceptance=spec_acceptance, draft_model=draft_model, mtp=mtp,
        prefix_hit_rate=prefix_hit_rate, prefix_cache_tokens=prefix_cache_tokens)
    if lens is not None:  # the memory fit and static token budget use the mean lengths
        input_len = max(1, round(lens_mean(lens, "input")))
        output_len = max(1, round(lens_mean(lens, "output")))
    return ServeResult(serve_estimate(dep, input_len=input_len, output_len=output_len, rate=rate,
                                      concurrency=concurrency, batch=batch, scheduler=SchedulerConfig(kind=kind),
                                      lengths=lens, speculative=specdec, prefix_cache=cache),
                       rate if concurrency is None and batch is None else None)


def lens_mean(lens, side: str) -> float:
    """Mean tokens of one side of a RequestLengths (analytic for specs, the file's mean for CSV pairs)."""
    if lens.pairs is not None:
        return float((lens.pairs.inputs if side == "input" else lens.pairs.outputs).mean())
    return (lens.input if side == "input" else lens.output).mean


serve = serve_run  # `gpuplan serve MODEL ...` is `gpuplan serve run MODEL ...`


@dataclass(frozen=True)
class CapacityResult(Result):
    """`serve_plan`: `plan` is the workload's CapacityPlan (best + every candidate)."""

    plan: Any  # gpuplan.workloads.inference.capacity.CapacityPlan
    serving_day: Any = None  # gpuplan.facilities.run_cost.RunCost of the best layout for one day
    kwh_per_million_output_tokens: float | None = None
    assumptions: Any = None  # gpuplan.facilities.assumptions.Assumptions
    features: Any = None  # {lengths: mean/percentiles, spec_tokens_per_step, prefix_hit_rate} when any is on

    def json_data(self) -> Any:
        from gpuplan.facilities.run_cost import run_cost_dict
        from gpuplan.interfaces.api._common import to_jsonable

        out = to_jsonable(self.plan)
        if self.serving_day is not None:
            out["best_serving_day"] = run_cost_dict(self.serving_day)
            out["best_kwh_per_million_output_tokens"] = self.kwh_per_million_output_tokens
        if self.features:
            out.update(self.features)
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
    input_dist: str | None = None,
    output_dist: str | None = None,
    lengths: str | None = None,
    spec_tokens: int = 0,
    spec_acceptance: float | None = None,
    draft_model: str | ModelSpec | None = None,
    mtp: int = 0,
    prefix_hit_rate: float = 0.0,
    prefix_cache_tokens: int | None = None,
) -> CapacityResult:
    """Fewest GPUs (type from `gpus`, and TP) serving `rate` req/s within p90 TTFT / TPOT, with cost
    (facilities.pricing.gpu_hour_price per GPU type) and the best layout's energy for one day of
    serving (facilities.run_cost, under one assumptions set: `pue`, `overrides`). `system`: the node
    whose scale-up fabric every GPU type is served on (default: each GPU's widest catalog system);
    `usd_per_gpu_hour`: the price of every GPU type (default: gpu_hour_price). `gpuplan sweep` passes
    both for hypothetical hardware variants. Length distributions, speculative decoding and prefix
    caching: as `serve_run` (`serving_features`); with a length distribution `output_len` is its mean."""
    from gpuplan.facilities.assumptions import assumptions_from_options
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
    lens, specdec, cache = serving_features(
        input_len=input_len, output_len=output_len, input_dist=input_dist, output_dist=output_dist, lengths=lengths,
        spec_tokens=spec_tokens, spec_acceptance=spec_acceptance, draft_model=draft_model, mtp=mtp,
        prefix_hit_rate=prefix_hit_rate, prefix_cache_tokens=prefix_cache_tokens)
    if lens is not None:
        input_len, output_len = lens_mean(lens, "input"), lens_mean(lens, "output")
    res = plan_capacity(resolve_model(model), cands, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                        input_len=input_len, output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                        lengths=lens, speculative=specdec, prefix_cache=cache)
    g, sys_spec = systems[res.best.gpu]
    day = serving_day_cost(sys_spec, g, res.best.gpus, assumptions=a, usd_per_gpu_hour=usd_per_gpu_hour)
    return CapacityResult(res, day, kwh_per_million_output_tokens(day, rate * output_len), a,
                          _features_summary(lens, specdec, cache))


def _features_summary(lens, specdec, cache) -> dict | None:
    """JSON keys of the serving features of a plan: the length distribution's mean and percentiles
    (10,000 draws at the plan's seed), tokens per verify step, prefix hit rate."""
    import numpy as np

    from gpuplan.workloads.inference.capacity import PLAN_SEED
    from gpuplan.workloads.inference.lengths import length_stats

    out: dict = {}
    if lens is not None:
        ins, outs = lens.sample(np.random.default_rng(PLAN_SEED), 10_000)
        for side, x in (("input_len", ins), ("output_len", outs)):
            st = length_stats(x)
            out.update({f"{side}_mean": st.mean, f"{side}_p50": st.p50, f"{side}_p90": st.p90, f"{side}_p99": st.p99})
        out["lengths"] = ", ".join(f"{k}={v}" for k, v in lens.describe().items())
    if specdec is not None:
        out.update(spec_tokens=specdec.tokens, spec_acceptance=specdec.acceptance,
                   spec_tokens_per_step=specdec.tokens_per_step)
    if cache is not None:
        out["prefix_hit_rate"] = cache.hit_rate
    return out or None


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
) -> FrontierResult:
    """Tokens/s per GPU against tokens/s per user over TP and closed-loop concurrency."""
    from gpuplan.workloads.inference.capacity import frontier

    sys_spec, gpu_spec = system_and_gpu(system, gpu)
    return FrontierResult(tuple(frontier(resolve_model(model), gpu_spec, sys_spec, input_len=input_len,
                                         output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)))


