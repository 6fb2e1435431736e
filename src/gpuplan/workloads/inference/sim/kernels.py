"""Numba-compiled pieces shared by the serving simulator's two loops (simulator._simulate, the
step-by-step reference, and simulator_events._simulate_events): paged KV bytes of a sequence,
causal query-key pairs of a prompt chunk, a per-token cost table read with linear extension, and the
size of the KV-memory trace."""

from __future__ import annotations

from numba import njit

_TRACE_POINTS = 4096  # KV-memory trace points kept (halved by taking every other when full)


@njit(cache=True, error_model="numpy")
def _pairs_upto(n, w):
    """sum_{p=1..n} min(p, w): causal query-key pairs of n tokens under window w (w = 0: global)."""
    if w <= 0 or n <= w:
        return n * (n + 1) / 2.0
    return w * (w + 1) / 2.0 + (n - w) * w


@njit(cache=True, error_model="numpy")
def _seq_bytes(ctx, block, g_bytes, w_bytes, w_blocks_cap):
    """Per-GPU KV bytes of a sequence of ctx tokens in paged blocks of `block` tokens: global layers
    ceil(ctx / block) blocks, window layers at most w_blocks_cap (memory.MemoryPlan.sequence_kv_bytes)."""
    blocks = (ctx + block - 1) // block
    wb = blocks if blocks < w_blocks_cap else w_blocks_cap
    return blocks * block * g_bytes + wb * block * w_bytes


@njit(cache=True, error_model="numpy")
def _linear(lin, n):
    """lin[n] for a table of per-n costs, extended linearly past its end with its last slope."""
    top = lin.shape[0] - 1
    if n <= top:
        return lin[n]
    return lin[top] + (lin[top] - lin[top - 1]) * (n - top)
