"""The terms of per-GPU training memory as array expressions: each takes ints / floats for one plan
or numpy arrays broadcast together (a plan search's grid), so `memory.training_memory` (one plan,
rank by rank) and `memory_grid.rank_memory_arrays` (the search's screen) evaluate the same
formulas. What goes into them (parameters of a pipeline rank, bytes a layer saves per token) is
summed by the callers from the operator inventory; the formulas and their sources are in
`workloads.training.memory`'s module docstring, one line each below.

Symbols: t tokens per micro-batch on the GPU (micro_batch x seq_len / cp), b activation bytes,
h hidden, sp = tp with sequence parallelism else 1, p pipeline ranks, v virtual stages per rank,
m micro-batches per step (inf without a global batch), r the pipeline rank.
"""

from __future__ import annotations

import numpy as np

from gpuplan.workloads.training.plan_codes import ShardingCode

#: bytes of the fp32 copy of the logits the cross-entropy keeps for backward (Megatron-LM
#: vocab_parallel_cross_entropy casts logits.float()).
LOGITS_FP32_BYTES = 4


def activation_bytes(precision) -> int:
    """Bytes of one activation element: 4 in fp32 / tf32 runs, else 2 (bf16 / fp16; FP8 recipes keep
    their activations in bf16). `precision`: a specs.plan.Precision."""
    return 4 if getattr(precision, "value", precision) in ("fp32", "tf32") else 2


#: bytes per gradient element FSDP2 accumulates under a pipeline schedule: its reduce dtype
#: (torchtitan `mixed_precision_reduce = "float32"`, MixedPrecisionPolicy(reduce_dtype=fp32)).
FSDP2_GRAD_BYTES = 4.0


def model_state_bytes(dense, experts, per_param, sharding, dense_shard, expert_shard, fsdp2_pipeline, act_bytes):
    """(weights, gradients, optimizer) bytes on one GPU holding `dense` + `experts` parameters.

    ZeRO / FSDP over the data-parallel group: `sharding` (ShardingCode) >= ZERO1 divides the
    optimizer states, >= ZERO2 also the gradients, ZERO3 also the weights (Rajbhandari et al. 2020,
    sec. 5), dense parameters over `dense_shard` = dp x cp ranks, experts over `expert_shard` (the
    expert data-parallel group). `per_param` = (weights, gradients, optimizer) bytes per parameter
    (`memory.state_bytes_per_param`). FSDP2 under a pipeline schedule (`fsdp2_pipeline`, torchtitan:
    no reshard after forward, one gradient reduction after the last micro-batch) also keeps the
    stage's parameters unsharded in the compute dtype (`act_bytes`) and its gradients unsharded in
    fp32 (FSDP2_GRAD_BYTES)."""
    wb, gb, ob = per_param

    def held(per: float, sharded):
        return np.where(sharded, (dense / dense_shard + experts / expert_shard) * per, (dense + experts) * per)

    weights = held(wb, sharding >= ShardingCode.ZERO3)
    grads = held(gb, sharding >= ShardingCode.ZERO2)
    if fsdp2_pipeline is not False:  # (False: no plan keeps FSDP2's stage unsharded, the terms below are no-ops)
        weights = np.where(fsdp2_pipeline, weights + (dense + experts) * act_bytes, weights)
        grads = np.where(fsdp2_pipeline, (dense + experts) * FSDP2_GRAD_BYTES, grads)
    return weights, grads, held(ob, sharding >= ShardingCode.ZERO1)


def chunks_in_flight(pp, vpp, m, rank):
    """Model chunks (of L / (p v) layers) whose activations rank r holds at its peak: 1 without a
    pipeline; 1F1B min(p - r, m); interleaved min(2 (p - r - 1) + (v - 1) p + 1, m v) (Narayanan et
    al. 2021 sec. 2.2; Megatron-LM pipeline_parallel/schedules.py warm-up micro-batch counts, + the
    one in steady state)."""
    interleaved = np.minimum(2 * (pp - rank - 1) + (vpp - 1) * pp + 1, np.multiply(m, vpp))
    return np.where(np.equal(pp, 1), 1.0, np.where(np.equal(vpp, 1), np.minimum(pp - rank, m), interleaved))


