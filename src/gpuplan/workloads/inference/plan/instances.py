"""One instance of a disaggregated (or co-located) serving plan and its load curves: the layout
(`InstanceLayout`, `candidate_layouts`), the instance simulated per role (`_Instance`: prefill-only,
decode-only, co-located = the `replica.Replica` that `serve run` simulates), and the rate -> p90
latency ladder per role (`LoadPoint`, `RoleCurve`, `_ladder`). The planner that pairs them is
plan/disaggregation.py (its module docstring gives the method and sources)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuplan.specs import Gpu, ModelSpec, System
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.engines import GENERIC, EngineProfile
from gpuplan.workloads.inference.replica import PLANNING_SEED, STEADY_STATE, Load, Replica, ServingFeatures
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, LengthDistribution, Workload, make_workload
from gpuplan.workloads.inference.sim.decode_pool import simulate_decode
from gpuplan.workloads.inference.sim.frontend import frontend_latency_s
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig

#: per-instance rates simulated, as fractions of the instance's saturated requests/s
LOAD_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
#: requests per simulated point and the leading fraction left out of the percentiles: the
#: replica's STEADY_STATE window for a Poisson loop (replica.py), as `serve run --rate` measures
SIM_REQUESTS = STEADY_STATE.open_loop_requests
WARMUP_FRACTION = STEADY_STATE.open_loop_warmup_fraction
PLAN_SEED = PLANNING_SEED


@dataclass(frozen=True, eq=False)
class InstanceLayout:
    """One instance's hardware and parallel layout, and its GPU price ($/GPU-hour or None).
    Equal (and hashed) by `key`: GPU and system ids, tp, ep, attention_dp."""

    gpu: Gpu
    system: System
    tp: int
    ep: int = 1
    attention_dp: int = 1
    usd_per_gpu_hour: float | None = None

    @property
    def key(self) -> tuple:
        return (self.gpu.id, self.system.id, self.tp, self.ep, self.attention_dp)

    def __hash__(self) -> int:
        return hash(self.key)

    def __eq__(self, other) -> bool:
        return isinstance(other, InstanceLayout) and self.key == other.key

    @property
    def label(self) -> str:
        out = f"{self.gpu.id} tp{self.tp}"
        if self.ep > 1:
            out += f" ep{self.ep}"
        if self.attention_dp > 1:
            out += f" adp{self.attention_dp}"
        return out


def candidate_layouts(model: ModelSpec, hardware: list[tuple[Gpu, System, float | None]],
                      tps: tuple[int, ...] = (1, 2, 4, 8)) -> list[InstanceLayout]:
    """Instance layouts to search: every tp of `tps` inside the scale-up domain that divides the
    heads; MoE models also with the experts split over the tp GPUs (ep = tp) and with attention data
    parallelism on top (ep = attention_dp = tp, the DeepSeek serving layout)."""
    out: list[InstanceLayout] = []
    for gpu, system, price in hardware:
        for tp in tps:
            if tp > system.scaleup_domain_gpus or model.heads % tp:
                continue
            out.append(InstanceLayout(gpu, system, tp, usd_per_gpu_hour=price))
            if model.moe is not None and tp > 1 and model.moe.num_experts % tp == 0:
                out.append(InstanceLayout(gpu, system, tp, ep=tp, usd_per_gpu_hour=price))
                out.append(InstanceLayout(gpu, system, tp, ep=tp, attention_dp=tp, usd_per_gpu_hour=price))
    return out


# ---------------------------------------------------------------------------------------------- curves
@dataclass(frozen=True)
class LoadPoint:
    """One simulated per-instance Poisson rate and its p90 latencies, seconds (NaN: not measured)."""

    rate: float
    ttft_p90_s: float = math.nan
    tpot_p90_s: float = math.nan
    first_token_delay_p90_s: float = math.nan  # decode instances: arrival of the KV -> first token
    prefill_time_fraction: float = math.nan  # co-located: prefill's share of the step time (token_costs.py)


@dataclass(frozen=True)
class RoleCurve:
    """A layout's points in one role (prefill / decode / co-located), increasing rate."""

    layout: InstanceLayout
    points: tuple[LoadPoint, ...]
    why_not: str = ""  # set when the layout cannot serve in this role at all

    def at(self, rate: float, metric: str) -> float:
        """`metric` at per-instance `rate`, linear between simulated points (held flat below the first)."""
        rates = np.array([p.rate for p in self.points])
        vals = np.array([getattr(p, metric) for p in self.points])
        return float(np.interp(rate, rates, vals))

    def max_rate(self, metric: str, limit_s: float) -> float | None:
        """The largest rate whose `metric` stays <= limit_s (linear between the last point that meets
        it and the first that does not); None when even the lowest simulated rate misses it."""
        prev = None
        for p in self.points:
            v = getattr(p, metric)
            if not v <= limit_s:
                if prev is None:
                    return None
                pv = getattr(prev, metric)
                return prev.rate + (limit_s - pv) / (v - pv) * (p.rate - prev.rate)
            prev = p
        return prev.rate if prev is not None else None


