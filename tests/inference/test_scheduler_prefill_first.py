"""Prefill-first scheduler (SchedulerKind.PREFILL_FIRST, SGLang's default: schedulers.py) against
hand-computed timelines on a synthetic step-cost table, in both simulator loops.

Step cost table of every case here: overhead 1 s + 0.1 s per token of the step (linear table), no
LM-head, attention or KV-read cost (coefficients 0), so a step of n tokens takes 1 + 0.1 n seconds.
KV budget, sequence slots and blocks never bind."""

from __future__ import annotations

import numpy as np
import pytest

from gpuplan.workloads.inference.kernels import StepCoefficients, StepTables
from gpuplan.workloads.inference.sim.schedulers import SCHEDULER_CODE, SchedulerKind
from gpuplan.workloads.inference.sim.simulator import _simulate
from gpuplan.workloads.inference.sim.events import Engine, KvLayout, Requests, _simulate_events

LIN = 0.1 * np.arange(65, dtype=float)  # 0.1 s per token (extended linearly past 64)


def _run(loop, kind, arrival, in_len, out_len, max_tokens):
    n = len(arrival)
    ins = np.asarray(in_len, np.int64)
    outs = np.asarray(out_len, np.int64)
    # overhead 1 s, attention costs 0; the linear table LIN, no LM head, draft model or CUDA graphs
    coef = StepCoefficients(overhead_s=1.0, decode_bytes_global=0.0, decode_bytes_window=0.0, decode_flops_global=0.0,
                            decode_flops_window=0.0, hbm_bytes_per_s=1.0, attention_flops_per_s=1.0,
                            prefill_flops_global=0.0, prefill_flops_window=0.0, prefill_bytes_per_token=0.0,
                            step_scale=1.0, verify_tokens=1, drafting=False, draft_ctx_s=0.0)
    tables = StepTables(LIN, np.zeros(65), np.zeros(0), np.zeros(0, np.int64))
    requests = Requests(np.asarray(arrival, float), ins, outs, np.zeros(n, np.int64), outs.copy())
    engine = Engine(SCHEDULER_CODE[kind], False, 8, max_tokens, False)
    layout = KvLayout(1e18, 1, 1.0, 0.0, 0, 1 << 40)  # budget, block 1, 1 byte per token, no window
    if loop == "reference":
        first, finish, _, steps, pre, _, _, _, _ = _simulate(
            requests.arrival, ins, outs, engine.closed_loop, engine.sched, engine.no_evict, engine.max_seqs,
            engine.max_tokens, *layout, coef, tables, requests.cached, requests.out_steps, 1.0)
    else:
        first, finish, _, steps, pre, _, _, _, _ = _simulate_events(requests, engine, layout, coef, tables)
    return first, finish, steps, pre


@pytest.mark.parametrize("loop", ["reference", "events"])
def test_decode_stalls_during_a_prefill_step(loop):
    # A: arrives 0, 4-token prompt, 3 output tokens; B: arrives 2.0 s, 4-token prompt, 3 outputs.
    # step 1: A's prompt (4 tokens)          1.4 s -> 1.4  A's first token
    # step 2: A decodes (1 token)            1.1 s -> 2.5  (B arrived at 2.0)
    # step 3: B's prompt ONLY (A stalls)     1.4 s -> 3.9  B's first token
    # step 4: A and B decode (2 tokens)      1.2 s -> 5.1  A's 3rd token: A done
    # step 5: B decodes                      1.1 s -> 6.2  B done
    first, finish, steps, pre = _run(loop, SchedulerKind.PREFILL_FIRST, [0.0, 2.0], [4, 4], [3, 3], 8)
    assert (steps, pre) == (5, 0)
    assert first == pytest.approx([1.4, 3.9], rel=1e-12)
    assert finish == pytest.approx([5.1, 6.2], rel=1e-12)
    # A's TPOT includes B's prefill step: (5.1 - 1.4) / 2 = 1.85 s = (1.1 + 1.4 + 1.2) / 2
    assert (finish[0] - first[0]) / 2 == pytest.approx(1.85, rel=1e-12)


@pytest.mark.parametrize("loop", ["reference", "events"])
def test_chunked_scheduler_mixes_the_same_prompt_with_the_decode(loop):
    # the same requests under CHUNKED (decodes first, the prompt fills the budget beside them):
    # step 3 runs B's 4 prompt tokens + A's decode, 5 tokens: 1.5 s -> 4.0 (A's 3rd token, B's 1st)
    # step 4: B decodes 1.1 s -> 5.1; step 5: B decodes 1.1 s -> 6.2
    first, finish, steps, _ = _run(loop, SchedulerKind.CHUNKED, [0.0, 2.0], [4, 4], [3, 3], 8)
    assert steps == 5
    assert first == pytest.approx([1.4, 4.0], rel=1e-12)
    assert finish == pytest.approx([4.0, 6.2], rel=1e-12)
    # A's TPOT (4.0 - 1.4) / 2 = 1.3 s against 1.85 s prefill-first; B's TTFT 2.0 against 1.9 s


@pytest.mark.parametrize("loop", ["reference", "events"])
def test_prompt_chunked_at_the_token_budget_stalls_decode_over_every_chunk(loop):
    # B's 12-token prompt at a budget of 8 (SGLang chunked_prefill_size) runs as chunks 8 + 4, both
    # prefill-only steps; A (4 in, 3 out) stalls through both:
    # step 1: A's prompt 1.4 -> 1.4; step 2: A decodes 1.1 -> 2.5
    # step 3: B chunk of 8: 1.8 -> 4.3; step 4: B chunk of 4: 1.4 -> 5.7 (B's first token)
    # step 5: A and B decode: 1.2 -> 6.9 (A's 3rd token; B's 2nd and last)
    first, finish, steps, _ = _run(loop, SchedulerKind.PREFILL_FIRST, [0.0, 2.0], [4, 12], [3, 2], 8)
    assert steps == 5
    assert first == pytest.approx([1.4, 5.7], rel=1e-12)
    assert finish == pytest.approx([6.9, 6.9], rel=1e-12)
    assert (finish[0] - first[0]) / 2 == pytest.approx(2.75, rel=1e-12)  # (1.1 + 1.8 + 1.4 + 1.2) / 2


@pytest.mark.parametrize("loop", ["reference", "events"])
def test_two_waiting_prompts_share_one_prefill_step(loop):
    # A and B both arrive at 0 (4-token prompts, 2 outputs); C arrives at 1.5 s (4 in, 2 out):
    # step 1: A + B prompts (8 tokens): 1.8 -> 1.8 (first tokens of A and B; C arrived)
    # step 2: C's prompt only, A and B stall: 1.4 -> 3.2 (C's first)
    # step 3: A, B, C decode (3 tokens): 1.3 -> 4.5: all three done
    first, finish, steps, _ = _run(loop, SchedulerKind.PREFILL_FIRST, [0.0, 0.0, 1.5], [4, 4, 4], [2, 2, 2], 8)
    assert steps == 3
    assert first == pytest.approx([1.8, 1.8, 3.2], rel=1e-12)
    assert finish == pytest.approx([4.5, 4.5, 4.5], rel=1e-12)


def test_kind_parses_from_its_option_value():
    assert SchedulerKind("prefill-first") is SchedulerKind.PREFILL_FIRST
