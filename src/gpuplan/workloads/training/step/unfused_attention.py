"""HBM bytes per score element of Megatron's unfused (materialised-score) attention core.

Megatron's attention of the pre-FlashAttention stacks (Megatron-LM / Megatron-DeepSpeed
`CoreAttention`, Megatron-core `DotProductAttention`, the `--attention-backend unfused` path) computes
the b x a x s x s scores with a batched GEMM (baddbmm), runs the fused causal scale-mask-softmax kernel
on them, applies `self.attention_dropout = torch.nn.Dropout(config.attention_dropout)` to the
probabilities and multiplies them by V (bmm). Counted kernel by kernel, per element of the s x s score
matrix of one head, in bf16 / fp16 (2 B) with ATen's 1-byte dropout mask.

Megatron's causal softmax (megatron/fused_kernels/scaled_upper_triang_masked_softmax.h, the same file in
NVIDIA/Megatron-LM and microsoft / bigscience-workshop Megatron-DeepSpeed) launches one block row per
query row i (`local_seq = blockIdx.x + 1`): the forward loads only the row's first i + 1 elements
(`batch_element_count = local_seq`) and stores the whole row (zeros above the diagonal,
`copy_zero_vector`); the backward loads the gradient and the saved output only on those i + 1 elements
and stores the whole row. Over a row of s the loads touch the causal fraction

    c(s) = (s + 1) / (2 s)                                   (mean of (i + 1) / s over i = 0 .. s-1)

Forward:
    baddbmm writes Q K^T / sqrt(d)                      2
    causal softmax loads c of it, stores the row        2c + 2
    dropout reads P, writes its mask and P'             D = 2 + 1 + 2
    bmm with V reads P'                                 2
    forward = 6 + 2c + D                                (12.0 at s = 2048 with dropout, 7.0 without)
Backward (autograd of the same chain):
    bmm: dP' = dC V^T written, P' read by dV            2 + 2
    dropout backward (`native_dropout_backward`)
      reads dP' and the mask, writes dP                 D = 2 + 1 + 2
    softmax backward loads dP and P on c, stores        4c + 2
    baddbmm backward: dS read by dQ and by dK           2 + 2
    backward = 10 + 4c + D                              (17.0 at s = 2048 with dropout, 12.0 without)

With an attention dropout of 0 the dropout kernel never runs (D = 0): PyTorch's `dropout` returns its
input unchanged when p == 0 (aten/src/ATen/native/Dropout.cpp `_dropout_impl`: "if (p == 0 || !train ||
...) return input;", and the fused `native_dropout` path is taken only for 0 < p < 1,
`is_fused_kernel_acceptable`). The two batched GEMMs run over the full s x s (baddbmm / bmm are not
causal-aware); their FLOPs are `step.compute.attention_core_seconds`'s. (The count replaces 13 / 26 B,
which loaded whole softmax rows and took the backward as twice the forward.)
"""

from __future__ import annotations

#: Bytes per score element of the bf16 / fp16 scores and probabilities, and of ATen's dropout mask (bool).
SCORE_BYTES = 2.0
MASK_BYTES = 1.0
#: Dropout's bytes per score element, forward (read P 2, write mask 1 and P' 2) and backward
#: (read dP' 2, read mask 1, write dP 2): absent when the attention dropout is 0.
ATTENTION_DROPOUT_SCORE_BYTES = SCORE_BYTES + MASK_BYTES + SCORE_BYTES


def causal_read_fraction(seq_len: float) -> float:
    """Share of an s x s score matrix Megatron's causal softmax loads: (s + 1) / (2 s) (module docstring)."""
    s = float(seq_len)
    return (s + 1.0) / (2.0 * s)


def megatron_unfused_score_bytes(attention_dropout: float, seq_len: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes per score element of Megatron's unfused attention core at sequence
    length `seq_len`: 6 + 2c + D and 10 + 4c + D, c = `causal_read_fraction(seq_len)`, D =
    ATTENTION_DROPOUT_SCORE_BYTES with attention dropout, 0 without (module docstring, term by term)."""
    c = causal_read_fraction(seq_len)
    b = SCORE_BYTES
    dropout = ATTENTION_DROPOUT_SCORE_BYTES if attention_dropout > 0.0 else 0.0
    forward = b + (c * b + b) + dropout + b
    backward = (b + b) + dropout + (2.0 * c * b + b) + (b + b)
    return forward, backward


__all__ = ["ATTENTION_DROPOUT_SCORE_BYTES", "MASK_BYTES", "SCORE_BYTES", "causal_read_fraction",
           "megatron_unfused_score_bytes"]
