"""Event-driven serving loop: the step-by-step simulator (simulator._simulate) with per-step work
proportional to what happens in the step, not to the batch size.

The reference loop walks every running sequence at every engine step (build the step, then
advance it), O(batch) per step. Between events a decoding sequence does nothing but add one token,
so this loop keeps decode state implicitly and touches a sequence only when something happens to it:

- a decoding request r stores `key_r = input_len + generated - t` (its context minus the global
  decode-step counter t: engine steps that ran the decoders, which is every step except the
  prefill-only steps of the prefill-first scheduler), so its context at decode step t is `key_r + t`
  and the batch's summed context is `sum(key) + n_dec * t` (an integer, exactly the reference's
  `ctx_g`); every step index below (completion, window, KV block) counts decode steps.
  Sliding-window layers read `min(ctx, w)`: requests below the window and those capped at it are summed apart, and a min-heap
  of the step each one reaches the window moves it across (once);
- completion: each decoder's last step `out_steps - (generated - t)` sits in a min-heap; with
  counted blocks (below), in a calendar instead: FINISH_BUCKETS lists by last step mod 1024, a step
  reading its bucket only (a decoder ending more than 1024 steps on is passed over once a round).
  The heap's pops were ~18% of the loop's time on the serving benchmark; the calendar finishes a
  step's decoders in another order, which changes nothing where every KV sum is an exact integer
  (counted blocks), so the heap stays for the other cases (30.6 -> 22.5 ms a run of the benchmark's
  310,760 steps in-process, 2026-11-28);
- KV blocks (vLLM-style allocation as the sequence grows): a decoder needs a new block at step
  `tc_r` (first step whose write position passes its allocated capacity); it sits in ring bucket
  `tc_r mod block` and after a crossing its next `tc_r` is at most `block` steps later, so each step
  visits one bucket only. Counted blocks (no window layer, and every KV sum an exact integer: KV
  bytes per token integral, budget below 2^50 B): after its first block past its prefill's, a
  decoder holds ceil(need / block) blocks, need = context + 1 - cached, and crosses at every decode
  step t = cached - key (mod block), one block each time; so the ring keeps only the count of
  decoders of each phase, a step's decoders grow by count x one block's bytes (summed in any order:
  exact), and a decoder's bytes are worked out from its context when it finishes or is preempted.
  A decoder already past its prefill's blocks on entry is sized at its entry step (ring.due), then
  counted. This removes the per-decoder block visits (two per crossing: sizing and growing), half
  of the loop's time on the serving benchmark (310,760 steps: 0.081 -> 0.034 CPU-s, 2026-11-28);
- a request enters the decoding state in one place, at the top of a step: prompts that finished
  prefill in the last step (queued in `to_dec`), then admitted requests whose prompt is all in KV;
- prompts being prefilled (usually none or one) are kept in a list in admission order, and the
  running set in a doubly-linked list in admission order (the reference's slot order: the chunked
  token budget goes in this order and preemption takes the tail).

A step whose new KV blocks all fit (the usual case) is applied in that form. A step where memory
might run out (new blocks + prompt chunks > free KV) walks the running list in order with the
reference's rules (prompt chunks refused, the latest admitted preempted), so eviction is the
reference's decision sequence. Step time, clock and trace use the same expressions in the same
order as the reference, so the results are the reference's bit for bit where KV bytes per token
are integers (every sum of them is then exact); tests/inference/test_simulator_events.py checks
it on every scheduler (prefill-first included), eviction, windows, prefix caching and CUDA-graph
padding.

Speculative decoding (context `input + min(out, 1 + (gen - 1) e)`, not linear in steps) runs on
the reference loop.

Layout: `_simulate_events` allocates the state (namedtuples of arrays: Progress, Decoding,
LinkedList, BlockRing, Heap, Calendar; together an EventState; request links, ring phases and
calendar links in int32, as a fresh array's pages each cost a first-touch fault, ~2 us a 4 KiB page
on the 2-core machine) and runs `_run_events`, whose step reads as the
named helpers below: admission (`_admit_static_batch`, `_admit_continuous`, `_route_admitted`,
`_enter_decoding`), scheduling a step (`_chunk_tokens`, `_prefill_first_chunks`, `_step_fits`,
`_grow_due_blocks`, `_take_prompt_chunks`, `_walk_with_eviction`, `_decode_context`), its cost
(kernels.step_seconds), completion bookkeeping (`_finish_prompts`, `_complete_decoders`,
`_finish_request`, `_release_static_batch`) and statistics (`_record_trace`). The loop and its
helpers are compiled without numba's reference counting (`_nrt=False`: they allocate nothing) and
the helpers are inlined (numba IR), so splitting costs no call or reference count per step.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from gpuplan.workloads.inference.jit import kernel

from gpuplan.workloads.inference.kernels import (TRACE_POINTS, blocks_kv_bytes, causal_pairs_upto, graph_tokens_of_step,
                                                 paged_kv_bytes, prefill_seconds_of_step, step_seconds, table_lookup,
                                                 trace_append)

#: Options of the loop's functions: cached, numpy division semantics, no reference counting (they
#: allocate nothing; numba's own internal kernels use the same `_nrt=False`).
_LOOP = dict(cache=True, error_model="numpy", _nrt=False)
#: ... and the helpers are inlined into `_run_events` (numba IR), so a split costs nothing per step.
_HELPER = dict(_LOOP, inline="always")

#: Per-request inputs (arrival order): arrival times (a closed loop writes its releases here),
#: prompt and output lengths, prompt tokens served from the prefix cache, engine steps per output.
Requests = namedtuple("Requests", ("arrival", "in_len", "out_len", "cached", "out_steps"))
#: Scheduler (SCHEDULER_CODE: 0 static, 1 continuous, 2 chunked, 3 prefill-first), whole-sequence KV
#: reservation (no_evict), per-step limits, and whether finished requests release the next (closed loop).
Engine = namedtuple("Engine", ("sched", "no_evict", "max_seqs", "max_tokens", "closed_loop"))
#: KV budget (bytes per GPU), block size (tokens), KV bytes per token of the global / window layers,
#: the window (tokens; 0 none) and the blocks a window layer holds at most.
KvLayout = namedtuple("KvLayout", ("budget", "block", "g_bytes", "w_bytes", "window", "w_blocks_cap"))
#: Per-request progress: prompt(+recompute) tokens whose KV exists, tokens to prefill before the
#: next sample, tokens sampled (materialised while not decoding), KV bytes and blocks held, prompt
#: tokens run this step, first-token and finish times.
Progress = namedtuple("Progress", ("pref", "tgt", "gen", "alloc", "nblk", "pq", "first", "finish"))
#: Decoders (module docstring): key = context - decode steps, decoding, below the window, the
#: decode step after the last one, the step reaching the window, the step of the next KV block,
#: blocks and bytes after this step's block (decoders due one; counted blocks: by position in the
#: due list); `agg` holds the batch's sums (AGG_* indices). The window and block-step arrays have
#: one entry where the loop never reads them (no window; blocks counted or not grown), and so has
#: the last-step array with counted blocks, whose calendar works the step out from the key
#: (`_last_decode_step`).
Decoding = namedtuple("Decoding", ("key", "dec", "below", "tfin", "twin", "tc", "x_blocks", "x_bytes", "agg"))
AGG_N_DEC, AGG_KEY, AGG_N_BELOW, AGG_KEY_BELOW, AGG_N_CAPPED = range(5)
#: A doubly-linked list of requests in admission order; `ends` = (head, tail, size).
LinkedList = namedtuple("LinkedList", ("nx", "pv", "ends"))
HEAD, TAIL, SIZE = range(3)
#: KV-block ring: bucket b (slots[b, :count[b]]) holds the decoders whose next block step is b
#: (mod block); a decoder's bucket and position in it. Counted blocks (`counted`, module docstring):
#: count[b] is the number of decoders crossing a block at every decode step = b (mod block), bucket
#: a decoder's phase (-1: due its first block at its entry step, listed in due[:n_due[0]]); slots
#: and pos are unused.
BlockRing = namedtuple("BlockRing", ("slots", "count", "bucket", "pos", "counted", "due", "n_due"))
#: A min-heap of (step, request) with lazy deletion; `size` is a one-element array.
Heap = namedtuple("Heap", ("keys", "vals", "size"))
#: Completion calendar, used with counted blocks (module docstring): bucket b is a list (head[b],
#: then nxt[r] until -1) of the decoders whose last decode step is b (mod FINISH_BUCKETS), so a
#: step reads one bucket instead of popping a heap. Its order of a step's completions differs from
#: the heap's; with counted blocks every KV sum they change is an exact integer, so the results
#: do not. Without counted blocks the loop keeps the completion heap (`fheap`).
Calendar = namedtuple("Calendar", ("head", "nxt"))
#: buckets of the completion calendar (a power of two): a decoder further than this many steps
#: from its end is passed over once per round (about output steps / 1024 visits)
FINISH_BUCKETS = 1024
#: The loop's state, allocated by `_simulate_events`: the above (heaps of completions and window
#: crossings, the completion calendar), static-batch members, requests
#: queued to start decoding, preempted requests (a stack), and the KV-memory trace (times, bytes).
EventState = namedtuple("EventState", ("prog", "dec", "run", "prefill", "ring", "fheap", "wheap", "cal", "batch",
                                       "to_dec", "preempted", "trace_t", "trace_b"))
#: Token counts and attention sums of the step being built (ints, then floats).
StepBatch = namedtuple("StepBatch", ("n_tok", "n_seq", "pf_tok", "budget_tok", "pairs_g", "pairs_w", "pf_kv"))


# ---------------------------------------------------------------------------------------------
# containers


@kernel(**_LOOP)
def _heap_push(hk, hv, size, key, val):
    """Push (key, val) on the min-heap hk/hv of `size` entries; returns the new size."""
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if hk[p] <= key:
            break
        hk[i] = hk[p]
        hv[i] = hv[p]
        i = p
    hk[i] = key
    hv[i] = val
    return size + 1


@kernel(**_LOOP)
def _heap_pop(hk, hv, size):
    """Remove the top of the min-heap; returns the new size."""
    size -= 1
    if size <= 0:
        return 0
    key = hk[size]
    val = hv[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and hk[c + 1] < hk[c]:
            c += 1
        if hk[c] >= key:
            break
        hk[i] = hk[c]
        hv[i] = hv[c]
        i = c
    hk[i] = key
    hv[i] = val
    return size


@kernel(**_LOOP)
def _heap_compact(hk, hv, size, live, keyof):
    """Drop stale entries (request not `live`, or its current key differs); returns the new size."""
    m = 0
    for i in range(size):
        r = hv[i]
        if live[r] and keyof[r] == hk[i]:
            hk[m] = hk[i]
            hv[m] = hv[i]
            m += 1
    size = 0
    for i in range(m):
        size = _heap_push(hk, hv, size, hk[i], hv[i])
    return size


@kernel(**_HELPER)
def _heap_add(h, key, r, live, keyof):
    """Push (key, r) on heap h, first dropping stale entries when it is full."""
    if h.size[0] == h.keys.shape[0]:
        h.size[0] = _heap_compact(h.keys, h.vals, h.size[0], live, keyof)
    h.size[0] = _heap_push(h.keys, h.vals, h.size[0], key, r)


@kernel(**_HELPER)
def _push_back(lst, r):
    """Append request r to the list."""
    tail = lst.ends[TAIL]
    lst.nx[r] = -1
    lst.pv[r] = tail
    if tail >= 0:
        lst.nx[tail] = r
    else:
        lst.ends[HEAD] = r
    lst.ends[TAIL] = r
    lst.ends[SIZE] += 1


@kernel(**_HELPER)
def _unlink(lst, r):
    """Remove request r from the list."""
    if lst.pv[r] >= 0:
        lst.nx[lst.pv[r]] = lst.nx[r]
    else:
        lst.ends[HEAD] = lst.nx[r]
    if lst.nx[r] >= 0:
        lst.pv[lst.nx[r]] = lst.pv[r]
    else:
        lst.ends[TAIL] = lst.pv[r]
    lst.ends[SIZE] -= 1


@kernel(**_HELPER)
def _ring_insert(ring, r, b):
    """Put decoder r in bucket b of the KV-block ring."""
    ring.bucket[r] = b
    ring.pos[r] = ring.count[b]
    ring.slots[b, ring.count[b]] = r
    ring.count[b] += 1


@kernel(**_HELPER)
def _count_in(ring, R, D, K, r):
    """Counted blocks: decoder r, holding ceil(need / block) blocks or due its first at a step
    before the next visit of its phase, crosses a block at every decode step t with need(t) = 1
    (mod block): t = cached - key (mod block)."""
    b = (R.cached[r] - D.key[r]) % K.block
    ring.bucket[r] = b
    ring.count[b] += 1


@kernel(**_HELPER)
def _blocks_after(R, K, prog, D, r, t):
    """Counted blocks: KV blocks a decoder holds after decode step t, ceil(need(t) / block) with
    need(t) = key + t + 1 - cached (the positions written by then), at least its prefill's prog.nblk."""
    nb = (D.key[r] + t + 1 - R.cached[r] + K.block - 1) // K.block
    return nb if nb > prog.nblk[r] else prog.nblk[r]


