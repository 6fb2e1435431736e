"""Speculative decoding (speculative.py), prefix caching (prefix_cache.py) in the simulator, the
features-off regression against the simulator before they existed, and the CLI contract."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, LengthDistribution, LengthKind, make_workload
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.cost.prefix_cache import PrefixCache
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.plan.service import serve_estimate
from gpuplan.workloads.inference.sim.simulator import simulate
from gpuplan.workloads.inference.cost.speculative import SpeculativeDecoding, draft_cost, expected_tokens_per_step


@pytest.fixture(scope="module")
def h100():
    cat = load_catalog()
    g = cat.gpu("h100-sxm5-80gb")
    return g, cat.widest_system_for(g.id)


@pytest.fixture(scope="module")
def llama70(h100):
    g, sys_ = h100
    dep = Deployment(load_model("llama-3-70b"), g, sys_, tp=4)
    return dep, step_time_model(dep), memory_plan(dep)


def _static_one(input_len, output_len, n=1):
    sched = SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=n, max_batch_tokens=n * input_len)
    wl = make_workload(np.random.default_rng(0), n, ArrivalKind.BURST, input_len=LengthDistribution(input_len),
                       output_len=LengthDistribution(output_len))
    return sched, wl


# ---- speculative decoding -----------------------------------------------------------------
def test_expected_tokens_per_step_hand_values():
    # Leviathan et al. 2023 eq. 1: (1 - a^(k+1)) / (1 - a); a = 0.8, k = 4: (1 - 0.32768) / 0.2 = 3.3616
    assert expected_tokens_per_step(4, 0.8) == pytest.approx(3.3616, abs=1e-12)
    assert expected_tokens_per_step(3, 0.0) == 1.0  # nothing accepted: the verify pass's own token
    assert expected_tokens_per_step(3, 1.0) == 4.0  # everything accepted: k + 1
    # a = 0.5, k = 1: (1 - 0.25) / 0.5 = 1.5
    assert expected_tokens_per_step(1, 0.5) == pytest.approx(1.5)


@settings(max_examples=50, deadline=None)
@given(k=st.integers(1, 16), a=st.floats(0.0, 1.0))
def test_expected_tokens_bounds(k, a):
    e = expected_tokens_per_step(k, a)
    assert 1.0 - 1e-12 <= e <= k + 1 + 1e-12
    assert e <= expected_tokens_per_step(k + 1, a) + 1e-12  # more drafted tokens never yield fewer


def test_iterations_of_a_request():
    spec = SpeculativeDecoding(4, 0.8, mtp_layers=1)
    # 257 output tokens: the prefill's one + 256 at 3.3616 per step: 1 + ceil(76.15) = 78 iterations
    assert spec.iterations(np.array([257, 1, 2]) ).tolist() == [78, 1, 2]


def test_spec_decoding_steps_and_speedup_at_batch_one(llama70, h100):
    dep, steps, mem = llama70
    spec = SpeculativeDecoding(4, 0.8, draft_model=load_model("llama-3-8b"))
    draft = draft_cost(dep, spec)
    sched, wl = _static_one(512, 257)
    plain = simulate(steps, mem, wl, sched)
    fast = simulate(steps, mem, wl, sched, speculative=spec, draft=draft)
    assert plain.steps == 257  # one prefill step (first token) + 256 decode steps
    assert fast.steps == 78  # 1 + ceil(256 / 3.3616) (test_iterations_of_a_request)
    # batch 1: the verify pass over 5 tokens is weight-bandwidth-bound like a 1-token step, so a
    # step costs about one target decode step + 4 draft (8B) decode steps; per output token that is
    # (t70 + 4 t8 + ...) / 3.3616 < t70: the TPOT must fall, and not below t70 / (k + 1)
    assert fast.tpot_ms.mean < plain.tpot_ms.mean
    assert fast.tpot_ms.mean > plain.tpot_ms.mean / 5
    assert fast.ttft_ms.mean == pytest.approx(plain.ttft_ms.mean, rel=1e-12)  # the prefill is unchanged


def test_spec_speedup_shrinks_with_batch(llama70):
    # the verify pass is compute-bound at large batch: k + 1 rows cost ~k + 1 times one, so the
    # TPOT gain of speculation at batch 64 is smaller than at batch 1
    dep, steps, mem = llama70
    spec = SpeculativeDecoding(4, 0.8, mtp_layers=1)
    draft = draft_cost(dep, spec)
    ratio = {}
    for b in (1, 64):
        sched, wl = _static_one(256, 129, b)
        plain = simulate(steps, mem, wl, sched)
        fast = simulate(steps, mem, wl, sched, speculative=spec, draft=draft)
        ratio[b] = plain.tpot_ms.mean / fast.tpot_ms.mean
    assert ratio[1] > ratio[64] and ratio[1] > 2.0


def test_spec_decoding_needs_one_draft():
    with pytest.raises(InputError, match="draft"):
        SpeculativeDecoding(4, 0.8)
    with pytest.raises(InputError, match="draft"):
        SpeculativeDecoding(4, 0.8, draft_model=load_model("llama-3-8b"), mtp_layers=1)
    with pytest.raises(InputError, match="spec_acceptance"):
        SpeculativeDecoding(4, 1.5, mtp_layers=1)
    with pytest.raises(InputError, match="spec_tokens"):
        SpeculativeDecoding(0, 0.5, mtp_layers=1)


# ---- prefix caching -------------------------------------------------------------------------
def test_cached_tokens():
    pc = PrefixCache(0.5)
    # floor(0.5 L), at most L - 1 (the last prompt token is always computed)
    assert pc.cached_tokens(np.array([100, 1, 3])).tolist() == [50, 0, 1]
    assert PrefixCache(0.9999).cached_tokens(np.array([2048])).tolist() == [2047]
    assert pc.pool(np.array([100, 200])) == 75  # the mean cached prefix (50 + 100) / 2
    with pytest.raises(InputError, match="prefix_hit_rate"):
        PrefixCache(1.0)


def test_prefix_hit_half_prefill(llama70):
    # one request of 2048 prompt tokens and 1 output token: TTFT = its prefill step. With half the
    # prompt cached, the step runs 1024 tokens through every GEMM (half the linear FLOPs) and
    # attention for those 1024 queries over all 2048 keys: pairs(2048) - pairs(1024) =
    # 2048 x 2049 / 2 - 1024 x 1025 / 2 = 1,573,376 causal pairs, reading the K/V of 2048 tokens
    dep, steps, mem = llama70
    sched, wl = _static_one(2048, 1)
    full = simulate(steps, mem, wl, sched)
    half = simulate(steps, mem, wl, sched, prefix_cache=PrefixCache(0.5))
    assert full.ttft_ms.mean == pytest.approx(steps.prefill_time(1, 2048) * 1e3, rel=1e-9)
    expect = steps.step_time(prefill_tokens=1024, prefill_seqs=1, prefill_pairs=2048 * 2049 / 2 - 1024 * 1025 / 2,
                             prefill_kv_tokens=2048)
    assert half.ttft_ms.mean == pytest.approx(expect * 1e3, rel=1e-9)
    assert steps.lookup_linear(1024) < 0.6 * steps.lookup_linear(2048)  # compute-bound GEMMs: about half


def test_prefix_cache_memory_is_held_once(llama70):
    dep, steps, mem = llama70
    rep = serve_estimate(dep, input_len=2048, output_len=64, concurrency=4, prefix_cache=PrefixCache(0.5), requests=40)
    # the cache holds one cached prefix of 1024 tokens (paged blocks): sequence_kv_bytes(1024)
    assert rep.prefix_cache_gib_per_gpu == pytest.approx(mem.sequence_kv_bytes(1024) / 2**30)
    off = serve_estimate(dep, input_len=2048, output_len=64, concurrency=4, requests=40)
    assert rep.ttft_ms < off.ttft_ms and rep.prefix_cache_gib_per_gpu > 0 == off.prefix_cache_gib_per_gpu


# ---- features off == the simulator before them ----------------------------------------------
#: (steps, preemptions, completed, mean TTFT ms, mean TPOT ms, output tokens/s, peak KV bytes) of the
#: simulator at commit e0b20e0 (before lengths, speculative decoding, prefix caching and the slot
#: arrays), for lognormal (CV 1) 1024 / 512-token requests at seed 3 on one H100 (scenario table below)
OLD_RESULTS = {
    "chunked_poisson": (16208, 0, 3000, 21952.150279362813, 35.341155926373105, 5167.3483828272365, 55306092544.0),
    "chunked_preempt": (24846, 47738, 3000, 37800.743942785215, 21.642423558827034, 4018.0520914083495, 20185088000.0),
    "continuous_closed": (18184, 0, 2000, 58.5343602997623, 14.03038680595266, 4228.573263286823, 16479420416.0),
    "static_burst": (13671, 0, 200, 41437.75593770422, 8.421943572194946, 961.0114143982818, 7853834240.0),
    "noevict_graphs": (7004, 0, 2000, 63944.2590197545, 33.589394134938175, 5938.605749740682, 58575552512.0),
    # re-pinned when kernel launches came from the operator inventory (operators.kernels_per_layer):
    # Gemma-2's four norms per layer make 11 kernels, not 9 -- 2 x 42 layers x 3 us = 0.25 ms more per
    # step; steps, preemptions, completions and peak KV unchanged (was 3064.505.., 38.0028.., 2571.797..)
    # re-pinned when the attention ceiling took the head-dim factor (primitives.attention_head_dim): Gemma-2's
    # head_dim 256 runs FlashAttention-3 at 642 / 616 = 1.042 of the head_dim-128 rate (FA3 Fig. 5), so its
    # attention is faster; steps, preemptions, completions and peak KV unchanged (was 3084.103.., 38.2635..,
    # 2548.691..)
    "window_model": (11049, 6381, 1500, 3082.812283899543, 38.25209221257116, 2549.351147383832, 56420990976.0),
}
SCENARIOS = {
    "chunked_poisson": ("llama-3-8b", SchedulerConfig(), ArrivalKind.POISSON, 3000, None, 20.0, (), None),
    "chunked_preempt": ("llama-3-8b", SchedulerConfig(max_batch_seqs=512), ArrivalKind.CLOSED_LOOP, 3000, 512, None, (), 0.45),
    "continuous_closed": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.CONTINUOUS), ArrivalKind.CLOSED_LOOP, 2000, 64,
                          None, (), None),
    "static_burst": ("llama-3-8b", SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=32, max_batch_tokens=32 * 4096),
                     ArrivalKind.BURST, 200, None, None, (), None),
    "noevict_graphs": ("llama-3-8b", SchedulerConfig(no_evict=True, max_batch_seqs=1024), ArrivalKind.BURST, 2000, None, None,
                       (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), None),
    "window_model": ("gemma-2-9b", SchedulerConfig(), ArrivalKind.CLOSED_LOOP, 1500, 128, None, (), None),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_features_off_equal_the_old_simulator(name, h100):
    g, sys_ = h100
    model, sched, kind, n, conc, rate, graphs, frac = SCENARIOS[name]
    dep = Deployment(load_model(model), g, sys_, tp=1)
    mem = memory_plan(dep, memory_fraction=frac, max_batch_tokens=sched.max_batch_tokens, max_batch_seqs=sched.max_batch_seqs)
    lens = dict(input_len=LengthDistribution(1024, LengthKind.LOGNORMAL, 1.0),
                output_len=LengthDistribution(512, LengthKind.LOGNORMAL, 1.0))
    wl = make_workload(np.random.default_rng(3), n, kind, rate=rate, concurrency=conc, **lens)
    # the step-time physics of that commit: GEMMs on the plain roofline (serving.gemm_overlap = 1, its prior)
    with knobs.overridden({"serving.gemm_overlap": 1.0}):
        r = simulate(step_time_model(dep), mem, wl, sched, cuda_graph_batch_sizes=graphs, prefix_cache=PrefixCache(0.0))
    got = (r.steps, r.preemptions, r.completed, r.ttft_ms.mean, r.tpot_ms.mean, r.output_tokens_per_s, r.peak_kv_bytes)
    want = OLD_RESULTS[name]
    assert got[:3] == want[:3]
    for a, b in zip(got[3:], want[3:]):
        assert a == pytest.approx(b, rel=1e-12)


# ---- CLI ------------------------------------------------------------------------------------
def test_cli_serve_run_features_json(runner):
    out = runner.invoke(app, ["serve", "run", "llama-3-8b", "--concurrency", "4", "--input-dist", "uniform:100:300",
                              "--output-dist", "lognormal:128:0.5:max=512", "--spec-tokens", "4", "--spec-acceptance", "0.8",
                              "--mtp", "1", "--prefix-hit-rate", "0.5", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["spec_tokens_per_step"] == pytest.approx(3.3616)
    assert d["prefix_hit_rate"] == 0.5 and d["prefix_cache_gib_per_gpu"] > 0
    assert 100 <= d["input_len_p50"] <= 300 and d["input_len_p99"] <= 300 and d["output_len_p99"] <= 512
    assert abs(d["input_len_mean"] - 200) < 10  # uniform(100, 300): mean 200, 2000 draws (SE 1.3)


def test_cli_serve_plan_dataset_json(runner):
    out = runner.invoke(app, ["serve", "plan", "llama-3-8b", "--rate", "2", "--lengths", "sharegpt", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert "sharegpt-vllm" in d["lengths"] and d["input_len_p99"] <= 1024
    # lognormal CV 1 at mean 230, capped at 1024: the cap trims the mean a little (10,000 draws)
    assert 200 < d["input_len_mean"] < 232


@pytest.mark.parametrize("args, field", [
    (["--spec-tokens", "3"], "spec_acceptance"),
    (["--mtp", "1"], "spec_tokens"),
    (["--spec-tokens", "3", "--spec-acceptance", "0.7"], "draft_model"),
    (["--prefix-hit-rate", "1.5"], "prefix_hit_rate"),
    (["--prefix-cache-tokens", "100"], "prefix_cache_tokens"),
    (["--lengths", "missing.csv"], "lengths"),
    (["--lengths", "no-such-set"], "lengths"),
    (["--input-dist", "uniform:9:1"], "input_dist"),
    (["--input-dist", "10", "--lengths", "sharegpt"], "lengths"),
])
def test_cli_bad_feature_input_exit_2(runner, args, field):
    out = runner.invoke(app, ["serve", "run", "llama-3-8b", *args])
    assert out.exit_code == 2, out.output
    assert field in out.output and "Traceback" not in out.output


def test_mlperf_and_sharegpt_rows_are_predicted(validation_dir):
    import csv

    from gpuplan.interfaces.validation.inference import predict_row

    rows = {r["id"]: r for r in csv.DictReader(open(validation_dir / "inference.csv", encoding="utf-8"))}
    for rid, ds in (("mlperf40-1", "openorca-mlperf"), ("mlperf40-2", "openorca-mlperf"), ("vllmci-7", "sharegpt-vllm")):
        if rid in rows:
            p = predict_row(rows[rid])
            assert math.isfinite(p.value) and p.value > 0 and ds in p.notes
