"""The event-driven simulator loop (sim/events.py) against the step-by-step reference loop
(simulator._simulate, `simulate(..., event_driven=False)`): the same steps, preemptions,
completions, TTFT / TPOT / e2e percentiles and KV trace, on every scheduler, eviction under memory
pressure, sliding-window models, prefix caching, CUDA-graph padding, and random small workloads.

Tolerance: none. The two loops add the same step times in the same order (kernels.step_seconds)
and, when KV bytes per token are integers (every model here), every sum of KV bytes is exact, so the
results agree bit for bit; the assertions compare every figure for equality."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, LengthDistribution, LengthKind, Workload, make_workload
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.cost.prefix_cache import PrefixCache
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.sim.simulator import SimResult, simulate
from gpuplan.workloads.inference.cost.speculative import SpeculativeDecoding


@pytest.fixture(scope="module")
def models():
    cat = load_catalog()
    g = cat.gpu("h100-sxm5-80gb")
    out = {}
    # llama-3-8b: global attention only; gemma-2-9b: 21 global + 21 window-4096 layers;
    # gpt-oss-20b: window 128 (decoders cross it within a few steps); mistral-7b: every layer windowed
    for name in ("llama-3-8b", "gemma-2-9b", "gpt-oss-20b", "mistral-7b"):
        dep = Deployment(load_model(name), g, cat.system(g.id))
        out[name] = (dep, step_time_model(dep), memory_plan(dep))
    return out


def _assert_same(ref: SimResult, fast: SimResult) -> None:
    assert (fast.requests, fast.completed, fast.steps, fast.preemptions) == \
        (ref.requests, ref.completed, ref.steps, ref.preemptions)
    for field in ("ttft_ms", "tpot_ms", "e2e_ms"):
        a, b = getattr(ref, field), getattr(fast, field)
        for q in ("p50", "p90", "p99", "mean"):
            x, y = getattr(a, q), getattr(b, q)
            assert (np.isnan(x) and np.isnan(y)) or y == x, (field, q)
    for q in ("duration_s", "output_tokens_per_s", "requests_per_s", "mean_in_flight", "busy_s", "prefill_busy_s"):
        assert getattr(fast, q) == getattr(ref, q), q
    np.testing.assert_array_equal(fast.kv_time_s, ref.kv_time_s)
    np.testing.assert_array_equal(fast.kv_bytes, ref.kv_bytes)


def _both(steps, mem, wl, sched, **kw) -> tuple[SimResult, SimResult]:
    return (simulate(steps, mem, wl, sched, event_driven=False, **kw),
            simulate(steps, mem, wl, sched, event_driven=True, **kw))


LENS = dict(input_len=LengthDistribution(512, LengthKind.LOGNORMAL, 1.0),
            output_len=LengthDistribution(256, LengthKind.LOGNORMAL, 1.0))

# name: (model, scheduler, arrivals, requests, concurrency, rate, KV budget fraction, graphs, prefix hit)
SCENARIOS = {
    "poisson_chunked": ("llama-3-8b", SchedulerConfig(), ArrivalKind.POISSON, 1500, None, 30.0, 1.0, (), 0.0),
    "closed_continuous": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.CONTINUOUS, max_batch_seqs=64),
                          ArrivalKind.CLOSED_LOOP, 800, 64, None, 1.0, (), 0.0),
    "closed_static": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=32),
                      ArrivalKind.CLOSED_LOOP, 300, 40, None, 1.0, (), 0.0),
    "burst_static": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=16, max_batch_tokens=16 * 8192),
                     ArrivalKind.BURST, 100, None, None, 1.0, (), 0.0),
    "noevict_graphs": ("llama-3-8b", SchedulerConfig(no_evict=True, max_batch_seqs=512), ArrivalKind.BURST, 1000, None,
                       None, 1.0, (1, 2, 4, 8, 16, 32, 64, 128, 256, 512), 0.0),
    # KV budget cut to 1/20: thousands of preemptions (recompute) in both schedulers
    "evict_chunked": ("llama-3-8b", SchedulerConfig(max_batch_seqs=256), ArrivalKind.CLOSED_LOOP, 800, 200, None,
                      0.05, (), 0.0),
    "evict_continuous_poisson": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.CONTINUOUS, max_batch_seqs=256),
                                 ArrivalKind.POISSON, 800, None, 100.0, 0.05, (), 0.0),
    "prefix_cache": ("llama-3-8b", SchedulerConfig(), ArrivalKind.POISSON, 1000, None, 40.0, 1.0, (), 0.5),
    "prefix_cache_evict": ("llama-3-8b", SchedulerConfig(), ArrivalKind.CLOSED_LOOP, 600, 200, None, 0.05, (), 0.5),
    "window_gemma": ("gemma-2-9b", SchedulerConfig(), ArrivalKind.CLOSED_LOOP, 600, 64, None, 1.0, (), 0.0),
    "window_128_evict": ("gpt-oss-20b", SchedulerConfig(), ArrivalKind.CLOSED_LOOP, 600, 128, None, 0.02, (), 0.0),
    "all_window_layers": ("mistral-7b", SchedulerConfig(kind=SchedulerKind.CONTINUOUS), ArrivalKind.POISSON, 600, None,
                          30.0, 1.0, (), 0.0),
    # prefill-first (SGLang): prefill-only steps stall the decoders (the event loop's decode clock
    # falls behind the step count); with eviction, windows, prefix caching and CUDA graphs
    "poisson_prefill_first": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.PREFILL_FIRST), ArrivalKind.POISSON,
                              1500, None, 30.0, 1.0, (), 0.0),
    "evict_prefill_first": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.PREFILL_FIRST, max_batch_seqs=256,
                                                          max_batch_tokens=2048),
                            ArrivalKind.CLOSED_LOOP, 800, 200, None, 0.05, (), 0.0),
    "window_128_prefill_first_evict": ("gpt-oss-20b", SchedulerConfig(kind=SchedulerKind.PREFILL_FIRST),
                                       ArrivalKind.CLOSED_LOOP, 600, 128, None, 0.02, (), 0.0),
    "gemma_prefill_first_prefix_graphs": ("gemma-2-9b",
                                          SchedulerConfig(kind=SchedulerKind.PREFILL_FIRST, max_batch_seqs=64),
                                          ArrivalKind.POISSON, 800, None, 20.0, 1.0, (1, 2, 4, 8, 16, 32, 64), 0.5),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_event_loop_equals_step_loop(models, name):
    model, sched, kind, n, conc, rate, frac, graphs, hit = SCENARIOS[name]
    _, steps, mem = models[model]
    mem = dataclasses.replace(mem, kv_budget_bytes=mem.kv_budget_bytes * frac)
    lens = LENS
    if frac < 1.0:  # keep the longest request within the cut budget (else Infeasible)
        lens = dict(input_len=LengthDistribution(512, LengthKind.UNIFORM, 0.9),
                    output_len=LengthDistribution(256, LengthKind.UNIFORM, 0.9))
    wl = make_workload(np.random.default_rng(7), n, kind, rate=rate, concurrency=conc, **lens)
    ref, fast = _both(steps, mem, wl, sched, cuda_graph_batch_sizes=graphs,
                      prefix_cache=PrefixCache(hit) if hit else None)
    assert ref.completed == n
    if frac < 1.0:
        assert ref.preemptions > 100  # the scenario does exercise eviction
    _assert_same(ref, fast)


def test_speculative_decoding_runs_the_reference_loop(models):
    # context under speculation is input + min(out, 1 + (gen - 1) e): not linear in steps, so the
    # event loop is not used; both flags give the reference's numbers
    dep, steps, mem = models["llama-3-8b"]
    wl = make_workload(np.random.default_rng(1), 200, ArrivalKind.CLOSED_LOOP, concurrency=16, **LENS)
    spec = SpeculativeDecoding(3, 0.7, mtp_layers=1)
    ref, fast = _both(steps, mem, wl, SchedulerConfig(), speculative=spec)
    _assert_same(ref, fast)
    # and speculation is applied: 1 + 0.7 + 0.49 + 0.343 = 2.53 tokens per verify step, so far
    # fewer engine steps than plain decoding of the same workload
    plain = simulate(steps, mem, wl, SchedulerConfig())
    assert fast.steps < 0.6 * plain.steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    model=st.sampled_from(["llama-3-8b", "gpt-oss-20b"]),
    kind=st.sampled_from(list(SchedulerKind)),
    no_evict=st.booleans(),
    arrivals=st.sampled_from([ArrivalKind.POISSON, ArrivalKind.CLOSED_LOOP, ArrivalKind.BURST]),
    n=st.integers(1, 40),
    max_seqs=st.integers(1, 12),
    max_tokens=st.integers(8, 2048),
    mem_factor=st.floats(1.0, 6.0),
    hit=st.sampled_from([0.0, 0.3, 0.9]),
    graphs=st.sampled_from([(), (1, 2, 4, 8)]),
    block=st.sampled_from([1, 7, 16, 64]),  # 1: SGLang page size (a decoder may need 2 blocks on entry)
    seed=st.integers(0, 2**31 - 1),
)
def test_event_loop_equals_step_loop_random(models, model, kind, no_evict, arrivals, n, max_seqs, max_tokens,
                                            mem_factor, hit, graphs, block, seed):
    _, steps, mem = models[model]
    mem = dataclasses.replace(mem, block_size=block)
    rng = np.random.default_rng(seed)
    ins = rng.integers(1, 400, n)
    outs = rng.integers(1, 200, n)
    if arrivals == ArrivalKind.POISSON:
        arr = np.cumsum(rng.exponential(1.0 / rng.uniform(1.0, 200.0), n))
    elif arrivals == ArrivalKind.CLOSED_LOOP:
        arr = np.full(n, np.inf)
        arr[: int(rng.integers(1, n + 1))] = 0.0
    else:
        arr = np.zeros(n)
    wl = Workload(arr, ins, outs, arrivals, concurrency=int(np.isfinite(arr).sum()))
    # KV budget between the longest request's blocks and a few times that (plus what a prefix cache
    # holds): memory pressure is common
    budget = mem.sequence_kv_bytes(float((ins + outs).max())) * mem_factor
    if hit:
        budget += mem.sequence_kv_bytes(float(PrefixCache(hit).pool(ins)))
    mem = dataclasses.replace(mem, kv_budget_bytes=budget)
    sched = SchedulerConfig(kind=kind, no_evict=no_evict, max_batch_seqs=max_seqs, max_batch_tokens=max_tokens)
    ref, fast = _both(steps, mem, wl, sched, cuda_graph_batch_sizes=graphs,
                      prefix_cache=PrefixCache(hit) if hit else None)
    _assert_same(ref, fast)


def _tracking_blocks(monkeypatch):
    """simulate() with the event loop tracking every decoder's KV blocks (count_blocks=False)."""
    from gpuplan.workloads.inference.sim import simulator

    real = simulator._simulate_events
    monkeypatch.setattr(simulator, "_simulate_events", lambda R, E, K, coef, tables: real(R, E, K, coef, tables, False))


