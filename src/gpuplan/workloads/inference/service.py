"""One-call serving estimate: a deployment under one load -> the report `gpuplan serve` prints.

Load (exactly one): `rate` (Poisson open loop, requests/s), `concurrency` (closed loop) or
`batch` (one static batch). With none, the closed loop runs at the largest concurrency that fits
in memory and the scheduler's sequence cap (the replica's saturated throughput).

With attention data parallelism (Deployment.attention_dp = a) the replica is a attention groups,
each with its own requests: the load splits evenly over them (rate / a, ceil(concurrency / a),
ceil(batch / a)), one group is simulated (its MoE layers carry all a groups' tokens, see
operators.py) and the replica's throughput is a x the group's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.workloads.inference.arrivals import ArrivalKind, LengthDistribution, make_workload
from gpuplan.workloads.inference.deployment import Deployment
from gpuplan.workloads.inference.memory import memory_plan
from gpuplan.workloads.inference.operators import step_time_model
from gpuplan.workloads.inference.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.simulator import simulate

#: Requests simulated per estimate (enough for stable p99 at the default seed).
SERVE_REQUESTS = 2000


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


def serve_estimate(dep: Deployment, *, input_len: int, output_len: int, rate: float | None = None,
                   concurrency: int | None = None, batch: int | None = None,
                   scheduler: SchedulerConfig | None = None, requests: int = SERVE_REQUESTS, seed: int = 0) -> ServeReport:
    """Simulate one replica under the given load and report (module docstring)."""
    given = [x is not None for x in (rate, concurrency, batch)]
    if sum(given) > 1:
        raise InputError("load: give at most one of --rate, --concurrency, --batch", field="load")
    if input_len < 1 or output_len < 1:
        raise InputError("input_len / output_len: must be >= 1 token", field="input_len")
    sched = scheduler or SchedulerConfig()
    groups = dep.attention_dp
    if batch is not None:
        if batch < 1:
            raise InputError(f"batch: must be >= 1, got {batch}", field="batch")
        batch = -(-batch // groups)
        sched = SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=batch, max_batch_tokens=batch * input_len)
    mem = memory_plan(dep, max_batch_tokens=min(sched.max_batch_tokens, 65536), max_batch_seqs=sched.max_batch_seqs)
    fit = mem.max_concurrent_sequences(input_len + output_len)
    steps = step_time_model(dep)
    rng = np.random.default_rng(seed)
    lens = dict(input_len=LengthDistribution(input_len), output_len=LengthDistribution(output_len))
    conc = 0
    if batch is not None:
        wl, load = make_workload(rng, batch, ArrivalKind.BURST, **lens), f"static batch {batch * groups}"
    elif rate is not None:
        wl = make_workload(rng, requests, ArrivalKind.POISSON, rate=rate / groups, **lens)
        load = f"poisson {rate:g} req/s"
    else:
        conc = -(-concurrency // groups) if concurrency is not None else max(1, min(fit, sched.max_batch_seqs))
        wl = make_workload(rng, max(requests, 4 * conc), ArrivalKind.CLOSED_LOOP, concurrency=conc, **lens)
        load = f"closed loop {conc * groups}"
    if groups > 1:
        load += f" over {groups} attention-DP groups"
    # a closed loop's latencies are those of its steady state: its initial burst (every slot filled at
    # t = 0) is left out of the percentiles, as a long benchmark run dilutes it
    warmup = conc if (batch is None and rate is None) else 0
    res = simulate(steps, mem, wl, sched, warmup_requests=warmup)
    gib = 2.0**30
    return ServeReport(
        model=dep.model.name, gpu=dep.gpu.id, tp=dep.tp, pp=dep.pp, ep=dep.ep, attention_dp=groups, weight_dtype=dep.weight_dtype.value,
        kv_dtype=dep.kv_dtype.value, load=load, input_len=input_len, output_len=output_len,
        ttft_ms=res.ttft_ms.mean, ttft_p50_ms=res.ttft_ms.p50, ttft_p90_ms=res.ttft_ms.p90, ttft_p99_ms=res.ttft_ms.p99,
        tpot_ms=res.tpot_ms.mean, tpot_p50_ms=res.tpot_ms.p50, tpot_p90_ms=res.tpot_ms.p90, tpot_p99_ms=res.tpot_ms.p99,
        e2e_p50_ms=res.e2e_ms.p50, e2e_p90_ms=res.e2e_ms.p90, e2e_p99_ms=res.e2e_ms.p99,
        output_tokens_per_s=res.output_tokens_per_s * groups, requests_per_s=res.requests_per_s * groups,
        kv_cache_bytes_per_token=mem.kv_cache_bytes_per_token, kv_cache_gib_per_gpu=mem.kv_budget_bytes / gib,
        weights_gib_per_gpu=mem.weights_bytes / gib, max_concurrent_sequences=fit * groups,
        max_context_tokens=min(mem.max_context(1), dep.model.max_position_embeddings or 1 << 62), peak_kv_gib_per_gpu=res.peak_kv_bytes / gib, preemptions=res.preemptions,
    )
