"""First output token from a decode step (workloads.inference.sim.deferred_first_token).

FasterTransformer-derived engines (lmdeploy TurboMind before "Refactor turbomind attention", PR
#1116, March 2024) run the prompt's first L - 1 tokens in the context step, which samples nothing;
the last prompt token runs in the first decode step, which samples the first output token
(LlamaBatch<T>::ContextDecode: "subtract input/context len by 1 to skip last input token (will
process with decoder later)"). lmdeploy's own A100 table shows it: first-token latency of a 1-token
prompt 11 ms = one decode step (TPOT 9-10 ms); of a 128-token prompt 22 ms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.interfaces.validation.inference import deferred_first_token_for, predict_row
from gpuplan.workloads.inference.engines import ENGINES
from gpuplan.models import load_model
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, Workload
from gpuplan.workloads.inference.sim.deferred_first_token import deferred_result, deferred_workload
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.sim.simulator import Percentiles, SimResult, simulate

LMDEPLOY = ENGINES["lmdeploy"]
SOURCE_V01 = "InternLM/lmdeploy docs/en/benchmark/a100_fp16.md @3e391df (lmdeploy v0.1.0a1, A100-80G, CUDA 11.8)"


def _row(**cells) -> dict[str, str]:
    """lmdeploy-2's columns: Llama-2-7B fp16 on one A100-SXM4-80GB, static batch 1, 128 in / 128 out."""
    row = {"id": "t-1", "source": SOURCE_V01, "confidence": "high", "notes": "", "model": "Llama-2-7B",
           "layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "32", "ffn": "11008", "ffn_kind": "swiglu",
           "hf_config": "", "vocab": "32000", "system": "a100-sxm4-80gb", "num_gpus": "1", "tp": "1", "pp": "1",
           "weight_dtype": "fp16", "kv_dtype": "fp16", "engine": "lmdeploy", "batch": "1", "concurrency": "",
           "max_load": "", "request_rate": "", "input_len": "128", "output_len": "128", "metric": "ttft_ms",
           "value": "22"}
    row.update(cells)
    return row


def test_version_rule():
    assert deferred_first_token_for({"source": SOURCE_V01}, LMDEPLOY) is True    # v0.1
    assert deferred_first_token_for({"engine_version": "0.2.1"}, LMDEPLOY) is True
    assert deferred_first_token_for({"engine_version": "0.3.0"}, LMDEPLOY) is False
    assert deferred_first_token_for({}, LMDEPLOY) is False                       # unstated: today's engine
    # engines whose prefill samples the first token in every version
    assert deferred_first_token_for({"engine_version": "0.1"}, ENGINES["tensorrt-llm"]) is False
    assert deferred_first_token_for({"engine_version": "0.1"}, ENGINES["vllm"]) is False


def test_deferred_workload_moves_the_last_prompt_token_to_the_decode_steps():
    # (128, 128) -> (127, 129): the context step runs 127 tokens, 129 decode-or-prefill emissions
    # of which the first is not an output token; a 1-token prompt has no context step: unchanged
    wl = Workload(np.zeros(3), np.array([128, 2048, 1]), np.array([128, 1, 7]), ArrivalKind.BURST)
    d = deferred_workload(wl)
    assert d.input_len.tolist() == [127, 2047, 1]
    assert d.output_len.tolist() == [129, 2, 7]
    # every token's KV is still held: the KV the request needs is the same
    assert (d.input_len + d.output_len).tolist() == (wl.input_len + wl.output_len).tolist()


def _static(dep_model="llama-2-7b"):
    cat = load_catalog()
    gpu = cat.gpu("a100-sxm4-80gb")
    dep = Deployment(load_model(dep_model), gpu, cat.system(gpu.id), weight_dtype="fp16", kv_dtype="fp16")
    return step_time_model(dep), memory_plan(dep)


