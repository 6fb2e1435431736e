"""`gpuplan.api` for serving: `serve_run` (one deployment under one load), `serve_plan` (fewest GPUs
meeting latency objectives; with `disaggregated=True` the cheapest of co-located and disaggregated
prefill/decode serving, `serve_plan_disaggregated`), `serve_frontier` (throughput vs interactivity) is in serving_frontier.py.
`plot=` on plan and frontier writes a latency-throughput figure (interfaces.reports.serving_plot).

Hardware rule (one for the three, `_common.system_and_gpu`): `--system` names the node and its
GPU; with only `--gpu` (default h100-sxm5-80gb) the GPU's widest catalog system
(`Catalog.widest_system_for`) supplies the tensor-parallel fabric.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Sequence

from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import (
    DEFAULT_GPU, Result, positive, resolve_gpu, resolve_model, resolve_system, system_and_gpu, widest_system,
)
from gpuplan.interfaces.api.serving_inputs import check_pd_ratio, lengths_file, prefix_cache
from gpuplan.specs import Gpu, ModelSpec, System
from gpuplan.workloads.inference.engines import ENGINE_NAMES

#: request shape, and the serving objectives shared by `serve plan` and `plan --goal serve`
from gpuplan.interfaces.api.defaults import (  # noqa: E402,F401
    DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN, DEFAULT_RATE, DEFAULT_TPOT_MS, DEFAULT_TTFT_MS,
)


#: Served / offered requests per second below which an open-loop run is reported as overloaded.
OVERLOAD_FRACTION = 0.95


@dataclass(frozen=True)
class ServeResult(Result):
    """`serve_run`: `report` is the workload's ServeReport."""

    report: Any  # gpuplan.workloads.inference.plan.service.ServeReport
    offered_rate: float | None = None  # requests/s offered by an open-loop (Poisson) load
    moe: bool = False  # the served model has routed experts (selects the error band's regime)
    profile: Any = None; model_spec: Any = None  # noqa: E702 - the EngineProfile run, the ModelSpec served (--emit)
    #: the prediction's regime (interfaces.validation.regimes.serving_regime): hardware generation,
    #: engine, architecture, weight precision; widens the band where no public row shares it
    regime: Any = None

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

        from gpuplan.interfaces.validation.error_bands import serving_bands

        out = to_jsonable(self.report)
        out["band_80pct"] = serving_bands(out, self.moe, self.regime)
        out["warnings"] = self.warnings
        return out


#: `engine` of serve run / serve plan when none is named: workloads.inference.engines.GENERIC's name
from gpuplan.interfaces.api.defaults import DEFAULT_ENGINE  # noqa: E402,F401
#: what `engine` accepts: the default, then the engines (workloads.inference.engines.ENGINE_NAMES)
SERVING_ENGINES = ENGINE_NAMES


def serving_engine(engine: str | None, *, scheduler: str | None = None, memory_fraction: float | None = None):
    """The EngineProfile a serve command runs (workloads.inference.engines): the one named by
    `engine` (default GENERIC), with the explicit `scheduler` kind and KV `memory_fraction` in place
    of its own (`memory_fraction` is checked, > 0 and <= 1, with every numeric option:
    validation_rules). Bad input: InputError naming `engine` or `scheduler` and what is allowed."""
    from gpuplan.workloads.inference.engines import engine_profile
    from gpuplan.workloads.inference.sim.schedulers import SchedulerKind

    try:
        profile = engine_profile(engine if engine is not None else DEFAULT_ENGINE)
    except InputError as exc:  # named as the option, as gpuplan.api's option checks are (`--tp: ...`)
        raise InputError(f"--engine: {str(exc).split(': ', 1)[1]}", field="engine", allowed=exc.allowed) from None
    kind = None
    if scheduler is not None:
        try:
            kind = SchedulerKind(scheduler)
        except ValueError:
            allowed = ", ".join(k.value for k in SchedulerKind)
            raise InputError(f"scheduler: unknown '{scheduler}'; allowed: {allowed}", field="scheduler",
                             allowed=allowed) from None
    return profile.overridden(scheduler=kind, memory_fraction=memory_fraction)


