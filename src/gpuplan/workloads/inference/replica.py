"""A serving replica under a load: the one path from a deployment to latency statistics.

`serve run`, `serve plan`, `serve frontier`, the disaggregated planner and `validate` all simulate a
replica through `Replica.run`, so what `validate` scores is what a user runs. A replica is

    deployment (model, GPUs, tp/pp/ep, formats) -> engine profile (scheduler, KV rule, CUDA graphs)
    -> memory plan -> step-time model -> workload (arrivals x lengths) -> simulation -> statistics

built once (`Replica.__init__`: memory plan and step model) and run under any number of loads.

The load (`Load`): a Poisson open loop at `rate` requests/s, a closed loop of `concurrency`
requests in flight, one static batch, or a burst of n requests at t = 0 (an offline max-load run).
With attention data parallelism (Deployment.attention_dp = a) the replica is a groups that each
serve their own requests: the load splits evenly (rate / a, ceil(concurrency / a), ceil(batch /
a), ceil(n / a)), one group is simulated (its MoE layers carry all a groups' tokens, operators.py)
and the replica's throughput is a x the group's.

The measurement window (`Window`) is an explicit input: which requests are simulated and which of
them the latency statistics cover.
- `STEADY_STATE` (planning: serve run / plan / frontier, disaggregation): the steady state after
  warm-up. A closed loop of c simulates max(2000, 4 c) requests and leaves out its initial burst
  (the c requests that all arrive at t = 0); a Poisson loop simulates 2000 requests and leaves out
  the first 10% (it starts with an empty queue, which no long-running service has). A static batch
  or a burst is measured whole.
- `BENCHMARK_RUN` (validation rows): the window of the benchmark tools that measured the rows.
  vLLM's `benchmarks/benchmark_serving.py` and SGLang's `bench_serving.py` send `--num-prompts`
  requests (default 1,000) and report means and percentiles over every one of them, with no warm-up
  left out; trtllm-bench throughput runs use 1,000-3,000 requests (TensorRT-LLM perf-overview.md).
  A Poisson row with no stated count simulates 1,500 requests, all counted; a closed loop simulates
  max(200, 4 c) requests and leaves out the initial burst (the steady state those tools' reports
  approach at their request counts); a stated request count (`Window.requests`) replaces the rule.

Statistics: `ReplicaRun` holds the simulator's result (means and p50/p90/p99 of TTFT, TPOT and
end-to-end latency over the window's requests; throughput over every request) plus the replica-level
throughput. Requests served through an API (open or closed loop) pay the serving front-end's latency
on their first token and their end (sim/frontend.py); a static batch or a burst is an in-process run.
Capacity plans judge the objectives on p90 TTFT and p90 TPOT over the STEADY_STATE window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum

from gpuplan.errors import InputError
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import MemoryPlan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.engines import GENERIC, EngineProfile
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, SeededGenerator, Workload, make_workload
from gpuplan.workloads.inference.sim.deferred_first_token import deferred_result, deferred_workload
from gpuplan.workloads.inference.sim.frontend import frontend_latency_s, with_frontend_latency
from gpuplan.workloads.inference.sim.lengths import RequestLengths, fixed
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.sim.simulator import SimResult, simulate

#: Seed of every planning simulation (serve run / plan / frontier, disaggregation), so that a plan's
#: replica re-run through `serve run` reproduces the plan's figures.
PLANNING_SEED = 0


class LoadKind(str, Enum):
    RATE = "rate"  # Poisson open loop, requests/s
    CONCURRENCY = "concurrency"  # closed loop, requests in flight
    BATCH = "batch"  # one static batch
    BURST = "burst"  # n requests at t = 0, the engine's own batching (offline max-load run)


@dataclass(frozen=True)
class Load:
    """What arrives at a whole replica (all its attention-DP groups together)."""

    kind: LoadKind
    value: float

    @staticmethod
    def poisson(rate: float) -> "Load":
        return Load(LoadKind.RATE, float(rate))

    @staticmethod
    def closed(concurrency: int) -> "Load":
        return Load(LoadKind.CONCURRENCY, int(concurrency))

    @staticmethod
    def static(batch: int) -> "Load":
        return Load(LoadKind.BATCH, int(batch))

    @staticmethod
    def burst(requests: int) -> "Load":
        return Load(LoadKind.BURST, int(requests))

    @property
    def through_api(self) -> bool:
        """Open and closed loops are load generators against a serving API (front-end latency)."""
        return self.kind in (LoadKind.RATE, LoadKind.CONCURRENCY)

    def per_group(self, groups: int) -> "Load":
        """The share of one of `groups` attention-DP groups (module docstring)."""
        if self.kind is LoadKind.RATE:
            return Load(self.kind, self.value / groups)
        return Load(self.kind, max(1, -(-int(self.value) // groups)))

    def label(self) -> str:
        return {LoadKind.RATE: f"poisson {self.value:g} req/s", LoadKind.CONCURRENCY: f"closed loop {int(self.value)}",
                LoadKind.BATCH: f"static batch {int(self.value)}", LoadKind.BURST: f"burst of {int(self.value)}"}[self.kind]


@dataclass(frozen=True)
class Window:
    """Requests simulated per attention-DP group and which of them the statistics cover (module
    docstring). `requests`: a stated count that replaces the rule for open loops and bursts."""

    closed_loop_min_requests: int
    closed_loop_requests_per_slot: int
    closed_loop_leaves_out_burst: bool
    open_loop_requests: int
    open_loop_warmup_fraction: float
    requests: int | None = None

    def simulated_requests(self, load: Load) -> int:
        if load.kind is LoadKind.BATCH:
            return int(load.value)
        if load.kind is LoadKind.CONCURRENCY:
            return max(self.closed_loop_min_requests, self.closed_loop_requests_per_slot * int(load.value))
        if self.requests is not None:
            return max(1, int(self.requests))
        return self.open_loop_requests if load.kind is LoadKind.RATE else int(load.value)

    def warmup_requests(self, load: Load, simulated: int) -> int:
        if load.kind is LoadKind.CONCURRENCY and self.closed_loop_leaves_out_burst:
            return int(load.value)
        if load.kind is LoadKind.RATE:
            return int(simulated * self.open_loop_warmup_fraction)
        return 0

    def with_requests(self, requests: int | None) -> "Window":
        return replace(self, requests=requests)


STEADY_STATE = Window(closed_loop_min_requests=2000, closed_loop_requests_per_slot=4, closed_loop_leaves_out_burst=True,
                      open_loop_requests=2000, open_loop_warmup_fraction=0.1)
BENCHMARK_RUN = Window(closed_loop_min_requests=200, closed_loop_requests_per_slot=4, closed_loop_leaves_out_burst=True,
                       open_loop_requests=1500, open_loop_warmup_fraction=0.0)


@dataclass(frozen=True)
class ServingFeatures:
    """Request lengths other than fixed, speculative decoding and prefix caching (None: off)."""

    lengths: object = None  # sim.lengths.RequestLengths
    speculative: object = None  # cost.speculative.SpeculativeDecoding
    prefix_cache: object = None  # cost.prefix_cache.PrefixCache

    @property
    def any(self) -> bool:
        return self.lengths is not None or self.speculative is not None or self.prefix_cache is not None


def static_scheduler(batch: int, input_len: int) -> SchedulerConfig:
    """One static batch: all `batch` prompts prefilled together, then decoded to the end."""
    if batch < 1:
        raise InputError(f"batch: must be >= 1, got {batch}", field="batch")
    return SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=batch, max_batch_tokens=batch * input_len)


@dataclass(frozen=True)
class ReplicaRun:
    """One replica under one load: the simulated group's result and the replica's throughput."""

    result: SimResult
    groups: int
    load: Load
    workload: Workload = field(repr=False)
    frontend_latency_s: float = 0.0

    @property
    def output_tokens_per_s(self) -> float:
        return self.result.output_tokens_per_s * self.groups

    @property
    def total_tokens_per_s(self) -> float:
        return self.result.total_tokens_per_s * self.groups

    @property
    def requests_per_s(self) -> float:
        return self.result.requests_per_s * self.groups

    def meets(self, ttft_ms: float, tpot_ms: float) -> bool:
        """p90 TTFT and p90 TPOT within the objectives, and every request served."""
        r = self.result
        return r.ttft_ms.p90 <= ttft_ms and r.tpot_ms.p90 <= tpot_ms and r.completed == r.requests


class Replica:
    """One deployment under an engine's defaults: memory plan and step model built once, run under
    any load through `run` (module docstring).

    `scheduler`: the engine's unless given (a static batch: `static_scheduler`). The memory plan's
    activation workspace is sized for min(scheduler token budget, engine per-step token limit)
    tokens (the engine reserves activations for its largest step: vLLM profiles a dummy forward of
    max_num_batched_tokens) unless `workspace_tokens` states it. `deferred_first_token`: the
    engine version samples the first output token in a decode step (sim/deferred_first_token.py)."""

    def __init__(self, dep: Deployment, engine: EngineProfile | None = None, scheduler: SchedulerConfig | None = None,
                 features: ServingFeatures = ServingFeatures(), *, workspace_tokens: int | None = None,
                 deferred_first_token: bool = False):
        self.dep = dep
        # the engine's per-step limits on this GPU (EngineProfile.for_gpu: vLLM's depend on the part)
        self.engine = (engine or GENERIC).for_gpu(dep.gpu)
        self.sched = scheduler or self.engine.scheduler_config()
        self.features = features
        tokens = workspace_tokens if workspace_tokens is not None else min(self.sched.max_batch_tokens,
                                                                           self.engine.max_batch_tokens)
        self.mem: MemoryPlan = self.engine.memory_plan(dep, max_batch_tokens=tokens, max_batch_seqs=self.sched.max_batch_seqs)
        self.steps = step_time_model(dep)
        self.deferred_first_token = deferred_first_token
        self.draft = None
        if features.speculative is not None:
            from gpuplan.workloads.inference.cost.speculative import draft_cost

            self.draft = draft_cost(dep, features.speculative)

    @property
    def groups(self) -> int:
        return self.dep.attention_dp

    @property
    def static(self) -> bool:
        return self.sched.kind is SchedulerKind.STATIC

    def lengths(self, input_len: int, output_len: int) -> RequestLengths:
        """The features' lengths, else fixed input_len / output_len."""
        if self.features.lengths is not None:
            return self.features.lengths
        return RequestLengths(fixed(input_len), fixed(output_len))

    def fit_concurrency(self, input_len: int, output_len: int) -> int:
        """Sequences of input_len + output_len tokens that fit one group at once (memory and the
        scheduler's sequence cap): the closed loop of a saturated replica."""
        return max(1, min(self.mem.max_concurrent_sequences(input_len + output_len), self.sched.max_batch_seqs))

    def workload(self, load: Load, input_len: int, output_len: int, window: Window = STEADY_STATE,
                 seed: int = PLANNING_SEED) -> Workload:
        """The requests one attention-DP group receives under `load` (its share)."""
        share = load.per_group(self.groups)
        n = window.simulated_requests(share)
        rng = SeededGenerator(seed)  # numpy.random only if a draw is made
        lens = dict(lengths=self.lengths(input_len, output_len))
        if share.kind is LoadKind.RATE:
            return make_workload(rng, n, ArrivalKind.POISSON, rate=share.value, **lens)
        if share.kind is LoadKind.CONCURRENCY:
            return make_workload(rng, n, ArrivalKind.CLOSED_LOOP, concurrency=int(share.value), **lens)
        return make_workload(rng, n, ArrivalKind.BURST, **lens)

    def simulate(self, wl: Workload, warmup_requests: int = 0, *, decoding: bool = True) -> SimResult:
        """The simulator on this replica's step model, memory plan and scheduler, with the engine's
        CUDA-graph padding (not for a static batch), and its features (speculative decoding only
        where `decoding`)."""
        f = self.features
        spec = f.speculative if decoding else None
        return simulate(self.steps, self.mem, wl, self.sched, warmup_requests=warmup_requests,
                        cuda_graph_batch_sizes=() if self.static else self.engine.cuda_graph_batch_sizes,
                        speculative=spec, draft=self.draft if spec is not None else None, prefix_cache=f.prefix_cache)

    def run(self, load: Load, input_len: int, output_len: int, *, window: Window = STEADY_STATE,
            seed: int = PLANNING_SEED) -> ReplicaRun:
        """Simulate one group under its share of `load` and report over `window` (module docstring)."""
        if load.kind is LoadKind.BATCH and not self.static:
            raise InputError("batch: a static batch needs the replica built with static_scheduler(batch, input_len)",
                             field="batch")
        share = load.per_group(self.groups)
        real = self.workload(load, input_len, output_len, window, seed)
        wl = deferred_workload(real) if self.deferred_first_token else real
        res = self.simulate(wl, window.warmup_requests(share, real.arrival_s.shape[0]))
        if self.deferred_first_token:
            res = deferred_result(res, real, wl)
        frontend_s = frontend_latency_s() if load.through_api else 0.0
        if load.through_api:
            res = with_frontend_latency(res, frontend_s)
        return ReplicaRun(res, self.groups, load, real, frontend_s)


