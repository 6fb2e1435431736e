"""Capacity planning: the fewest GPUs that serve a request rate within TTFT and TPOT objectives,
cost per million output tokens, and the throughput-vs-interactivity frontier.

For each candidate (GPU type, tp) one replica is simulated under a closed loop at increasing
concurrency; the largest concurrency whose p90 TTFT and p90 TPOT meet the objectives gives the
replica's sustainable requests/s. Then

    replicas = ceil(rate / replica_requests_per_s),  gpus = replicas x tp
    usd_per_million_output_tokens = gpus x usd_per_gpu_hour / (3600 x rate x output_len) x 1e6

The frontier: for each tp and concurrency, tokens/s per GPU (output tokens/s / tp) against
tokens/s per user (1000 / mean TPOT ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuplan.errors import GpuplanError, Infeasible, InputError
from gpuplan.validation_rules import check_number
from gpuplan.specs import Gpu, ModelSpec, System
from gpuplan.workloads.inference.arrivals import ArrivalKind, LengthDistribution, make_workload
from gpuplan.workloads.inference.deployment import Deployment
from gpuplan.workloads.inference.memory import memory_plan
from gpuplan.workloads.inference.operators import step_time_model
from gpuplan.workloads.inference.schedulers import SchedulerConfig
from gpuplan.workloads.inference.simulator import SimResult, simulate

#: closed-loop concurrencies tried per candidate (powers of two up to the scheduler's sequence cap)
CONCURRENCY_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
PLAN_SEED = 7


@dataclass(frozen=True)
class CandidateResult:
    gpu: str
    tp: int
    concurrency: int
    ttft_p90_ms: float
    tpot_p90_ms: float
    replica_requests_per_s: float
    replica_output_tokens_per_s: float
    replicas: int
    gpus: int
    usd_per_gpu_hour: float | None
    usd_per_million_output_tokens: float | None
    meets_slo: bool


@dataclass(frozen=True)
class CapacityPlan:
    best: CandidateResult
    candidates: tuple[CandidateResult, ...]


@dataclass(frozen=True)
class FrontierPoint:
    tp: int
    concurrency: int
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    ttft_p90_ms: float


def _run(dep: Deployment, conc: int, input_len: int, output_len: int, sched: SchedulerConfig,
         lengths=None, speculative=None, prefix_cache=None) -> SimResult:
    mem = memory_plan(dep, max_batch_tokens=sched.max_batch_tokens, max_batch_seqs=sched.max_batch_seqs)
    steps = step_time_model(dep)
    rng = np.random.default_rng(PLAN_SEED)
    lens = dict(lengths=lengths) if lengths is not None else \
        dict(input_len=LengthDistribution(input_len), output_len=LengthDistribution(output_len))
    wl = make_workload(rng, max(4 * conc, 64), ArrivalKind.CLOSED_LOOP, concurrency=conc, **lens)
    if speculative is None and prefix_cache is None:
        return simulate(steps, mem, wl, sched)
    from gpuplan.workloads.inference.speculative import draft_cost

    draft = draft_cost(dep, speculative) if speculative is not None else None
    return simulate(steps, mem, wl, sched, speculative=speculative, draft=draft, prefix_cache=prefix_cache)


def plan_capacity(model: ModelSpec, candidates: list[tuple[Gpu, System, float | None]], *, rate: float,
                  ttft_ms: float, tpot_ms: float, input_len: int, output_len: int, tps: tuple[int, ...] = (1, 2, 4, 8),
                  weight_dtype: str = "bf16", kv_dtype: str = "bf16", scheduler: SchedulerConfig | None = None,
                  progress=None, lengths=None, speculative=None, prefix_cache=None) -> CapacityPlan:
    """Fewest GPUs (then lowest cost) serving `rate` requests/s within p90 TTFT / TPOT objectives.

    `candidates`: (gpu, system for its scale-up fabric, usd_per_gpu_hour or None). `lengths`
    (lengths.RequestLengths; then `output_len` is its mean output, which prices the tokens),
    `speculative` (speculative.SpeculativeDecoding), `prefix_cache` (prefix_cache.PrefixCache):
    as in the simulator; None = fixed input_len / output_len, no speculation, no prefix cache.
    `progress(stage, fraction)` before each (gpu, tp)."""
    if not rate > 0:
        raise InputError(f"rate: must be > 0 requests/s, got {rate}", field="rate")
    if not (ttft_ms > 0 and tpot_ms > 0):
        raise InputError("ttft_ms / tpot_ms: objectives must be > 0 ms", field="ttft_ms")
    sched = scheduler or SchedulerConfig()
    results: list[CandidateResult] = []
    for i_gpu, (gpu, system, price) in enumerate(candidates):
        for i_tp, tp in enumerate(tps):
            if progress:
                progress(f"{gpu.id} tp={tp}", (i_gpu * len(tps) + i_tp) / (len(candidates) * len(tps)))
            if tp > system.scaleup_domain_gpus or model.heads % tp:
                continue
            try:
                dep = Deployment(model, gpu, system, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
                best: tuple[int, SimResult] | None = None
                for conc in CONCURRENCY_LADDER:
                    if conc > sched.max_batch_seqs:
                        break
                    res = _run(dep, conc, input_len, output_len, sched, lengths, speculative, prefix_cache)
                    if res.ttft_ms.p90 <= ttft_ms and res.tpot_ms.p90 <= tpot_ms:
                        best = (conc, res)
                    else:
                        break
            except GpuplanError:
                continue
            if best is None:
                continue
            conc, res = best
            replicas = max(1, math.ceil(rate / res.requests_per_s))
            gpus = replicas * tp
            cost = None if price is None else gpus * price / (3600.0 * rate * output_len) * 1e6
            results.append(CandidateResult(
                gpu=gpu.id, tp=tp, concurrency=conc, ttft_p90_ms=res.ttft_ms.p90, tpot_p90_ms=res.tpot_ms.p90,
                replica_requests_per_s=res.requests_per_s, replica_output_tokens_per_s=res.output_tokens_per_s,
                replicas=replicas, gpus=gpus, usd_per_gpu_hour=price, usd_per_million_output_tokens=cost, meets_slo=True,
            ))
    if not results:
        raise Infeasible(
            f"no candidate meets TTFT <= {ttft_ms} ms and TPOT <= {tpot_ms} ms (p90) even at concurrency 1 "
            "(or the model does not fit); relax the objectives or add GPU types"
        )
    results.sort(key=lambda r: (r.gpus, r.usd_per_million_output_tokens if r.usd_per_million_output_tokens is not None else math.inf))
    return CapacityPlan(best=results[0], candidates=tuple(results))


def frontier(model: ModelSpec, gpu: Gpu, system: System, *, input_len: int, output_len: int,
             tps: tuple[int, ...] = (1, 2, 4, 8), weight_dtype: str = "bf16", kv_dtype: str = "bf16",
             scheduler: SchedulerConfig | None = None, progress=None) -> list[FrontierPoint]:
    """Throughput-vs-interactivity points over tp and closed-loop concurrency (Pareto filtering is
    left to the reader: every simulated point is returned, sorted by tokens/s per user);
    `progress(stage, fraction)` before each tp."""
    check_number(input_len, "input_len", gt=0, integer=True)
    check_number(output_len, "output_len", gt=0, integer=True)
    sched = scheduler or SchedulerConfig()
    out: list[FrontierPoint] = []
    why_not: list[str] = []
    for i_tp, tp in enumerate(tps):
        if progress:
            progress(f"tp={tp}", i_tp / len(tps))
        if tp > system.scaleup_domain_gpus or model.heads % tp:
            why_not.append(f"tp={tp}: {'exceeds the scale-up domain' if tp > system.scaleup_domain_gpus else 'does not divide the heads'}")
            continue
        try:
            dep = Deployment(model, gpu, system, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
            for conc in CONCURRENCY_LADDER:
                if conc > sched.max_batch_seqs:
                    break
                res = _run(dep, conc, input_len, output_len, sched)
                out.append(FrontierPoint(tp, conc, res.output_tokens_per_s / tp, 1e3 / res.tpot_ms.mean, res.ttft_ms.p90))
        except InputError:  # bad input (unknown dtype ...) is the user's to fix, not a tp that does not fit
            raise
        except GpuplanError as exc:
            why_not.append(f"tp={tp}: {exc}")
            continue
    if not out:
        raise Infeasible(f"no frontier point for {model.name} on {gpu.id}: " + "; ".join(why_not[:4]))
    out.sort(key=lambda p: -p.tokens_per_s_per_user)
    return out
