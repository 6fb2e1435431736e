"""Discrete-event (iteration-level) serving simulator.

Events are engine steps: at each step the scheduler (schedulers.py) picks the sequences and
tokens that run, the step costs `operators.StepTimeModel` time (tables + a few multiply-adds, no
per-op recomputation), and the clock jumps by that time (or to the next arrival when idle). The loop
is compiled with numba over flat arrays (no per-request Python objects); a process's first short
runs of the event-driven loop go interpreted, the same code and numbers (jit.py). `_simulate` here is the
step-by-step reference (every running sequence visited at every step); `simulate` runs the
event-driven loop of sim/events.py by default, which keeps decode state implicit and does work
only where something happens (a prompt chunk, a KV block, a completion, a window crossing) and
gives the same results (tests/inference/test_simulator_events.py); `event_driven=False` runs this one.

Reported metrics (vLLM benchmark_serving definitions):
- TTFT = first-token time - arrival; TPOT = (finish - first token) / (output_len - 1) per request;
  e2e = finish - arrival; each at p50 / p90 / p99 over requests.
- output_tokens_per_s = all output tokens / (last finish - first arrival); requests_per_s likewise.
- KV memory over time: (time, bytes per GPU) at steps (down-sampled to at most 4096 points).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from gpuplan.workloads.inference.jit import kernel

from gpuplan.errors import Infeasible
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, Workload
from gpuplan.workloads.inference.cost.memory import MemoryPlan
from gpuplan.workloads.inference.cost.operators import StepTimeModel
from gpuplan.workloads.inference.sim.schedulers import SCHEDULER_CODE, SchedulerConfig
from gpuplan.workloads.inference.kernels import (TRACE_POINTS, causal_pairs_upto, paged_kv_bytes, step_seconds,
                                                 graph_tokens_of_step, prefill_seconds_of_step, table_lookup,
                                                 trace_append)
from gpuplan.workloads.inference.sim.events import Engine, KvLayout, Requests, _simulate_events
from gpuplan.workloads.inference.sim.on_lists import simulate_events_on_lists
from gpuplan.workloads.inference.sim.percentiles import linear_percentiles
from gpuplan.workloads.inference import jit

if TYPE_CHECKING:
    from gpuplan.workloads.inference.cost.prefix_cache import PrefixCache
    from gpuplan.workloads.inference.cost.speculative import DraftCost, SpeculativeDecoding

@kernel(cache=True, error_model="numpy")
def _simulate(arrival, in_len, out_len, closed_loop, sched, no_evict, max_seqs, max_tokens,
              budget, block, g_bytes, w_bytes, window, w_blocks_cap, coef, tables, cached, out_steps, spec_e):
    # Per-request state lives in request-indexed arrays while a request waits (never admitted, or
    # preempted); while it runs it lives in slot-indexed arrays (s_*), contiguous in running order,
    # so the per-step passes read memory sequentially. Slots are loaded on admission, written back
    # on preemption and compacted (in order) when sequences finish.
    n = arrival.shape[0]
    lin_t, logit_t, draft_t, graph_t = tables
    spec_q = coef.verify_tokens
    spec_on = spec_q > 1
    grow = sched != 0 and not no_evict  # KV blocks allocated as the sequence grows (may preempt)
    first = np.full(n, np.inf)
    finish = np.full(n, np.inf)
    prefilled = cached.copy()  # prompt(+recompute) tokens whose KV exists (a cached prefix exists from the start)
    target = in_len.copy()  # tokens to prefill before the next token is sampled
    generated = np.zeros(n, np.int64)  # engine iterations that produced tokens (= tokens without speculation)
    alloc = np.zeros(n)  # KV bytes held (private blocks: the cached prefix is the cache's)
    s_r = np.empty(max_seqs, np.int64)  # request of the slot
    s_in = np.empty(max_seqs, np.int64)
    s_out = np.empty(max_seqs, np.int64)
    s_steps = np.empty(max_seqs, np.int64)
    s_cached = np.empty(max_seqs, np.int64)
    s_pref = np.empty(max_seqs, np.int64)
    s_tgt = np.empty(max_seqs, np.int64)
    s_gen = np.empty(max_seqs, np.int64)
    s_alloc = np.empty(max_seqs)
    s_cap = np.empty(max_seqs, np.int64)  # tokens the held blocks can take (s_alloc = paged_kv_bytes(s_cap))
    s_fin = np.zeros(max_seqs, np.bool_)  # finished (static batches keep their slots until all finish)
    s_q = np.zeros(max_seqs, np.int64)  # tokens the slot runs this step
    nrun = 0
    preempted = np.empty(n, np.int64)
    npre = 0
    next_wait = 0  # next never-admitted request (arrival order)
    released = 0
    for i in range(n):
        if arrival[i] < np.inf:
            released = i + 1
    used = 0.0
    now = 0.0
    done = 0
    steps = 0
    preemptions = 0
    busy = 0.0  # engine-step seconds, and the prefill phase's share of them (kernels.prefill_seconds_of_step)
    pf_busy = 0.0
    tr_t = np.empty(TRACE_POINTS)
    tr_b = np.empty(TRACE_POINTS)
    ntr = 0
    stride = 1
    n_dec = 0
    while done < n:
        # ---- admission -------------------------------------------------------------------
        if sched == 0:
            if nrun == 0 and next_wait < n:
                # static: wait until a full batch has arrived (or take what the closed loop released)
                last = next_wait + min(max_seqs, n - next_wait) - 1
                if arrival[last] < np.inf:
                    now = max(now, arrival[last])
                elif next_wait < released:
                    now = max(now, arrival[released - 1])
                while nrun < max_seqs and next_wait < n and arrival[next_wait] <= now:
                    r = next_wait
                    cost = paged_kv_bytes(in_len[r] + out_len[r] - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                    if nrun > 0 and used + cost > budget:
                        break
                    used += cost
                    alloc[r] = cost
                    s_r[nrun] = r
                    s_in[nrun] = in_len[r]
                    s_out[nrun] = out_len[r]
                    s_steps[nrun] = out_steps[r]
                    s_cached[nrun] = cached[r]
                    s_pref[nrun] = prefilled[r]
                    s_tgt[nrun] = target[r]
                    s_gen[nrun] = generated[r]
                    s_alloc[nrun] = cost
                    s_cap[nrun] = 0
                    s_fin[nrun] = False
                    nrun += 1
                    next_wait += 1
        else:
            while nrun < max_seqs:
                if npre > 0:
                    r = preempted[npre - 1]
                elif next_wait < n and arrival[next_wait] <= now:
                    r = next_wait
                else:
                    break
                if no_evict:  # reserve the whole sequence's KV up front (TensorRT-LLM GUARANTEED_NO_EVICT)
                    cost = paged_kv_bytes(in_len[r] + out_len[r] - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                else:
                    cost = paged_kv_bytes(target[r] - cached[r], block, g_bytes, w_bytes, w_blocks_cap)
                if used + cost > budget and nrun > 0:
                    break
                if no_evict:
                    used += cost
                    alloc[r] = cost
                if npre > 0:
                    npre -= 1
                else:
                    next_wait += 1
                s_r[nrun] = r
                s_in[nrun] = in_len[r]
                s_out[nrun] = out_len[r]
                s_steps[nrun] = out_steps[r]
                s_cached[nrun] = cached[r]
                s_pref[nrun] = prefilled[r]
                s_tgt[nrun] = target[r]
                s_gen[nrun] = generated[r]
                s_alloc[nrun] = alloc[r]
                s_cap[nrun] = 0
                s_fin[nrun] = False
                nrun += 1
        if nrun == 0:
            if next_wait < n and arrival[next_wait] < np.inf:
                now = max(now, arrival[next_wait])
                continue
            break  # nothing can ever arrive (closed loop exhausted)
        # ---- build the step ---------------------------------------------------------------
        n_tok = 0
        n_seq = 0
        ctx_g = 0  # integer sums (exact; the float sum of these integers is the same number below 2^53)
        ctx_w = 0
        pairs_g = 0.0
        pairs_w = 0.0
        pf_kv = 0.0
        pf_tok = 0
        n_verify = 0  # decoding sequences this step (after any preemption)
        # n_dec: decoding sequences, counted when the last step advanced (admissions add prefills only)
        budget_tok = max_tokens - (n_dec * spec_q if sched == 2 else 0)
        # grow decode KV; preempt the latest admitted when out of blocks. Prefill-first (sched 3): a
        # first walk runs prompt chunks only (phase 1); the decoders run, in a second walk (phase 2),
        # only when no prompt chunk could
        phase = 1 if sched == 3 else 0
        while True:
            j = 0
            while j < nrun:
                s_q[j] = 0
                if s_pref[j] < s_tgt[j]:
                    if phase != 2:  # (phase 2: prompts wait)
                        rem = s_tgt[j] - s_pref[j]
                        if sched >= 2:
                            q = min(rem, budget_tok)
                        elif sched == 1:
                            q = rem if (rem <= budget_tok or pf_tok == 0) else 0
                        else:
                            q = rem
                        if q > 0:
                            c = s_pref[j]
                            newb = paged_kv_bytes(c + q - s_cached[j], block, g_bytes, w_bytes, w_blocks_cap)
                            if grow and used - s_alloc[j] + newb > budget:
                                q = 0
                            else:
                                if grow:
                                    used += newb - s_alloc[j]
                                    s_alloc[j] = newb
                                    s_cap[j] = (c + q - s_cached[j] + block - 1) // block * block
                                s_q[j] = q
                                budget_tok -= q
                                n_tok += q
                                pf_tok += q
                                pairs_g += causal_pairs_upto(c + q, 0) - causal_pairs_upto(c, 0)
                                pairs_w += causal_pairs_upto(c + q, window) - causal_pairs_upto(c, window)
                                pf_kv += c + q
                                if c + q >= s_tgt[j]:
                                    n_seq += 1  # samples its next token this step
                elif phase != 1 and s_gen[j] < s_steps[j]:
                    if spec_on:  # tokens so far: the prefill's one + spec_e per verify step (capped)
                        ctx = s_in[j] + min(s_out[j], int(1.0 + (s_gen[j] - 1) * spec_e))
                    else:
                        ctx = s_in[j] + s_gen[j]
                    if grow:
                        need = ctx + spec_q - s_cached[j]  # the step writes KV for spec_q positions
                        cross = need > s_cap[j]  # needs another block (else newb == s_alloc: `used` is unchanged)
                        newb = paged_kv_bytes(need, block, g_bytes, w_bytes, w_blocks_cap) if cross else s_alloc[j]
                        while used - s_alloc[j] + newb > budget and nrun - 1 > j:
                            # preempt the most recently admitted sequence (recompute later)
                            v = nrun - 1
                            rv = s_r[v]
                            used -= s_alloc[v]
                            alloc[rv] = 0.0
                            if spec_on:
                                target[rv] = s_in[v] + min(s_out[v], int(1.0 + (s_gen[v] - 1) * spec_e))
                            else:
                                target[rv] = s_in[v] + s_gen[v]
                            prefilled[rv] = s_cached[v]
                            generated[rv] = s_gen[v]
                            preempted[npre] = rv
                            npre += 1
                            nrun -= 1
                            preemptions += 1
                        if cross:
                            used += newb - s_alloc[j]
                            s_alloc[j] = newb
                            s_cap[j] = (need + block - 1) // block * block
                    s_q[j] = 1
                    n_verify += 1
                    n_tok += spec_q
                    n_seq += spec_q
                    ctx_g += ctx
                    ctx_w += ctx if (window <= 0 or ctx < window) else window
                j += 1
            if phase == 1 and pf_tok == 0:
                phase = 2
                continue
            break
        if n_tok == 0:
            # nothing runnable (memory-blocked prompts): wait for the next arrival or give up
            if next_wait < n and arrival[next_wait] > now and arrival[next_wait] < np.inf:
                now = arrival[next_wait]
                continue
            break
        # ---- step time (kernels.step_seconds) ---------------------------------------------------
        linear_s = table_lookup(lin_t, graph_tokens_of_step(graph_t, n_tok, pf_tok))
        logits_s = table_lookup(logit_t, graph_tokens_of_step(graph_t, n_seq, pf_tok))
        draft_s = table_lookup(draft_t, n_verify) if coef.drafting else 0.0
        dt = step_seconds(coef, linear_s, logits_s, draft_s, ctx_g, ctx_w, pairs_g, pairs_w, pf_kv)
        now += dt
        steps += 1
        busy += dt
        pf_busy += prefill_seconds_of_step(coef, dt, draft_s, ctx_g, ctx_w, pairs_g, pairs_w, pf_kv, pf_tok, n_tok)
        # ---- advance sequences; compact the running set (static batches keep their slots) --------
        k = 0
        alldone = True
        n_dec = 0
        for j in range(nrun):
            q = s_q[j]
            if q > 0:
                if s_pref[j] < s_tgt[j]:
                    s_pref[j] += q
                    if s_pref[j] >= s_tgt[j]:
                        s_gen[j] += 1
                        if first[s_r[j]] == np.inf:
                            first[s_r[j]] = now
                else:
                    s_gen[j] += 1
            if s_gen[j] >= s_steps[j] and not s_fin[j]:
                s_fin[j] = True
                finish[s_r[j]] = now
                done += 1
                if closed_loop and released < n:
                    arrival[released] = now
                    released += 1
            if not s_fin[j]:
                alldone = False
                if s_pref[j] >= s_tgt[j]:
                    n_dec += 1
                if sched != 0:
                    if k != j:
                        s_r[k] = s_r[j]
                        s_in[k] = s_in[j]
                        s_out[k] = s_out[j]
                        s_steps[k] = s_steps[j]
                        s_cached[k] = s_cached[j]
                        s_pref[k] = s_pref[j]
                        s_tgt[k] = s_tgt[j]
                        s_gen[k] = s_gen[j]
                        s_alloc[k] = s_alloc[j]
                        s_cap[k] = s_cap[j]
                        s_fin[k] = False
                    k += 1
            elif sched != 0:
                used -= s_alloc[j]
        if sched != 0:
            nrun = k
        elif alldone:
            for j in range(nrun):
                used -= s_alloc[j]
            nrun = 0
            n_dec = 0
        if steps % stride == 0:
            ntr, stride = trace_append(tr_t, tr_b, ntr, stride, now, used)
    return first, finish, arrival, steps, preemptions, tr_t[:ntr].copy(), tr_b[:ntr].copy(), busy, pf_busy


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p90: float
    p99: float
    mean: float


def _pct(x: np.ndarray, scale: float = 1.0) -> Percentiles:
    finite = np.isfinite(x)
    if not finite.all():  # (a boolean index copies the sample even when it keeps every value)
        x = x[finite]
    if x.size == 0:
        return Percentiles(math.nan, math.nan, math.nan, math.nan)
    mean = float(x.mean() * scale)
    p50, p90, p99 = linear_percentiles(x, (50, 90, 99))  # np.percentile's values without numpy.ma's import
    return Percentiles(p50 * scale, p90 * scale, p99 * scale, mean)


@dataclass(frozen=True)
class SimResult:
    """Serving metrics of one simulation (module docstring gives every definition)."""

    requests: int
    completed: int
    duration_s: float
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    mean_in_flight: float  # Little's law: requests_per_s x mean e2e
    steps: int
    preemptions: int
    kv_time_s: np.ndarray
    kv_bytes: np.ndarray
    #: engine-step seconds of the whole run (every step, warm-up included) and the prefill phase's
    #: share of them (kernels.prefill_seconds_of_step); 0 where a loop does not count them
    busy_s: float = 0.0
    prefill_busy_s: float = 0.0

    @property
    def peak_kv_bytes(self) -> float:
        return float(self.kv_bytes.max()) if self.kv_bytes.size else 0.0

    @property
    def prefill_time_fraction(self) -> float | None:
        """prefill_busy_s / busy_s: the share of the replica's engine-step time spent on prefill."""
        return self.prefill_busy_s / self.busy_s if self.busy_s > 0 else None



