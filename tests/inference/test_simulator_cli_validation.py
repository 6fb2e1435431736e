"""Simulator invariants (Little's law, percentile order), step-time physics, CLI contract, and the
validation MAPE on ../shared/validation/inference.csv."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.models import load_model
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, LengthDistribution, LengthKind, make_workload
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import expected_distinct_experts, step_time_model
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.sim.simulator import simulate


@pytest.fixture(scope="module")
def h100_8b():
    cat = load_catalog()
    g = cat.gpu("h100-sxm5-80gb")
    dep = Deployment(load_model("llama-3-8b"), g, cat.system(g.id))
    return step_time_model(dep), memory_plan(dep)


def test_expected_distinct_experts():
    # E (1 - (1 - k/E)^B): one token touches exactly k; Mixtral E=8, k=2, B=2: 8 (1 - 0.75^2) = 3.5
    assert expected_distinct_experts(8, 2, 1) == pytest.approx(2.0)
    assert expected_distinct_experts(8, 2, 2) == pytest.approx(3.5)
    assert expected_distinct_experts(256, 8, 10_000) == pytest.approx(256.0)


def test_decode_step_is_weight_bandwidth_bound(h100_8b):
    steps, _ = h100_8b
    # batch 1: >= 16.06 GB of bf16 weights / 3.35 TB/s peak = 4.8 ms; achievable (0.8) -> ~6 ms, plus launches
    t = steps.decode_step_time(1, 1024)
    assert 16.06e9 / 3.35e12 < t < 16.06e9 / (0.7 * 3.35e12) + 2e-3
    # monotone in batch and context
    assert steps.decode_step_time(64, 1024) > t and steps.decode_step_time(1, 8192) > t


@pytest.mark.parametrize("kind", [SchedulerKind.STATIC, SchedulerKind.CONTINUOUS, SchedulerKind.CHUNKED])
def test_littles_law_and_percentile_order(h100_8b, kind):
    steps, mem = h100_8b
    rng = np.random.default_rng(1)
    wl = make_workload(rng, 400, ArrivalKind.CLOSED_LOOP, concurrency=16,
                       input_len=LengthDistribution(512, LengthKind.UNIFORM, 0.5), output_len=LengthDistribution(128))
    res = simulate(steps, mem, wl, SchedulerConfig(kind=kind, max_batch_seqs=16))
    assert res.completed == 400
    # Little's law: L = lambda W; a closed loop holds 16 in flight (minus the drain at the end)
    assert 14.0 < res.mean_in_flight <= 16.0 + 1e-9
    for p in (res.ttft_ms, res.tpot_ms, res.e2e_ms):
        assert p.p50 <= p.p90 <= p.p99


@settings(max_examples=15, deadline=None)
@given(rate=st.floats(0.5, 40.0), seed=st.integers(0, 1000))
def test_poisson_throughput_matches_offered_load_when_unsaturated(h100_8b, rate, seed):
    steps, mem = h100_8b
    rng = np.random.default_rng(seed)
    wl = make_workload(rng, 300, ArrivalKind.POISSON, rate=rate, input_len=LengthDistribution(256),
                       output_len=LengthDistribution(64))
    res = simulate(steps, mem, wl, SchedulerConfig())
    assert res.ttft_ms.p50 <= res.ttft_ms.p90 <= res.ttft_ms.p99
    # output tokens/s = requests/s x 64 tokens exactly (fixed lengths)
    assert res.output_tokens_per_s == pytest.approx(res.requests_per_s * 64)
    # well below capacity (~hundreds of req/s for 256/64 on an H100), completions follow arrivals
    assert res.requests_per_s == pytest.approx(rate, rel=0.35)


def test_cli_serve_json_contract(runner):
    out = runner.invoke(app, ["serve", "llama-3-8b", "--gpu", "h100-sxm5-80gb", "--tp", "2", "--input-len", "2048",
                              "--output-len", "256", "--rate", "4", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    for key in ("ttft_ms", "tpot_ms", "output_tokens_per_s", "requests_per_s", "kv_cache_bytes_per_token",
                "max_concurrent_sequences"):
        assert key in data
    # Llama-3-8B bf16: 2 x 32 layers x 8 kv heads x 128 x 2 B = 131,072 B/token
    assert data["kv_cache_bytes_per_token"] == 131_072
    assert data["ttft_ms"] > 0 and data["tpot_ms"] > 0


def test_cli_serve_bad_input_exit_2(runner):
    out = runner.invoke(app, ["serve", "llama-3-8b", "--kv-dtype", "fp7"])
    assert out.exit_code == 2 and "kv_dtype" in out.output
    out = runner.invoke(app, ["serve", "llama-3-70b", "--gpu", "h100-sxm5-80gb"])
    assert out.exit_code == 2 and "does not fit" in out.output


def test_cli_serve_plan_json(runner):
    out = runner.invoke(app, ["serve", "plan", "llama-3-8b", "--rate", "5", "--ttft-ms", "2000", "--tpot-ms", "60",
                              "--gpus-from", "h100-sxm5-80gb", "--input-len", "1024", "--output-len", "128", "--json"])
    assert out.exit_code == 0, out.output
    best = json.loads(out.stdout)["best"]
    assert best["gpus"] >= 1 and best["tpot_p90_ms"] <= 60 and best["ttft_p90_ms"] <= 2000


#: Re-based on the grown public file (110 rows; SCHEMA.md: rows of confidence `low` are reported but
#: not scored, and at least 90% of the high/medium rows must be predicted). 86 of 95 high/medium rows
#: predicted (9 need input/output lengths the sources do not state). With attention data parallelism
#: (the `attention_dp` column honoured; the lock-step rank balance of TensorRT-LLM tech blog 10),
#: trtllm-bench's own settings for TensorRT-LLM max-load rows (max_batch_size / max_num_tokens from
#: its config-field KV estimate and rounding rule, chunked prefill off, its request counts), padded
#: CUDA-graph generation steps (perf-overview llm_options), and closed-loop latencies of the steady
#: state (the initial burst left out): MAPE 17.9% (23.5% before); per family trtllm014 32.0,
#: aic 31.1, trtllm1x-po 26.5 (41.2 before), trtllm061 20.7, lmdeploy 16.3, trtllm10 14.3,
#: vllmci 14.0, trtllm017 10.5, nim 6.5 (39.7 before). Limits carry ~10% relative slack.
#: Re-set with the datasets' length distributions (catalog/data/datasets.toml, lengths.py): the 9
#: rows without input/output lengths (mlperf40 OpenOrca, vllmci ShareGPT) are now predicted, 95 of
#: 95 scored rows; MAPE 18.9% over 95 (17.9% over 86 before; no previously predicted row moved).
#: mlperf40 20.0 (new; its Server TPOT row is -77%: the engine batches far deeper than a Poisson
#: open loop at the offered rate needs), vllmci 24.2 (14.0 over 6 rows before; its 200-prompt
#: ShareGPT max-load rows are +23..48%, set by the longest outputs of the lognormal tail).
#: Re-set with MoE / MLA serving physics (operators.attention_math_precision: MLA computes in bf16
#: before Blackwell; kernels_per_layer: launches from the operator inventory, 21 per DeepSeek-V3 MoE
#: layer instead of 9): MAPE 18.5% over 95 (18.9 before); aic 24.0 (31.1: its TPOT row -17 -> -3%),
#: trtllm1x-po 24.5 (26.5: DeepSeek-R1 DEP8 on H200 +70 -> +55%); the dense families unchanged.
#: Re-set with SGLang's default scheduler for the `sglang` engine profile (SchedulerKind.PREFILL_FIRST:
#: prefill batches apart from decode, enable_mixed_chunk off; scheduler.py get_next_batch_to_run):
#: aic 4.9 (24.0: its TTFT row -44 -> -5%: the half of the 16-request closed loop prefilled first
#: stalls while the other half prefills, so the two halves decode in step, finish together and
#: their 16 new prompts take two 8192-token prefill steps, where chunked kept the halves a step apart
#: and each half's prompts shared one step with the other's decodes; TPOT -4.0 -> -4.7%);
#: MAPE 18.1% over 95 (18.5).
#: Re-set with the run's stated request count (validation_inference.run_requests: 500 in TensorRT-LLM's
#: Triton table, not trtllm-bench's 3000) and the per-query-head decode attention of TensorRT-LLM
#: before XQA (Deployment.grouped_decode_attention; rows stating v0.6.1): trtllm014 32.0 -> 23.2
#: (TPOT rows 4 and 8 +42/+76% -> -17/-6%), trtllm061 20.7 -> 12.4 (Llama-2-70B row 4 +103% -> -17%);
#: MAPE 16.1% over 95 (18.1). Limits: figure x 1.1.
#: Re-set with serving GEMMs whose math and memory times overlap in part (operators.
#: gemm_roofline_seconds, knob serving.gemm_overlap 0.74 fitted on these rows, prior 1 = the
#: roofline): MAPE 13.4% over 95 (16.1); trtllm017 8.5, lmdeploy 12.7, trtllm10 13.3, trtllm014 18.4,
#: trtllm061 11.0, mlperf40 18.4, vllmci 19.6, nim 6.6, aic 1.1, trtllm1x-po 20.4. Mean signed error
#: of TTFT / TPOT / e2e rows -16 / -13 / -14% -> -12 / -9 / -11%, throughput +6 -> +2%.
#: Limits: figure x 1.1 (aic, 2 rows: 2.5).
#: Re-set with the first output token of lmdeploy TurboMind before v0.3 from its first decode step
#: (workloads.inference.sim.deferred_first_token: ContextDecode runs L - 1 prompt tokens) and the
#: serving API's front-end latency on Poisson / closed-loop TTFT and e2e (workloads.inference.sim.frontend,
#: knob serving.frontend_latency_s 3 ms): MAPE 12.6% over 95 (13.4); lmdeploy 8.3 (12.7: lmdeploy-2
#: TTFT -45 -> -0.2%), trtllm014 16.7 (18.4: trtllm014-1 TTFT -27 -> -14%), vllmci 19.2 (19.6),
#: nim 6.5 (6.6), aic 1.5 (1.1: aic-1 TTFT -0.1 -> +0.9%); mean signed error of the TTFT rows -12 -> -6%.
#: Limits of the moved families and the overall: figure x 1.1 (aic, 2 rows: 2.5).
#: Re-set with the serving engines' own tensor-parallel all-reduce (workloads.inference.cost.tp_allreduce:
#: TensorRT-LLM / vLLM one-shot and two-shot kernels within their size limits, NCCL above, on one
#: NVLink domain the faster of the collective model and its steady-state ring, whose staging-buffer
#: fill made 8-64 MB all-reduces about twice as slow as vLLM's measured pynccl) and
#: serving.gemm_overlap refit on the merged model (0.74 -> 0.60): MAPE 11.9% over 95 (12.6);
#: trtllm017 6.7, lmdeploy 8.6, trtllm10 8.6, trtllm014 17.7, trtllm061 9.0, mlperf40 17.8,
#: vllmci 19.3, nim 6.1, aic 4.8, trtllm1x-po 20.2 (max-load TP rows of trtllm017 / trtllm10 from
#: -15..-34% to within about -24..+5%). Limits: figure x 1.1 (aic, 2 rows: 5.5). (The steady ring is
#: gone since: the collective model runs NCCL's LL128 and a one-step Simple fill, within these limits.)
#: Re-set with measured HBM ceilings per part (catalog/data/ceilings.toml, primitives.efficiency.
#: hbm_efficiency: efficiency.hbm 0.80 on H100 SXM x each part's BabelStream copy fraction / H100's,
#: Azure AI-benchmarking-guide: A100 80GB 0.80 -> 0.743, H200 0.80 -> 0.772): MAPE 11.9% over 95
#: (11.8); trtllm017 6.8 -> 7.7, lmdeploy 8.6 -> 10.5 (A100 rows slower by the measured copy
#: bandwidth; the fitted knobs keep their defaults, CV refits them), vllmci 19.3 -> 16.9, trtllm10
#: 8.7 -> 8.4, trtllm014 17.7 -> 17.2, trtllm061 8.9 -> 9.4. Limits of the moved families: x 1.1.
#: Re-set with the host time per running sequence of the Python-driven engines (vLLM, SGLang, TGI;
#: cost/operators.HOST_SECONDS_PER_SEQUENCE, fitted 81 us): MAPE 11.1% over 95 (11.9); vllmci 16.9 ->
#: 7.7 (its max-load throughput rows +23..+35% -> +6..+10%), nim 5.9 -> 7.4 (engine "other" runs
#: as vLLM), aic 2.2 -> 2.0; the TensorRT-LLM and lmdeploy families unchanged. Limits of the moved
#: families and the overall: figure x 1.1.
#: Re-set with the attention-DP loss of the busiest of a lock-step ranks (operators.attention_dp_balance:
#: round-robin 0.649 at a = 8, TensorRT-LLM's default, instead of its opt-in balance scheduler's
#: 0.874, which only the rows stating it keep): trtllm1x-po 20.0 -> 22.4 (the Qwen3-235B DEP4 / DEP8
#: rows -12 / +11% -> -28 / -18%, gpt-oss-120b DEP2 +3 -> -3%, DeepSeek DEP4 +15 -> +19%); the
#: 2026-11-28 family trtllm-dsr1bp 43.0 -> 10.5. Limit of the moved family: figure x 1.1.
#: Re-set with TensorRT-LLM's KV dtype when none is stated (EngineProfile.default_kv_dtype: FP8 for
#: FP8 / NVFP4 ModelOpt checkpoints, KvCacheConfig.dtype "auto" following hf_quant_config.json):
#: trtllm1x-po 22.4 -> 23.7 (po-18 -28 -> -12%, po-14 -22 -> +24%, po-22 -20 -> +49%); the limit
#: 24.6 still holds, unchanged. trtllm017 and mlperf40 state FP8 weights: unchanged.
INFERENCE_MAPE_LIMIT_PCT = 12.2
INFERENCE_FAMILY_LIMITS_PCT = {"trtllm1x-po": 24.6, "nim": 8.2, "trtllm014": 19.5, "aic": 5.5,
                               "trtllm061": 10.4, "lmdeploy": 11.5, "trtllm10": 9.5, "vllmci": 8.5,
                               "trtllm017": 8.5, "mlperf40": 20.0}
INFERENCE_MIN_PREDICTED_FRACTION = 0.90  # SCHEMA.md


def test_validation_mape(record_rows):
    from collections import defaultdict

    from gpuplan.interfaces.row_types import SkipRow
    from gpuplan.interfaces.validation.inference import predict_row

    # the families of record (conftest.THIRD_SPLIT_FAMILIES); the 2026-11-28 families are gated by
    # the serving-unseen issue
    rows = record_rows("inference")
    scored = [r for r in rows if r["confidence"] != "low"]
    errs, by_family = [], defaultdict(list)
    for r in scored:
        try:
            value = predict_row(r).value
        except SkipRow:
            continue
        err = abs(value - float(r["value"])) / float(r["value"])
        errs.append(err)
        by_family[r["id"].rsplit("-", 1)[0]].append(err)
    assert len(errs) >= INFERENCE_MIN_PREDICTED_FRACTION * len(scored), (len(errs), len(scored))
    for family, fam_errs in by_family.items():
        limit = INFERENCE_FAMILY_LIMITS_PCT.get(family, 50.0)
        assert 100 * float(np.mean(fam_errs)) <= limit, (family, 100 * float(np.mean(fam_errs)))
    assert 100 * float(np.mean(errs)) <= INFERENCE_MAPE_LIMIT_PCT


#: Default-mode MAPE gates of the Python-engine families of the 2026-11-28 split (conftest.
#: THIRD_SPLIT_FAMILIES; issue 30, docs/accuracy.md "Engine physics, third pass"), measured on
#: `gpuplan validate --builtin inference`: rocmvllm-mi300x 16.5% (17.4 before AMD's custom
#: all-reduce barrier, tp_allreduce.CUSTOM_ALLREDUCE_LATENCY_SCALE), dcrh200 11.0%. Limits: x 1.1.
UNSEEN_SERVING_FAMILY_LIMITS_PCT = {"rocmvllm-mi300x": 18.2, "dcrh200": 12.1}


def test_validation_mape_of_the_unseen_python_engine_families():
    import csv

    from gpuplan.catalog.validation_sets import validation_dir
    from gpuplan.interfaces.validation.inference import predict_row

    def row_family(row_id: str) -> str:  # SCHEMA.md: the id without its final -N
        return row_id.rsplit("-", 1)[0]

    with open(validation_dir() / "inference.csv", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if row_family(r["id"]) in UNSEEN_SERVING_FAMILY_LIMITS_PCT
                and r["confidence"] != "low"]
    errs: dict[str, list[float]] = {}
    for r in rows:  # every row of these families is predicted (none skipped)
        value = predict_row(r).value
        errs.setdefault(row_family(r["id"]), []).append(abs(value - float(r["value"])) / float(r["value"]))
    assert {k: len(v) for k, v in errs.items()} == {"rocmvllm-mi300x": 11, "dcrh200": 10}
    for family, limit in UNSEEN_SERVING_FAMILY_LIMITS_PCT.items():
        assert 100 * float(np.mean(errs[family])) <= limit, (family, 100 * float(np.mean(errs[family])))


def test_warmup_requests_left_out_of_latencies(h100_8b):
    # Two requests through a static batch of one: request 0 starts at once (TTFT a = its prefill step,
    # StepTimeModel.prefill_time(1, 512)); request 1 waits for request 0. Leaving request 0 out as
    # warm-up, the mean TTFT is request 1's b, and the 2-request mean is (a + b) / 2.
    steps, mem = h100_8b
    lens = dict(input_len=LengthDistribution(512), output_len=LengthDistribution(32))
    sched = SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=1, max_batch_tokens=512)
    wl = make_workload(np.random.default_rng(0), 2, ArrivalKind.BURST, **lens)
    both = simulate(steps, mem, wl, sched)
    second = simulate(steps, mem, wl, sched, warmup_requests=1)
    a = steps.prefill_time(1, 512) * 1e3
    assert second.ttft_ms.mean == pytest.approx(2 * both.ttft_ms.mean - a, rel=1e-9)
    assert second.ttft_ms.mean > a
    # throughput counts every request either way
    assert second.output_tokens_per_s == both.output_tokens_per_s


def test_cuda_graph_padding_of_generation_steps(h100_8b):
    # 3 requests of 16 + 2 tokens, in-flight batching: step 1 prefills the 3 prompts (48 tokens, no
    # padding: a context step), step 2 decodes the 3 sequences (generation only). With captured CUDA-graph
    # sizes (1, 2, 4, 8) the generation step runs as 4 rows: it costs linear(4) - linear(3) +
    # logits(4) - logits(3) more (padded rows carry no KV, attention unchanged); with sizes (1, 2, 3) none.
    steps, mem = h100_8b
    lens = dict(input_len=LengthDistribution(16), output_len=LengthDistribution(2))
    sched = SchedulerConfig(kind=SchedulerKind.CONTINUOUS, max_batch_seqs=8, max_batch_tokens=512)
    wl = make_workload(np.random.default_rng(0), 3, ArrivalKind.BURST, **lens)
    plain = simulate(steps, mem, wl, sched)
    padded = simulate(steps, mem, wl, sched, cuda_graph_batch_sizes=(1, 2, 4, 8))
    exact = simulate(steps, mem, wl, sched, cuda_graph_batch_sizes=(1, 2, 3))
    extra = (steps.linear_table[4] - steps.linear_table[3]) + float(steps.logits_time(4) - steps.logits_time(3))
    assert plain.steps == padded.steps == 2
    assert padded.duration_s - plain.duration_s == pytest.approx(extra, rel=1e-9)
    assert exact.duration_s == pytest.approx(plain.duration_s, rel=1e-12)


def test_overloaded_open_loop_is_flagged(runner):
    # an A10-class load far above capacity: Llama-3-8B on one A100 at 200 requests/s of 2048 in / 256
    # out needs ~200 x 2304 = 460k tokens/s, several times what one GPU serves -> the served rate
    # falls below 95% of the offered one and `warnings` says so; at 0.5 requests/s it does not
    out = runner.invoke(app, ["serve", "llama-3-8b", "--gpu", "a100-sxm4-80gb", "--rate", "200", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert d["requests_per_s"] < 0.95 * 200 and d["warnings"] and d["warnings"][0].startswith("overloaded")
    calm = json.loads(runner.invoke(app, ["serve", "llama-3-8b", "--gpu", "a100-sxm4-80gb", "--rate", "0.5",
                                          "--json"]).stdout)
    assert calm["warnings"] == []