@kernel(**_HELPER)
def _decoder_alloc(R, K, prog, D, ring, r, t):
    """KV bytes decoder r holds after decode step t: prog.alloc when blocks are tracked (or while it
    is due its first block), else `blocks_kv_bytes` of `_blocks_after` (the same expression)."""
    if not ring.counted or ring.bucket[r] < 0:
        return prog.alloc[r]
    return blocks_kv_bytes(_blocks_after(R, K, prog, D, r, t), K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)


@kernel(**_HELPER)
def _ring_remove(ring, r):
    """Take decoder r out of its bucket (the bucket's last entry moves into its slot)."""
    b = ring.bucket[r]
    last_r = ring.slots[b, ring.count[b] - 1]
    ring.slots[b, ring.pos[r]] = last_r
    ring.pos[last_r] = ring.pos[r]
    ring.count[b] -= 1
    ring.bucket[r] = -1


@kernel(**_HELPER)
def _last_decode_step(R, D, r):
    """The decode step after decoder r's last: out_steps - (generated - t) at its entry step t, where
    key = input + generated - t, so out_steps + input - key (its key stays while it decodes)."""
    return R.out_steps[r] + R.in_len[r] - D.key[r]


@kernel(**_HELPER)
def _calendar_insert(cal, r, step):
    """Put decoder r, whose last decode step is `step`, in its calendar bucket."""
    b = step & (FINISH_BUCKETS - 1)
    cal.nxt[r] = cal.head[b]
    cal.head[b] = r