@dataclass(frozen=True)
class KvBudgetSetup:
    """The KV budget and per-request arrays a simulation starts from (kv_budget_setup)."""

    budget_bytes: float  # KV bytes per GPU left for sequences
    kv_bytes_per_token: float  # per GPU, target (+ draft) model
    out_steps: np.ndarray  # engine steps per request's output (fewer with speculative decoding)
    cached_tokens: np.ndarray  # prompt tokens served from the prefix cache, per request
    spec_tokens_per_step: float  # expected tokens per verify step (1 without speculation)
    spec_verify_tokens: int  # positions verified per step (k + 1; 1 without speculation)
    draft_table: np.ndarray
    draft_ctx_s: float


def kv_budget_setup(steps: StepTimeModel, memory: MemoryPlan, ins: np.ndarray, outs: np.ndarray, speculative,
                    draft, prefix_cache, instance: str) -> KvBudgetSetup:
    """KV budget of one instance (co-located replica or decode instance): memory.kv_budget_bytes less
    the draft model's weights (speculative decoding: its KV per token is added to the target's) and
    less the shared prefix pool held once (prefix caching); raises Infeasible when nothing is left or
    the longest request's KV (target + draft, whole blocks) does not fit. `instance` names the
    instance in the message."""
    budget = float(memory.kv_budget_bytes)
    g_bytes = float(memory.kv_bytes_per_token_per_gpu)
    if speculative is not None:
        if draft is None:
            from gpuplan.workloads.inference.cost.speculative import draft_cost

            draft = draft_cost(steps.dep, speculative)
        budget -= draft.weights_bytes_per_gpu
        g_bytes += draft.kv_bytes_per_token_per_gpu
        out_steps = speculative.iterations(outs)
        spec_e, spec_q = float(speculative.tokens_per_step), int(speculative.tokens + 1)
        draft_table, draft_ctx = np.ascontiguousarray(draft.table, dtype=float), float(draft.ctx_seconds_per_token)
    else:
        out_steps, spec_e, spec_q, draft_table, draft_ctx = outs, 1.0, 1, np.zeros(0), 0.0
    if prefix_cache is not None and prefix_cache.hit_rate > 0:
        cached = prefix_cache.cached_tokens(ins)
        pool = prefix_cache.pool(ins)
        budget -= memory.sequence_kv_bytes(pool) if pool > 0 else 0.0
    else:
        cached = np.zeros(ins.shape[0], np.int64)
    if budget <= 0:
        raise Infeasible(f"no KV memory left on {instance}: the draft model's weights or the prefix cache take "
                         "the whole KV budget")
    longest = int((ins + outs - cached).max())
    biggest = memory.sequence_kv_bytes(float(longest))
    if speculative is not None:  # the draft's KV of the same tokens
        biggest += math.ceil(longest / memory.block_size) * memory.block_size * draft.kv_bytes_per_token_per_gpu
    if biggest > budget:
        raise Infeasible(f"a request of {int((ins + outs).max())} tokens needs {biggest / 2**30:.2f} GiB of KV per "
                         f"GPU; {instance} has {budget / 2**30:.2f} GiB for the KV cache")
    return KvBudgetSetup(budget, g_bytes, out_steps, cached, spec_e, spec_q, draft_table, draft_ctx)