#: Stages a DualPipe rank holds: stage r and its mirror pp - 1 - r (DeepSeek-V3 report arXiv 2412.19437
#: sec. 3.2.1, Table 2 "Parameter 2x"; deepseek-ai/DualPipe: the rank runs both directions' chunks).
DUALPIPE_STAGES_PER_RANK = 2


def dualpipe_stages(pp: int, rank: int) -> tuple[int, ...]:
    """The pipeline stages (of pp) DualPipe rank r holds: r and pp - 1 - r."""
    return tuple(sorted({rank, pp - 1 - rank}))


def dualpipe_chunks_in_flight(pp):
    """Stage-chunks whose activations a DualPipe rank holds at its peak: pp + 1 (DeepSeek-V3 report
    Table 2, "Activation PP+1", against 1F1B's PP on its first rank)."""
    return np.asarray(pp, dtype=np.float64) + 1.0


def stored_activation_bytes(mean_layer_bytes, layers_on_rank, vpp, in_flight):
    """Activations of the stored layers: the rank's mean bytes per layer and micro-batch x its chunk
    (layers_on_rank / v layers) x the chunks in flight."""
    return mean_layer_bytes * (layers_on_rank / vpp) * in_flight


def embedding_dropout_bytes(tokens, hidden, sp, in_flight, pp):
    """Embedding dropout masks on the first rank (1 byte per element, t h / sp per micro-batch) of
    each micro-batch in flight on its first chunk: min(in flight, p) of them (1 without a pipeline)."""
    return tokens * hidden / sp * np.minimum(in_flight, np.where(np.greater(pp, 1), pp, 1))


def backward_working_set_bytes(tokens, act_bytes, hidden, widest_ffn, sp, tp):
    """The gradients alive while one layer's backward runs: b t (h / sp + 2 f / tp), f the widest
    FFN (dense, or top_k x the expert FFN)."""
    return tokens * act_bytes * (hidden / sp + 2 * widest_ffn / tp)


def logits_bytes(tokens, vocab, tp, loss_bytes_per_entry, mtp_layers, act_bytes, hidden, sp):
    """The loss phase on the last rank: t V / tp x (the loss's bytes per vocabulary entry + 4 per MTP
    depth, whose fp32 softmax stays beside the main loss's: Megatron-core multi_token_prediction.py)
    + the final norm's input and output, 2 b t h / sp."""
    return (tokens * vocab / tp * (loss_bytes_per_entry + mtp_layers * LOGITS_FP32_BYTES)
            + tokens * 2 * act_bytes * hidden / sp)


def mtp_activation_bytes(mtp_layers, last_layer_bytes_per_token, act_bytes, hidden, sp, tokens):
    """MTP modules on the last rank (DeepSeek-V3 sec. 2.2): per depth the saved set of a layer like
    the last one plus its projection's input (2 h) and its two norms' inputs, for one micro-batch."""
    per_depth = last_layer_bytes_per_token + 2 * act_bytes * 2 * hidden / sp
    return mtp_layers * per_depth * tokens


def zero3_gather_bytes(biggest_layer_params, tp, act_bytes):
    """ZeRO-3 / FSDP parameter gather buffer: two layers' unsharded weights in the compute dtype (the
    one computing and the one prefetched), 2 x the rank's largest layer / tp x b."""
    return 2 * biggest_layer_params / tp * act_bytes


def fsdp_root_bytes(dense, block_dense, act_bytes):
    """FSDP2's root module, never resharded after forward (torch fully_shard docs): what no block
    holds (embedding, final norm, output head), unsharded in the compute dtype."""
    return np.maximum(0.0, dense - block_dense) * act_bytes


def fp8_weight_cache_bytes(bytes_per_element, block_dense, experts):
    """Transformer Engine's quantised weight and its transpose, cached across the micro-batches of a
    step (TE linear.py): 2 x the format's bytes per element x the block weights held here."""
    return 2 * bytes_per_element * (block_dense + experts)


__all__ = ["FSDP2_GRAD_BYTES", "LOGITS_FP32_BYTES", "backward_working_set_bytes", "chunks_in_flight",
           "embedding_dropout_bytes", "fp8_weight_cache_bytes", "fsdp_root_bytes", "logits_bytes",
           "model_state_bytes", "mtp_activation_bytes", "stored_activation_bytes", "zero3_gather_bytes"]