def serving_features(*, input_len: int, output_len: int, input_dist: str | None = None, output_dist: str | None = None,
                     lengths: str | None = None, spec_tokens: int = 0, spec_acceptance: float | None = None,
                     draft_model: str | ModelSpec | None = None, mtp: int = 0, prefix_hit_rate: float = 0.0,
                     prefix_cache_tokens: int | None = None):
    """(RequestLengths or None, SpeculativeDecoding or None, PrefixCache or None) from the options
    shared by `serve run` and `serve plan` (docs/serving.md); None where the feature is off."""
    from gpuplan.validation_rules import check_number
    from gpuplan.workloads.inference.sim.lengths import request_lengths
    from gpuplan.workloads.inference.cost.speculative import SpeculativeDecoding

    lens = None
    if input_dist or output_dist or lengths:
        with lengths_file(lengths) if lengths else nullcontext() as pairs:
            dataset = None
            if lengths and pairs is None:
                from gpuplan.catalog.datasets import get_dataset

                dataset = get_dataset(lengths)
            lens = request_lengths(input_len, output_len, input_dist=input_dist, output_dist=output_dist,
                                   lengths=pairs, dataset=dataset)
    spec = None
    check_number(spec_tokens, "spec_tokens", ge=0, integer=True)
    check_number(mtp, "mtp", ge=0, integer=True)
    if spec_tokens:
        if spec_acceptance is None:
            raise InputError("spec_acceptance: speculative decoding needs the per-token acceptance rate, 0-1 "
                             "(--spec-acceptance)", field="spec_acceptance")
        spec = SpeculativeDecoding(int(spec_tokens), float(spec_acceptance),
                                   draft_model=resolve_model(draft_model, "draft_model") if draft_model is not None else None,
                                   mtp_layers=int(mtp))
    elif draft_model is not None or mtp or spec_acceptance is not None:
        raise InputError("spec_tokens: --draft-model / --mtp / --spec-acceptance need --spec-tokens K >= 1", field="spec_tokens")
    return lens, spec, prefix_cache(prefix_hit_rate, prefix_cache_tokens)


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
    kv_dtype: str | None = None,
    scheduler: str | None = None,
    engine: str = DEFAULT_ENGINE,
    memory_fraction: float | None = None,
    input_dist: str | None = None,
    output_dist: str | None = None,
    lengths: str | None = None,
    spec_tokens: int = 0,
    spec_acceptance: float | None = None,
    draft_model: str | ModelSpec | None = None,
    mtp: int = 0,
    prefix_hit_rate: float = 0.0,
    prefix_cache_tokens: int | None = None,
    usd_per_gpu_hour: float | None = None,
    attention_dp_balance: bool = False,
) -> ServeResult:
    """TTFT, TPOT, throughput and memory of one replica of `model` on tp x pp GPUs (simulated); `ep`
    experts split over ep GPUs, `attention_dp` attention data-parallel groups, `attention_dp_balance` the
    engine's balance scheduler for them (Deployment). Length distributions (`input_dist`, `output_dist` or `lengths`), speculative decoding
    (`spec_tokens`, `spec_acceptance`, `draft_model` or `mtp`) and prefix caching
    (`prefix_hit_rate`, `prefix_cache_tokens`): `serving_features`, docs/serving.md.
    `engine`: the serving engine whose defaults run (workloads.inference.engines: its scheduler, KV
    memory rule, fraction and block size, per-step limits, CUDA-graph padding, TP all-reduce; default
    `generic`, gpuplan's own); `scheduler` and `memory_fraction` (the KV budget rule's fraction)
    override the engine's (`serving_engine`). `usd_per_gpu_hour`: the GPU's price (default: the
    cheapest catalog cloud price, facilities.pricing; none known: no cost keys). `kv_dtype` None: the
    engine's own choice for `weight_dtype` weights (EngineProfile.default_kv_dtype: TensorRT-LLM
    follows an FP8 / NVFP4 checkpoint's FP8 KV recipe), else bf16."""
    from gpuplan.interfaces.validation.regimes import serving_regime
    from gpuplan.workloads.inference.cost.deployment import Deployment
    from gpuplan.workloads.inference.plan.service import serve_estimate

    profile = serving_engine(engine, scheduler=scheduler, memory_fraction=memory_fraction)
    kv_dtype = profile.kv_dtype_for(weight_dtype, kv_dtype)
    positive(tp, "tp")
    positive(pp, "pp")
    positive(ep, "ep")
    positive(attention_dp, "attention_dp")
    spec = resolve_model(model)
    sys_spec, gpu_spec = system_and_gpu(system, gpu, replica_gpus=tp * pp)
    dep = Deployment(spec, gpu_spec, sys_spec, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, weight_dtype=weight_dtype,
                     kv_dtype=kv_dtype, attention_dp_balance=bool(attention_dp_balance), **profile.deployment_options())
    lens, specdec, cache = serving_features(
        input_len=input_len, output_len=output_len, input_dist=input_dist, output_dist=output_dist, lengths=lengths,
        spec_tokens=spec_tokens, spec_acceptance=spec_acceptance, draft_model=draft_model, mtp=mtp,
        prefix_hit_rate=prefix_hit_rate, prefix_cache_tokens=prefix_cache_tokens)
    if lens is not None:  # the memory fit and static token budget use the mean lengths
        input_len = max(1, round(lens_mean(lens, "input")))
        output_len = max(1, round(lens_mean(lens, "output")))
    from gpuplan.facilities.pricing import gpu_hour_price

    price = gpu_hour_price(gpu_spec, usd_per_gpu_hour, required=False)
    return ServeResult(serve_estimate(dep, input_len=input_len, output_len=output_len, rate=rate,
                                      concurrency=concurrency, batch=batch, scheduler=profile.for_gpu(gpu_spec).scheduler_config(),
                                      lengths=lens, speculative=specdec, prefix_cache=cache, engine=profile,
                                      usd_per_gpu_hour=None if price is None else price.value),
                       rate if concurrency is None and batch is None else None, spec.moe is not None, profile, spec,
                       regime=serving_regime(gpu_spec, profile.name, spec.moe is not None, weight_dtype))


