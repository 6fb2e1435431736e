"""`serve plan` completeness (issue 16): the co-located search over expert parallelism and
attention-DP for MoE models, the open-loop (Poisson) verification of each sized plan, and
disaggregated plans with length distributions, speculative decoding and prefix caching. Expected
numbers are derived by hand in the comments."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.interfaces.api._common import resolve_gpu, resolve_model, widest_system
from gpuplan.workloads.inference.plan import capacity
from gpuplan.workloads.inference.replica import Replica, fewest_replicas
from gpuplan.workloads.inference.plan.capacity import CandidateResult, colocated_layouts, plan_capacity
from gpuplan.workloads.inference.sim.decode_pool import simulate_decode
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.plan.disaggregation import plan_disaggregated
from gpuplan.workloads.inference.cost.kv_transfer import (
    KvLink, kv_bytes_per_request, kv_transfer, link_bytes, link_wait_s, transfer_stats,
)
from gpuplan.workloads.inference.sim.lengths import RequestLengths, parse_length_spec
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.cost.prefix_cache import PrefixCache
from gpuplan.workloads.inference.cost.speculative import SpeculativeDecoding, draft_cost

H100 = "h100-sxm5-80gb"
runner = CliRunner()


def _hw(gpu: str = H100, price: float = 2.0):
    g = resolve_gpu(gpu)
    return [(g, widest_system(g), price)]


def _dep(model, tp: int = 1, **kw) -> Deployment:
    g = resolve_gpu(H100)
    return Deployment(resolve_model(model) if isinstance(model, str) else model, g, widest_system(g), tp=tp, **kw)


# ============================================================ 1. co-located ep x attention-DP search
def test_colocated_layouts_hand_enumeration():
    # dense: tp only
    assert colocated_layouts(resolve_model("llama-3-8b"), 8) == [(1, 1)]
    # Mixtral-8x7B, 8 experts, tp 4: ep in {2, 4} divide both 4 and 8; attention DP off / on (adp = tp)
    assert colocated_layouts(resolve_model("mixtral-8x7b"), 4) == [(1, 1), (1, 4), (2, 1), (2, 4), (4, 1), (4, 4)]
    # tp 1: nothing to split
    assert colocated_layouts(resolve_model("mixtral-8x7b"), 1) == [(1, 1)]
    # 6 experts at tp 4: ep 2 divides 6 and 4, ep 4 does not divide 6
    m6 = resolve_model("mixtral-8x7b")
    m6 = m6.model_copy(update={"moe": m6.moe.model_copy(update={"num_experts": 6})})
    assert colocated_layouts(m6, 4) == [(1, 1), (1, 4), (2, 1), (2, 4)]


@settings(max_examples=60, deadline=None)
@given(experts=st.integers(2, 300), tp=st.sampled_from([1, 2, 3, 4, 6, 8, 16]))
def test_colocated_layouts_are_exactly_the_valid_ones(experts, tp):
    m = resolve_model("mixtral-8x7b")
    m = m.model_copy(update={"moe": m.moe.model_copy(update={"num_experts": experts, "top_k": 2})})
    got = colocated_layouts(m, tp)
    want = {(1, 1)} | ({(1, tp)} if tp > 1 else set())
    want |= {(ep, a) for ep in range(2, tp + 1) if tp % ep == 0 and experts % ep == 0 for a in (1, tp)}
    assert set(got) == want and len(got) == len(want)


def test_moe_plan_searches_every_layout_and_attention_dp_rescues_indivisible_heads():
    # Qwen3-30B-A3B with 12 heads instead of 32 (head_dim 128 kept), tp 8 only: plain attention TP needs
    # 8 | 12 heads -> false, so (ep, adp) = (1,1), (2,1), (4,1), (8,1) are rejected; with attention DP
    # each GPU runs all 12 heads of its own requests (attention tp 8 / 8 = 1 divides 12): (1,8), (2,8),
    # (4,8), (8,8) are sized (ep 2, 4, 8 divide both 8 and 128 experts)
    base = resolve_model("qwen3-30b-a3b")
    m = base.model_copy(update={"heads": 12, "kv_heads": 4, "name": "qwen3-moe-12h"})
    plan = plan_capacity(m, _hw(), rate=4, ttft_ms=2000, tpot_ms=50, input_len=1024, output_len=128, tps=(8,))
    sized = {(c.ep, c.attention_dp) for c in plan.candidates}
    rejected = {(r.ep, r.attention_dp): r.why for r in plan.rejected}
    assert sized == {(1, 8), (2, 8), (4, 8), (8, 8)}
    assert set(rejected) == {(1, 1), (2, 1), (4, 1), (8, 1)}
    assert all(w == "attention tp 8 does not divide the 12 heads" for w in rejected.values())
    assert plan.best.attention_dp == 8 and plan.best.layout.startswith(f"{H100} tp8")
    assert plan.best.why_not_best == "best"
    # every other candidate says why it loses: the ranking is GPUs, then cost, then headroom
    assert all(c.why_not_best and c.why_not_best != "best" for c in plan.candidates[1:])


def test_attention_dp_concurrency_and_throughput_count_every_group():
    # with attention DP the closed-loop concurrency is per group and the replica serves groups x the
    # group's requests/s: concurrency is a multiple of the 8 groups, and the replica's tokens/s are
    # its requests/s x 128 output tokens (each request outputs exactly 128)
    m = resolve_model("qwen3-30b-a3b")
    plan = plan_capacity(m, _hw(), rate=4, ttft_ms=2000, tpot_ms=50, input_len=1024, output_len=128, tps=(8,))
    adp = [c for c in plan.candidates if c.attention_dp == 8]
    assert adp
    for c in adp:
        assert c.concurrency % 8 == 0
        assert c.replica_output_tokens_per_s == pytest.approx(c.replica_requests_per_s * 128, rel=0.02)


def _cand(**kw) -> CandidateResult:
    base = dict(gpu=H100, tp=1, concurrency=8, ttft_p90_ms=100.0, tpot_p90_ms=10.0, replica_requests_per_s=2.0,
                replica_output_tokens_per_s=256.0, replicas=2, gpus=2, usd_per_gpu_hour=2.0,
                usd_per_million_output_tokens=2.0, meets_slo=True, layout=f"{H100} tp1", closed_loop_replicas=2,
                open_loop_ttft_p90_ms=50.0, open_loop_tpot_p90_ms=9.0)
    base.update(kw)
    return CandidateResult(**base)


def test_why_others_lose():
    best = _cand()
    assert capacity._why(best, best) == "best"
    # 4 GPUs against 2
    assert capacity._why(_cand(gpus=4, replicas=4, closed_loop_replicas=4), best) == "4 GPUs vs 2"
    # same GPUs, $2.5 vs $2.0 per M tokens: 2.5 / 2.0 - 1 = 25%
    assert capacity._why(_cand(usd_per_million_output_tokens=2.5), best) == "same GPUs, costlier by 25%"
    # same GPUs and cost, capacity 2 x 1.5 = 3 vs 2 x 2 = 4 req/s
    assert capacity._why(_cand(replica_requests_per_s=1.5), best) == \
        "same GPUs and cost, less headroom (3 vs 4 req/s closed-loop capacity)"
    # the open-loop check raised 3 replicas to 4
    assert capacity._why(_cand(gpus=4, replicas=4, closed_loop_replicas=3), best) == \
        "4 GPUs vs 2; Poisson arrivals need 4 replicas, not 3"


# ============================================================ 2. open-loop verification
def test_fewest_replicas_searches_up_then_bisects():
    # meets(n) iff n >= 7, first guess 3, cap 16: probes 3, 4 (+1), 5 (+2), 7 (+4) -> first hit 7 after
    # the miss at 5; bisection probes 6 (miss) -> 7
    probes = []

    def meets(n):
        probes.append(n)
        return n >= 7, n

    assert fewest_replicas(meets, 3, 16) == (7, 7)
    assert probes == [3, 4, 5, 7, 6]


def test_fewest_replicas_searches_down_when_the_first_guess_meets():
    # meets(n) iff n >= 2, first guess 9: probes 9, 8 (-1), 6 (-2), 2 (-4) all meet; 2 - 8 < 1 stops the
    # steps; bisection between 0 and 2 probes 1 (miss) -> 2
    probes = []

    def meets(n):
        probes.append(n)
        return n >= 2, n

    assert fewest_replicas(meets, 9, 40) == (2, 2)
    assert probes == [9, 8, 6, 2, 1]


def test_fewest_replicas_gives_up_at_the_cap():
    # never met, first guess 2, cap 12: probes 2, 3, 4, 6, 10, then the cap 12 (2 + 16 > 12)
    probes = []

    def meets(n):
        probes.append(n)
        return False, n

    assert fewest_replicas(meets, 2, 12) == (None, 12)
    assert probes == [2, 3, 4, 6, 10, 12]


def test_open_loop_adds_replicas_that_the_closed_loop_misses():
    # Llama-3-70B, 2048 in / 256 out, 10 req/s, TTFT <= 1000 ms, TPOT <= 40 ms, tp 2 on H100s. The
    # closed loop's goodput is ~0.8 req/s per replica -> first guess ceil(10 / 0.8) = 13 replicas, each
    # then offered 10 / 13 = 0.77 req/s, >= 90% of what it serves back to back: Poisson arrivals at that
    # utilisation queue (M/G/1 waiting grows as rho / (1 - rho), ~10 service times at rho 0.9) and the
    # p90 TPOT passes 40 ms (decode steps share the GPU with queued prefills), so the plan needs more
    # replicas; the count meets both objectives under Poisson arrivals at rate / replicas
    plan = plan_capacity(resolve_model("llama-3-70b"), _hw(), rate=10, ttft_ms=1000, tpot_ms=40, input_len=2048,
                         output_len=256, tps=(2,))
    c = plan.best
    rho = 10 / (c.closed_loop_replicas * c.replica_requests_per_s)
    assert rho > 0.9
    assert c.replicas > c.closed_loop_replicas
    assert c.open_loop_ttft_p90_ms <= 1000 and c.open_loop_tpot_p90_ms <= 40
    assert c.open_loop_requests_per_s == pytest.approx(10 / c.replicas)
    assert c.gpus == 2 * c.replicas
    # one replica fewer misses an objective under Poisson arrivals (the count is the fewest)
    rep = Replica(_dep("llama-3-70b", 2))
    fewer = capacity.open_loop_check(rep, 10 / (c.replicas - 1), 2048, 256).result
    assert fewer.ttft_ms.p90 > 1000 or fewer.tpot_ms.p90 > 40


def test_light_load_needs_no_extra_replicas():
    # Llama-3-8B, 5 req/s of 1024 in / 128 out on one H100: the closed loop sustains ~10x that at
    # TPOT <= 60 ms, so at 5 req/s one replica is far from saturation and Poisson arrivals meet the
    # objectives with the same single GPU (the open-loop p90s are the lighter-load ones: below the
    # closed loop's at its deepest concurrency)
    plan = plan_capacity(resolve_model("llama-3-8b"), _hw(), rate=5, ttft_ms=2000, tpot_ms=60, input_len=1024,
                         output_len=128, tps=(1,))
    c = plan.best
    assert c.replicas == c.closed_loop_replicas == 1
    assert c.open_loop_ttft_p90_ms < c.ttft_p90_ms and c.open_loop_tpot_p90_ms < c.tpot_p90_ms


def test_cli_plan_json_reports_layout_and_both_loops():
    out = runner.invoke(app, ["serve", "plan", "qwen3-30b-a3b", "--rate", "4", "--ttft-ms", "2000", "--tpot-ms", "50",
                              "--gpu", H100, "--input-len", "1024", "--output-len", "128", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    best = d["best"]
    for key in ("tp", "ep", "attention_dp", "layout", "ttft_p90_ms", "tpot_p90_ms", "open_loop_ttft_p90_ms",
                "open_loop_tpot_p90_ms", "open_loop_requests_per_s", "closed_loop_replicas", "replicas", "gpus",
                "usd_per_million_output_tokens", "why_not_best"):
        assert key in best, key
    assert best["why_not_best"] == "best"
    # qwen3-30b-a3b: 128 experts; at tp 8 the search holds ep 2, 4, 8 with and without attention DP
    layouts = {(c["tp"], c["ep"], c["attention_dp"]) for c in d["candidates"]} | \
              {(r["tp"], r["ep"], r["attention_dp"]) for r in d["rejected"]}
    assert {(8, 1, 1), (8, 1, 8), (8, 2, 1), (8, 2, 8), (8, 4, 1), (8, 4, 8), (8, 8, 1), (8, 8, 8)} <= layouts
    text = runner.invoke(app, ["serve", "plan", "llama-3-70b", "--rate", "2", "--gpu", H100, "--input-len", "1024",
                               "--output-len", "128"])
    assert text.exit_code == 0, text.output
    assert "meets the objectives under Poisson arrivals" in text.output
    assert "cannot serve: h100-sxm5-80gb tp1" in text.output  # 70B of bf16 weights exceed one 80 GB GPU


# ============================================================ 3. disaggregated with the serving features
def test_kv_transfer_carries_only_the_uncached_prompt():
    # Llama-3-70B bf16: 327,680 B of KV per token. A 2048-token prompt with a 50% prefix hit has
    # floor(0.5 x 2048) = 1024 cached tokens: 1024 x 327,680 = 335,544,320 B move (half of 671,088,640)
    d = _dep("llama-3-70b", 4)
    assert kv_bytes_per_request(d, 2048) == 671_088_640
    assert kv_bytes_per_request(d, 2048, 1024) == 335_544_320
    # tp4 -> tp4: each of the 4 ranks moves its 2 of the 8 KV heads: 335,544,320 / 4 = 83,886,080 B
    assert link_bytes(d, d, 2048, 1024) == 83_886_080
    full = kv_transfer(d, d, 2048, KvLink.NVLINK)
    half = kv_transfer(d, d, 2048, KvLink.NVLINK, cached_tokens=1024)
    assert half.kv_per_request_bytes == 335_544_320 and half.time_s < full.time_s
    st_ = transfer_stats(d, d, np.array([2048] * 10), KvLink.NVLINK, PrefixCache(0.5))
    assert (st_.kv_per_request_bytes, st_.time_s, st_.time_p90_s) == (335_544_320, half.time_s, half.time_s)
    assert st_.time_sq_s2 == pytest.approx(half.time_s ** 2)


def test_transfer_stats_over_a_two_point_distribution():
    # prompts of 1000 and 3000 tokens, 50 each: of the 16 quantile midpoints (i + 0.5) / 16, the 8 below
    # 0.5 fall on 1000 (np.quantile index q x 99 < 49) and the 8 above on 3000; so the mean time is
    # (t1000 + t3000) / 2, the mean square (t1000^2 + t3000^2) / 2, and the p90 prompt is 3000 tokens
    d = _dep("llama-3-8b", 1)
    t1 = kv_transfer(d, d, 1000, KvLink.NETWORK).time_s
    t3 = kv_transfer(d, d, 3000, KvLink.NETWORK).time_s
    s = transfer_stats(d, d, np.array([1000] * 50 + [3000] * 50), KvLink.NETWORK)
    assert s.time_s == pytest.approx((t1 + t3) / 2)
    assert s.time_sq_s2 == pytest.approx((t1 ** 2 + t3 ** 2) / 2)
    assert s.time_p90_s == pytest.approx(t3)
    # 131,072 B per token (Llama-3-8B bf16): mean bytes 2000 x 131,072 = 262,144,000
    assert s.kv_per_request_bytes == pytest.approx(262_144_000)


def test_link_wait_mg1():
    # M/G/1 (Pollaczek-Khinchine): W = r E[S^2] / (2 (1 - r E[S])). Transfers of 10 or 30 ms, equally
    # likely: E[S] = 0.02 s, E[S^2] = (1e-4 + 9e-4) / 2 = 5e-4 s^2; at 10 req/s rho = 0.2:
    # W = 10 x 5e-4 / 1.6 = 3.125 ms (M/D/1 at 20 ms: 10 x 4e-4 / 1.6 = 2.5 ms)
    assert link_wait_s(10.0, 0.02, 5e-4) == pytest.approx(3.125e-3)
    assert link_wait_s(10.0, 0.02) == pytest.approx(2.5e-3)


@settings(max_examples=40, deadline=None)
@given(r=st.floats(0.0, 40.0), t=st.floats(1e-4, 0.05), cv2=st.floats(0.0, 3.0))
def test_link_wait_grows_with_the_variance(r, t, cv2):
    # E[S^2] = (1 + CV^2) t^2 >= t^2: variable transfers never wait less than deterministic ones
    w_d, w_g = link_wait_s(r, t), link_wait_s(r, t, (1 + cv2) * t * t)
    if math.isinf(w_d):
        assert math.isinf(w_g)
    else:
        assert w_g >= w_d * (1 - 1e-12)


def _decode_fixture():
    dep = _dep("llama-3-8b", 1)
    return dep, step_time_model(dep), memory_plan(dep, max_batch_tokens=256, max_batch_seqs=256)


def test_decode_pool_prefix_cache_reserves_only_private_blocks():
    # a KV budget of 1088 x 2 + 1024 + 32 = 3232 tokens (16-token blocks, all sizes whole blocks).
    # Without prefix caching each 2048 + 64-token request reserves 2112 tokens: two need 4224 > 3232, so
    # the second waits for the first. With a 50% hit, floor(0.5 x 2048) = 1024 tokens are cached: the
    # shared prefix (1024 tokens, charged once) leaves 2208, and each request reserves only its private
    # 2048 - 1024 + 64 = 1088 tokens: 2 x 1088 = 2176 <= 2208, both decode together
    dep, steps, mem = _decode_fixture()
    budget = mem.sequence_kv_bytes(1088) * 2 + mem.sequence_kv_bytes(1024) + mem.sequence_kv_bytes(32)
    small = type(mem)(**{**mem.__dict__, "kv_budget_bytes": budget})
    arr, ins, outs = np.array([0.0, 0.0]), np.array([2048, 2048]), np.array([64, 64])
    plain = simulate_decode(steps, small, arr, ins, outs, 256)  # 2 x 2112 tokens do not fit: queued
    assert plain.first_token_delay_s[1] > plain.first_token_delay_s[0] + 60 * plain.tpot_s[0]
    cached = simulate_decode(steps, small, arr, ins, outs, 256, prefix_cache=PrefixCache(0.5))
    assert cached.first_token_delay_s[0] == cached.first_token_delay_s[1]
    # attention still reads the whole 2048-token prompt: the same step times as without the cache
    both = simulate_decode(steps, mem, arr, ins, outs, 256)
    assert cached.tpot_s[0] == pytest.approx(both.tpot_s[0], rel=1e-12)


def test_decode_pool_speculative_steps_and_cost():
    # one request, 1000-token prompt, 9 output tokens, k = 4 drafted at acceptance 1: E = 5 tokens per
    # step, 1 + ceil(8 / 5) = 3 steps (the first yields 1 token), at contexts 1000, 1001, 1006. Each
    # step: overhead + linear(5) + logits(5) + max(KV bytes x ctx / HBM, 5 x FLOPs x ctx / FLOP/s)
    # + the draft's table[1] + its per-context-token seconds x ctx (speculative.py)
    from gpuplan import knobs

    dep, steps, mem = _decode_fixture()
    spec = SpeculativeDecoding(4, 1.0, mtp_layers=1)
    draft = draft_cost(dep, spec)
    run = simulate_decode(steps, mem, np.array([0.0]), np.array([1000]), np.array([9]), 256, speculative=spec,
                          draft=draft)
    st_ = steps

    def step(ctx):
        dt = knobs.value("serving.step_overhead_s") + st_.linear_table[5] + st_.logits_table[5]
        dt += max(st_.global_layers * st_.kv_bytes_per_token_layer * ctx / st_.hbm_bytes_per_s,
                  5 * st_.global_layers * st_.decode_pair_flops * ctx / st_.attention_flops_per_s)
        dt += draft.table[1] + draft.ctx_seconds_per_token * ctx
        return dt * st_.step_scale

    t = [step(1000), step(1001), step(1006)]
    assert run.first_token_delay_s[0] == pytest.approx(t[0], rel=1e-9)
    assert run.tpot_s[0] == pytest.approx((t[1] + t[2]) / 8, rel=1e-9)


def test_disaggregated_prefix_cache_shrinks_the_prefill_pool_and_the_transfer():
    # 8192 in / 16 out at 20 req/s, Llama-3-8B, tp1 instances (as test_disaggregation's prefill-heavy
    # case: >= 3 prefill instances, a prompt >= 0.133 s of compute). A 75% prefix hit leaves 2048 of
    # 8192 tokens to compute: the GEMM work falls 4x (attention over the cached keys remains), so the
    # prefill pool shrinks; the KV moved is the 2048 computed tokens x 131,072 B = 268,435,456 B
    kw = dict(tps=(1,), rate=20, ttft_ms=5000, tpot_ms=50, input_len=8192, output_len=16)
    plain = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), **kw)
    hit = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), prefix_cache=PrefixCache(0.75), **kw)
    n_plain = {p.role: p.instances for p in plain.best_disaggregated.pools}["prefill"]
    n_hit = {p.role: p.instances for p in hit.best_disaggregated.pools}["prefill"]
    assert n_plain >= 3 and n_hit < n_plain
    assert hit.best_disaggregated.kv_per_request_bytes == 268_435_456
    assert plain.best_disaggregated.kv_per_request_bytes == 8192 * 131_072


def test_disaggregated_speculative_decoding_cuts_the_decode_tpot():
    # Llama-3-8B 1024 in / 256 out at 1 req/s: a decode instance runs ~1 sequence per step, weight-bound,
    # so a verify pass over k + 1 = 4 positions reads the weights once, about one plain step. Each of the
    # k = 3 draft steps of a one-layer MTP head reads one layer ((8.03e9 - 2 x 128,256 x 4096) / 32 =
    # 0.218e9 params) and the LM head (128,256 x 4096 = 0.525e9): 0.743e9 = 9.3% of the model, 27.8% for
    # three. At acceptance 0.8, E = (1 - 0.8^4) / 0.2 = 2.952 tokens per step, so the TPOT falls to about
    # (1 + 0.278) / 2.952 = 0.433 of the plain one (+-10% for the KV reads and the step overhead)
    kw = dict(tps=(1,), rate=1, ttft_ms=2000, tpot_ms=50, input_len=1024, output_len=256, pd_ratio="1:1")
    plain = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), **kw)
    fast = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), speculative=SpeculativeDecoding(3, 0.8, mtp_layers=1),
                              **kw)
    ratio = fast.best_disaggregated.tpot_p90_ms / plain.best_disaggregated.tpot_p90_ms
    assert 0.39 < ratio < 0.48


def test_disaggregated_length_distribution_prices_the_mean_and_times_the_tail():
    # uniform 16..48 output tokens (mean 32) and lognormal prompts of mean 4096: the cost is priced at 32
    # output tokens per request, $/M = GPUs x $2 / (3600 x rate x 32) x 1e6; the p90 prompt is longer than
    # the mean, so its KV transfer (the TTFT term) exceeds the mean transfer
    lens = RequestLengths(parse_length_spec("lognormal:4096:0.5:max=8192", "input_dist"),
                          parse_length_spec("uniform:16:48", "output_dist"))
    plan = plan_disaggregated(resolve_model("llama-3-8b"), _hw(), tps=(1,), rate=4, ttft_ms=3000, tpot_ms=20,
                              input_len=4096, output_len=32, lengths=lens)
    b = plan.best_disaggregated
    assert b.usd_per_million_output_tokens == pytest.approx(b.gpus * 2.0 / (3600 * 4 * 32) * 1e6)
    assert b.kv_transfer_p90_ms > b.kv_transfer_ms
    # mean prompt bytes ~ 4096 x 131,072 B (lognormal capped at 8192 trims the mean slightly; 16 quantiles)
    assert 0.85 * 4096 * 131_072 < b.kv_per_request_bytes < 1.02 * 4096 * 131_072


def test_cli_disaggregated_features_json():
    out = runner.invoke(app, ["serve", "plan", "llama-3-8b", "--disaggregated", "--rate", "4", "--ttft-ms", "3000",
                              "--tpot-ms", "20", "--input-dist", "uniform:1024:3072", "--output-len", "64",
                              "--prefix-hit-rate", "0.5", "--spec-tokens", "2", "--spec-acceptance", "0.7", "--mtp", "1",
                              "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["prefix_hit_rate"] == 0.5 and d["spec_tokens_per_step"] == pytest.approx(1 + 0.7 + 0.49)
    assert 1024 <= d["input_len_p50"] <= 3072
    best = d["best_disaggregated"]
    for key in ("kv_per_request_bytes", "kv_transfer_ms", "kv_transfer_p90_ms", "kv_link_wait_ms", "ttft_p90_ms",
                "tpot_p90_ms", "usd_per_million_output_tokens"):
        assert key in best, key
    # a 50% hit moves half of each prompt: the mean prompt of uniform(1024, 3072) is 2048 tokens, so
    # ~1024 x 131,072 B = 134,217,728 B (16 quantiles of 4000 draws: within 2%)
    assert best["kv_per_request_bytes"] == pytest.approx(134_217_728, rel=0.02)
    lib = api.serve_plan("llama-3-8b", disaggregated=True, rate=4, ttft_ms=3000, tpot_ms=20,
                         input_dist="uniform:1024:3072", output_len=64, prefix_hit_rate=0.5, spec_tokens=2,
                         spec_acceptance=0.7, mtp=1).to_dict()
    assert lib["best"] == d["best"]


@pytest.mark.parametrize("args, field", [
    (["--prefix-hit-rate", "1.5"], "prefix_hit_rate"),
    (["--spec-tokens", "2"], "spec_acceptance"),
    (["--input-dist", "uniform:9:1"], "input_dist"),
    (["--lengths", "no-such-set"], "lengths"),
    (["--spec-tokens", "2", "--spec-acceptance", "0.7"], "draft_model"),
])
def test_cli_disaggregated_bad_feature_input_exits_2(args, field, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["serve", "plan", "llama-3-8b", "--disaggregated", *args])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and field in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cached", [-1, 2048, 5000, 1.5])
def test_cached_tokens_must_leave_a_token_to_compute(cached):
    from gpuplan.errors import InputError

    with pytest.raises(InputError) as e:
        kv_bytes_per_request(_dep("llama-3-8b"), 2048, cached)
    assert e.value.field == "cached_tokens"


@settings(max_examples=25, deadline=None)
@given(length=st.integers(1, 32768), h=st.floats(0.0, 0.95))
def test_fixed_prompts_give_exactly_one_transfer(length, h):
    # all prompts equal: mean = p90 = the one transfer, mean square = its square; the bytes are the
    # uncached tokens x 131,072 B (Llama-3-8B bf16, global attention)
    d = _dep("llama-3-8b", 1)
    cache = PrefixCache(h) if h > 0 else None
    c = int(cache.cached_tokens(np.array([length]))[0]) if cache else 0
    one = kv_transfer(d, d, length, KvLink.NVLINK, cached_tokens=c)
    s = transfer_stats(d, d, np.full(7, length), KvLink.NVLINK, cache)
    assert (s.time_s, s.time_p90_s, s.kv_per_request_bytes) == (one.time_s, one.time_s, one.kv_per_request_bytes)
    assert s.kv_per_request_bytes == (length - c) * 131_072


def test_cli_plan_price_and_system_options():
    # --usd-per-gpu-hour prices every GPU type: $/M output tokens = gpus x price / (output tokens/s x 3600) x 1e6,
    # so doubling the price doubles the figure exactly (same plan, the price does not enter the search's
    # ranking by GPU count).
    args = ["serve", "plan", "llama-3-8b", "--rate", "2", "--gpu", H100, "--input-len", "512", "--output-len", "128",
            "--system", "dgx-h100", "--json"]
    one = json.loads(runner.invoke(app, args + ["--usd-per-gpu-hour", "1"]).stdout)["best"]
    two = json.loads(runner.invoke(app, args + ["--usd-per-gpu-hour", "2"]).stdout)["best"]
    assert one["layout"] == two["layout"]
    assert two["usd_per_million_output_tokens"] == pytest.approx(2 * one["usd_per_million_output_tokens"], rel=1e-9)
    bad = runner.invoke(app, args[:-1] + ["--system", "no-such-system"])
    assert bad.exit_code == 2 and "unknown system 'no-such-system'" in bad.output