def fewest_replicas(meets, first_guess: int, cap: int) -> tuple[int | None, object]:
    """The fewest replicas n in [1, cap] with meets(n)[0] true, for a `meets` that is monotone in n
    (latency falls as each replica's share of the rate falls: with one seed the Poisson arrival
    times scale exactly with 1 / rate, arrivals.make_workload). Exponential search from
    `first_guess` down or up, then bisection. Returns (n, meets' result at n), or (None, the result
    at `cap`) when even `cap` replicas miss."""
    first_guess = min(max(1, first_guess), cap)
    ok, res = meets(first_guess)
    if ok:  # search down: the largest miss below
        hi, best, step = first_guess, res, 1
        lo = 0
        while hi - step >= 1:
            n = hi - step
            ok, r = meets(n)
            if not ok:
                lo = n
                break
            hi, best = n, r
            step *= 2
    else:  # search up: the first hit above
        lo, step, hit = first_guess, 1, None
        while True:
            n = min(first_guess + step, cap)
            ok, r = meets(n)
            if ok:
                hit = (n, r)
                break
            lo, res = n, r
            if n == cap:
                return None, res
            step *= 2
        hi, best = hit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok, r = meets(mid)
        if ok:
            hi, best = mid, r
        else:
            lo = mid
    return hi, best


def replicas_for_rate(rate: float, replica_requests_per_s: float) -> int:
    """ceil(rate / a replica's sustainable requests/s): the closed loop's first guess."""
    return max(1, math.ceil(rate / replica_requests_per_s)) if replica_requests_per_s > 0 else 1