def lens_mean(lens, side: str) -> float:
    """Mean tokens of one side of a RequestLengths (analytic for specs, the file's mean for CSV pairs;
    disaggregation.mean_lengths)."""
    from gpuplan.workloads.inference.plan.disaggregation import mean_lengths

    return mean_lengths(lens)[0 if side == "input" else 1]


serve = serve_run  # `gpuplan serve MODEL ...` is `gpuplan serve run MODEL ...`


@dataclass(frozen=True)
class CapacityResult(Result):
    """`serve_plan`: `plan` is the workload's CapacityPlan (best + every candidate)."""

    plan: Any  # gpuplan.workloads.inference.plan.capacity.CapacityPlan
    serving_day: Any = None  # gpuplan.facilities.run_cost.RunCost of the best layout for one day
    kwh_per_million_output_tokens: float | None = None
    assumptions: Any = None  # gpuplan.facilities.assumptions.Assumptions
    plot_file: str | None = None  # the --plot figure written, if any
    features: Any = None  # {lengths: mean/percentiles, spec_tokens_per_step, prefix_hit_rate} when any is on
    #: the EngineProfile every candidate ran, the ModelSpec and formats served (`serve plan --emit`)
    profile: Any = None; model_spec: Any = None; weight_dtype: str = "bf16"; kv_dtype: str = "bf16"  # noqa: E702
    #: the best layout's regime against the public rows (error_bands.regime_summary): validated or not, and why
    best_regime: dict | None = None
    #: the load and lengths the plan was sized for ({rate, input_len, output_len}): `--emit vllm-bench` & co.
    workload: dict | None = None
    #: with `confidence`: {level, by_gpu: {gpu: latency_factor, ttft/tpot objective ms, band regime, validated, reason}}
    confidence: dict | None = None

    def json_data(self) -> Any:
        from gpuplan.facilities.run_cost import run_cost_dict
        from gpuplan.interfaces.api._common import to_jsonable

        out = to_jsonable(self.plan)
        out["kv_dtype"] = self.kv_dtype  # every layout's KV format (EngineProfile.kv_dtype_for when unset)
        if self.best_regime is not None:
            out["best_regime"] = self.best_regime
        if self.confidence is not None:
            out["confidence"] = self.confidence
        if self.plot_file is not None:
            out["plot_file"] = self.plot_file
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
    kv_dtype: str | None = None,
    pue: float | None = None,
    overrides=None,
    system: str | System | None = None,
    usd_per_gpu_hour: float | None = None,
    progress=None,
    disaggregated: bool = False,
    pd_ratio: str | None = None,
    kv_link: str | None = None,
    prefill_gpus: str | Gpu | Sequence[str | Gpu] | None = None,
    decode_gpus: str | Gpu | Sequence[str | Gpu] | None = None,
    plot: str | None = None,
    input_dist: str | None = None,
    output_dist: str | None = None,
    lengths: str | None = None,
    spec_tokens: int = 0,
    spec_acceptance: float | None = None,
    draft_model: str | ModelSpec | None = None,
    mtp: int = 0,
    prefix_hit_rate: float = 0.0,
    prefix_cache_tokens: int | None = None,
    engine: str = DEFAULT_ENGINE,
    scheduler: str | None = None,
    memory_fraction: float | None = None,
    confidence: float | None = None,
) -> "CapacityResult | DisaggregatedPlanResult":
    """Fewest GPUs (type from `gpus`, and TP) serving `rate` req/s within p90 TTFT / TPOT, with cost
    (facilities.pricing.gpu_hour_price per GPU type) and the best layout's energy for one day of
    serving (facilities.run_cost, under one assumptions set: `pue`, `overrides`). `system`: the node
    whose scale-up fabric every GPU type is served on (default: each GPU's widest catalog system);
    `usd_per_gpu_hour`: the price of every GPU type (default: gpu_hour_price). `gpuplan sweep` passes
    both for hypothetical hardware variants. `progress(stage, fraction)` before each (GPU, tp).
    `disaggregated=True`: `serve_plan_disaggregated` (with
    `pd_ratio`, `kv_link`, `prefill_gpus`, `decode_gpus`). `plot`: write the latency-throughput figure
    of the candidates (interfaces.reports.serving_plot) to this .png/.svg/.pdf.
    Length distributions, speculative decoding and prefix caching: as `serve_run` (`serving_features`);
    with a length distribution `output_len` is its mean. Co-located layouts: tp, and for MoE models
    ep and attention_dp (capacity.colocated_layouts); each gets the fewest replicas whose p90s meet the
    objectives under Poisson arrivals at the rate / replicas (a closed loop gives the first guess;
    workloads.inference.replica). `engine`, `scheduler`,
    `memory_fraction`: as `serve_run`; every layout (and with `disaggregated`, every instance) runs
    that engine's defaults. `confidence` (0.8, the shipped bands' level; None: the point prediction):
    each GPU type's layouts must meet the objectives at the pessimistic edge of that type's serving
    latency band (error_bands.serving_latency_margin: its regime, validated or not), i.e. their p90s
    times exp(q90) meet the objectives; `confidence_margins` reports each factor."""
    from gpuplan.facilities.assumptions import assumptions_from_options, memory_scope
    from gpuplan.facilities.pricing import gpu_hour_price
    from gpuplan.facilities.run_cost import kwh_per_million_output_tokens, serving_day_cost
    from gpuplan.workloads.inference.plan.capacity import plan_capacity

    from gpuplan.interfaces.validation.error_bands import check_confidence

    confidence = check_confidence(confidence)
    if disaggregated:
        if confidence is not None:
            raise InputError("confidence: plans the co-located search only; drop --disaggregated or --confidence",
                             field="confidence")
        return serve_plan_disaggregated(
            model, gpus, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, input_len=input_len, output_len=output_len,
            weight_dtype=weight_dtype, kv_dtype=kv_dtype, system=system, usd_per_gpu_hour=usd_per_gpu_hour,
            pd_ratio=pd_ratio, kv_link=kv_link, prefill_gpus=prefill_gpus, decode_gpus=decode_gpus, plot=plot,
            pue=pue, overrides=overrides, input_dist=input_dist, output_dist=output_dist, lengths=lengths,
            spec_tokens=spec_tokens, spec_acceptance=spec_acceptance, draft_model=draft_model, mtp=mtp,
            prefix_hit_rate=prefix_hit_rate, prefix_cache_tokens=prefix_cache_tokens, engine=engine,
            scheduler=scheduler, memory_fraction=memory_fraction)
    profile = serving_engine(engine, scheduler=scheduler, memory_fraction=memory_fraction)
    kv_dtype = profile.kv_dtype_for(weight_dtype, kv_dtype)
    for name, value in (("pd_ratio", pd_ratio), ("kv_link", kv_link), ("prefill_gpus", prefill_gpus),
                        ("decode_gpus", decode_gpus)):
        if value is not None:
            raise InputError(f"{name}: only with disaggregated serving (--disaggregated)", field=name)
    if plot is not None:
        from gpuplan.interfaces.reports.serving_plot import check_plot_file

        check_plot_file(plot)
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
    spec = resolve_model(model)
    from gpuplan.interfaces.validation.error_bands import confidence_margins

    margins = None if confidence is None else confidence_margins(
        [c[0] for c in cands], profile.name, spec.moe is not None, weight_dtype, confidence, ttft_ms, tpot_ms)
    with memory_scope(a):  # `--set usable_memory_fraction=` (workloads.memory_headroom)
        res = plan_capacity(spec, cands, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                            input_len=input_len, output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                            progress=progress, lengths=lens, speculative=specdec, prefix_cache=cache, engine=profile,
                            slo_factors=None if margins is None else
                            {g: m["latency_factor"] for g, m in margins["by_gpu"].items()})
    g, sys_spec = systems[res.best.gpu]
    day = serving_day_cost(sys_spec, g, res.best.gpus, assumptions=a, usd_per_gpu_hour=usd_per_gpu_hour)
    plot_file = None
    if plot is not None:
        plot_file = _plot_capacity(plot, spec, res, systems, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                                   input_len=max(1, round(input_len)), output_len=max(1, round(output_len)),
                                   weight_dtype=weight_dtype, kv_dtype=kv_dtype, lengths=lens, speculative=specdec,
                                   prefix_cache=cache, engine=profile)
    from gpuplan.interfaces.validation.error_bands import regime_summary
    from gpuplan.interfaces.validation.regimes import serving_regime

    best_regime = regime_summary("inference", serving_regime(g, profile.name, spec.moe is not None, weight_dtype))
    return CapacityResult(res, day, kwh_per_million_output_tokens(day, rate * output_len), a, plot_file,
                          _features_summary(lens, specdec, cache), profile, spec, weight_dtype, kv_dtype,
                          best_regime=best_regime, workload={"rate": rate, "input_len": input_len, "output_len": output_len},
                          confidence=margins)