def test_static_batch_of_one_is_prefill_of_l_minus_1_plus_a_decode_step():
    # One request of 128 in / 4 out, static batch of 1. Simulated as (127, 5): the context step is
    # prefill_time(1, 127) and emits the spurious token; then 4 decode steps at contexts 128..131,
    # each emitting a real token. The real first token is the first decode step's:
    #   TTFT = prefill(1, 127) + decode(1, 128)
    # and deferred_result takes that step as the mean of the 4: TTFT' + TPOT' with
    #   TPOT' = (decode(128) + decode(129) + decode(130) + decode(131)) / 4.
    steps, mem = _static()
    wl = Workload(np.zeros(1), np.array([128]), np.array([4]), ArrivalKind.BURST)
    sim_wl = deferred_workload(wl)
    sched = SchedulerConfig(kind=SchedulerKind.STATIC, max_batch_seqs=1, max_batch_tokens=128)
    res = deferred_result(simulate(steps, mem, sim_wl, sched), wl, sim_wl)
    dec = [steps.decode_step_time(1, c) for c in (128, 129, 130, 131)]
    mean_dec = sum(dec) / 4
    assert res.ttft_ms.mean == pytest.approx(1e3 * (steps.prefill_time(1, 127) + mean_dec), rel=1e-9)
    # the first decode step differs from the mean by the attention over 1.5 tokens on average: < 0.1%
    assert res.ttft_ms.mean == pytest.approx(1e3 * (steps.prefill_time(1, 127) + dec[0]), rel=1e-3)
    # e2e is the simulated one: prefill(127) + 4 decode steps
    assert res.e2e_ms.mean == pytest.approx(1e3 * (steps.prefill_time(1, 127) + sum(dec)), rel=1e-9)
    # output tokens/s counts the 4 real tokens, not the 5 simulated emissions
    assert res.output_tokens_per_s == pytest.approx(4 / (steps.prefill_time(1, 127) + sum(dec)), rel=1e-9)


def test_lmdeploy_v01_row_ttft_adds_one_decode_step():
    # The v0.1 row's TTFT = prefill(1, 127) + one decode step at batch 1 (about 10 ms for Llama-2-7B
    # fp16 on A100: 13.5 GB of weights at 0.8 x 2.04 TB/s = 8.3 ms, plus launches and the rest);
    # the same row without a stated version is the plain prefill(1, 128).
    steps, _ = _static()
    deferred = predict_row(_row()).value
    plain = predict_row(_row(source="lmdeploy static benchmark")).value
    assert plain == pytest.approx(1e3 * steps.prefill_time(1, 128), rel=1e-9)
    decode_ms = 1e3 * steps.decode_step_time(1, 128)
    assert 8.3 < decode_ms < 12.0
    assert deferred == pytest.approx(1e3 * steps.prefill_time(1, 127) + decode_ms, rel=2e-3)
    # TPOT is the decode step either way (the deferred run has one more decode step of the same cost)
    tpot_deferred = predict_row(_row(metric="tpot_ms")).value
    tpot_plain = predict_row(_row(metric="tpot_ms", source="lmdeploy static benchmark")).value
    assert tpot_deferred == pytest.approx(tpot_plain, rel=2e-3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 100_000), st.integers(1, 10_000)), min_size=1, max_size=20))
def test_deferred_workload_invariants(pairs):
    # every request keeps its total tokens (the KV it needs), keeps a prompt of >= 1 token, and
    # gains exactly one emission when its prompt had a token to move (L > 1)
    ins = np.array([p[0] for p in pairs])
    outs = np.array([p[1] for p in pairs])
    wl = Workload(np.zeros(len(pairs)), ins, outs, ArrivalKind.BURST)
    d = deferred_workload(wl)
    assert np.array_equal(d.input_len + d.output_len, ins + outs)
    assert (d.input_len >= 1).all()
    assert np.array_equal(d.output_len - outs, (ins > 1).astype(int))
    assert np.array_equal(d.arrival_s, wl.arrival_s)


def test_deferred_result_formula():
    # A simulated (L - 1, n + 1) result with TTFT' 12 ms, TPOT' 10 ms over 2 requests of n = 4 real
    # tokens (5 simulated emissions each): TTFT = 12 + 10 = 22 ms at every percentile; TPOT 10 ms and
    # e2e as simulated; output tokens/s x 8 / 10 (real / simulated tokens): 100 -> 80
    sim = SimResult(requests=2, completed=2, duration_s=0.1,
                    ttft_ms=Percentiles(12.0, 12.0, 12.0, 12.0), tpot_ms=Percentiles(10.0, 10.0, 10.0, 10.0),
                    e2e_ms=Percentiles(52.0, 52.0, 52.0, 52.0), output_tokens_per_s=100.0,
                    total_tokens_per_s=300.0, requests_per_s=20.0, mean_in_flight=1.04, steps=5, preemptions=0,
                    kv_time_s=np.zeros(0), kv_bytes=np.zeros(0))
    real = Workload(np.zeros(2), np.array([128, 128]), np.array([4, 4]), ArrivalKind.BURST)
    out = deferred_result(sim, real, deferred_workload(real))
    assert (out.ttft_ms.p50, out.ttft_ms.p99, out.ttft_ms.mean) == pytest.approx((22.0, 22.0, 22.0))
    assert out.tpot_ms == sim.tpot_ms and out.e2e_ms == sim.e2e_ms
    assert out.output_tokens_per_s == pytest.approx(80.0)
    assert (out.total_tokens_per_s, out.requests_per_s) == (300.0, 20.0)