@kernel(**_HELPER)
def _calendar_remove(cal, r, step):
    """Take decoder r (last decode step `step`) out of its calendar bucket (a preemption)."""
    b = step & (FINISH_BUCKETS - 1)
    prev = -1
    q = cal.head[b]
    while q != r:
        prev = q
        q = cal.nxt[q]
    if prev < 0:
        cal.head[b] = cal.nxt[r]
    else:
        cal.nxt[prev] = cal.nxt[r]


# ---------------------------------------------------------------------------------------------
# admission


@kernel(**_HELPER)
def _admit_static_batch(R, E, K, prog, run, batch, now, used, next_wait, released):
    """Static batching: once the last batch is done, wait until a full batch has arrived (or take
    what a closed loop released) and admit it, each request reserving its whole sequence's KV.
    Returns (now, used, next_wait, batch size)."""
    n = R.arrival.shape[0]
    last = next_wait + min(E.max_seqs, n - next_wait) - 1
    if R.arrival[last] < np.inf:
        now = max(now, R.arrival[last])
    elif next_wait < released:
        now = max(now, R.arrival[released - 1])
    nbatch = 0
    while nbatch < E.max_seqs and next_wait < n and R.arrival[next_wait] <= now:
        r = next_wait
        cost = paged_kv_bytes(R.in_len[r] + R.out_len[r] - R.cached[r], K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)
        if nbatch > 0 and used + cost > K.budget:
            break
        used += cost
        prog.alloc[r] = cost
        batch[nbatch] = r
        nbatch += 1
        next_wait += 1
        _push_back(run, r)
    return now, used, next_wait, nbatch


@kernel(**_HELPER)
def _admit_continuous(R, E, K, prog, run, preempted, now, used, next_wait, npre):
    """Iteration-level admission while a sequence slot is free: preempted requests first (latest
    first), then arrivals in order, while the KV they need fits (no-evict: the whole sequence,
    reserved now; else the prompt, allocated as it runs). Returns (used, next_wait, npre)."""
    n = R.arrival.shape[0]
    while run.ends[SIZE] < E.max_seqs:
        if npre > 0:
            r = preempted[npre - 1]
        elif next_wait < n and R.arrival[next_wait] <= now:
            r = next_wait
        else:
            break
        if E.no_evict:  # reserve the whole sequence's KV up front (TensorRT-LLM GUARANTEED_NO_EVICT)
            cost = paged_kv_bytes(R.in_len[r] + R.out_len[r] - R.cached[r], K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)
        else:
            cost = paged_kv_bytes(prog.tgt[r] - R.cached[r], K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)
        if used + cost > K.budget and run.ends[SIZE] > 0:
            break
        if E.no_evict:
            used += cost
            prog.alloc[r] = cost
        if npre > 0:
            npre -= 1
        else:
            next_wait += 1
        prog.nblk[r] = 0
        _push_back(run, r)
    return used, next_wait, npre


@kernel(**_HELPER)
def _route_admitted(R, prog, run, prefill, to_dec, n_to_dec, admit_from):
    """Requests admitted after `admit_from`: a prompt joins the prefill list; a prompt already all in
    KV decodes from this step (after the prompts that finished prefill in the last step). Returns
    the new number queued in to_dec."""
    r = run.nx[admit_from] if admit_from >= 0 else run.ends[HEAD]
    while r >= 0:
        if prog.pref[r] < prog.tgt[r]:
            _push_back(prefill, r)
        elif prog.gen[r] < R.out_steps[r]:
            to_dec[n_to_dec] = r
            n_to_dec += 1
        r = run.nx[r]
    return n_to_dec


