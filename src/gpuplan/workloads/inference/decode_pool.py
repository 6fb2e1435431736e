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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from gpuplan import knobs
from gpuplan.errors import Infeasible
from gpuplan.workloads.inference.memory import MemoryPlan
from gpuplan.workloads.inference.operators import StepTimeModel


@njit(cache=True)
def _blocks_bytes(ctx, block, g_bytes, w_bytes, w_blocks_cap):
    blocks = (ctx + block - 1) // block
    wb = blocks if blocks < w_blocks_cap else w_blocks_cap
    return blocks * block * g_bytes + wb * block * w_bytes


@njit(cache=True)
def _table(lin, n):
    top = lin.shape[0] - 1
    if n <= top:
        return lin[n]
    return lin[top] + (lin[top] - lin[top - 1]) * (n - top)


@njit(cache=True)
def _decode_loop(arrival, in_len, out_len, max_seqs, budget, block, g_bytes, w_bytes, window, w_blocks_cap,
                 lin, logits, overhead, dec_bytes_g, dec_bytes_w, dec_flops_g, dec_flops_w, hbm, attn_flops, step_scale):
    n = arrival.shape[0]
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
            cost = _blocks_bytes(in_len[nxt] + out_len[nxt], block, g_bytes, w_bytes, w_blocks_cap)
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
            c = in_len[run[j]] + generated[run[j]]
            ctx_g += c
            ctx_w += c if (window <= 0 or c < window) else window
        dt = overhead + _table(lin, nrun) + _table(logits, nrun)
        dt += max((dec_bytes_g * ctx_g + dec_bytes_w * ctx_w) / hbm, (dec_flops_g * ctx_g + dec_flops_w * ctx_w) / attn_flops)
        now += dt * step_scale
        k = 0
        for j in range(nrun):
            r = run[j]
            generated[r] += 1
            if generated[r] == 1:
                first[r] = now
            if generated[r] >= out_len[r]:
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
                    output_len: np.ndarray, max_batch_seqs: int) -> DecodeRun:
    """Run the decode-only loop (module docstring) on requests arriving (sorted) at `arrival_s`."""
    ins = np.asarray(input_len, dtype=np.int64)
    outs = np.asarray(output_len, dtype=np.int64)
    arr = np.asarray(arrival_s, dtype=float)
    biggest = memory.sequence_kv_bytes(float((ins + outs).max()))
    if biggest > memory.kv_budget_bytes:
        raise Infeasible(f"a request of {int((ins + outs).max())} tokens needs {biggest / 2**30:.2f} GiB of KV per GPU; "
                         f"the decode instance has {memory.kv_budget_bytes / 2**30:.2f} GiB for the KV cache")
    st = steps
    w = st.window
    w_cap = (math.ceil(w / memory.block_size) + 1) if w else 1 << 40
    first, finish = _decode_loop(
        arr, ins, outs, int(max_batch_seqs), float(memory.kv_budget_bytes), int(memory.block_size),
        float(memory.kv_bytes_per_token_per_gpu), float(memory.window_kv_bytes_per_token_per_gpu), int(w), int(w_cap),
        st.linear_table, st.logits_table, knobs.value("serving.step_overhead_s"),
        float(st.global_layers * st.kv_bytes_per_token_layer), float(st.window_layers * st.kv_bytes_per_token_layer),
        float(st.global_layers * st.decode_pair_flops), float(st.window_layers * st.decode_pair_flops),
        float(st.hbm_bytes_per_s), float(st.attention_flops_per_s), float(st.step_scale),
    )
    tpot = np.where(outs > 1, (finish - first) / np.maximum(outs - 1, 1), np.nan)
    duration = max(float(finish.max() - arr.min()), 1e-12)
    return DecodeRun(first_token_delay_s=first - arr, tpot_s=tpot, output_tokens_per_s=float(outs.sum()) / duration)
