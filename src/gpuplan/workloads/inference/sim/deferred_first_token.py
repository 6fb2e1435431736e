"""First output token sampled by a decode step: FasterTransformer-derived engines.

Most engines sample a request's first output token from the logits of its last prompt token at the
end of the prefill (context) step. FasterTransformer and lmdeploy's TurboMind before its attention
refactor do not: the context decoder runs the prompt's first L - 1 tokens and produces no token; the
last prompt token goes through the sequence's first decode (self-attention) step, which samples the
first output token (lmdeploy src/turbomind/models/llama/LlamaBatch.cc, `LlamaBatch<T>::ContextDecode`
of TurboMind 2, PR #590, Oct 2023: "subtract input/context len by 1 to skip last input token (will
process with decoder later)"; replaced by one forward over prefill and decode tokens in "Refactor
turbomind attention", PR #1116, merged March 2024). So, for an L-token prompt and n output tokens:

    TTFT = prefill(L - 1 tokens) + one decode step          (instead of prefill(L tokens))
    e2e  = prefill(L - 1) + n decode steps                  (instead of prefill(L) + (n - 1) decode steps)

The same lmdeploy table shows it: a 1-token prompt (no context decode) has a first-token latency of
11 ms, one decode step (TPOT 9-10 ms), and a 128-token prompt 22 ms (lmdeploy docs/en/benchmark/
a100_fp16.md @3e391df, llama2-7b batch 1).

It is simulated as the request (L - 1, n + 1) -- a prefill of L - 1 tokens that emits a token, then n
decode steps -- whose first emitted token is not an output token (`deferred_workload`); the metrics
are then those of the n real tokens (`deferred_result`): the first real token arrives one decode
step after the simulated one, taken as the request's mean time per output token (exact for equal
decode steps; a static batch's first step is its shortest, by the attention of the tokens it has
yet to generate):

    TTFT = TTFT' + TPOT';  TPOT = (e2e - TTFT) / (n - 1) = TPOT';  e2e = e2e'
    output tokens/s = output tokens/s' x sum(n) / sum(n + 1);  total tokens/s and requests/s unchanged
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpuplan.workloads.inference.sim.arrivals import Workload
from gpuplan.workloads.inference.sim.simulator import Percentiles, SimResult


def deferred_workload(workload: Workload) -> Workload:
    """The workload as the simulator runs it when the first output token comes from a decode step:
    each request with a prompt of L > 1 tokens becomes (L - 1, n + 1) (module docstring); a 1-token
    prompt has no context step (its one token runs in the first decode step, which a 1-token prefill
    step costs the same as) and is left as it is."""
    ins = np.asarray(workload.input_len, dtype=np.int64)
    outs = np.asarray(workload.output_len, dtype=np.int64)
    shifted = ins > 1
    return replace(workload, input_len=np.where(shifted, ins - 1, ins), output_len=np.where(shifted, outs + 1, outs))


def deferred_result(res: SimResult, workload: Workload, simulated: Workload) -> SimResult:
    """Metrics of the real output tokens from a simulation of `simulated` = deferred_workload(workload)
    (module docstring): TTFT later by the mean TPOT, output tokens/s scaled by real / simulated output
    tokens; TPOT, e2e, total tokens/s and requests/s as simulated."""
    shift_ms = res.tpot_ms.mean if np.isfinite(res.tpot_ms.mean) else 0.0
    t = res.ttft_ms
    ttft = Percentiles(t.p50 + shift_ms, t.p90 + shift_ms, t.p99 + shift_ms, t.mean + shift_ms)
    real = float(np.sum(workload.output_len))
    sim = float(np.sum(simulated.output_len))
    return replace(res, ttft_ms=ttft, output_tokens_per_s=res.output_tokens_per_s * real / sim if sim > 0 else 0.0)
