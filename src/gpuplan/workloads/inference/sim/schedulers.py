"""Batch schedulers of the serving simulator (what joins each engine step).

- STATIC: a batch of up to `max_batch_seqs` requests is formed when that many have arrived (or no
  more will), prefilled in one step and decoded until its longest member finishes; slots free only
  when the whole batch is done (FasterTransformer / lmdeploy static benchmark).
- CONTINUOUS: in-flight (iteration-level) batching with paged KV (Orca, OSDI'22; vLLM, SOSP'23):
  a request joins at any step when a sequence slot and KV blocks for its prompt are free; whole
  prompts share the step with decoding sequences up to `max_batch_tokens` (TensorRT-LLM in-flight
  batching). When decoding sequences run out of KV blocks, the most recently admitted one is
  preempted and recomputed later (vLLM's recompute preemption).
- CHUNKED: CONTINUOUS with chunked prefill (Sarathi-Serve, OSDI'24; vLLM V1 default): decodes are
  scheduled first, prompts fill the rest of the token budget in chunks.
- PREFILL_FIRST: prefill-prioritised, prefill and decode in separate steps (SGLang's default
  scheduler): whenever a waiting prompt's chunk fits, the step is a prefill batch of prompts only,
  chunked at the token budget (`max_batch_tokens` = SGLang `chunked_prefill_size`), and the running
  decodes stall for that step; otherwise the step decodes every running sequence. SGLang
  python/sglang/srt/managers/scheduler.py `get_next_batch_to_run`: `new_batch =
  self.get_new_batch_prefill()`; `if new_batch is not None: # Run prefill first if possible`, else
  `update_running_batch` (decode); `get_new_batch_prefill` mixes the running decodes into the prefill
  batch only when `is_mixed_chunk`, i.e. server_args.py `enable_mixed_chunk: bool = False`
  (`--enable-mixed-chunk`, off by default); `chunked_prefill_size` defaults to 8192 on 35-160 GB
  GPUs (H100, H200, A100), 2048 below, 16384 above. vLLM V0 without chunked prefill did the same
  (vllm/core/scheduler.py `_schedule_default`: "Don't schedule decodes if prefills are scheduled",
  whole prompts). Simplification: a prompt chunk is refused when its KV does not fit (as in the
  other kinds), not by SGLang's PrefillAdder reserve for the running requests' future tokens.

Admission policy (`no_evict`): False = vLLM's optimistic admission (blocks for the prompt only,
preempt on overflow); True = TensorRT-LLM's default capacity scheduler GUARANTEED_NO_EVICT (a
request joins only if the KV of its whole input + output fits beside everyone else's).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpuplan.errors import InputError
from gpuplan.workloads.inference.cost.memory import DEFAULT_MAX_BATCH_SEQS, DEFAULT_MAX_BATCH_TOKENS


class SchedulerKind(str, Enum):
    STATIC = "static"
    CONTINUOUS = "continuous"
    CHUNKED = "chunked"
    PREFILL_FIRST = "prefill-first"


#: integer codes the compiled simulator loop uses
SCHEDULER_CODE = {SchedulerKind.STATIC: 0, SchedulerKind.CONTINUOUS: 1, SchedulerKind.CHUNKED: 2,
                  SchedulerKind.PREFILL_FIRST: 3}


@dataclass(frozen=True)
class SchedulerConfig:
    kind: SchedulerKind = SchedulerKind.CHUNKED
    max_batch_seqs: int = DEFAULT_MAX_BATCH_SEQS  # sequences per step (vLLM max_num_seqs)
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS  # tokens per step (vLLM max_num_batched_tokens)
    no_evict: bool = False  # reserve input + output KV at admission (TensorRT-LLM GUARANTEED_NO_EVICT)

    def __post_init__(self):
        object.__setattr__(self, "kind", SchedulerKind(self.kind))
        if self.max_batch_seqs < 1:
            raise InputError(f"max_batch_seqs: must be >= 1, got {self.max_batch_seqs}", field="max_batch_seqs")
        if self.max_batch_tokens < 1:
            raise InputError(f"max_batch_tokens: must be >= 1, got {self.max_batch_tokens}", field="max_batch_tokens")
