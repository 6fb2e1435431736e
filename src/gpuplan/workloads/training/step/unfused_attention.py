"""HBM traffic of the unfused attention core of the pre-FlashAttention Megatron stacks
(`AttentionKernel.UNFUSED` under Megatron-LM / Megatron-DeepSpeed: fp16 / bf16 scores materialised,
Megatron's fused causal scale-mask-softmax, ATen dropout), bytes per element of the s x s score matrix
of one head, counted kernel by kernel (2-byte scores, 1-byte dropout mask).

Megatron's causal softmax (megatron/fused_kernels/scaled_upper_triang_masked_softmax.h, the same file in
NVIDIA/Megatron-LM and microsoft / bigscience-workshop Megatron-DeepSpeed) launches one block row per
query row i (`local_seq = blockIdx.x + 1`): the forward loads only the row's first i + 1 elements
(`batch_element_count = local_seq`) and stores the whole row (zeros above the diagonal,
`copy_zero_vector`); the backward loads the gradient and the saved output only on those i + 1 elements
and stores the whole row. Over a row of s, the loads touch the causal fraction

    c(s) = (s + 1) / (2 s)                                   (mean of (i + 1) / s over i = 0 .. s-1)

Forward (ParallelAttention / CoreAttention of that era):
    baddbmm writes Q K^T / sqrt(d)                      2
    causal softmax reads c of it, writes the row        2c + 2
    dropout reads, writes, and writes its mask          2 + 2 + 1
    bmm with V reads the dropped probabilities          2
    forward = 11 + 2c                                   (12.0 at s = 2048)
Backward (autograd of the same chain):
    bmm: dP = dC V^T written, P read by dV = P^T dC     2 + 2
    dropout backward reads dP and the mask, writes      2 + 1 + 2
    softmax backward reads dP and the output on c,
      writes the row                                    4c + 2
    baddbmm backward: dS read by dQ and by dK           2 + 2
    backward = 15 + 4c                                  (17.0 at s = 2048)

(It replaces 13 / 26 B: the forward counted full-row softmax loads, and the backward was taken as
twice the forward, not counted.) The two batched GEMMs run over the full s x s (baddbmm / bmm are not
causal-aware); their FLOPs are `step.compute.attention_core_seconds`'s.
"""

from __future__ import annotations

#: Bytes per score element of the fp16 / bf16 scores and probabilities, and of ATen's dropout mask (bool).
SCORE_BYTES = 2.0
MASK_BYTES = 1.0


def causal_read_fraction(seq_len: float) -> float:
    """Share of an s x s score matrix Megatron's causal softmax loads: (s + 1) / (2 s) (module docstring)."""
    s = float(seq_len)
    return (s + 1.0) / (2.0 * s)


def score_bytes(seq_len: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes per score element of the unfused core: 11 + 2c and 15 + 4c with
    c = `causal_read_fraction(seq_len)` (module docstring, term by term)."""
    c = causal_read_fraction(seq_len)
    b, mask = SCORE_BYTES, MASK_BYTES
    forward = b + (c * b + b) + (b + b + mask) + b
    backward = (b + b) + (b + mask + b) + (2.0 * c * b + b) + (b + b)
    return forward, backward


__all__ = ["MASK_BYTES", "SCORE_BYTES", "causal_read_fraction", "score_bytes"]
