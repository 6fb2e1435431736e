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
- completion: each decoder's last step `out_steps - (generated - t)` sits in a min-heap;
- KV blocks (vLLM-style allocation as the sequence grows): a decoder needs a new block at step
  `tc_r` (first step whose write position passes its allocated capacity); it sits in ring bucket
  `tc_r mod block` and after a crossing its next `tc_r` is at most `block` steps later, so each step
  visits one bucket only;
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
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gpuplan.workloads.inference.kernels import (TRACE_POINTS, blocks_kv_bytes, causal_pairs_upto, paged_kv_bytes,
                                                 graph_tokens_of_step, step_seconds, table_lookup, trace_append)


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True, error_model="numpy")
def _simulate_events(arrival, in_len, out_len, closed_loop, sched, no_evict, max_seqs, max_tokens,
                     budget, block, g_bytes, w_bytes, window, w_blocks_cap, coef, tables, cached, out_steps):
    n = arrival.shape[0]
    lin_t, logit_t, draft_t, graph_t = tables
    grow = sched != 0 and not no_evict
    first = np.full(n, np.inf)
    finish = np.full(n, np.inf)
    pref = cached.copy()  # prompt(+recompute) tokens whose KV exists
    tgt = in_len.copy()  # tokens to prefill before the next token is sampled
    gen = np.zeros(n, np.int64)  # tokens sampled (materialised while not decoding)
    alloc = np.zeros(n)  # KV bytes held
    nblk = np.zeros(n, np.int64)  # KV blocks held (grow mode): they take nblk * block tokens
    key = np.zeros(n, np.int64)  # decoders: context - decode steps
    dec = np.zeros(n, np.bool_)  # decoding
    below = np.zeros(n, np.bool_)  # decoding below the sliding window
    tfin = np.full(n, -1, np.int64)  # decoders: decode-step count after their last step
    twin = np.full(n, -1, np.int64)  # decoders below the window: first step at context >= window
    tc = np.full(n, -1, np.int64)  # decoders (grow): step of the next KV block
    pq = np.zeros(n, np.int64)  # prompt tokens run this step
    x_blocks = np.zeros(n, np.int64)  # decoders due a block this step: blocks and bytes after it
    x_bytes = np.zeros(n)
    # running list (admission order) and prefill sub-list (same order)
    nx = np.full(n, -1, np.int64)
    pv = np.full(n, -1, np.int64)
    head = -1
    tail = -1
    nrun = 0
    pnx = np.full(n, -1, np.int64)
    ppv = np.full(n, -1, np.int64)
    phead = -1
    ptail = -1
    # static batches: members, released together
    batch = np.empty(max(1, min(max_seqs, n)), np.int64)
    nbatch = 0
    batch_left = 0
    # KV-block ring: bucket b holds decoders whose next block step is = b (mod block)
    nb_ring = block if grow else 1
    cap_ring = min(max_seqs, n) + 1
    ring = np.empty((nb_ring, cap_ring), np.int64)
    ring_n = np.zeros(nb_ring, np.int64)
    ring_b = np.full(n, -1, np.int64)
    ring_p = np.zeros(n, np.int64)
    # heaps (lazy deletion; compacted when full)
    hcap = 2 * min(max_seqs, n) + 64
    fk = np.empty(hcap, np.int64)
    fv = np.empty(hcap, np.int64)
    fn = 0
    wk = np.empty(hcap, np.int64)
    wv = np.empty(hcap, np.int64)
    wn = 0
    # decode aggregates
    n_dec = 0
    s_key = 0
    n_below = 0
    s_below = 0
    n_capped = 0
    n_dec_last = 0  # decoders counted when the last step advanced (chunked budget)
    # requests that start decoding at the next step (prompts done), entered at its top
    to_dec = np.empty(max(1, min(max_seqs, n)), np.int64)
    n_to_dec = 0
    preempted = np.empty(n, np.int64)
    npre = 0
    next_wait = 0
    released = 0
    for i in range(n):
        if arrival[i] < np.inf:
            released = i + 1
    used = 0.0
    now = 0.0
    done = 0
    steps = 0
    preemptions = 0
    tr_t = np.empty(TRACE_POINTS)
    tr_b = np.empty(TRACE_POINTS)
    ntr = 0
    stride = 1
    next_trace = 1  # the next step that is a multiple of `stride` (the reference's steps % stride == 0)
    td = 0  # decode steps so far (= steps except under prefill-first, where prefill steps stall decodes)
    while done < n:
        t = td
        # ---- admission (the reference's rules; appended to the running and prefill lists) ------
        admit_from = tail
        if sched == 0:
            if batch_left == 0 and next_wait < n:
                last = next_wait + min(max_seqs, n - next_wait) - 1
                if arrival[last] < np.inf:
                    now = max(now, arrival[last])
                elif next_wait < released:
                    now = max(now, arrival[released - 1])
                nbatch = 0
                while nbatch < max_seqs and next_wait < n and arrival[next_wait] <= now:
                    r = next_wait
                    cost = paged_kv_bytes(in_len[r] + out_len[r] - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                    if nbatch > 0 and used + cost > budget:
                        break
                    used += cost
                    alloc[r] = cost
                    batch[nbatch] = r
                    nbatch += 1
                    batch_left += 1
                    next_wait += 1
                    nx[r] = -1
                    pv[r] = tail
                    if tail >= 0:
                        nx[tail] = r
                    else:
                        head = r
                    tail = r
                    nrun += 1
        else:
            while nrun < max_seqs:
                if npre > 0:
                    r = preempted[npre - 1]
                elif next_wait < n and arrival[next_wait] <= now:
                    r = next_wait
                else:
                    break
                if no_evict:
                    cost = paged_kv_bytes(in_len[r] + out_len[r] - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                else:
                    cost = paged_kv_bytes(tgt[r] - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                if used + cost > budget and nrun > 0:
                    break
                if no_evict:
                    used += cost
                    alloc[r] = cost
                if npre > 0:
                    npre -= 1
                else:
                    next_wait += 1
                nblk[r] = 0
                nx[r] = -1
                pv[r] = tail
                if tail >= 0:
                    nx[tail] = r
                else:
                    head = r
                tail = r
                nrun += 1
        # newly admitted: prompts join the prefill list; a prompt already all in KV decodes at once
        # (after the prompts that finished prefill in the last step)
        r = nx[admit_from] if admit_from >= 0 else head
        while r >= 0:
            if pref[r] < tgt[r]:
                pnx[r] = -1
                ppv[r] = ptail
                if ptail >= 0:
                    pnx[ptail] = r
                else:
                    phead = r
                ptail = r
            elif gen[r] < out_steps[r]:
                to_dec[n_to_dec] = r
                n_to_dec += 1
            r = nx[r]
        # new decoders enter the decoding state at step t: key (context - t), last step on the
        # completion heap, below the window (window heap) or capped at it, next KV-block step in the ring
        for i in range(n_to_dec):
            r = to_dec[i]
            k_r = in_len[r] + gen[r] - t
            key[r] = k_r
            dec[r] = True
            n_dec += 1
            s_key += k_r
            tfin[r] = out_steps[r] - (gen[r] - t)
            if fn == hcap:
                fn = _heap_compact(fk, fv, fn, dec, tfin)
            fn = _heap_push(fk, fv, fn, tfin[r], r)
            if window > 0 and k_r + t < window:
                below[r] = True
                n_below += 1
                s_below += k_r
                twin[r] = window - k_r
                if wn == hcap:
                    wn = _heap_compact(wk, wv, wn, below, twin)
                wn = _heap_push(wk, wv, wn, twin[r], r)
            elif window > 0:
                n_capped += 1
            if grow:
                c_r = nblk[r] * block + cached[r] - k_r
                tc[r] = c_r if c_r > t else t
                b = tc[r] % block
                ring_b[r] = b
                ring_p[r] = ring_n[b]
                ring[b, ring_n[b]] = r
                ring_n[b] += 1
        n_to_dec = 0
        if nrun == 0:
            if next_wait < n and arrival[next_wait] < np.inf:
                now = max(now, arrival[next_wait])
                continue
            break
        # ---- build the step ---------------------------------------------------------------
        budget_tok = max_tokens - (n_dec_last if sched == 2 else 0)
        # decoders reaching the sliding window read `window` tokens from this step on
        while wn > 0 and wk[0] <= t:
            r = wv[0]
            kk = wk[0]
            wn = _heap_pop(wk, wv, wn)
            if below[r] and twin[r] == kk:
                below[r] = False
                twin[r] = -1
                n_below -= 1
                s_below -= key[r]
                n_capped += 1
        n_tok = 0
        n_seq = 0
        pairs_g = 0.0
        pairs_w = 0.0
        pf_kv = 0.0
        pf_tok = 0
        if sched == 3:
            # prefill-first: prompt chunks only, in admission order (a chunk whose KV does not fit
            # is refused); the decoders run only if no chunk could
            r = phead
            while r >= 0:
                pq[r] = 0
                q = min(tgt[r] - pref[r], budget_tok)
                if q > 0:
                    c = pref[r]
                    newb = paged_kv_bytes(c + q - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                    if not grow or used - alloc[r] + newb <= budget:
                        if grow:
                            used += newb - alloc[r]
                            alloc[r] = newb
                            nblk[r] = (c + q - cached[r] + block - 1) // block
                        pq[r] = q
                        budget_tok -= q
                        n_tok += q
                        pf_tok += q
                        pairs_g += causal_pairs_upto(c + q, 0) - causal_pairs_upto(c, 0)
                        pairs_w += causal_pairs_upto(c + q, window) - causal_pairs_upto(c, window)
                        pf_kv += c + q
                        if c + q >= tgt[r]:
                            n_seq += 1
                r = pnx[r]
        dec_run = pf_tok == 0 or sched != 3  # the decoders run this step
        # does everything this step asks for fit in KV memory? (then no refusal, no preemption)
        fits = True
        if grow and dec_run:
            demand = 0.0
            b = t % block
            for i in range(ring_n[b]):
                r = ring[b, i]
                if tc[r] == t:
                    # blocks after this step's write (= paged_kv_bytes's ceil(need / block)); one more
                    # than now except on entry with block 1, so the division is rarely needed
                    need = key[r] + t + 1 - cached[r]
                    nbk = nblk[r] + 1 if (nblk[r] + 1) * block >= need else (need + block - 1) // block
                    newb = blocks_kv_bytes(nbk, block, g_bytes, w_bytes, w_blocks_cap)
                    x_blocks[r] = nbk
                    x_bytes[r] = newb
                    demand += newb - alloc[r]
            bt = budget_tok
            pft = 0
            r = phead if sched != 3 else -1
            while r >= 0:
                rem = tgt[r] - pref[r]
                if sched == 2:
                    q = min(rem, bt)
                else:
                    q = rem if (rem <= bt or pft == 0) else 0
                if q > 0:
                    demand += paged_kv_bytes(pref[r] + q - cached[r], block, g_bytes, w_bytes, w_blocks_cap) - alloc[r]
                    bt -= q
                    pft += q
                r = pnx[r]
            fits = used + demand <= budget
        if fits:
            if grow and dec_run:
                b = t % block
                i = 0
                while i < ring_n[b]:
                    r = ring[b, i]
                    if tc[r] != t:
                        i += 1
                        continue
                    need = key[r] + t + 1 - cached[r]
                    newb = x_bytes[r]
                    used += newb - alloc[r]
                    alloc[r] = newb
                    nblk[r] = x_blocks[r]
                    ahead = nblk[r] * block - need + 1  # steps to the next block: 1..block
                    tc[r] = t + ahead
                    nbk = b + ahead
                    if nbk >= block:
                        nbk -= block
                    if nbk != b:  # move to its new bucket (swap-remove here)
                        last_r = ring[b, ring_n[b] - 1]
                        ring[b, i] = last_r
                        ring_p[last_r] = i
                        ring_n[b] -= 1
                        ring_b[r] = nbk
                        ring_p[r] = ring_n[nbk]
                        ring[nbk, ring_n[nbk]] = r
                        ring_n[nbk] += 1
                    else:
                        i += 1
            r = phead if sched != 3 else -1
            while r >= 0:
                pq[r] = 0
                rem = tgt[r] - pref[r]
                if sched == 2:
                    q = min(rem, budget_tok)
                elif sched == 1:
                    q = rem if (rem <= budget_tok or pf_tok == 0) else 0
                else:
                    q = rem
                if q > 0:
                    c = pref[r]
                    if grow:
                        newb = paged_kv_bytes(c + q - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                        used += newb - alloc[r]
                        alloc[r] = newb
                        nblk[r] = (c + q - cached[r] + block - 1) // block
                    pq[r] = q
                    budget_tok -= q
                    n_tok += q
                    pf_tok += q
                    pairs_g += causal_pairs_upto(c + q, 0) - causal_pairs_upto(c, 0)
                    pairs_w += causal_pairs_upto(c + q, window) - causal_pairs_upto(c, window)
                    pf_kv += c + q
                    if c + q >= tgt[r]:
                        n_seq += 1
                r = pnx[r]
        else:
            # memory may run out: the reference's walk in admission order (refuse prompt chunks,
            # preempt the latest admitted to give a decoder its block)
            r = head
            while r >= 0:
                if pref[r] < tgt[r]:
                    if sched == 3:  # prefill-first: no chunk could run, the decoders do
                        r = nx[r]
                        continue
                    pq[r] = 0
                    rem = tgt[r] - pref[r]
                    if sched == 2:
                        q = min(rem, budget_tok)
                    else:
                        q = rem if (rem <= budget_tok or pf_tok == 0) else 0
                    if q > 0:
                        c = pref[r]
                        newb = paged_kv_bytes(c + q - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                        if used - alloc[r] + newb <= budget:
                            used += newb - alloc[r]
                            alloc[r] = newb
                            nblk[r] = (c + q - cached[r] + block - 1) // block
                            pq[r] = q
                            budget_tok -= q
                            n_tok += q
                            pf_tok += q
                            pairs_g += causal_pairs_upto(c + q, 0) - causal_pairs_upto(c, 0)
                            pairs_w += causal_pairs_upto(c + q, window) - causal_pairs_upto(c, window)
                            pf_kv += c + q
                            if c + q >= tgt[r]:
                                n_seq += 1
                elif dec[r]:
                    cross = tc[r] == t
                    need = key[r] + t + 1 - cached[r]
                    newb = paged_kv_bytes(need, block, g_bytes, w_bytes, w_blocks_cap) if cross else alloc[r]
                    while used - alloc[r] + newb > budget and tail != r:
                        v = tail  # preempt the most recently admitted (recompute later)
                        used -= alloc[v]
                        alloc[v] = 0.0
                        tail = pv[v]
                        nx[tail] = -1
                        nrun -= 1
                        if dec[v]:
                            gen[v] = key[v] + t - in_len[v]
                            dec[v] = False
                            n_dec -= 1
                            s_key -= key[v]
                            if window > 0:
                                if below[v]:
                                    below[v] = False
                                    n_below -= 1
                                    s_below -= key[v]
                                else:
                                    n_capped -= 1
                            bv = ring_b[v]
                            last_r = ring[bv, ring_n[bv] - 1]
                            ring[bv, ring_p[v]] = last_r
                            ring_p[last_r] = ring_p[v]
                            ring_n[bv] -= 1
                            ring_b[v] = -1
                        else:  # a prompt: leaves the prefill list
                            if ppv[v] >= 0:
                                pnx[ppv[v]] = pnx[v]
                            else:
                                phead = pnx[v]
                            if pnx[v] >= 0:
                                ppv[pnx[v]] = ppv[v]
                            else:
                                ptail = ppv[v]
                            if pq[v] > 0:  # cannot happen (prompts after r are not yet visited)
                                pq[v] = 0
                        tgt[v] = in_len[v] + gen[v]
                        pref[v] = cached[v]
                        preempted[npre] = v
                        npre += 1
                        preemptions += 1
                    if cross:
                        used += newb - alloc[r]
                        alloc[r] = newb
                        nblk[r] = (need + block - 1) // block
                        tc[r] = t + nblk[r] * block - need + 1
                        b = ring_b[r]
                        nbk = tc[r] % block
                        if nbk != b:
                            last_r = ring[b, ring_n[b] - 1]
                            ring[b, ring_p[r]] = last_r
                            ring_p[last_r] = ring_p[r]
                            ring_n[b] -= 1
                            ring_b[r] = nbk
                            ring_p[r] = ring_n[nbk]
                            ring[nbk, ring_n[nbk]] = r
                            ring_n[nbk] += 1
                r = nx[r]
        ctx_g = 0
        ctx_w = 0
        if dec_run:
            n_tok += n_dec
            n_seq += n_dec
            ctx_g = s_key + n_dec * t
            if window > 0:
                ctx_w = s_below + n_below * t + n_capped * window
            else:
                ctx_w = ctx_g
        if n_tok == 0:
            if next_wait < n and arrival[next_wait] > now and arrival[next_wait] < np.inf:
                now = arrival[next_wait]
                continue
            break
        # ---- step time (the reference's: kernels.step_seconds; no draft model on this loop) ------------
        linear_s = table_lookup(lin_t, graph_tokens_of_step(graph_t, n_tok, pf_tok))
        logits_s = table_lookup(logit_t, graph_tokens_of_step(graph_t, n_seq, pf_tok))
        dt = step_seconds(coef, linear_s, logits_s, 0.0, ctx_g, ctx_w, pairs_g, pairs_w, pf_kv)
        now += dt
        steps += 1
        if dec_run:
            td += 1
        t1 = td
        # ---- advance: prompts that ran; decoders that finish ----------------------------------
        r = phead
        while r >= 0:
            r_next = pnx[r]
            q = pq[r]
            if q > 0:
                pq[r] = 0
                pref[r] += q
                if pref[r] >= tgt[r]:
                    gen[r] += 1
                    if first[r] == np.inf:
                        first[r] = now
                    if ppv[r] >= 0:
                        pnx[ppv[r]] = pnx[r]
                    else:
                        phead = pnx[r]
                    if pnx[r] >= 0:
                        ppv[pnx[r]] = ppv[r]
                    else:
                        ptail = ppv[r]
                    if gen[r] >= out_steps[r]:
                        finish[r] = now
                        done += 1
                        if closed_loop and released < n:
                            arrival[released] = now
                            released += 1
                        if sched != 0:
                            used -= alloc[r]
                            nrun -= 1
                            if pv[r] >= 0:
                                nx[pv[r]] = nx[r]
                            else:
                                head = nx[r]
                            if nx[r] >= 0:
                                pv[nx[r]] = pv[r]
                            else:
                                tail = pv[r]
                        else:
                            batch_left -= 1
                    else:  # decodes from the next step on (its last step is later than t1)
                        to_dec[n_to_dec] = r
                        n_to_dec += 1
            r = r_next
        while fn > 0 and fk[0] <= t1:
            r = fv[0]
            kk = fk[0]
            fn = _heap_pop(fk, fv, fn)
            if not (dec[r] and tfin[r] == kk):
                continue
            dec[r] = False
            n_dec -= 1
            s_key -= key[r]
            if window > 0:
                if below[r]:
                    below[r] = False
                    n_below -= 1
                    s_below -= key[r]
                else:
                    n_capped -= 1
            if grow:
                bv = ring_b[r]
                last_r = ring[bv, ring_n[bv] - 1]
                ring[bv, ring_p[r]] = last_r
                ring_p[last_r] = ring_p[r]
                ring_n[bv] -= 1
                ring_b[r] = -1
            gen[r] = out_steps[r]
            finish[r] = now
            done += 1
            if closed_loop and released < n:
                arrival[released] = now
                released += 1
            if sched != 0:
                used -= alloc[r]
                nrun -= 1
                if pv[r] >= 0:
                    nx[pv[r]] = nx[r]
                else:
                    head = nx[r]
                if nx[r] >= 0:
                    pv[nx[r]] = pv[r]
                else:
                    tail = pv[r]
            else:
                batch_left -= 1
        n_dec_last = n_dec + n_to_dec
        if sched == 0 and batch_left == 0:
            for j in range(nbatch):
                used -= alloc[batch[j]]
            nbatch = 0
            nrun = 0
            head = -1
            tail = -1
            n_dec_last = 0
        if steps == next_trace:
            ntr, stride = trace_append(tr_t, tr_b, ntr, stride, now, used)
            next_trace = (steps // stride + 1) * stride
    return first, finish, arrival, steps, preemptions, tr_t[:ntr].copy(), tr_b[:ntr].copy()
