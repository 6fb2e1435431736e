"""HBM bytes per score element of Megatron's unfused (materialised-score) attention core.

Megatron-core's `DotProductAttention` (megatron/core/transformer/dot_product_attention.py, the
`--attention-backend unfused` path and the pre-FlashAttention stacks) computes the b x a x s x s
scores with a batched GEMM, runs the fused scale-mask-softmax kernel on them, applies
`self.attention_dropout = torch.nn.Dropout(config.attention_dropout)` to the probabilities and
multiplies them by V. Per score element, in bf16 / fp16 (2 B) with a 1-byte dropout mask:

    forward   QK^T writes S (2) + softmax reads S, writes P (2 + 2)
              + dropout reads P, writes its mask and P' (2 + 1 + 2) + the AV GEMM reads P' (2)  = 13 B
    backward  about twice the forward                                                           = 26 B

Dropout's own share is 5 B each way (forward: read P, write mask and P'; backward
`native_dropout_backward`: read dP', read the mask, write dP). With an attention dropout of 0 that
kernel never runs: PyTorch's `dropout` returns its input unchanged when p == 0
(aten/src/ATen/native/Dropout.cpp `_dropout_impl`: "if (p == 0 || !train || ...) return input;",
and the fused `native_dropout` path is taken only for 0 < p < 1, `is_fused_kernel_acceptable`),
so the score element moves 13 - 5 = 8 B forward and 26 - 5 = 21 B backward.
"""

from __future__ import annotations

#: Forward bytes per score element with attention dropout (module docstring: 2 + 4 + 5 + 2).
UNFUSED_SCORE_BYTES_FWD = 13.0
#: Backward bytes per score element with attention dropout: about twice the forward.
UNFUSED_SCORE_BYTES_BWD = 26.0
#: Dropout's bytes per score element, forward (read P 2, write mask 1 and P' 2) and backward
#: (read dP' 2, read mask 1, write dP 2): absent when the attention dropout is 0.
ATTENTION_DROPOUT_SCORE_BYTES = 5.0


def megatron_unfused_score_bytes(attention_dropout: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes per score element of Megatron's unfused attention core:
    (13, 26) with attention dropout, (8, 21) without (p == 0: PyTorch skips the dropout kernel;
    module docstring)."""
    if attention_dropout > 0.0:
        return UNFUSED_SCORE_BYTES_FWD, UNFUSED_SCORE_BYTES_BWD
    return (UNFUSED_SCORE_BYTES_FWD - ATTENTION_DROPOUT_SCORE_BYTES,
            UNFUSED_SCORE_BYTES_BWD - ATTENTION_DROPOUT_SCORE_BYTES)


__all__ = ["ATTENTION_DROPOUT_SCORE_BYTES", "UNFUSED_SCORE_BYTES_BWD", "UNFUSED_SCORE_BYTES_FWD",
           "megatron_unfused_score_bytes"]
