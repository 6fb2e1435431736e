"""Blackwell training attention at the call's sequence length, from the measurement its ceiling comes from.

The Blackwell training-attention ceilings (`step.compute`: cuDNN 0.510, flash-attn FlashAttention-2 0.163 of
the dense peak) are the mean of NVIDIA/cudnn-frontend's B200 benchmark at 16k-128k tokens, where the rate is
flat. The same artifact (benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv
@bb37575d; causal, head_dim 128, 128 query / 8 KV heads, batch 1) measures shorter sequences, slower: a
tile's fixed work (loading Q, writing O and the log-sum-exp, the pipeline's fill) is spread over fewer key
blocks, and the diagonal blocks a causal mask half-wastes are a larger share. Forward / backward TFLOP/s:

    tokens   cuDNN (pyt_cudnn)    FlashAttention-2 (flash_attention)
    512        83.991 / 134.164     63.936 /  81.393
    1024      254.501 / 308.529    154.417 / 104.860
    2048      478.921 / 371.486    254.381 / 198.845
    4096      855.678 / 701.265    342.990 / 273.484
    8192     1171.278 / 942.509    399.925 / 318.004

forward + backward at 1 : 2.5 FLOPs (`attention_passes.forward_backward_rate`) over the 16k-128k mean (the ceilings'
own figure: 1146.8 and 366.9) is the factor (`length_factor`) on the ceiling at the call's key length,
log-linear between the measured lengths, 1 from 16k on, the 512-token figure below 512. E.g. 8k: cuDNN
(1 + 2.5) / (1 / 1171.278 + 2.5 / 942.509) = 998.2 -> 0.870, FlashAttention-2 337.8 -> 0.921.
The artifact's GB200 run (sdpa_bf16_benchmark_results_NVIDIA_GB200.csv @d48a60eb, PyTorch's FlashAttention-2)
is 1.09-1.13 x B200's same backend at every length, the two parts' peak ratio (2500 / 2250 = 1.11): the
ceiling's fraction of peak carries over and so does this factor.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from gpuplan.specs import Gpu
from gpuplan.specs.execution import AttentionKernel
from gpuplan.workloads.training.step.attention_passes import forward_backward_rate

#: Sequence lengths (tokens) of the artifact's rows below the plateau.
LENGTHS = (512, 1024, 2048, 4096, 8192)
#: The length from which the ceiling's own (plateau) figure holds.
PLATEAU_FROM = 16384
#: (forward, backward) TFLOP/s per length, cuDNN (the artifact's `pyt_cudnn` backend).
B200_CUDNN_BY_LENGTH = ((83.991, 134.164), (254.501, 308.529), (478.921, 371.486), (855.678, 701.265),
                        (1171.278, 942.509))
#: (forward, backward) TFLOP/s per length, flash-attn's FlashAttention-2 (the `flash_attention` backend).
B200_FLASH2_BY_LENGTH = ((63.936, 81.393), (154.417, 104.860), (254.381, 198.845), (342.990, 273.484),
                         (399.925, 318.004))


#: log2 of the measured lengths and of the plateau's start: the interpolation's abscissae
_LOG_LENGTHS = [math.log2(n) for n in LENGTHS] + [math.log2(PLATEAU_FROM)]


@lru_cache(maxsize=8)
def _factors(kernel: AttentionKernel, plateau_tflops: float) -> list[float]:
    """The measured forward + backward rate at each of LENGTHS over the plateau rate, then 1 at PLATEAU_FROM."""
    table = B200_FLASH2_BY_LENGTH if kernel is AttentionKernel.FLASH2 else B200_CUDNN_BY_LENGTH
    return [forward_backward_rate(f, b) / plateau_tflops for f, b in table] + [1.0]


def applies(gpu: Gpu, kernel: AttentionKernel) -> bool:
    """Blackwell with a fused kernel whose ceiling is the artifact's: cuDNN (`FLASH`) or FlashAttention-2 (`FLASH2`)."""
    return gpu.family == "blackwell" and kernel in (AttentionKernel.FLASH, AttentionKernel.FLASH2)


def length_factor(kernel: AttentionKernel, keys, plateau_tflops: float):
    """Rate at `keys` tokens over the plateau rate `plateau_tflops` (module docstring); `keys` broadcasts."""
    x = np.log2(np.maximum(np.asarray(keys, dtype=np.float64), LENGTHS[0]))
    return np.interp(x, _LOG_LENGTHS, _factors(kernel, float(plateau_tflops)))


__all__ = ["B200_CUDNN_BY_LENGTH", "B200_FLASH2_BY_LENGTH", "LENGTHS", "PLATEAU_FROM", "applies", "length_factor"]