@kernel(**_HELPER)
def _enter_decoding(R, K, prog, D, ring, fheap, wheap, cal, to_dec, n_to_dec, t, grow):
    """The queued decoders enter the decoding state at decode step t: key (context - t), last step
    on the completion heap (counted blocks: in the calendar), below the window (window heap) or
    capped at it, next KV-block step in the ring."""
    agg = D.agg
    for i in range(n_to_dec):
        r = to_dec[i]
        k_r = R.in_len[r] + prog.gen[r] - t
        D.key[r] = k_r
        D.dec[r] = True
        agg[AGG_N_DEC] += 1
        agg[AGG_KEY] += k_r
        if ring.counted:  # (= R.out_steps[r] - (prog.gen[r] - t))
            _calendar_insert(cal, r, _last_decode_step(R, D, r))
        else:
            D.tfin[r] = R.out_steps[r] - (prog.gen[r] - t)
            _heap_add(fheap, D.tfin[r], r, D.dec, D.tfin)
        if K.window > 0 and k_r + t < K.window:
            D.below[r] = True
            agg[AGG_N_BELOW] += 1
            agg[AGG_KEY_BELOW] += k_r
            D.twin[r] = K.window - k_r
            _heap_add(wheap, D.twin[r], r, D.below, D.twin)
        elif K.window > 0:
            agg[AGG_N_CAPPED] += 1
        if grow:
            c_r = prog.nblk[r] * K.block + R.cached[r] - k_r  # first step past its prefill's blocks
            if not ring.counted:
                D.tc[r] = c_r if c_r > t else t
                _ring_insert(ring, r, D.tc[r] % K.block)
            elif c_r > t:  # one block more at step c_r (< t + block): its phase from then on
                _count_in(ring, R, D, K, r)
            else:  # past its prefill's blocks already: sized at this step, then counted
                ring.bucket[r] = -1
                ring.due[ring.n_due[0]] = r
                ring.n_due[0] += 1


@kernel(**_HELPER)
def _leave_decoding(K, D, ring, r, grow):
    """Decoder r leaves the decoding state (finished or preempted): the batch's sums and its ring slot."""
    agg = D.agg
    D.dec[r] = False
    agg[AGG_N_DEC] -= 1
    agg[AGG_KEY] -= D.key[r]
    if K.window > 0:
        if D.below[r]:
            D.below[r] = False
            agg[AGG_N_BELOW] -= 1
            agg[AGG_KEY_BELOW] -= D.key[r]
        else:
            agg[AGG_N_CAPPED] -= 1
    if grow:
        if not ring.counted:
            _ring_remove(ring, r)
        elif ring.bucket[r] >= 0:
            ring.count[ring.bucket[r]] -= 1
            ring.bucket[r] = -1


# ---------------------------------------------------------------------------------------------
# scheduling a step


@kernel(**_HELPER)
def _cross_window(D, wheap, t):
    """Decoders reaching the sliding window read `window` tokens from decode step t on."""
    agg = D.agg
    wk, wv = wheap.keys, wheap.vals
    while wheap.size[0] > 0 and wk[0] <= t:
        r = wv[0]
        kk = wk[0]
        wheap.size[0] = _heap_pop(wk, wv, wheap.size[0])
        if D.below[r] and D.twin[r] == kk:
            D.below[r] = False
            D.twin[r] = -1
            agg[AGG_N_BELOW] -= 1
            agg[AGG_KEY_BELOW] -= D.key[r]
            agg[AGG_N_CAPPED] += 1


@kernel(**_HELPER)
def _chunk_tokens(sched, rem, budget_tok, pf_tok):
    """Prompt tokens a prompt with `rem` left runs this step (schedulers.py): chunked and
    prefill-first, as many as the step's token budget leaves; continuous, the whole rest if it fits
    the budget or no other prompt runs, else none; static, the whole prompt."""
    if sched >= 2:
        return min(rem, budget_tok)
    if sched == 1:
        return rem if (rem <= budget_tok or pf_tok == 0) else 0
    return rem


@kernel(**_HELPER)
def _add_chunk(acc, c, q, target, window):
    """The step batch with a prompt chunk from token c to c + q added (it samples when it reaches
    the prompt's target)."""
    return StepBatch(acc.n_tok + q, acc.n_seq + (1 if c + q >= target else 0), acc.pf_tok + q, acc.budget_tok - q,
                     acc.pairs_g + (causal_pairs_upto(c + q, 0) - causal_pairs_upto(c, 0)),
                     acc.pairs_w + (causal_pairs_upto(c + q, window) - causal_pairs_upto(c, window)),
                     acc.pf_kv + (c + q))


@kernel(**_HELPER)
def _grant_chunk(R, K, prog, r, q, newb, acc, used, grow):
    """Run q prompt tokens of r this step (its KV grows to newb bytes when allocated as it grows).
    Returns (step batch, used)."""
    c = prog.pref[r]
    if grow:
        used += newb - prog.alloc[r]
        prog.alloc[r] = newb
        prog.nblk[r] = (c + q - R.cached[r] + K.block - 1) // K.block
    prog.pq[r] = q
    return _add_chunk(acc, c, q, prog.tgt[r], K.window), used


@kernel(**_HELPER)
def _prefill_first_chunks(R, K, prog, prefill, acc, used, grow):
    """Prefill-first: prompt chunks only, in admission order; a chunk whose KV does not fit is
    refused. Returns (step batch, used)."""
    r = prefill.ends[HEAD]
    while r >= 0:
        prog.pq[r] = 0
        q = min(prog.tgt[r] - prog.pref[r], acc.budget_tok)
        if q > 0:
            newb = paged_kv_bytes(prog.pref[r] + q - R.cached[r], K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)
            if not grow or used - prog.alloc[r] + newb <= K.budget:
                acc, used = _grant_chunk(R, K, prog, r, q, newb, acc, used, grow)
        r = prefill.nx[r]
    return acc, used


