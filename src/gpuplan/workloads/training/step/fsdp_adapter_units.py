"""FSDP1 with each adapter wrapped as an FSDP unit of its own: every parameter all-gather runs in
series with the compute instead of behind it.

Where it happens. Hugging Face stacks shard a PEFT model with torch FSDP1
(`FullyShardedDataParallel`) under PEFT's wrapping policy (`peft.utils.other.fsdp_auto_wrap_policy`,
used by accelerate and the HF Trainer; Answer.AI's fsdp_qlora `train.py` `get_wrapping_policy`
copies it from llama-recipes): `_or_policy` of the transformer block class and a `lambda_policy_fn`
that wraps every leaf module with a trainable weight, i.e. each LoRA `lora_A` and `lora_B` Linear,
as a unit of its own (FSDP1 with `use_orig_params=False` requires one `requires_grad` per
FlatParameter, so the trainable adapters cannot share the frozen block's). A block with p adapted
projections is 1 + 2 p units, the adapters' units nested inside the block's.

Why the gathers stop overlapping (torch 2.1 .. 2.5 `torch/distributed/fsdp/_runtime_utils.py`,
`_limiter_utils.py`; FSDP1's `limit_all_gathers` is on by default and fsdp_qlora sets it):
- Forward: before each unit's all-gather `_unshard` takes `_free_event_queue.dequeue_if_needed()`
  and blocks the CPU on it (`event.synchronize()`, the "rate_limiter"); the queue holds the free
  events `_reshard` records after each unit's forward, `_max_num_inflight_all_gathers = 2`. Units
  reshard in program order, so when the CPU reaches block i+1's all-gather the event it waits on is
  that of the unit resharded two before: an adapter of block i's last projection (its down
  projection's lora_A), recorded after nearly all of block i's forward. Block i+1's gather is issued
  only once block i's compute is done: forward = sum over blocks of (gather + compute).
- Backward: block i's pre-backward hook prefetches block i-1's parameters (BACKWARD_PRE, the
  default) before block i's gradients run; the recomputed forward (activation checkpointing) and the
  backward of block i's adapters then all-gather those adapters, and every collective of the process
  group runs in issue order on its one NCCL stream, so they start only after block i-1's gather:
  block i's compute waits for it. Backward = sum over blocks of (gather + compute).
So per micro-batch both all-gather passes of the sharded parameters add to the step. The adapters'
gradient reduce-scatters, issued in post-backward hooks, still run behind the backward.

Applies (`applies`) to `Framework.TRANSFORMERS` (FSDP1 + PEFT as above) with adapters (LoRA / QLoRA)
and ZeRO-3 / FSDP FULL_SHARD sharding. Composer / llm-foundry (`Framework.FSDP`) and torchtitan's
FSDP2 wrap adapters otherwise and are not included; FSDP2 (`fully_shard`) has no free-event queue.
"""

from __future__ import annotations

from gpuplan.specs.execution import Framework

#: All-gather passes over the sharded parameters per micro-batch that run in series with compute
#: where `applies`: the forward's and the backward's (module docstring).
SERIAL_GATHER_PASSES = 2.0


def applies(ctx) -> bool:
    """Whether the plan shards a PEFT model with FSDP1 under PEFT's wrapping policy (module docstring):
    `Framework.TRANSFORMERS` with adapters; the ZeRO-3 sharding itself is the caller's branch."""
    return ctx.framework is Framework.TRANSFORMERS and ctx.fine_tuning.adapters


__all__ = ["SERIAL_GATHER_PASSES", "applies"]
