"""The global batch a plan gets when the user gives none (`default_global_batch`), its cap, and the
note that says so. The plan search, the API's single-plan estimates and the validation rows share
this one rule (plan_search's module docstring explains why the batch suits dp, not the micro-batch)."""

from __future__ import annotations

import numpy as np

#: Default tokens per optimizer step when no global batch is given: 2^22 ~ 4M tokens (GPT-3 175B
#: used 3.2M, Llama 2/3 4M-16M); each plan rounds it to whole micro-batches per rank
#: (`default_global_batch`).
DEFAULT_BATCH_TOKENS = 2**22
#: Largest default batch a plan may have (tokens): 2 x DEFAULT_BATCH_TOKENS = 2^23 ~ 8.4M. The
#: default grows with dp once dp exceeds DEFAULT_BATCH_TOKENS / seq_len (one sequence per rank at
#: least); past twice the default it is no longer "about 4M tokens", and ranking by time per token
#: would then reward the larger batch itself (fewer DP reductions, optimizer steps and pipeline
#: fills per token), not the layout: DeepSeek-V3 on 15,360 GPUs at seq 8192 would pick dp 7,680 and
#: 63M tokens a step over the 4M asked for. Such a dp needs the user's own --global-batch (Llama 3
#: 405B doubled its batch 4M -> 8M -> 16M tokens in stages, Dubey et al. 2024, sec. 3.4.1). A policy
#: bound of the default, not a fitted value.
MAX_DEFAULT_BATCH_TOKENS = 2 * DEFAULT_BATCH_TOKENS


def default_global_batch(seq_len: int, dp, micro_batch):
    """The global batch (sequences) of a plan when none is given: the multiple of micro_batch x dp
    nearest DEFAULT_BATCH_TOKENS / seq_len sequences, at least one micro-batch per data-parallel rank:

        unit = micro_batch x dp
        global_batch = unit x max(1, floor(DEFAULT_BATCH_TOKENS / (seq_len x unit) + 1/2))

    (ties go to the larger batch). Megatron-core requires global_batch % (micro_batch x dp) == 0
    (megatron/core/num_microbatches_calculator.py, ConstantNumMicroBatchesCalculator), and real runs
    state the batch per data-parallel rank, suited to the layout, not one figure for every layout
    (Llama 3 405B: 32 sequences per DP rank x dp 64 on 8,192 GPUs, 16 x dp 128 on 16,384, 16M tokens
    either way; Dubey et al. 2024, Table 4). E.g. seq 4096, dp 384, micro-batch 1: 2^22 / 4096 =
    1024 sequences, 1024 / 384 = 2.67 -> 3 x 384 = 1152.

    `dp` and `micro_batch` may be numpy arrays (broadcast together; the plan search scores a whole
    grid at once): the result is then an integer-valued float array. With plain ints it is an int."""
    unit = np.multiply(micro_batch, dp)
    per_step = np.maximum(1.0, np.floor(DEFAULT_BATCH_TOKENS / (seq_len * unit) + 0.5))
    batch = per_step * unit
    if np.ndim(batch) == 0 and isinstance(dp, (int, np.integer)) and isinstance(micro_batch, (int, np.integer)):
        return int(batch)
    return batch


def default_batch_note(global_batch: int, seq_len: int) -> str:
    """The one-line note that says a plan's global batch was chosen to suit its dp (M = 10^6 tokens)."""
    return (f"global batch {global_batch:,} sequences ({global_batch * seq_len / 1e6:.2f}M tokens): the multiple of "
            f"dp x micro-batch nearest 2^22 = {DEFAULT_BATCH_TOKENS / 1e6:.2f}M tokens (set --global-batch to fix it)")


__all__ = ["DEFAULT_BATCH_TOKENS", "MAX_DEFAULT_BATCH_TOKENS", "default_batch_note", "default_global_batch"]