def _event_loop(requests: Requests, engine: Engine, layout: KvLayout, coef, tables) -> tuple:
    """`_simulate_events` interpreted while this process's budget of interpreted steps lasts, else
    compiled (jit.py): a trial run interpreted on Python lists (sim/on_lists.py) and a copy of the
    arrivals (a closed loop writes them) stopped at the budget; unfinished there, the kernels are
    compiled and the run starts over. Numpy scalars warn nowhere (numba's `error_model="numpy"`
    does not); an operation Python refuses where numba returns inf, NaN or 0 (a division by zero)
    leaves the run to the compiled loop, as does another thread compiling the kernels meanwhile
    (they then refuse lists)."""
    limit = jit.interpreted_steps_left()
    if limit > 0:
        trial = requests._replace(arrival=requests.arrival.copy())
        try:
            with np.errstate(all="ignore"):
                out = simulate_events_on_lists(trial, engine, layout, coef, tables, limit)
        except Exception as exc:  # noqa: BLE001 - see the docstring; anything else is raised again
            if not (isinstance(exc, ArithmeticError) or jit.compiled()):
                raise
            out = None
        jit.spend_interpreted_steps(limit if out is None else out[3])
        if out is not None and out[3] < limit:
            return out
    jit.compile_kernels()
    return _simulate_events(requests, engine, layout, coef, tables)