@kernel(**_HELPER)
def _step_fits(R, E, K, prog, D, ring, prefill, acc, used, t):
    """Whether everything the step asks for fits in KV memory: the blocks of the decoders due one at
    decode step t (recorded in x_blocks / x_bytes) and the prompt chunks (then nothing is refused
    or preempted)."""
    demand = 0.0
    b = t % K.block
    if ring.counted:  # one block each for the decoders of phase b, sized blocks for those due their first
        demand += ring.count[b] * (K.block * K.g_bytes)
        for i in range(ring.n_due[0]):
            r = ring.due[i]
            need = D.key[r] + t + 1 - R.cached[r]
            nbk = (need + K.block - 1) // K.block
            newb = blocks_kv_bytes(nbk, K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)
            D.x_blocks[i] = nbk  # (counted: by position in the due list)
            D.x_bytes[i] = newb
            demand += newb - prog.alloc[r]
    for i in range(ring.count[b] if not ring.counted else 0):
        r = ring.slots[b, i]
        if D.tc[r] == t:
            # blocks after this step's write (= paged_kv_bytes's ceil(need / block)); one more
            # than now except on entry with block 1, so the division is rarely needed
            need = D.key[r] + t + 1 - R.cached[r]
            nbk = prog.nblk[r] + 1 if (prog.nblk[r] + 1) * K.block >= need else (need + K.block - 1) // K.block
            newb = blocks_kv_bytes(nbk, K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)
            D.x_blocks[r] = nbk
            D.x_bytes[r] = newb
            demand += newb - prog.alloc[r]
    bt = acc.budget_tok
    pft = 0
    r = prefill.ends[HEAD] if E.sched != 3 else -1
    while r >= 0:
        q = _chunk_tokens(E.sched, prog.tgt[r] - prog.pref[r], bt, pft)
        if q > 0:
            demand += paged_kv_bytes(prog.pref[r] + q - R.cached[r], K.block, K.g_bytes, K.w_bytes,
                                     K.w_blocks_cap) - prog.alloc[r]
            bt -= q
            pft += q
        r = prefill.nx[r]
    return used + demand <= K.budget


@kernel(**_HELPER)
def _grow_due_blocks(R, K, prog, D, ring, used, t):
    """Give each decoder due a block at decode step t the block `_step_fits` sized (they all fit)
    and move it to the bucket of its next one, 1 to `block` steps later. Returns used."""
    block = K.block
    b = t % block
    if ring.counted:  # the decoders of phase b grow one block each; those due their first join a phase
        used += ring.count[b] * (block * K.g_bytes)
        for i in range(ring.n_due[0]):
            r = ring.due[i]
            used += D.x_bytes[i] - prog.alloc[r]
            _count_in(ring, R, D, K, r)
        ring.n_due[0] = 0
        return used
    i = 0
    while i < ring.count[b]:
        r = ring.slots[b, i]
        if D.tc[r] != t:
            i += 1
            continue
        need = D.key[r] + t + 1 - R.cached[r]
        newb = D.x_bytes[r]
        used += newb - prog.alloc[r]
        prog.alloc[r] = newb
        prog.nblk[r] = D.x_blocks[r]
        ahead = prog.nblk[r] * block - need + 1  # steps to the next block: 1..block
        D.tc[r] = t + ahead
        nbk = b + ahead
        if nbk >= block:
            nbk -= block
        if nbk != b:  # to its new bucket (the bucket's last entry takes slot i: look at it next)
            _ring_remove(ring, r)
            _ring_insert(ring, r, nbk)
        else:
            i += 1
    return used


@kernel(**_HELPER)
def _take_prompt_chunks(R, E, K, prog, prefill, acc, used, grow):
    """The prompt chunks of a step that fits (every scheduler but prefill-first, whose chunks ran
    first). Returns (step batch, used)."""
    r = prefill.ends[HEAD] if E.sched != 3 else -1
    while r >= 0:
        prog.pq[r] = 0
        q = _chunk_tokens(E.sched, prog.tgt[r] - prog.pref[r], acc.budget_tok, acc.pf_tok)
        if q > 0:
            newb = 0.0
            if grow:
                newb = paged_kv_bytes(prog.pref[r] + q - R.cached[r], K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)
            acc, used = _grant_chunk(R, K, prog, r, q, newb, acc, used, grow)
        r = prefill.nx[r]
    return acc, used


@kernel(**_HELPER)
def _preempt_tail(R, K, prog, D, ring, cal, run, prefill, preempted, used, npre, t):
    """Preempt the most recently admitted request (recompute later: its KV is freed, its target is
    its tokens so far). Returns (used, npre)."""
    v = run.ends[TAIL]
    used -= _decoder_alloc(R, K, prog, D, ring, v, t - 1) if D.dec[v] else prog.alloc[v]  # (not yet grown at t)
    prog.alloc[v] = 0.0
    _unlink(run, v)
    if D.dec[v]:
        prog.gen[v] = D.key[v] + t - R.in_len[v]
        if ring.counted:
            _calendar_remove(cal, v, _last_decode_step(R, D, v))
        _leave_decoding(K, D, ring, v, True)
    else:  # a prompt: leaves the prefill list
        _unlink(prefill, v)
        if prog.pq[v] > 0:  # cannot happen (prompts after r are not yet visited)
            prog.pq[v] = 0
    prog.tgt[v] = R.in_len[v] + prog.gen[v]
    prog.pref[v] = R.cached[v]
    preempted[npre] = v
    return used, npre + 1


