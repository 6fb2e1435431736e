"""One-call serving estimate: a deployment under one load -> the report `gpuplan serve` prints.
The replica, its load split and its measurement window are replica.py's (one path for serve run,
serve plan, serve frontier, disaggregation and validate).

Load (exactly one): `rate` (Poisson open loop, requests/s), `concurrency` (closed loop) or
`batch` (one static batch). With none, the closed loop runs at the largest concurrency that fits
in memory and the scheduler's sequence cap (the replica's saturated throughput).

With attention data parallelism (Deployment.attention_dp = a) the replica is a attention groups,
each with its own requests: the load splits evenly over them (rate / a, ceil(concurrency / a),
ceil(batch / a)), one group is simulated (its MoE layers carry all a groups' tokens, see
operators.py) and the replica's throughput is a x the group's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuplan.errors import InputError
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.prefix_cache import PrefixCache
from gpuplan.workloads.inference.cost.speculative import SpeculativeDecoding
from gpuplan.workloads.inference.engines import GENERIC, EngineProfile
from gpuplan.workloads.inference.plan.capacity import frontier_coordinates
from gpuplan.workloads.inference.plan.token_costs import token_costs
from gpuplan.workloads.inference.replica import (
    PLANNING_SEED, STEADY_STATE, Load, LoadKind, Replica, ServingFeatures, static_scheduler,
)
from gpuplan.workloads.inference.sim.lengths import RequestLengths, length_stats
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig


@dataclass(frozen=True)
class ServeReport:
    """`gpuplan serve --json` keys; latencies are means unless the key names a percentile."""

    model: str
    gpu: str
    tp: int
    pp: int
    ep: int
    attention_dp: int
    weight_dtype: str
    kv_dtype: str
    load: str
    input_len: int
    output_len: int
    ttft_ms: float
    ttft_p50_ms: float
    ttft_p90_ms: float
    ttft_p99_ms: float
    tpot_ms: float
    tpot_p50_ms: float
    tpot_p90_ms: float
    tpot_p99_ms: float
    e2e_p50_ms: float
    e2e_p90_ms: float
    e2e_p99_ms: float
    output_tokens_per_s: float
    requests_per_s: float
    kv_cache_bytes_per_token: float
    kv_cache_gib_per_gpu: float
    weights_gib_per_gpu: float
    max_concurrent_sequences: int
    max_context_tokens: int
    peak_kv_gib_per_gpu: float
    preemptions: int
    # lengths the requests drew (lengths.py): mean and percentiles, tokens
    input_len_mean: float = 0.0
    input_len_p50: float = 0.0
    input_len_p90: float = 0.0
    input_len_p99: float = 0.0
    output_len_mean: float = 0.0
    output_len_p50: float = 0.0
    output_len_p90: float = 0.0
    output_len_p99: float = 0.0
    lengths: str = ""  # the length specs (fixed:N, lognormal:..., a dataset or CSV)
    # speculative decoding (speculative.py): k, alpha, the draft, expected tokens per verify step
    spec_tokens: int = 0
    spec_acceptance: float = 0.0
    spec_draft: str = ""
    spec_tokens_per_step: float = 1.0
    # prefix caching (prefix_cache.py): hit rate and the KV the cache holds per GPU
    prefix_hit_rate: float = 0.0
    prefix_cache_gib_per_gpu: float = 0.0
    # front-end latency (frontend.py) included in TTFT and e2e: the serving API's, 0 for a static batch
    frontend_latency_ms: float = 0.0
    # the serving engine whose defaults ran (engines.py; "generic" = gpuplan's own) and the scheduler kind in effect
    engine: str = GENERIC.name
    scheduler: str = ""
    # the scheduler's per-step limits in effect (the engine's on this GPU: EngineProfile.for_gpu), sequences / tokens
    max_batch_seqs: int = 0
    max_batch_tokens: int = 0
    # cost (token_costs.py; None without a price): the replica's GPUs at usd_per_gpu_hour over the
    # requests it served; prefill's share of its engine-step time splits it between input and output
    prefill_time_fraction: float | None = None
    usd_per_gpu_hour: float | None = None
    usd_per_request: float | None = None
    usd_per_million_input_tokens: float | None = None
    usd_per_million_output_tokens: float | None = None  # all of the cost over the output tokens
    usd_per_million_output_tokens_decode: float | None = None
    # this deployment's point on the latency-throughput frontier (capacity.frontier_coordinates)
    tokens_per_s_per_gpu: float = 0.0
    tokens_per_s_per_user: float = 0.0
    # the engine's attention-DP balance scheduler (Deployment.attention_dp_balance)
    attention_dp_balance: bool = False


def serve_estimate(dep: Deployment, *, input_len: int, output_len: int, rate: float | None = None,
                   concurrency: int | None = None, batch: int | None = None,
                   scheduler: SchedulerConfig | None = None, requests: int | None = None, seed: int = PLANNING_SEED,
                   lengths: RequestLengths | None = None, speculative: SpeculativeDecoding | None = None,
                   prefix_cache: PrefixCache | None = None, engine: EngineProfile | None = None,
                   usd_per_gpu_hour: float | None = None) -> ServeReport:
    """Simulate one replica under the given load and report (module docstring): one `Replica.run`
    over the STEADY_STATE window (replica.py), the path `serve plan`, `serve frontier` and
    `validate` take too. `lengths`: request lengths other than fixed input_len / output_len (then
    input_len / output_len are their means, used for the memory fit and the static batch's token
    budget); `speculative`, `prefix_cache`: see speculative.py and prefix_cache.py. `engine`
    (engines.py; default GENERIC): its scheduler (when `scheduler` is None), KV memory rule, fraction
    and block size, and the CUDA-graph batch sizes its generation steps pad to (not for a static
    batch); the caller builds `dep` with its `deployment_options()`. `requests`: simulate that many
    requests (open loop; a closed loop at least that many) instead of the window's 2000. `usd_per_gpu_hour`: the price that costs the replica's
    GPUs per request and per million input / output tokens (token_costs.py); None: no cost."""
    given = [x is not None for x in (rate, concurrency, batch)]
    if sum(given) > 1:
        raise InputError("load: give at most one of --rate, --concurrency, --batch", field="load")
    if input_len < 1 or output_len < 1:
        raise InputError("input_len / output_len: must be >= 1 token", field="input_len")
    engine = engine or GENERIC
    features = ServingFeatures(lengths, speculative, prefix_cache)
    groups = dep.attention_dp
    if batch is not None:
        if batch < 1:
            raise InputError(f"batch: must be >= 1, got {batch}", field="batch")
        scheduler = static_scheduler(-(-batch // groups), input_len)
    replica = Replica(dep, engine, scheduler, features)
    fit = replica.mem.max_concurrent_sequences(input_len + output_len)
    if batch is not None:
        load = Load.static(batch)
    elif rate is not None:
        load = Load.poisson(rate)
    elif concurrency is not None:
        load = Load.closed(concurrency)
    else:  # saturated: the largest closed loop that fits memory and the scheduler's sequence cap
        load = Load.closed(replica.fit_concurrency(input_len, output_len) * groups)
    window = STEADY_STATE if requests is None else replace(STEADY_STATE, closed_loop_min_requests=requests,
                                                           open_loop_requests=requests)
    run = replica.run(load, input_len, output_len, window=window, seed=seed)
    res, wl = run.result, run.workload
    label = {LoadKind.BATCH: f"static batch {-(-batch // groups) * groups}" if batch else "",
             LoadKind.RATE: f"poisson {rate:g} req/s" if rate is not None else "",
             LoadKind.CONCURRENCY: f"closed loop {load.per_group(groups).value * groups:g}"}[load.kind]
    if groups > 1:
        label += f" over {groups} attention-DP groups" + (" (balance scheduler)" if dep.attention_dp_balance else "")
    gib = 2.0**30
    mem = replica.mem
    sched = replica.sched
    li, lo = length_stats(wl.input_len), length_stats(wl.output_len)
    pool = prefix_cache.pool(wl.input_len) if prefix_cache is not None and prefix_cache.hit_rate > 0 else 0
    lens = replica.lengths(input_len, output_len)
    f = res.prefill_time_fraction
    cost = {}
    if usd_per_gpu_hour is not None and f is not None and run.requests_per_s > 0:
        cost = token_costs(dep.num_gpus, usd_per_gpu_hour, run.requests_per_s, li.mean, lo.mean, f).to_dict()
    return ServeReport(
        model=dep.model.name, gpu=dep.gpu.id, tp=dep.tp, pp=dep.pp, ep=dep.ep, attention_dp=groups, weight_dtype=dep.weight_dtype.value,
        kv_dtype=dep.kv_dtype.value, load=label, input_len=input_len, output_len=output_len,
        ttft_ms=res.ttft_ms.mean, ttft_p50_ms=res.ttft_ms.p50, ttft_p90_ms=res.ttft_ms.p90, ttft_p99_ms=res.ttft_ms.p99,
        tpot_ms=res.tpot_ms.mean, tpot_p50_ms=res.tpot_ms.p50, tpot_p90_ms=res.tpot_ms.p90, tpot_p99_ms=res.tpot_ms.p99,
        e2e_p50_ms=res.e2e_ms.p50, e2e_p90_ms=res.e2e_ms.p90, e2e_p99_ms=res.e2e_ms.p99,
        output_tokens_per_s=run.output_tokens_per_s, requests_per_s=run.requests_per_s,
        kv_cache_bytes_per_token=mem.kv_cache_bytes_per_token, kv_cache_gib_per_gpu=mem.kv_budget_bytes / gib,
        weights_gib_per_gpu=mem.weights_bytes / gib, max_concurrent_sequences=fit * groups,
        max_context_tokens=min(mem.max_context(1), dep.model.max_position_embeddings or 1 << 62), peak_kv_gib_per_gpu=res.peak_kv_bytes / gib, preemptions=res.preemptions,
        input_len_mean=li.mean, input_len_p50=li.p50, input_len_p90=li.p90, input_len_p99=li.p99,
        output_len_mean=lo.mean, output_len_p50=lo.p50, output_len_p90=lo.p90, output_len_p99=lo.p99,
        lengths=", ".join(f"{k}={v}" for k, v in lens.describe().items()),
        spec_tokens=speculative.tokens if speculative else 0,
        spec_acceptance=speculative.acceptance if speculative else 0.0,
        spec_draft=(speculative.draft_model.name if speculative.draft_model is not None else f"mtp x{speculative.mtp_layers}")
        if speculative else "",
        spec_tokens_per_step=speculative.tokens_per_step if speculative else 1.0,
        prefix_hit_rate=prefix_cache.hit_rate if prefix_cache else 0.0,
        prefix_cache_gib_per_gpu=(mem.sequence_kv_bytes(pool) / gib) if pool else 0.0,
        frontend_latency_ms=1e3 * run.frontend_latency_s, engine=engine.name, scheduler=sched.kind.value,
        max_batch_seqs=sched.max_batch_seqs, max_batch_tokens=sched.max_batch_tokens,
        attention_dp_balance=dep.attention_dp_balance, usd_per_gpu_hour=usd_per_gpu_hour if cost else None, **cost,
        **dict(zip(("tokens_per_s_per_gpu", "tokens_per_s_per_user"),
                   frontier_coordinates(run.output_tokens_per_s, dep.num_gpus, res.tpot_ms.mean))),
    )
