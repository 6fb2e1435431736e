"""Numba kernels of the serving model: the one home of each quantity the simulator loops compute per
engine step. The Python step time and KV bytes call the same functions as the loops: plain Python
until the process compiles its kernels, numba dispatchers after (jit.py), the same numbers either way.

Used by every simulator loop (sim/simulator.py `_simulate`, the step-by-step reference;
sim/events.py `_simulate_events`, the event-driven loop; sim/decode_pool.py `_decode_loop`, the
decode instance of disaggregated serving), by `StepTimeModel.step_time` (cost/operators.py) and by
`MemoryPlan.sequence_kv_bytes` (cost/memory.py). The module sits beside cost/ and sim/, not in
sim/, because cost/ calls it and sim/ imports cost/ (the import-linter `acyclic` contract).

- `step_seconds(c, ...)`: one engine step (the formula of cost/operators.py's module docstring):

      step = (overhead + linear(n_tokens) + logits(n_sampled)
              + max(decode KV bytes / HBM, (k + 1) x decode attention FLOPs / attention FLOP/s)
              + draft(n_verify) + draft seconds per context token x sum(ctx)      [speculative]
              + max(prefill attention FLOPs / attention FLOP/s, prefill KV bytes / HBM)) x step_scale

  decode KV bytes = decode_bytes_global sum(ctx) + decode_bytes_window sum(min(ctx, w)); prefill
  FLOPs = prefill_flops_global pairs + prefill_flops_window window pairs (StepCoefficients). The
  table values come in as arguments: `table_lookup` of the StepTables at the step's counts, the
  linear and logits tables at `graph_tokens_of_step` (a generation-only step with CUDA graphs
  captured runs at the smallest captured size >= its tokens, padding on). step_seconds takes
  scalars only and is inlined into its caller: an array argument or a call per step costs the
  event-driven loop 5-10% (reference counts, argument passing; measured 2026-11-28).
- `prefill_seconds_of_step(c, dt, ...)`: the prefill phase's share of one step (its own attention,
  plus the shared overhead, linear layers and LM head by token share); the loops sum it and the
  step times, so a run's prefill and decode GPU-seconds are known (the cost of input vs output tokens).
- `table_lookup(table, n)`: a per-count cost table read at n, extended linearly past its end with
  its last slope.
- `paged_kv_bytes(ctx, ...)`: per-GPU KV bytes of a sequence of ctx tokens in paged blocks of b
  tokens (vLLM / TensorRT-LLM block allocation): `blocks_kv_bytes` of ceil(ctx / b) blocks, every
  block holding b tokens of the global layers and at most ceil(w / b) + 1 of them (the window
  straddles a block) b tokens of the sliding-window layers.
- `causal_pairs_upto(n, w)`: sum_{p=1..n} min(p, w), the causal (query, key) pairs of a prompt's
  first n tokens under a window w (w = 0: global); a chunk from c to c + q adds
  pairs(c + q) - pairs(c).
- `trace_append`: the KV-memory trace (time, bytes) kept at most TRACE_POINTS long by dropping
  every other point and doubling the stride when full.

Every loop adds the same terms in the same order, so the loops agree bit for bit
(tests/inference/test_simulator_events.py).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from gpuplan.workloads.inference.jit import kernel

#: KV-memory trace points kept (halved by taking every other when full)
TRACE_POINTS = 4096

#: Scalar coefficients of `step_seconds` for one deployment and engine
#: (StepTimeModel.step_coefficients): fixed overhead (s), decode KV bytes and attention FLOPs per
#: context token of the global / window layers, HBM B/s, attention FLOP/s, prefill FLOPs per causal
#: pair of the global / window layers, prefill KV bytes per token read, the attention-DP step scale,
#: positions verified per decoding sequence (k + 1 with speculative decoding, else 1), whether a
#: draft model runs and its seconds per context token. Scalars only: the tables travel as arrays
#: (StepTables), so a numba call copies no reference-counted member.
StepCoefficients = namedtuple("StepCoefficients", (
    "overhead_s", "decode_bytes_global", "decode_bytes_window", "decode_flops_global", "decode_flops_window",
    "hbm_bytes_per_s", "attention_flops_per_s", "prefill_flops_global", "prefill_flops_window",
    "prefill_bytes_per_token", "step_scale", "verify_tokens", "drafting", "draft_ctx_s",
))
#: Per-count tables of `step_seconds` (s): the linear layers over n tokens, the LM head over n
#: sampled tokens, the draft model's k steps over n sequences (empty: no draft), and the CUDA graph
#: padding: graph_tokens[n] = the smallest captured batch size >= n (empty: no graphs; n past the
#: largest size runs unpadded).
StepTables = namedtuple("StepTables", ("linear", "logits", "draft", "graph_tokens"))


@kernel(cache=True, error_model="numpy")
def table_lookup(table, n):
    """table[n] for a table of per-count costs, extended linearly past its end with its last slope."""
    top = table.shape[0] - 1
    if n <= top:
        return table[n]
    return table[top] + (table[top] - table[top - 1]) * (n - top)


@kernel(cache=True, error_model="numpy")
def blocks_kv_bytes(blocks, block, g_bytes, w_bytes, w_blocks_cap):
    """Per-GPU KV bytes of a sequence holding `blocks` paged blocks of `block` tokens: g_bytes per
    token in every block (global layers), w_bytes per token in at most w_blocks_cap of them
    (window layers)."""
    wb = blocks if blocks < w_blocks_cap else w_blocks_cap
    return blocks * block * g_bytes + wb * block * w_bytes


@kernel(cache=True, error_model="numpy")
def paged_kv_bytes(ctx, block, g_bytes, w_bytes, w_blocks_cap):
    """Per-GPU KV bytes of a sequence of ctx tokens (an integer): ceil(ctx / block) blocks
    (`blocks_kv_bytes`; module docstring)."""
    return blocks_kv_bytes((ctx + block - 1) // block, block, g_bytes, w_bytes, w_blocks_cap)


@kernel(cache=True, error_model="numpy")
def causal_pairs_upto(n, w):
    """sum_{p=1..n} min(p, w): causal query-key pairs of n tokens under window w (w = 0: global)."""
    if w <= 0 or n <= w:
        return n * (n + 1) / 2.0
    return w * (w + 1) / 2.0 + (n - w) * w


@kernel(cache=True, error_model="numpy")
def graph_tokens_of_step(graph_tokens, n, prefill_tokens):
    """Rows a step of n tokens (or n sampled tokens) runs through the linear layers (or the LM head):
    a generation-only step (prefill_tokens = 0) replays the smallest captured CUDA graph that holds
    it, graph_tokens[n] (padding on; every token of such a step is sampled, so both pad alike); a
    step with prompt tokens, or past the largest graph, or without graphs: n itself."""
    if prefill_tokens == 0 and n < graph_tokens.shape[0]:
        return graph_tokens[n]
    return n


@kernel(cache=True, error_model="numpy", inline="always")
def decode_attention_seconds(c, ctx_global, ctx_window):
    """The decoders' attention term of `step_seconds` (before step_scale): max(decode KV bytes / HBM,
    (k + 1) x decode attention FLOPs / attention FLOP/s) over contexts summing to ctx_global (ctx_window)."""
    cg = float(ctx_global)
    cw = float(ctx_window)
    return max((c.decode_bytes_global * cg + c.decode_bytes_window * cw) / c.hbm_bytes_per_s,
               c.verify_tokens * (c.decode_flops_global * cg + c.decode_flops_window * cw) / c.attention_flops_per_s)


@kernel(cache=True, error_model="numpy", inline="always")
def prefill_attention_seconds(c, pairs_global, pairs_window, prefill_kv_tokens):
    """The prompt chunks' attention term of `step_seconds` (before step_scale): max(prefill FLOPs /
    attention FLOP/s, prefill KV bytes read / HBM)."""
    return max((c.prefill_flops_global * pairs_global + c.prefill_flops_window * pairs_window) / c.attention_flops_per_s,
               c.prefill_bytes_per_token * prefill_kv_tokens / c.hbm_bytes_per_s)


@kernel(cache=True, error_model="numpy", inline="always")
def step_seconds(c, linear_s, logits_s, draft_s, ctx_global, ctx_window, pairs_global, pairs_window, prefill_kv_tokens):
    """Seconds of one engine step (module docstring) with coefficients `c` (StepCoefficients):
    `linear_s`, `logits_s` and `draft_s` are the step's table values (`table_lookup` of the linear
    and logits tables at `graph_tokens_of_step`, of the draft table at the decoding sequences);
    decoding sequences whose contexts sum to `ctx_global` (`ctx_window` capped at the window);
    prompt chunks of `pairs_global` (`pairs_window`) causal pairs reading `prefill_kv_tokens`
    tokens of KV. Scalars only and inlined into its caller (numba IR), so a simulator step pays
    neither a call nor a reference count."""
    dt = c.overhead_s + linear_s + logits_s
    if ctx_global > 0:
        dt += decode_attention_seconds(c, ctx_global, ctx_window)
        if c.drafting:  # speculative decoding: the draft's k autoregressive steps over the decoders
            dt += draft_s + c.draft_ctx_s * float(ctx_global)
    if pairs_global > 0:
        dt += prefill_attention_seconds(c, pairs_global, pairs_window, prefill_kv_tokens)
    if c.step_scale != 1.0:
        dt *= c.step_scale
    return dt


@kernel(cache=True, error_model="numpy", inline="always")
def prefill_seconds_of_step(c, dt, draft_s, ctx_global, ctx_window, pairs_global, pairs_window, prefill_kv_tokens,
                            prefill_tokens, tokens):
    """The prefill phase's share of one engine step of `dt` seconds (`step_seconds`) that runs
    `prefill_tokens` prompt tokens among its `tokens` (prompt + decode) tokens:

        A_p = prefill attention term x step_scale          (prompt chunks only: causal pairs)
        A_d = (decode attention term + draft terms) x step_scale   (decoders only)
        S   = dt - A_p - A_d                               (overhead + linear layers + LM head: shared)
        prefill seconds = A_p + S x prefill_tokens / tokens,  decode seconds = dt - prefill seconds

    The attention terms belong to one phase each; the shared terms (one fused GEMM pass over every
    token of the step, and the per-step overhead) are split by the step's token share, as a
    chunked-prefill batch runs its prompt and decode tokens through the same GEMMs (Agrawal et al.,
    Sarathi-Serve, OSDI 2024, sec. 3). An all-prefill step is all prefill (A_d = 0, share 1); an
    all-decode step is all decode (A_p = 0, share 0)."""
    if prefill_tokens <= 0 or tokens <= 0:
        return 0.0
    if prefill_tokens >= tokens:
        return dt
    a_p = 0.0
    if pairs_global > 0:
        a_p = prefill_attention_seconds(c, pairs_global, pairs_window, prefill_kv_tokens) * c.step_scale
    a_d = 0.0
    if ctx_global > 0:
        a_d = decode_attention_seconds(c, ctx_global, ctx_window)
        if c.drafting:
            a_d += draft_s + c.draft_ctx_s * float(ctx_global)
        a_d *= c.step_scale
    shared = dt - a_p - a_d
    return a_p + shared * prefill_tokens / tokens


@kernel(cache=True, error_model="numpy")
def trace_append(tr_t, tr_b, ntr, stride, now, used):
    """Append (now, used) to the KV-memory trace of `ntr` points; when it holds TRACE_POINTS, keep
    every other point first and double the stride. Returns the new (ntr, stride)."""
    if ntr == TRACE_POINTS:
        for i in range(TRACE_POINTS // 2):
            tr_t[i] = tr_t[2 * i]
            tr_b[i] = tr_b[2 * i]
        ntr = TRACE_POINTS // 2
        stride *= 2
    tr_t[ntr] = now
    tr_b[ntr] = used
    return ntr + 1, stride


def graph_token_table(cuda_graph_batch_sizes) -> np.ndarray:
    """StepTables.graph_tokens of the captured CUDA graph batch sizes: entry n is the smallest size
    >= n, for n up to the largest size (empty without graphs)."""
    # np.unique's answer (sorted distinct sizes) without its import of numpy.ma (~30 ms at start)
    sizes = np.array(sorted(set(np.asarray(cuda_graph_batch_sizes, dtype=np.int64).ravel().tolist())), dtype=np.int64)
    if sizes.size == 0:
        return np.zeros(0, np.int64)
    return sizes[np.searchsorted(sizes, np.arange(sizes[-1] + 1))]