#: candidates drawn by the plain plan's --plot (the best ones; MoE searches give many more layouts)
PLOT_CANDIDATES = 8


def _plot_capacity(path: str, spec: ModelSpec, res, systems: dict, **kw) -> str:
    """The plain plan's figure: the PLOT_CANDIDATES best candidates' co-located curves at their
    replica counts (Poisson)."""
    from gpuplan.interfaces.reports.serving_plot import plot_plan
    from gpuplan.workloads.inference.plan.disaggregation import InstanceLayout, colocated_latency_curves

    picks = [(InstanceLayout(systems[c.gpu][0], systems[c.gpu][1], c.tp, ep=c.ep, attention_dp=c.attention_dp,
                             usd_per_gpu_hour=c.usd_per_gpu_hour), c.replicas)
             for c in res.candidates if c.meets_slo][:PLOT_CANDIDATES]
    opts = colocated_latency_curves(spec, picks, **kw)
    best = res.best
    opts = [o if o.layout != f"{best.replicas} x {best.layout}" else _replace(o, why_not_best="best") for o in opts]
    title = (f"gpuplan serve plan {spec.name}: {kw['rate']:g} req/s, {kw['input_len']} in / {kw['output_len']} out tokens, "
             f"Poisson arrivals")
    return str(plot_plan(path, opts, ttft_slo_ms=kw["ttft_ms"], tpot_slo_ms=kw["tpot_ms"], title=title))


