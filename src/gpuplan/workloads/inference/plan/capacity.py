"""Capacity planning: the fewest GPUs that serve a request rate within TTFT and TPOT objectives,
cost per million output tokens, and the throughput-vs-interactivity frontier.

Candidate layouts (`colocated_layouts`): for each GPU type and tp inside its scale-up domain, the
plain tensor-parallel replica; for MoE models also every expert-parallel degree ep > 1 that divides
both the experts and the tp GPUs, each with attention data parallelism off and on (attention_dp =
tp: every GPU its own attention group, the DeepSeek serving layout of TensorRT-LLM
`enable_attention_dp`, SGLang `--enable-dp-attention`, vLLM DP + EP; Deployment). Dense models
are searched over tp only: for them attention-DP groups would be independent replicas, which the
replica count already covers (the engines enable attention DP for MoE models).

Sizing. Every layout is a `replica.Replica` under the engine's defaults, simulated exactly as
`serve run` simulates it (replica.py: one path, the STEADY_STATE window, one seed). A capacity plan
meets its objectives under Poisson arrivals at the rate each replica receives (the total rate /
replicas, open loop), with p90 TTFT and p90 TPOT over the steady state after warm-up:

    replicas = the fewest n with p90 TTFT(rate / n) <= ttft_ms and p90 TPOT(rate / n) <= tpot_ms
    gpus = replicas x tp
    usd_per_million_output_tokens = gpus x usd_per_gpu_hour / (3600 x rate x output_len) x 1e6
    (all of the cost over the output tokens; token_costs.py splits it between prefill and decode by
    the engine-step time each phase takes in the verified open-loop run: usd_per_million_input_tokens,
    usd_per_million_output_tokens_decode, usd_per_request)

(Sizing by goodput under Poisson arrivals, not by a closed loop's throughput, because a closed
loop never queues a request: M/G/c waiting, Kleinrock vol. 1 ch. 3; DistServe, Zhong et al. OSDI
2024 sec. 3.) The search starts from the closed loop's estimate: the largest concurrency on the
ladder whose p90s meet the objectives gives a sustainable requests/s, and ceil(rate / it) replicas
is the first guess; `replica.fewest_replicas` then searches down or up (exponential steps, then
bisection; latency is monotone in the per-replica rate). A layout that still misses at
OPEN_LOOP_MAX_FACTOR x the first guess (+ 4) replicas is reported, not chosen.

Ranking: fewest GPUs, then lowest cost, then the most closed-loop capacity (replicas x
replica requests/s: headroom over the rate); each other candidate and each layout that cannot serve
says why it loses (`why_not_best`, `rejected`).

The frontier: for each tp and concurrency, tokens/s per GPU (output tokens/s / tp) against
tokens/s per user (1000 / mean TPOT ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpuplan.errors import GpuplanError, Infeasible, InputError
from gpuplan.validation_rules import check_number
from gpuplan.specs import Gpu, ModelSpec, System
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.engines import GENERIC, EngineProfile
from gpuplan.workloads.inference.replica import (
    PLANNING_SEED, STEADY_STATE, Load, Replica, ReplicaRun, ServingFeatures, fewest_replicas, replicas_for_rate,
)
from gpuplan.workloads.inference.plan.token_costs import token_costs
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig

#: closed-loop concurrencies tried per candidate (powers of two up to the scheduler's sequence cap)
CONCURRENCY_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
#: replicas tried in the open-loop check: at most this multiple of the closed-loop count, plus 4
OPEN_LOOP_MAX_FACTOR = 4


@dataclass(frozen=True)
class CandidateResult:
    """One layout sized to the rate. `ttft_p90_ms` / `tpot_p90_ms`: the closed loop at `concurrency`
    per replica (the sizing); `open_loop_*`: Poisson arrivals at rate / replicas per replica with the
    verified `replicas` (`closed_loop_replicas` is what the closed loop alone asked for)."""

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
    ep: int = 1
    attention_dp: int = 1
    layout: str = ""
    closed_loop_replicas: int = 0
    open_loop_ttft_p90_ms: float | None = None
    open_loop_tpot_p90_ms: float | None = None
    open_loop_requests_per_s: float | None = None  # per replica, offered
    why_not_best: str = ""
    # the cost split between the phases (token_costs.py), from the verified open-loop run's step times
    prefill_time_fraction: float | None = None
    usd_per_request: float | None = None
    usd_per_million_input_tokens: float | None = None
    usd_per_million_output_tokens_decode: float | None = None


@dataclass(frozen=True)
class RejectedLayout:
    """A layout that cannot serve at all, and why (no memory, objectives missed at concurrency 1, ...)."""

    gpu: str
    tp: int
    ep: int
    attention_dp: int
    layout: str
    why: str


@dataclass(frozen=True)
class CapacityPlan:
    best: CandidateResult
    candidates: tuple[CandidateResult, ...]
    rejected: tuple[RejectedLayout, ...] = ()
    engine: str = GENERIC.name  # the serving engine whose defaults every candidate ran (engines.py)


@dataclass(frozen=True)
class FrontierPoint:
    tp: int
    concurrency: int
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    ttft_p90_ms: float
    tpot_p90_ms: float | None = None  # the p90 a TPOT objective is judged on (the x axis is 1e3 / mean TPOT)


def frontier_coordinates(output_tokens_per_s: float, gpus: int, tpot_mean_ms: float) -> tuple[float, float]:
    """A deployment's place on the latency-throughput frontier: (tokens/s per GPU, tokens/s per user)

        per GPU  = output tokens/s of the replica / its GPUs
        per user = 1e3 / mean TPOT in ms   (one stream's decode speed: the interactivity axis)

    as NVIDIA's and SemiAnalysis' throughput-interactivity plots draw it (`serve frontier`, and
    `serve run`'s point on that plot)."""
    return output_tokens_per_s / gpus, (1e3 / tpot_mean_ms if tpot_mean_ms > 0 else float("inf"))


def layout_label(gpu: str, tp: int, ep: int = 1, attention_dp: int = 1) -> str:
    """'h100-sxm5-80gb tp8 ep8 adp8' (ep / adp only where > 1); disaggregation.InstanceLayout.label."""
    out = f"{gpu} tp{tp}"
    if ep > 1:
        out += f" ep{ep}"
    if attention_dp > 1:
        out += f" adp{attention_dp}"
    return out


def colocated_layouts(model: ModelSpec, tp: int) -> list[tuple[int, int]]:
    """(ep, attention_dp) pairs searched at `tp` (module docstring): (1, 1) for every model; for MoE
    models with tp > 1 also (1, tp) and, for every ep > 1 dividing both tp and the experts, (ep, 1)
    and (ep, tp). E.g. 8 experts at tp 4: (1,1) (1,4) (2,1) (2,4) (4,1) (4,4)."""
    out = [(1, 1)]
    if model.moe is None or tp < 2:
        return out
    out.append((1, tp))
    for ep in range(2, tp + 1):
        if tp % ep == 0 and model.moe.num_experts % ep == 0:
            out += [(ep, 1), (ep, tp)]
    return out


def _replica(dep: Deployment, sched: SchedulerConfig | None, lengths=None, speculative=None, prefix_cache=None,
             engine: EngineProfile | None = None) -> Replica:
    return Replica(dep, engine, sched, ServingFeatures(lengths, speculative, prefix_cache))


def open_loop_check(rep: Replica, replica_rate: float, input_len: int, output_len: int) -> ReplicaRun:
    """One replica under Poisson arrivals at `replica_rate` requests/s: `serve run --rate` exactly."""
    return rep.run(Load.poisson(replica_rate), input_len, output_len, window=STEADY_STATE, seed=PLANNING_SEED)


def closed_loop(rep: Replica, concurrency: int, input_len: int, output_len: int) -> ReplicaRun:
    """One replica under a closed loop of `concurrency`: `serve run --concurrency` exactly."""
    return rep.run(Load.closed(concurrency), input_len, output_len, window=STEADY_STATE, seed=PLANNING_SEED)


def plan_capacity(model: ModelSpec, candidates: list[tuple[Gpu, System, float | None]], *, rate: float,
                  ttft_ms: float, tpot_ms: float, input_len: int, output_len: int, tps: tuple[int, ...] = (1, 2, 4, 8),
                  weight_dtype: str = "bf16", kv_dtype: str = "bf16", scheduler: SchedulerConfig | None = None,
                  progress=None, lengths=None, speculative=None, prefix_cache=None,
                  engine: EngineProfile | None = None, slo_factors=None) -> CapacityPlan:
    """Fewest GPUs (then lowest cost) serving `rate` requests/s within p90 TTFT / TPOT objectives,
    the fewest replicas meeting them under Poisson arrivals at rate / replicas (module docstring).

    `candidates`: (gpu, system for its scale-up fabric, usd_per_gpu_hour or None). Layouts: every tp
    of `tps` and, for MoE models, the (ep, attention_dp) pairs of `colocated_layouts`. `lengths`
    (lengths.RequestLengths; then `output_len` is its mean output, which prices the tokens),
    `speculative` (speculative.SpeculativeDecoding), `prefix_cache` (prefix_cache.PrefixCache):
    as in the simulator; None = fixed input_len / output_len, no speculation, no prefix cache.
    `engine` (engines.py; default GENERIC): every layout runs its scheduler (unless `scheduler` is
    given), memory rule, CUDA-graph padding and TP all-reduce (its `deployment_options`).
    `progress(stage, fraction)` before each (gpu, tp). `slo_factors` ({gpu id: f >= 1}, default 1):
    a GPU type's layouts must meet ttft_ms / f and tpot_ms / f, i.e. its predicted p90s times f meet the
    objectives (a planning margin, e.g. an error band's pessimistic edge: api.serve_plan --confidence)."""
    engine = engine or GENERIC
    slo_factors = dict(slo_factors or {})
    for gid, f in slo_factors.items():
        check_number(f, f"slo_factors[{gid}]", ge=1.0)
    if not rate > 0:
        raise InputError(f"rate: must be > 0 requests/s, got {rate}", field="rate")
    if not (ttft_ms > 0 and tpot_ms > 0):
        raise InputError("ttft_ms / tpot_ms: objectives must be > 0 ms", field="ttft_ms")
    sched = scheduler  # None: each layout's Replica takes the engine's limits on its GPU (EngineProfile.for_gpu)
    results: list[CandidateResult] = []
    rejected: list[RejectedLayout] = []
    for i_gpu, (gpu, system, price) in enumerate(candidates):
        for i_tp, tp in enumerate(tps):
            if progress:
                progress(f"{gpu.id} tp={tp}", (i_gpu * len(tps) + i_tp) / (len(candidates) * len(tps)))
            for ep, adp in colocated_layouts(model, tp):
                label = layout_label(gpu.id, tp, ep, adp)

                def reject(why: str) -> None:
                    rejected.append(RejectedLayout(gpu.id, tp, ep, adp, label, why))

                if tp > system.scaleup_domain_gpus:
                    reject(f"tp {tp} exceeds the {system.scaleup_domain_gpus}-GPU scale-up domain of {system.id}")
                    continue
                if model.heads % (tp // adp):
                    reject(f"attention tp {tp // adp} does not divide the {model.heads} heads")
                    continue
                f = slo_factors.get(gpu.id, 1.0)
                res = _size_layout(model, gpu, system, price, tp, ep, adp, rate=rate, ttft_ms=ttft_ms / f, tpot_ms=tpot_ms / f,
                                   input_len=input_len, output_len=output_len, weight_dtype=weight_dtype,
                                   kv_dtype=kv_dtype, sched=sched, lengths=lengths, speculative=speculative,
                                   prefix_cache=prefix_cache, engine=engine)
                if isinstance(res, str):
                    reject(res)
                else:
                    results.append(res)
    feasible = [r for r in results if r.meets_slo]
    if not feasible:
        reasons = "; ".join(f"{r.layout}: {r.why}" for r in rejected[:4])
        raise Infeasible(
            f"no candidate meets TTFT <= {ttft_ms} ms and TPOT <= {tpot_ms} ms (p90) even at concurrency 1 "
            "(or the model does not fit); relax the objectives or add GPU types"
            + ("; objectives divided by the planning margin " + ", ".join(f"{g} x{f:.2f}" for g, f in slo_factors.items())
               if slo_factors else "")
            + (f" ({reasons})" if reasons else "")
        )
    results.sort(key=_rank_key)
    best = results[0]
    results = [replace(r, why_not_best=_why(r, best)) for r in results]
    return CapacityPlan(best=results[0], candidates=tuple(results), rejected=tuple(rejected), engine=engine.name)


def _rank_key(r: CandidateResult):
    cost = r.usd_per_million_output_tokens
    return (not r.meets_slo, r.gpus, cost if cost is not None else math.inf, -r.replicas * r.replica_requests_per_s)


def _why(r: CandidateResult, best: CandidateResult) -> str:
    """Why `r` loses to `best` (ranked by GPUs, then cost)."""
    if r is best:
        return "best"
    if not r.meets_slo:
        return (f"misses the objectives under Poisson arrivals even with {r.replicas} replicas "
                f"(p90 TTFT {r.open_loop_ttft_p90_ms:.0f} ms, TPOT {r.open_loop_tpot_p90_ms:.1f} ms)")
    extra = "" if r.closed_loop_replicas == r.replicas else \
        f"; Poisson arrivals need {r.replicas} replicas, not {r.closed_loop_replicas}"
    a, b = r.usd_per_million_output_tokens, best.usd_per_million_output_tokens
    if r.gpus > best.gpus:
        return f"{r.gpus} GPUs vs {best.gpus}{extra}"
    if a is not None and b is not None and b > 0 and a > b * (1 + 1e-9):
        return f"same GPUs, costlier by {(a / b - 1) * 100:.0f}%{extra}"
    if a is None and b is not None:
        return f"same GPUs, no $/GPU-hour for {r.gpu}{extra}"
    return (f"same GPUs and cost, less headroom ({r.replicas * r.replica_requests_per_s:.3g} vs "
            f"{best.replicas * best.replica_requests_per_s:.3g} req/s closed-loop capacity){extra}")


def _size_layout(model, gpu, system, price, tp, ep, adp, *, rate, ttft_ms, tpot_ms, input_len, output_len,
                 weight_dtype, kv_dtype, sched, lengths, speculative, prefix_cache,
                 engine: EngineProfile = GENERIC) -> CandidateResult | str:
    """Closed-loop sizing then open-loop verification of one layout; a short reason when it cannot serve."""
    try:
        dep = Deployment(model, gpu, system, tp=tp, ep=ep, attention_dp=adp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                         **engine.deployment_options())
    except InputError as exc:
        if exc.field in ("weight_dtype", "kv_dtype", "activation_dtype"):
            raise
        return str(exc)
    groups = dep.attention_dp
    in_len, out_len = max(1, round(input_len)), max(1, round(output_len))
    try:
        rep = _replica(dep, sched, lengths, speculative, prefix_cache, engine)
        best: tuple[int, ReplicaRun] | None = None
        first: ReplicaRun | None = None
        for conc in CONCURRENCY_LADDER:
            if conc > rep.sched.max_batch_seqs:
                break
            run = closed_loop(rep, conc * groups, in_len, out_len)
            first = first or run
            if run.meets(ttft_ms, tpot_ms):
                best = (conc, run)
            else:
                break
    except InputError as exc:
        if exc.field not in ("tp", "ep", "attention_dp") or speculative is None:
            raise
        return f"the draft cannot use this layout: {exc}"  # the layout suits the target, not the draft model
    except GpuplanError as exc:
        return str(exc)
    if best is None:
        if first is None:
            return "no concurrency to try (max_batch_seqs < 1)"
        return (f"misses the objectives at concurrency {groups}: p90 TTFT {first.result.ttft_ms.p90:.0f} ms, "
                f"TPOT {first.result.tpot_ms.p90:.1f} ms")
    conc, closed = best
    replica_rps = closed.requests_per_s
    n0 = replicas_for_rate(rate, replica_rps)

    def meets(n: int):
        r = open_loop_check(rep, rate / n, in_len, out_len)
        return r.meets(ttft_ms, tpot_ms), r

    try:
        replicas, open_run = fewest_replicas(meets, n0, OPEN_LOOP_MAX_FACTOR * n0 + 4)
    except InputError:
        raise
    except GpuplanError as exc:
        return f"does not fit under Poisson arrivals: {exc}"
    ok = replicas is not None
    replicas = replicas if ok else OPEN_LOOP_MAX_FACTOR * n0 + 4
    gpus = replicas * tp
    res, open_res = closed.result, open_run.result
    f = open_res.prefill_time_fraction
    split = None if price is None or f is None else token_costs(gpus, price, rate, input_len, output_len, f)
    cost = None if price is None else gpus * price / (3600.0 * rate * output_len) * 1e6
    return CandidateResult(
        gpu=gpu.id, tp=tp, concurrency=conc * groups, ttft_p90_ms=res.ttft_ms.p90, tpot_p90_ms=res.tpot_ms.p90,
        replica_requests_per_s=replica_rps, replica_output_tokens_per_s=closed.output_tokens_per_s,
        replicas=replicas, gpus=gpus, usd_per_gpu_hour=price, usd_per_million_output_tokens=cost, meets_slo=ok,
        ep=ep, attention_dp=adp, layout=layout_label(gpu.id, tp, ep, adp), closed_loop_replicas=n0,
        open_loop_ttft_p90_ms=open_res.ttft_ms.p90, open_loop_tpot_p90_ms=open_res.tpot_ms.p90,
        open_loop_requests_per_s=rate / replicas, prefill_time_fraction=f,
        usd_per_request=None if split is None else split.usd_per_request,
        usd_per_million_input_tokens=None if split is None else split.usd_per_million_input_tokens,
        usd_per_million_output_tokens_decode=None if split is None else split.usd_per_million_output_tokens_decode,
    )


def frontier(model: ModelSpec, gpu: Gpu, system: System, *, input_len: int, output_len: int,
             tps: tuple[int, ...] = (1, 2, 4, 8), weight_dtype: str = "bf16", kv_dtype: str = "bf16",
             scheduler: SchedulerConfig | None = None, progress=None,
             engine: EngineProfile | None = None) -> list[FrontierPoint]:
    """Throughput-vs-interactivity points over tp and closed-loop concurrency (Pareto filtering is
    left to the reader: every simulated point is returned, sorted by tokens/s per user); each point
    is `serve run --concurrency c` on that tp (replica.py); `progress(stage, fraction)` before each tp."""
    check_number(input_len, "input_len", gt=0, integer=True)
    check_number(output_len, "output_len", gt=0, integer=True)
    engine = engine or GENERIC
    sched = scheduler  # None: the engine's limits on the GPU (Replica, EngineProfile.for_gpu)
    out: list[FrontierPoint] = []
    why_not: list[str] = []
    for i_tp, tp in enumerate(tps):
        if progress:
            progress(f"tp={tp}", i_tp / len(tps))
        if tp > system.scaleup_domain_gpus or model.heads % tp:
            why_not.append(f"tp={tp}: {'exceeds the scale-up domain' if tp > system.scaleup_domain_gpus else 'does not divide the heads'}")
            continue
        try:
            dep = Deployment(model, gpu, system, tp=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                             **engine.deployment_options())
            rep = Replica(dep, engine, sched)
            for conc in CONCURRENCY_LADDER:
                if conc > rep.sched.max_batch_seqs:
                    break
                run = closed_loop(rep, conc, input_len, output_len)
                res = run.result
                per_gpu, per_user = frontier_coordinates(run.output_tokens_per_s, tp, res.tpot_ms.mean)
                out.append(FrontierPoint(tp, conc, per_gpu, per_user, res.ttft_ms.p90, res.tpot_ms.p90))
        except InputError:  # bad input (unknown dtype ...) is the user's to fix, not a tp that does not fit
            raise
        except GpuplanError as exc:
            why_not.append(f"tp={tp}: {exc}")
            continue
    if not out:
        raise Infeasible(f"no frontier point for {model.name} on {gpu.id}: " + "; ".join(why_not[:4]))
    out.sort(key=lambda p: -p.tokens_per_s_per_user)
    return out