def test_counted_blocks_is_the_mode_of_global_attention_models(models):
    # counted blocks need growing blocks (not static, not no-evict), no window layer and integral
    # KV bytes per token: llama-3-8b bf16 = 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B
    from gpuplan.workloads.inference.sim.events import Engine, KvLayout, counts_blocks

    chunked, static, no_evict = Engine(2, False, 256, 8192, False), Engine(0, False, 256, 8192, False), \
        Engine(2, True, 256, 8192, False)
    llama = KvLayout(60e9, 16, 131072.0, 0.0, 0, 1 << 40)
    assert counts_blocks(chunked, llama)
    assert not counts_blocks(static, llama) and not counts_blocks(no_evict, llama)
    assert not counts_blocks(chunked, llama._replace(w_bytes=65536.0, window=4096, w_blocks_cap=257))  # a window
    assert not counts_blocks(chunked, llama._replace(g_bytes=131072.5))  # sums would round: order would matter
    assert not counts_blocks(chunked, llama._replace(budget=2.0**51))


@pytest.mark.parametrize("name", ["poisson_chunked", "evict_chunked", "evict_continuous_poisson"])
def test_counted_blocks_equal_tracked_blocks(models, monkeypatch, name):
    # the same loop with each decoder's blocks tracked one by one (the sizing + growing visits the
    # counting replaces): every figure equal, preemptions included
    model, sched, kind, n, conc, rate, frac, graphs, hit = SCENARIOS[name]
    _, steps, mem = models[model]
    mem = dataclasses.replace(mem, kv_budget_bytes=mem.kv_budget_bytes * frac)
    lens = LENS if frac == 1.0 else dict(input_len=LengthDistribution(512, LengthKind.UNIFORM, 0.9),
                                         output_len=LengthDistribution(256, LengthKind.UNIFORM, 0.9))
    wl = make_workload(np.random.default_rng(11), n, kind, rate=rate, concurrency=conc, **lens)
    counted = simulate(steps, mem, wl, sched)
    _tracking_blocks(monkeypatch)
    _assert_same(simulate(steps, mem, wl, sched), counted)