def _replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)


@dataclass(frozen=True)
class DisaggregatedPlanResult(Result):
    """`serve_plan(..., disaggregated=True)`: `plan` is the workload's DisaggregationPlan."""

    plan: Any  # gpuplan.workloads.inference.plan.disaggregation.DisaggregationPlan
    plot_file: str | None = None
    #: one day of serving per pool of the best option (role, gpu, gpus, RunCost), as `serve plan`'s best_serving_day
    serving_days: tuple = ()
    kwh_per_million_output_tokens: float | None = None
    assumptions: Any = None  # gpuplan.facilities.assumptions.Assumptions
    features: Any = None  # as CapacityResult.features
    profile: Any = None; model_spec: Any = None; weight_dtype: str = "bf16"; kv_dtype: str = "bf16"  # noqa: E702

    def json_data(self) -> Any:
        from gpuplan.facilities.run_cost import run_cost_dict
        from gpuplan.interfaces.api._common import to_jsonable

        out = to_jsonable(self.plan)
        out["kv_dtype"] = self.kv_dtype  # every pool's KV format (EngineProfile.kv_dtype_for when unset)
        if self.features:
            out.update(self.features)
        out["best_serving_day_per_pool"] = [{"role": role, "gpu": gpu, "gpus": n, **run_cost_dict(day)}
                                            for role, gpu, n, day in self.serving_days]
        out["best_kwh_per_million_output_tokens"] = self.kwh_per_million_output_tokens
        if self.assumptions is not None:
            values = self.assumptions.values()
            out["assumptions"] = {k: values[k] for k in ("pue", "grid_kg_co2_per_kwh", "electricity_usd_per_kwh",
                                                        "busy_activity_fraction")}
        out["plot_file"] = self.plot_file
        return out