@kernel(**_HELPER)
def _walk_with_eviction(R, E, K, prog, D, ring, cal, run, prefill, preempted, acc, used, npre, preemptions, t):
    """A step where memory may run out: the reference's walk in admission order (prompt chunks
    that do not fit are refused; a decoder due a block that does not fit preempts the latest
    admitted). Returns (step batch, used, npre, preemptions)."""
    r = run.ends[HEAD]
    while r >= 0:
        if prog.pref[r] < prog.tgt[r]:
            if E.sched == 3:  # prefill-first: no chunk could run, the decoders do
                r = run.nx[r]
                continue
            prog.pq[r] = 0
            q = _chunk_tokens(E.sched, prog.tgt[r] - prog.pref[r], acc.budget_tok, acc.pf_tok)
            if q > 0:
                newb = paged_kv_bytes(prog.pref[r] + q - R.cached[r], K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap)
                if used - prog.alloc[r] + newb <= K.budget:
                    acc, used = _grant_chunk(R, K, prog, r, q, newb, acc, used, True)
        elif D.dec[r]:
            need = D.key[r] + t + 1 - R.cached[r]
            held = _decoder_alloc(R, K, prog, D, ring, r, t - 1)
            if ring.counted:
                cross = need > (prog.nblk[r] if ring.bucket[r] < 0 else _blocks_after(R, K, prog, D, r, t - 1)) * K.block
            else:
                cross = D.tc[r] == t
            newb = paged_kv_bytes(need, K.block, K.g_bytes, K.w_bytes, K.w_blocks_cap) if cross else held
            while used - held + newb > K.budget and run.ends[TAIL] != r:
                used, npre = _preempt_tail(R, K, prog, D, ring, cal, run, prefill, preempted, used, npre, t)
                preemptions += 1
            if cross and ring.counted:
                used += newb - held
            elif cross:
                used += newb - prog.alloc[r]
                prog.alloc[r] = newb
                prog.nblk[r] = (need + K.block - 1) // K.block
                D.tc[r] = t + prog.nblk[r] * K.block - need + 1
                nbk = D.tc[r] % K.block
                if nbk != ring.bucket[r]:
                    _ring_remove(ring, r)
                    _ring_insert(ring, r, nbk)
        r = run.nx[r]
    if ring.counted:  # those due their first block have it (or were preempted)
        for i in range(ring.n_due[0]):
            if D.dec[ring.due[i]]:
                _count_in(ring, R, D, K, ring.due[i])
        ring.n_due[0] = 0
    return acc, used, npre, preemptions


@kernel(**_HELPER)
def _decode_context(K, D, t):
    """Summed context of the decoders at decode step t, all layers and window layers
    (sum(key) + n t; below the window likewise, capped ones at the window)."""
    agg = D.agg
    ctx_g = agg[AGG_KEY] + agg[AGG_N_DEC] * t
    if K.window > 0:
        ctx_w = agg[AGG_KEY_BELOW] + agg[AGG_N_BELOW] * t + agg[AGG_N_CAPPED] * K.window
    else:
        ctx_w = ctx_g
    return ctx_g, ctx_w


# ---------------------------------------------------------------------------------------------
# completion bookkeeping and statistics


@kernel(**_HELPER)
def _finish_request(R, E, prog, run, r, now, used, done, released, batch_left):
    """Request r produced its last token at `now`: a closed loop releases the next request; outside
    static batches its KV is freed and it leaves the running list. Returns (used, done, released,
    batch_left)."""
    n = R.arrival.shape[0]
    prog.finish[r] = now
    done += 1
    if E.closed_loop and released < n:
        R.arrival[released] = now
        released += 1
    if E.sched != 0:
        used -= prog.alloc[r]
        _unlink(run, r)
    else:
        batch_left -= 1
    return used, done, released, batch_left


@kernel(**_HELPER)
def _finish_prompts(R, E, prog, run, prefill, to_dec, now, used, done, released, batch_left):
    """Prompt chunks that ran: a prompt whose prefill completed samples its token (its first, the
    first time), leaves the prefill list and finishes or decodes from the next step on (queued in
    to_dec). Returns (used, done, released, batch_left, queued decoders)."""
    n_to_dec = 0
    r = prefill.ends[HEAD]
    while r >= 0:
        r_next = prefill.nx[r]
        q = prog.pq[r]
        if q > 0:
            prog.pq[r] = 0
            prog.pref[r] += q
            if prog.pref[r] >= prog.tgt[r]:
                prog.gen[r] += 1
                if prog.first[r] == np.inf:
                    prog.first[r] = now
                _unlink(prefill, r)
                if prog.gen[r] >= R.out_steps[r]:
                    used, done, released, batch_left = _finish_request(R, E, prog, run, r, now, used, done, released,
                                                                       batch_left)
                else:  # decodes from the next step on (its last step is later than this one)
                    to_dec[n_to_dec] = r
                    n_to_dec += 1
        r = r_next
    return used, done, released, batch_left, n_to_dec


@kernel(**_HELPER)
def _complete_decoders(R, E, K, prog, D, ring, run, fheap, cal, now, used, done, released, batch_left, t1, grow):
    """Decoders whose last decode step is t1 or earlier finish at `now` (counted blocks: the
    calendar's bucket of t1, every earlier step's bucket having been read at its step; else the
    completion heap, stale entries skipped). Returns (used, done, released, batch_left)."""
    if ring.counted:
        b = t1 & (FINISH_BUCKETS - 1)
        prev = -1
        r = cal.head[b]
        while r >= 0:
            r_next = cal.nxt[r]
            if _last_decode_step(R, D, r) <= t1:
                if prev < 0:
                    cal.head[b] = r_next
                else:
                    cal.nxt[prev] = r_next
                used, done, released, batch_left = _complete_decoder(R, E, K, prog, D, ring, run, r, now, used, done,
                                                                     released, batch_left, t1, grow)
            else:  # a later round's
                prev = r
            r = r_next
        return used, done, released, batch_left
    fk, fv = fheap.keys, fheap.vals
    while fheap.size[0] > 0 and fk[0] <= t1:
        r = fv[0]
        kk = fk[0]
        fheap.size[0] = _heap_pop(fk, fv, fheap.size[0])
        if not (D.dec[r] and D.tfin[r] == kk):
            continue
        used, done, released, batch_left = _complete_decoder(R, E, K, prog, D, ring, run, r, now, used, done, released,
                                                             batch_left, t1, grow)
    return used, done, released, batch_left


@kernel(**_HELPER)
def _complete_decoder(R, E, K, prog, D, ring, run, r, now, used, done, released, batch_left, t1, grow):
    """Decoder r ran its last decode step (t1 - 1 the last step's index) and finishes at `now`.
    Returns (used, done, released, batch_left)."""
    if grow and ring.counted:  # its blocks after the last step ran (t1 - 1), for _finish_request
        prog.alloc[r] = _decoder_alloc(R, K, prog, D, ring, r, t1 - 1)
    _leave_decoding(K, D, ring, r, grow)
    prog.gen[r] = R.out_steps[r]
    return _finish_request(R, E, prog, run, r, now, used, done, released, batch_left)