@pytest.mark.parametrize("frac", [1.0, 0.05])
def test_completion_calendar_wraps_and_survives_preemption(models, monkeypatch, frac):
    # counted blocks keep completions in a calendar of FINISH_BUCKETS = 1024 buckets (sim/events.py
    # Calendar): outputs of 2,250-3,250 tokens (uniform, 2750 +- 18%) end 2-3 rounds after they
    # enter decoding, so their bucket is passed over before their round comes; a KV budget cut to
    # 1/20 preempts decoders out of the calendar (recompute) and re-enters them. Equal to the
    # reference loop and to the heap (the tracked-blocks mode) in every figure.
    from gpuplan.workloads.inference.sim.events import FINISH_BUCKETS

    _, steps, mem = models["llama-3-8b"]
    mem = dataclasses.replace(mem, kv_budget_bytes=mem.kv_budget_bytes * frac)
    wl = make_workload(np.random.default_rng(5), 200, ArrivalKind.CLOSED_LOOP, concurrency=48,
                       input_len=LengthDistribution(256, LengthKind.UNIFORM, 0.5),
                       output_len=LengthDistribution(2750, LengthKind.UNIFORM, 0.18))
    assert wl.output_len.min() > 2 * FINISH_BUCKETS
    sched = SchedulerConfig(max_batch_seqs=48)
    ref, fast = _both(steps, mem, wl, sched)
    assert (ref.preemptions > 0) == (frac < 1.0)
    _assert_same(ref, fast)
    _tracking_blocks(monkeypatch)
    _assert_same(ref, simulate(steps, mem, wl, sched))


def test_percentiles_partition_a_copy_after_the_mean():
    # _pct partitions its own filtered copy in place: the percentiles are np.percentile's and the mean
    # is taken in the input's order (before partitioning), the caller's array untouched
    from gpuplan.workloads.inference.sim.simulator import _pct

    x = np.random.default_rng(5).lognormal(0.0, 1.5, 10_001)
    x[[3, 70]] = np.inf
    x[11] = np.nan
    before = x.copy()
    finite = x[np.isfinite(x)]
    p = _pct(x, 1e3)
    assert (p.p50, p.p90, p.p99) == tuple(float(v) for v in np.percentile(finite, [50, 90, 99]) * 1e3)
    assert p.mean == float(finite.mean() * 1e3)
    np.testing.assert_array_equal(x, before)