def serve_plan_disaggregated(
    model: str | ModelSpec,
    gpus: str | Gpu | Sequence[str | Gpu] = DEFAULT_GPU,
    *,
    rate: float = DEFAULT_RATE,
    ttft_ms: float = DEFAULT_TTFT_MS,
    tpot_ms: float = DEFAULT_TPOT_MS,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
    system: str | System | None = None,
    usd_per_gpu_hour: float | None = None,
    pd_ratio: str | None = None,
    kv_link: str | None = None,
    prefill_gpus: str | Gpu | Sequence[str | Gpu] | None = None,
    decode_gpus: str | Gpu | Sequence[str | Gpu] | None = None,
    tps: Sequence[int] = (1, 2, 4, 8),
    plot: str | None = None,
    pue: float | None = None,
    overrides=None,
    input_dist: str | None = None,
    output_dist: str | None = None,
    lengths: str | None = None,
    spec_tokens: int = 0,
    spec_acceptance: float | None = None,
    draft_model: str | ModelSpec | None = None,
    mtp: int = 0,
    prefix_hit_rate: float = 0.0,
    prefix_cache_tokens: int | None = None,
    engine: str = DEFAULT_ENGINE,
    scheduler: str | None = None,
    memory_fraction: float | None = None,
) -> DisaggregatedPlanResult:
    """The cheapest way to serve `rate` req/s within p90 TTFT / TPOT: disaggregated prefill / decode
    pools (GPU type and layout each, the P:D ratio; `pd_ratio` 'P:D' fixes it) or co-located
    replicas, compared in one list with $/M output tokens and why each other option loses
    (workloads.inference.plan.disaggregation). `prefill_gpus` / `decode_gpus` restrict a pool's GPU types
    (default `gpus`); `kv_link` 'nvlink' or 'network' forces the KV path (default: NVLink when both
    pools fit in one scale-up domain). The best option's energy: one day of serving per pool
    (facilities.run_cost at busy_activity_fraction, under `pue` / `overrides`), and facility kWh per
    million output tokens summed over the pools. Length distributions, speculative decoding and prefix
    caching: as `serve_run` (`serving_features`; workloads.inference.plan.disaggregation gives how each
    pool sees them); with a length distribution the cost uses its mean output. `engine`,
    `scheduler`, `memory_fraction`: as `serve_run`, for every instance."""
    from gpuplan.facilities.assumptions import assumptions_from_options, memory_scope
    from gpuplan.facilities.pricing import gpu_hour_price
    from gpuplan.facilities.run_cost import serving_day_cost
    from gpuplan.workloads.inference.plan.disaggregation import plan_disaggregated
    from gpuplan.workloads.inference.cost.kv_transfer import KvLink

    pd_ratio = check_pd_ratio(pd_ratio)
    profile = serving_engine(engine, scheduler=scheduler, memory_fraction=memory_fraction)
    kv_dtype = profile.kv_dtype_for(weight_dtype, kv_dtype)
    a = assumptions_from_options([f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, dict) else overrides,
                                 pue=pue)
    if kv_link is not None and kv_link not in ("auto",):
        try:
            KvLink(kv_link)
        except ValueError:
            raise InputError(f"kv_link: unknown '{kv_link}'; allowed: auto, nvlink, network", field="kv_link",
                             allowed="auto, nvlink, network") from None
    link = None if kv_link in (None, "auto") else kv_link
    for t in tps:
        positive(t, "tp")
    if plot is not None:
        from gpuplan.interfaces.reports.serving_plot import check_plot_file

        check_plot_file(plot)
    node = resolve_system(system) if system is not None else None

    specs: dict[str, tuple[Gpu, System]] = {}

    def hardware(items):
        out = []
        for g in gpu_list(items):
            price = gpu_hour_price(g, usd_per_gpu_hour, required=False)
            specs[g.id] = (g, node if node is not None else widest_system(g))
            out.append((g, specs[g.id][1], price.value if price is not None else None))
        return out

    lens, specdec, cache = serving_features(
        input_len=input_len, output_len=output_len, input_dist=input_dist, output_dist=output_dist, lengths=lengths,
        spec_tokens=spec_tokens, spec_acceptance=spec_acceptance, draft_model=draft_model, mtp=mtp,
        prefix_hit_rate=prefix_hit_rate, prefix_cache_tokens=prefix_cache_tokens)
    out_mean = float(output_len)
    if lens is not None:  # the saturation ladders' scale: the rounded means
        input_len = max(1, round(lens_mean(lens, "input")))
        out_mean = lens_mean(lens, "output")
        output_len = max(2, round(out_mean))
    spec = resolve_model(model)
    with memory_scope(a):  # `--set usable_memory_fraction=` (workloads.memory_headroom)
        res = plan_disaggregated(
            spec, hardware(gpus), rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, input_len=input_len, output_len=output_len,
            weight_dtype=weight_dtype, kv_dtype=kv_dtype, tps=tuple(tps), pd_ratio=pd_ratio, kv_link=link,
            prefill_hardware=hardware(prefill_gpus) if prefill_gpus is not None else None,
            decode_hardware=hardware(decode_gpus) if decode_gpus is not None else None,
            lengths=lens, speculative=specdec, prefix_cache=cache, engine=profile)
    plot_file = None
    if plot is not None:
        from gpuplan.interfaces.reports.serving_plot import plot_plan

        title = (f"gpuplan serve plan --disaggregated {spec.name}: {rate:g} req/s, {input_len} in / {output_len} out tokens")
        plot_file = str(plot_plan(plot, res.options, ttft_slo_ms=ttft_ms, tpot_slo_ms=tpot_ms, title=title))
    days = tuple((pool.role, pool.gpu, pool.gpus, serving_day_cost(specs[pool.gpu][1], specs[pool.gpu][0], pool.gpus,
                                                                   assumptions=a, usd_per_gpu_hour=usd_per_gpu_hour))
                 for pool in res.best.pools)
    kwh = None
    if days and all(d.power is not None for *_, d in days):
        facility_kw = sum(d.power.facility_power_w for *_, d in days) / 1e3
        kwh = facility_kw / (rate * out_mean * 3600.0) * 1e6  # kW / (tokens/s x 3600 s/h) x 1e6
    return DisaggregatedPlanResult(res, plot_file, days, kwh, a, _features_summary(lens, specdec, cache), profile, spec,
                                   weight_dtype, kv_dtype)

def _features_summary(lens, specdec, cache) -> dict | None:
    """JSON keys of the serving features of a plan: the length distribution's mean and percentiles
    (10,000 draws at the plan's seed), tokens per verify step, prefix hit rate."""
    import numpy as np

    from gpuplan.workloads.inference.replica import PLANNING_SEED as PLAN_SEED
    from gpuplan.workloads.inference.sim.lengths import length_stats

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