def simulate(steps: StepTimeModel, memory: MemoryPlan, workload: Workload, scheduler: SchedulerConfig,
             warmup_requests: int = 0, cuda_graph_batch_sizes: "tuple[int, ...]" = (), *,
             speculative: "SpeculativeDecoding | None" = None, draft: "DraftCost | None" = None,
             prefix_cache: "PrefixCache | None" = None, event_driven: bool = True) -> SimResult:
    """Run the serving simulation of `workload` on one replica; every request must eventually fit.
    `warmup_requests`: the first requests (in arrival order) left out of the latency percentiles
    (TTFT, TPOT, e2e), e.g. a closed loop's initial burst, which load generators that report steady
    state do not count (throughput always counts every request).
    `cuda_graph_batch_sizes`: batch sizes the engine captured as CUDA graphs with padding on
    (TensorRT-LLM `cuda_graph_config: enable_padding`): a generation-only step of n sequences runs
    the GEMMs, elementwise kernels and LM head of the smallest captured size >= n (the padded rows are
    computed, they hold no KV, so attention is unchanged); above the largest size, n itself.
    `speculative`: speculative decoding (speculative.py; `draft`: its speculative.draft_cost, built
    from steps.dep when not given);
    `prefix_cache`: prefix caching at a hit rate (prefix_cache.py). Both off: the plain simulation.
    `event_driven`: run the event-driven loop (sim/events.py: work per step proportional to
    what happens in it; the same results), else the step-by-step reference loop. Speculative
    decoding always runs on the reference loop."""
    n = workload.arrival_s.shape[0]
    ins = np.ascontiguousarray(workload.input_len, dtype=np.int64)  # read only (the loops copy what they update)
    outs = np.ascontiguousarray(workload.output_len, dtype=np.int64)
    kv = kv_budget_setup(steps, memory, ins, outs, speculative, draft, prefix_cache, "the replica")
    budget, g_bytes, out_steps, cached = kv.budget_bytes, kv.kv_bytes_per_token, kv.out_steps, kv.cached_tokens
    spec_e, spec_q, draft_table, draft_ctx = kv.spec_tokens_per_step, kv.spec_verify_tokens, kv.draft_table, kv.draft_ctx_s
    coef = steps.step_coefficients(spec_q, draft_ctx if draft_table.shape[0] > 0 else None)
    tables = steps.step_tables(cuda_graph_batch_sizes, draft_table)
    # window layers hold fewer tokens; when a model has no global layer, the simulator still tracks
    # context in `ctx_g` but the global coefficient is zero.
    closed_loop = workload.kind == ArrivalKind.CLOSED_LOOP
    # a closed loop writes its releases into the arrivals (a copy); an open loop only reads them (a
    # read-only array is copied all the same: numba would compile the loop again for its type)
    arrival = np.ascontiguousarray(workload.arrival_s, dtype=float)
    if closed_loop or not arrival.flags.writeable:
        arrival = arrival.copy()
    requests = Requests(arrival, ins, outs, cached, np.ascontiguousarray(out_steps, dtype=np.int64))
    engine = Engine(SCHEDULER_CODE[scheduler.kind], bool(scheduler.no_evict), int(scheduler.max_batch_seqs),
                    int(scheduler.max_batch_tokens), closed_loop)
    layout = KvLayout(budget, int(memory.block_size), g_bytes, float(memory.window_kv_bytes_per_token_per_gpu),
                      int(steps.window), int(memory.window_blocks_cap))
    if event_driven and speculative is None:
        first, finish, arrival, nsteps, npre, tr_t, tr_b, busy, pf_busy = _event_loop(requests, engine, layout, coef,
                                                                                       tables)
    else:
        jit.compile_kernels()
        first, finish, arrival, nsteps, npre, tr_t, tr_b, busy, pf_busy = _simulate(
            requests.arrival, ins, outs, engine.closed_loop, engine.sched, engine.no_evict, engine.max_seqs,
            engine.max_tokens, *layout, coef, tables, cached, requests.out_steps, spec_e)
    ok = np.isfinite(finish)
    n_done = int(np.count_nonzero(ok))
    warm = 0 < warmup_requests < n_done  # the first requests left out of the latency percentiles
    # every request finished (the usual case): the completed ones are every one, and the latency
    # sample the requests after the warm-up, as views; a boolean index would copy each array (~0.1-0.2
    # ms per 200,000 values) for the same values in the same order
    every = n_done == n

    def completed(a: np.ndarray) -> np.ndarray:
        return a if every else a[ok]

    def latency_sample(a: np.ndarray) -> np.ndarray:
        if every:
            return a[warmup_requests:] if warm else a
        lat = ok.copy()
        if warm:
            lat[:warmup_requests] = False
        return a[lat]

    start = float(completed(arrival).min()) if n_done else 0.0
    end = float(completed(finish).max()) if n_done else 0.0
    duration = max(end - start, 1e-12)
    out_tokens = float(completed(outs).sum())
    in_tokens = float(completed(ins).sum())
    e2e = finish - arrival
    ttft = first - arrival
    tpot = np.where(outs > 1, (finish - first) / np.maximum(outs - 1, 1), np.nan)
    rps = ok.sum() / duration
    return SimResult(
        requests=n, completed=n_done, duration_s=duration,
        ttft_ms=_pct(latency_sample(ttft), 1e3), tpot_ms=_pct(latency_sample(tpot), 1e3),
        e2e_ms=_pct(latency_sample(e2e), 1e3),
        output_tokens_per_s=out_tokens / duration, total_tokens_per_s=(out_tokens + in_tokens) / duration,
        requests_per_s=float(rps), mean_in_flight=float(rps * np.nanmean(completed(e2e))) if n_done else 0.0,
        steps=int(nsteps), preemptions=int(npre), kv_time_s=tr_t, kv_bytes=tr_b,
        busy_s=float(busy), prefill_busy_s=float(pf_busy),
    )

