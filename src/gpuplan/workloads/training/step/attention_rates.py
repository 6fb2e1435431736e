"""FlashAttention's backward / forward FLOP ratio and the training rate of a forward + backward pair.

FlashAttention-2's backward runs five block GEMMs per tile where its forward runs two (Dao 2023,
FlashAttention-2 sec. 3): backward FLOPs = FLASH_BACKWARD_RATIO x forward. A kernel measured at F forward
and B backward TFLOP/s trains at the time-weighted harmonic mean (`forward_backward_rate`):

    (1 + r) / (1 / F + r / B),   r = FLASH_BACKWARD_RATIO
"""

from __future__ import annotations

#: FlashAttention backward / forward FLOPs (Dao 2023, FlashAttention-2 sec. 3: 5 vs 2 GEMMs).
FLASH_BACKWARD_RATIO = 2.5


def forward_backward_rate(forward_tflops: float, backward_tflops: float) -> float:
    """Attention forward + backward rate at the FLOP ratio 1 : FLASH_BACKWARD_RATIO (TFLOP/s):
    (1 + r) / (1 / fwd + r / bwd), the time-weighted harmonic mean."""
    return (1.0 + FLASH_BACKWARD_RATIO) / (1.0 / forward_tflops + FLASH_BACKWARD_RATIO / backward_tflops)


__all__ = ["FLASH_BACKWARD_RATIO", "forward_backward_rate"]
