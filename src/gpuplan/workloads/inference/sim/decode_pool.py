"""Decode-only instance of disaggregated serving: requests arrive with their prompt's KV cache already
in place (moved from a prefill instance) and only generate.

An iteration-level (continuous-batching) loop like simulator.py's, without prefill:

- admission at each step, in arrival order, while a sequence slot (`max_batch_seqs`) is free and the
  KV of the whole sequence (input + output tokens, paged blocks) fits beside the running ones (the
  decode side reserves the blocks before it pulls the KV: Dynamo / vLLM NixlConnector allocate the
  destination blocks first; no preemption);
- every step decodes one token of each running sequence and costs the same closed-form pieces as
  a co-located decode step (operators.StepTimeModel: overhead + linear(n) + logits(n) + attention
  over the contexts), x step_scale (attention-DP balance);
- the decode instance produces every output token, the first in its first step after the KV
  lands (vLLM's disaggregated proxy sends the prompt to the prefill instance with max_tokens = 1 and
  then to the decode instance, which streams all tokens).

Per request: first_token_delay = first-step end - arrival at the decode instance (queueing for a
slot + one step); TPOT = (finish - first token) / (output_len - 1).

Prefix caching (prefix_cache.py, hit rate h): the decode instance keeps its own prefix cache (vLLM
NixlConnector pulls only the blocks its local prefix cache does not hold:
`NixlConnectorScheduler.update_state_after_alloc`, "Get unhashed blocks to pull from remote";
NVIDIA Dynamo's decode worker likewise matches its local prefix first). Each request reserves only
its private blocks (input - cached + output tokens) beside one shared copy of the cached prefix
(`pool_tokens`, charged once), while attention still reads the whole context (input + generated).

Speculative decoding (speculative.py: k drafted tokens, E = (1 - alpha^(k+1)) / (1 - alpha) tokens
per step): every step is a verify pass over k + 1 positions per sequence plus the draft's k steps,
as the co-located simulator charges it:

    step = overhead + linear(n (k + 1)) + logits(n (k + 1))
           + max(KV bytes x sum(ctx) / HBM, (k + 1) x attention FLOPs x sum(ctx) / attention FLOP/s)
           + draft table[n] + draft seconds per context token x sum(ctx)

A request's first step yields its first token, each later one E tokens on average (expected-value
model), so it needs 1 + ceil((L - 1) / E) steps (SpeculativeDecoding.iterations) and its context
grows by E per step; the draft's weights come out of the KV budget and its KV of the same tokens
joins each sequence's reservation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gpuplan.workloads.inference import jit
from gpuplan.workloads.inference.jit import kernel

from gpuplan.workloads.inference.cost.memory import MemoryPlan
from gpuplan.workloads.inference.cost.operators import StepTimeModel
from gpuplan.workloads.inference.kernels import graph_tokens_of_step, paged_kv_bytes, step_seconds, table_lookup


@kernel(cache=True)
def _decode_loop(arrival, in_len, out_len, max_seqs, budget, block, g_bytes, w_bytes, window, w_blocks_cap,
                 coef, tables, cached, out_steps, spec_e):
    n = arrival.shape[0]
    lin_t, logit_t, draft_t, graph_t = tables
    first = np.full(n, np.inf)
    finish = np.full(n, np.inf)
    generated = np.zeros(n, np.int64)
    alloc = np.zeros(n)
    run = np.empty(max_seqs, np.int64)
    nrun = 0
    nxt = 0
    used = 0.0
    now = 0.0
    done = 0
    while done < n:
        while nrun < max_seqs and nxt < n and arrival[nxt] <= now:
            cost = paged_kv_bytes(in_len[nxt] - cached[nxt] + out_len[nxt], block, g_bytes, w_bytes, w_blocks_cap)
            if nrun > 0 and used + cost > budget:
                break
            used += cost
            alloc[nxt] = cost
            run[nrun] = nxt
            nrun += 1
            nxt += 1
        if nrun == 0:
            now = max(now, arrival[nxt])
            continue
        ctx_g = 0.0
        ctx_w = 0.0
        for j in range(nrun):
            r = run[j]
            # tokens so far: the first step yields 1, each later one spec_e on average (1 without speculation)
            g = 0.0 if generated[r] == 0 else min(1.0 + (generated[r] - 1) * spec_e, float(out_len[r]))
            c = in_len[r] + g
            ctx_g += c
            ctx_w += c if (window <= 0 or c < window) else window
        n_tok = nrun * coef.verify_tokens  # positions verified: every one runs the linear layers and LM head
        linear_s = table_lookup(lin_t, graph_tokens_of_step(graph_t, n_tok, 0))
        logits_s = table_lookup(logit_t, graph_tokens_of_step(graph_t, n_tok, 0))
        draft_s = table_lookup(draft_t, nrun) if coef.drafting else 0.0
        now += step_seconds(coef, linear_s, logits_s, draft_s, ctx_g, ctx_w, 0.0, 0.0, 0.0)
        k = 0
        for j in range(nrun):
            r = run[j]
            generated[r] += 1  # engine steps taken
            if generated[r] == 1:
                first[r] = now
            if generated[r] >= out_steps[r]:
                finish[r] = now
                done += 1
                used -= alloc[r]
            else:
                run[k] = r
                k += 1
        nrun = k
    return first, finish


@dataclass(frozen=True)
class DecodeRun:
    """Per-request results of one decode instance (seconds; arrays in arrival order)."""

    first_token_delay_s: np.ndarray  # arrival at the decode instance -> first token
    tpot_s: np.ndarray  # NaN for 1-token outputs
    output_tokens_per_s: float


def simulate_decode(steps: StepTimeModel, memory: MemoryPlan, arrival_s: np.ndarray, input_len: np.ndarray,
                    output_len: np.ndarray, max_batch_seqs: int, *, speculative=None, draft=None,
                    prefix_cache=None) -> DecodeRun:
    """Run the decode-only loop (module docstring) on requests arriving (sorted) at `arrival_s`.
    `speculative` (speculative.SpeculativeDecoding, `draft` its speculative.draft_cost, built from
    steps.dep when not given) and `prefix_cache` (prefix_cache.PrefixCache): None = off."""
    ins = np.asarray(input_len, dtype=np.int64)
    outs = np.asarray(output_len, dtype=np.int64)
    arr = np.asarray(arrival_s, dtype=float)
    from gpuplan.workloads.inference.sim.simulator import kv_budget_setup

    kv = kv_budget_setup(steps, memory, ins, outs, speculative, draft, prefix_cache, "the decode instance")
    budget, g_bytes, out_steps, cached = kv.budget_bytes, kv.kv_bytes_per_token, kv.out_steps, kv.cached_tokens
    spec_e, spec_q, draft_table, draft_ctx = kv.spec_tokens_per_step, kv.spec_verify_tokens, kv.draft_table, kv.draft_ctx_s
    jit.compile_kernels()  # the decode loop has no interpreted trial (jit.py)
    first, finish = _decode_loop(
        arr, ins, outs, int(max_batch_seqs), budget, int(memory.block_size),
        g_bytes, float(memory.window_kv_bytes_per_token_per_gpu), int(steps.window), int(memory.window_blocks_cap),
        steps.step_coefficients(spec_q, draft_ctx if draft_table.shape[0] > 0 else None),
        steps.step_tables((), draft_table),
        np.ascontiguousarray(cached, dtype=np.int64), np.ascontiguousarray(out_steps, dtype=np.int64), spec_e,
    )
    tpot = np.where(outs > 1, (finish - first) / np.maximum(outs - 1, 1), np.nan)
    duration = max(float(finish.max() - arr.min()), 1e-12)
    return DecodeRun(first_token_delay_s=first - arr, tpot_s=tpot, output_tokens_per_s=float(outs.sum()) / duration)