def _p90(x: np.ndarray) -> float:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, 90)) if x.size else math.nan


class _Instance:
    """Deployment, step model and memory plans of one layout (built once per search), under the
    engine's TP all-reduce, memory rule and CUDA-graph padding (engines.py; the decode-only loop of
    decode_pool.py pads no batch)."""

    def __init__(self, layout: InstanceLayout, model: ModelSpec, weight_dtype: str, kv_dtype: str,
                 input_len: int, output_len: int, sched: SchedulerConfig | None, features: ServingFeatures = ServingFeatures(),
                 engine: EngineProfile = GENERIC):
        self.layout = layout
        self.engine = engine
        self.dep = Deployment(model, layout.gpu, layout.system, tp=layout.tp, ep=layout.ep,
                              attention_dp=layout.attention_dp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                              **engine.deployment_options())
        self.groups = layout.attention_dp
        # the co-located instance is the replica `serve run` simulates (replica.py); prefill- and
        # decode-only instances reuse its step model and memory plan
        self.replica = Replica(self.dep, engine, sched, features)  # sched None: the engine's limits on this GPU
        self.steps = self.replica.steps
        self.sched = sched = self.replica.sched
        self.mem = self.replica.mem
        # a decode instance's steps hold one token per sequence: its activation workspace is that of max_batch_seqs tokens
        self.decode_mem = engine.memory_plan(self.dep, max_batch_tokens=sched.max_batch_seqs, max_batch_seqs=sched.max_batch_seqs)
        self.input_len, self.output_len = input_len, output_len
        self.features = features
        self.draft = self.replica.draft

    def _make(self, n: int, kind: ArrivalKind, output_len: int | None, seed: int, **load) -> Workload:
        """n requests of the plan's lengths (fixed input_len / output_len, or its distribution);
        `output_len` 1: prefill-only requests (one output token each)."""
        rng = np.random.default_rng(seed)
        if self.features.lengths is None:
            return make_workload(rng, n, kind, input_len=LengthDistribution(self.input_len),
                                 output_len=LengthDistribution(output_len or self.output_len), **load)
        wl = make_workload(rng, n, kind, lengths=self.features.lengths, **load)
        if output_len == 1:
            wl = Workload(wl.arrival_s, wl.input_len, np.ones_like(wl.output_len), wl.kind, wl.concurrency)
        return wl

    def _workload(self, rate: float, output_len: int, seed: int) -> Workload:
        return self._make(SIM_REQUESTS, ArrivalKind.POISSON, output_len, seed, rate=rate / self.groups)

    def _simulate(self, wl: Workload, *, decoding: bool, warmup: int = 0):
        """The replica's simulation (its prefix cache, and its speculative decoding where `decoding`)."""
        return self.replica.simulate(wl, warmup, decoding=decoding)

    def _decode(self, wl: Workload):
        f = self.features
        return simulate_decode(self.steps, self.decode_mem, wl.arrival_s, wl.input_len, wl.output_len,
                               self.sched.max_batch_seqs, speculative=f.speculative, draft=self.draft,
                               prefix_cache=f.prefix_cache)

    def prefill_point(self, rate: float, seed: int = PLAN_SEED) -> LoadPoint:
        """A prefill-only instance (each request outputs the one token its prefill samples)."""
        res = self._simulate(self._workload(rate, 1, seed), decoding=False, warmup=int(SIM_REQUESTS * WARMUP_FRACTION))
        # the request enters through the serving API on the prefill side: its front-end latency
        # (sim/frontend.py) is part of TTFT once, as in a co-located replica's `serve run`
        return LoadPoint(rate, ttft_p90_s=res.ttft_ms.p90 / 1e3 + frontend_latency_s())

    def decode_point(self, rate: float, seed: int = PLAN_SEED) -> LoadPoint:
        run = self._decode(self._workload(rate, self.output_len, seed))
        keep = slice(int(SIM_REQUESTS * WARMUP_FRACTION), None)
        return LoadPoint(rate, tpot_p90_s=_p90(run.tpot_s[keep]),
                         first_token_delay_p90_s=_p90(run.first_token_delay_s[keep]))

    def colocated_point(self, rate: float, seed: int = PLAN_SEED) -> LoadPoint:
        """`serve run --rate` on this layout: the replica under Poisson arrivals (replica.py)."""
        res = self.replica.run(Load.poisson(rate), self.input_len, self.output_len, window=STEADY_STATE, seed=seed).result
        f = res.prefill_time_fraction
        return LoadPoint(rate, ttft_p90_s=res.ttft_ms.p90 / 1e3, tpot_p90_s=res.tpot_ms.p90 / 1e3,
                         prefill_time_fraction=math.nan if f is None else f)

    # saturated requests/s of one instance per role (the ladder's 100%)
    def prefill_saturation(self) -> float:
        conc = max(2, 2 * math.ceil(self.sched.max_batch_tokens / self.input_len))
        wl = self._make(8 * conc, ArrivalKind.CLOSED_LOOP, 1, PLAN_SEED, concurrency=conc)
        return self._simulate(wl, decoding=False).requests_per_s * self.groups

    def decode_saturation(self) -> float:
        """B / (output_len x decode step at B), B = the batch that fits (memory, max_batch_seqs); with
        serving features on, the decode loop itself on 3 B requests that all arrive at once."""
        b = max(1, min(self.sched.max_batch_seqs, self.decode_mem.max_concurrent_sequences(self.input_len + self.output_len)))
        if self.features.any:
            wl = self._make(3 * b, ArrivalKind.BURST, None, PLAN_SEED)
            run = self._decode(wl)
            return run.output_tokens_per_s * wl.arrival_s.shape[0] / max(1.0, float(wl.output_len.sum())) * self.groups
        step = self.steps.decode_step_time(b, self.input_len + self.output_len / 2)
        return b / (self.output_len * step) * self.groups

    def colocated_saturation(self) -> float:
        conc = max(1, min(self.sched.max_batch_seqs, self.mem.max_concurrent_sequences(self.input_len + self.output_len)))
        wl = self._make(4 * conc, ArrivalKind.CLOSED_LOOP, None, PLAN_SEED, concurrency=conc)
        return self._simulate(wl, decoding=True).requests_per_s * self.groups


def _ladder(point, saturation: float, stop) -> tuple[LoadPoint, ...]:
    pts = []
    for f in LOAD_FRACTIONS:
        p = point(f * saturation)
        pts.append(p)
        if stop(p):
            break
    return tuple(pts)