@kernel(**_HELPER)
def _release_static_batch(prog, run, batch, nbatch, used):
    """A static batch whose members all finished frees their KV and its slots. Returns used."""
    for j in range(nbatch):
        used -= prog.alloc[batch[j]]
    run.ends[HEAD] = -1
    run.ends[TAIL] = -1
    run.ends[SIZE] = 0
    return used


@kernel(**_HELPER)
def _record_trace(tr_t, tr_b, steps, now, used, ntr, stride, next_trace):
    """KV memory over time: a point at every `stride`-th step (kernels.trace_append halves the
    trace and doubles the stride when full). Returns (ntr, stride, next_trace)."""
    if steps == next_trace:
        ntr, stride = trace_append(tr_t, tr_b, ntr, stride, now, used)
        next_trace = (steps // stride + 1) * stride
    return ntr, stride, next_trace


# ---------------------------------------------------------------------------------------------
# the loop


@kernel(**_LOOP)
def _run_events(R, E, K, coef, tables, S, step_limit):
    """The event-driven loop (module docstring) over the state S (EventState) `_simulate_events`
    allocates, stopped after `step_limit` engine steps (a trial run interpreted: jit.py). Returns
    (engine steps, preemptions, trace points, engine-step seconds, their prefill share:
    kernels.prefill_seconds_of_step)."""
    prog, D, run, prefill, ring, fheap, wheap, cal, batch, to_dec, preempted, tr_t, tr_b = S
    n = R.arrival.shape[0]
    lin_t, logit_t, draft_t, graph_t = tables
    sched = E.sched
    grow = sched != 0 and not E.no_evict  # KV blocks allocated as the sequence grows (may preempt)
    nbatch = 0
    batch_left = 0
    n_dec_last = 0  # decoders counted when the last step advanced (chunked budget)
    n_to_dec = 0  # requests that start decoding at the next step (prompts done), entered at its top
    npre = 0
    next_wait = 0
    released = 0
    for i in range(n):
        if R.arrival[i] < np.inf:
            released = i + 1
    used = 0.0
    now = 0.0
    done = 0
    steps = 0
    preemptions = 0
    busy = 0.0  # engine-step seconds and the prefill phase's share (kernels.prefill_seconds_of_step)
    pf_busy = 0.0
    ntr = 0
    stride = 1
    next_trace = 1  # the next step that is a multiple of `stride` (the reference's steps % stride == 0)
    td = 0  # decode steps so far (= steps except under prefill-first, where prefill steps stall decodes)
    while done < n and steps < step_limit:
        t = td
        # ---- admission (the reference's rules; appended to the running and prefill lists) ------
        admit_from = run.ends[TAIL]
        if sched == 0:
            if batch_left == 0 and next_wait < n:
                now, used, next_wait, nbatch = _admit_static_batch(R, E, K, prog, run, batch, now, used, next_wait,
                                                                   released)
                batch_left = nbatch
        else:
            used, next_wait, npre = _admit_continuous(R, E, K, prog, run, preempted, now, used, next_wait, npre)
        n_to_dec = _route_admitted(R, prog, run, prefill, to_dec, n_to_dec, admit_from)
        _enter_decoding(R, K, prog, D, ring, fheap, wheap, cal, to_dec, n_to_dec, t, grow)
        n_to_dec = 0
        if run.ends[SIZE] == 0:
            if next_wait < n and R.arrival[next_wait] < np.inf:
                now = max(now, R.arrival[next_wait])
                continue
            break  # nothing can ever arrive (closed loop exhausted)
        # ---- scheduling the step ---------------------------------------------------------------
        _cross_window(D, wheap, t)
        acc = StepBatch(0, 0, 0, E.max_tokens - (n_dec_last if sched == 2 else 0), 0.0, 0.0, 0.0)
        if sched == 3:  # prefill-first: prompt chunks only; the decoders run only if no chunk could
            acc, used = _prefill_first_chunks(R, K, prog, prefill, acc, used, grow)
        dec_run = acc.pf_tok == 0 or sched != 3  # the decoders run this step
        if not (grow and dec_run) or _step_fits(R, E, K, prog, D, ring, prefill, acc, used, t):
            if grow and dec_run:
                used = _grow_due_blocks(R, K, prog, D, ring, used, t)
            acc, used = _take_prompt_chunks(R, E, K, prog, prefill, acc, used, grow)
        else:
            acc, used, npre, preemptions = _walk_with_eviction(R, E, K, prog, D, ring, cal, run, prefill, preempted, acc,
                                                               used, npre, preemptions, t)
        n_tok, n_seq = acc.n_tok, acc.n_seq
        ctx_g = 0
        ctx_w = 0
        n_dec = D.agg[AGG_N_DEC]
        if dec_run:
            n_tok += n_dec
            n_seq += n_dec
            ctx_g, ctx_w = _decode_context(K, D, t)
        if n_tok == 0:
            # nothing runnable (memory-blocked prompts): wait for the next arrival or give up
            if next_wait < n and R.arrival[next_wait] > now and R.arrival[next_wait] < np.inf:
                now = R.arrival[next_wait]
                continue
            break
        # ---- the step's cost (the reference's: kernels.step_seconds; no draft model on this loop) --------
        linear_s = table_lookup(lin_t, graph_tokens_of_step(graph_t, n_tok, acc.pf_tok))
        logits_s = table_lookup(logit_t, graph_tokens_of_step(graph_t, n_seq, acc.pf_tok))
        dt = step_seconds(coef, linear_s, logits_s, 0.0, ctx_g, ctx_w, acc.pairs_g, acc.pairs_w, acc.pf_kv)
        now += dt
        steps += 1
        busy += dt
        pf_busy += prefill_seconds_of_step(coef, dt, 0.0, ctx_g, ctx_w, acc.pairs_g, acc.pairs_w, acc.pf_kv, acc.pf_tok,
                                           n_tok)
        if dec_run:
            td += 1
        # ---- completion bookkeeping ---------------------------------------------------------------
        used, done, released, batch_left, n_to_dec = _finish_prompts(R, E, prog, run, prefill, to_dec, now, used,
                                                                     done, released, batch_left)
        used, done, released, batch_left = _complete_decoders(R, E, K, prog, D, ring, run, fheap, cal, now, used, done,
                                                              released, batch_left, td, grow)
        n_dec_last = D.agg[AGG_N_DEC] + n_to_dec
        if sched == 0 and batch_left == 0:
            used = _release_static_batch(prog, run, batch, nbatch, used)
            nbatch = 0
            n_dec_last = 0
        # ---- statistics ------------------------------------------------------------------------------
        ntr, stride, next_trace = _record_trace(tr_t, tr_b, steps, now, used, ntr, stride, next_trace)
    return steps, preemptions, ntr, busy, pf_busy


@kernel(cache=True, error_model="numpy")
def counts_blocks(E, K):
    """Whether the loop counts KV blocks per phase instead of tracking each decoder's (module
    docstring): blocks grow as sequences do, no layer has a window, and every sum of KV bytes is an
    exact integer (bytes per token integral; budget and block bytes far below 2^53)."""
    return (E.sched != 0 and not E.no_evict and K.w_bytes == 0.0 and K.g_bytes == np.floor(K.g_bytes)
            and K.budget < 2.0**50 and K.g_bytes * K.block < 2.0**40)


#: `_simulate_events`'s step limit when it runs to the end: more engine steps than a run can take
NO_STEP_LIMIT = 2**62


@kernel(cache=True, error_model="numpy")
def _event_state(R, E, K, count_blocks):
    """The loop's state (EventState) for requests R under engine E and KV layout K, as
    `_simulate_events` describes (`count_blocks`)."""
    n = R.arrival.shape[0]
    if n >= 2**31:
        raise ValueError("the event loop indexes requests in int32: at most 2^31 - 1 requests")
    slots = max(1, min(E.max_seqs, n))
    prog = Progress(R.cached.copy(), R.in_len.copy(), np.zeros(n, np.int64), np.zeros(n), np.zeros(n, np.int64),
                    np.zeros(n, np.int64), np.full(n, np.inf), np.full(n, np.inf))
    grow = E.sched != 0 and not E.no_evict
    counted = count_blocks and counts_blocks(E, K)
    tracked = grow and not counted
    # per-request arrays only where they are read (each is paged in when first written): window
    # state with a window, block steps when blocks are tracked (counted: due-list sized)
    n_win = n if K.window > 0 else 1
    n_x = n if tracked else slots + 1
    D = Decoding(np.zeros(n, np.int64), np.zeros(n, np.bool_), np.zeros(n_win, np.bool_),
                 np.full(1 if counted else n, -1, np.int64),
                 np.full(n_win, -1, np.int64), np.full(n if tracked else 1, -1, np.int64), np.zeros(n_x, np.int64),
                 np.zeros(n_x), np.zeros(5, np.int64))
    # request links, ring phases and calendar links in int32 (values below n < 2^31): each
    # per-request array's pages cost their first-touch faults (~2 us a 4 KiB page on the 2-core
    # machine), so a 200,000-request run's state is 4.8 MB and ~1,200 faults smaller than in int64
    run = LinkedList(np.full(n, -1, np.int32), np.full(n, -1, np.int32), np.array([-1, -1, 0], np.int64))
    prefill = LinkedList(np.full(n, -1, np.int32), np.full(n, -1, np.int32), np.array([-1, -1, 0], np.int64))
    n_buckets = K.block if grow else 1
    ring = BlockRing(np.empty((n_buckets if tracked else 1, min(E.max_seqs, n) + 1 if tracked else 1), np.int64),
                     np.zeros(n_buckets, np.int64), np.full(n if grow else 1, -1, np.int32), np.zeros(n if tracked else 1, np.int64),
                     counted, np.empty(slots + 1, np.int64), np.zeros(1, np.int64))
    hcap = 2 * min(E.max_seqs, n) + 64
    fheap = Heap(np.empty(hcap, np.int64), np.empty(hcap, np.int64), np.zeros(1, np.int64))
    wheap = Heap(np.empty(hcap, np.int64), np.empty(hcap, np.int64), np.zeros(1, np.int64))
    batch = np.empty(slots, np.int64)  # static batches: members, released together
    to_dec = np.empty(slots, np.int64)
    preempted = np.empty(n, np.int64)
    tr_t = np.empty(TRACE_POINTS)
    tr_b = np.empty(TRACE_POINTS)
    # completion calendar (counted blocks): bucket heads; the links are written before they are read
    cal = Calendar(np.full(FINISH_BUCKETS if counted else 1, -1, np.int32), np.empty(n if counted else 1, np.int32))
    return EventState(prog, D, run, prefill, ring, fheap, wheap, cal, batch, to_dec, preempted, tr_t, tr_b)


@kernel(cache=True, error_model="numpy")
def _simulate_events(R, E, K, coef, tables, count_blocks=True, step_limit=NO_STEP_LIMIT):
    """Run the event-driven loop on requests R (Requests; R.arrival is written by a closed loop)
    under engine E (Engine) and KV layout K (KvLayout), steps costed by kernels.step_seconds with
    coef / tables (StepCoefficients, StepTables). Returns (first-token times, finish times,
    arrivals, engine steps, preemptions, trace times, trace KV bytes, engine-step seconds, their
    prefill share): the reference's outputs. `count_blocks` False: track every decoder's blocks
    even where `counts_blocks` allows counting them (the tests compare the two). `step_limit`: stop
    after that many engine steps (the run is then unfinished; jit.py's trial runs)."""
    state = _event_state(R, E, K, count_blocks)
    steps, preemptions, ntr, busy, pf_busy = _run_events(R, E, K, coef, tables, state, step_limit)
    return (state.prog.first, state.prog.finish, R.arrival, steps, preemptions, state.trace_t[:ntr].copy(),
            state.trace_b[:ntr].copy(), busy, pf_busy)
