"""How many times the output head runs per micro-batch: once, or once per chunk of a chunked loss.

A chunked loss runs the head on pieces of the final hidden states: torchtune's
`CEWithChunkedOutputLoss(num_output_chunks=8)` with the model's `output` applied to
`h.chunk(num_output_chunks, dim=1)` (a fixed count: `CHUNKED_LOSS_CHUNKS`), LitGPT's
`[self.lm_head(x_i) for x_i in x.split(lm_head_chunk_size, dim=1)]` with `lm_head_chunk_size=128`
(lit_gpt/lora.py@8641822 `GPT.forward`; finetune/lora.py calls it so: ceil(seq_len / 128) chunks,
`FineTuning.loss_chunk_tokens`). What scales with the calls: a weight cast anew at every call and kept by
its matmul (`finetune_memory`, `autocast_weight_copies`).
"""

from __future__ import annotations

from gpuplan.specs.plan import TrainPlan

#: chunks of a chunked cross-entropy: torchtune `CEWithChunkedOutputLoss(num_output_chunks=8)` ("saves
#: memory by only upcasting one chunk at a time"; torchtune/modules/loss/ce_chunked_output_loss.py).
CHUNKED_LOSS_CHUNKS = 8


def head_calls(plan: TrainPlan) -> int:
    """Calls of the output head per micro-batch: 1 unchunked; with a chunked loss ceil(seq_len /
    `loss_chunk_tokens`) when the chunks are sized in tokens, else `CHUNKED_LOSS_CHUNKS`."""
    ft = plan.fine_tuning
    if not ft.chunked_loss:
        return 1
    if ft.loss_chunk_tokens:
        return -(-plan.seq_len // ft.loss_chunk_tokens)
    return CHUNKED_LOSS_CHUNKS


__all__ = ["CHUNKED_LOSS_CHUNKS", "head_calls"]
