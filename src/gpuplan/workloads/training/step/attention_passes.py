"""The forward and the backward pass of a fused attention core, each at its own measured rate.

A FlashAttention-class kernel runs 2 GEMMs per (query, key) tile in its forward (S = Q K^T, O = P V) and 5 in
its backward (S again, dV, dP, dQ, dK), so backward FLOPs = FLASH_BACKWARD_RATIO r = 2.5 x forward (Dao 2023,
FlashAttention-2, arXiv 2307.08691 sec. 4.1). The two passes do not run at one rate: the backward also
reads dO, O and the logsumexp, computes dS elementwise and accumulates dQ across key blocks, and every
measured kernel runs it slower. With R_f and R_b the measured forward and backward rates and
rho = R_f / R_b, the forward's share of the forward + backward time of one attention core is

    phi = (1 / R_f) / (1 / R_f + r / R_b) = 1 / (1 + r rho)                     (`forward_time_share`)

The training ceilings (`training.attention_ceiling.*`) are forward + backward rates, the time-weighted
harmonic mean (1 + r) / (1 / R_f + r / R_b) (`forward_backward_rate`), so a step's forward + backward
attention time is unchanged by the split; what it changes is every pass that runs the forward alone:
full recompute re-runs the layer's forward and selective recompute the attention core's (Korthikanti et
al. 2022 sec. 4), and FlashAttention saves only O and the logsumexp (FlashAttention-2 sec. 3.1.2), so the
recomputed core is a whole forward, at R_f. rho = 1 is the FLOP-proportional split phi = 1 / 3.5 this model
used before (a recomputed forward charged at the forward + backward rate).

rho of each kernel a training ceiling comes from (`forward_over_backward`; mean forward over mean backward
rate of the source's points):

- flash-attn FlashAttention-2 (the Ampere and Hopper ceilings, `AttentionKernel.FLASH` there and `FLASH2`
  anywhere but Blackwell): gpuplan's SDPA microbenchmark on one H200 (benchmarks/device_h200/sdpa_hd.json,
  torch 2.11 FLASH_ATTENTION backend = FlashAttention-2, causal, bf16, batch 2, 4,096 tokens, head_dim 128):
  forward 301.28, backward 241.33 TFLOP/s -> rho 1.2484. The same library on a B200 (below) gives 1.2656.
- flash-attn FlashAttention-2 on Blackwell (`FLASH2`): NVIDIA/cudnn-frontend sdpa_benchmark_training B200
  artifact @bb37575d, backend flash_attention, causal, head_dim 128, 16k / 32k / 64k / 128k tokens
  (B200_FLASH2_TFLOPS): mean forward 436.48, backward 344.88 -> 1.2656. rho does not drift with length: the
  artifact's flash_attention rows at 2k / 4k / 8k / 16k / 32k / 64k / 128k tokens give 1.279 / 1.254 / 1.258 /
  1.263 / 1.261 / 1.264 / 1.274 (254.381 / 198.845 ... 443.738 / 348.253), so one value serves every length.
- cuDNN fused attention on Blackwell (`FLASH`, the Blackwell ceiling): the same artifact, cuDNN 9.13
  (B200_CUDNN_SDPA_TFLOPS): mean forward 1372.29, backward 1076.09 -> 1.2753.
- ROCm FlashAttention-2 (Composable Kernel) on MI300X (the CDNA3 ceiling): ROCm/flash-attention issue #142
  (step.cdna3_attention.MI300X_CK_FA2_TFLOPS): mean forward 339.49, backward 202.16 -> 1.6793.
- FlashAttention v1 (`FLASH_V1`): Dao 2023 sec. 1: its "forward pass only reaches 30-50% of the theoretical
  maximum FLOPs/s of the device (Fig. 5), while the backward pass ... reach[es] only 25-35% ... on A100
  GPU (Fig. 6)": the midpoints 40% / 30% -> 1.3333. (llm-foundry's `attn_impl: triton`, Tri Dao's Triton
  port that this kernel class stands for, is by its own header "generally faster than CUDA [v1]
  forward" and "generally slower than CUDA backward": its rho is larger still; no figure was found.)
"""

from __future__ import annotations

from gpuplan.specs.execution import AttentionKernel
from gpuplan.workloads.training.step.cdna3_attention import MI300X_CK_FA2_TFLOPS

#: FlashAttention backward / forward FLOPs (Dao 2023, FlashAttention-2 sec. 4.1: 5 vs 2 GEMMs).
FLASH_BACKWARD_RATIO = 2.5
#: FlashAttention-2 (torch 2.11 FLASH_ATTENTION backend) on one H200, causal, bf16, batch 2, 4,096 tokens,
#: 32 heads x head_dim 128: (forward, backward) TFLOP/s (benchmarks/device_h200/sdpa_hd.json, `fwd_tflops`,
#: `bwd_tflops` of the head_dim 128 `flash` row).
H200_FLASH2_HD128_TFLOPS = ((301.28491991967894, 241.32826925453915),)
#: cuDNN 9.13 fused attention on one B200 through PyTorch SDPA, causal, head_dim 128, 128 query / 8 KV heads,
#: batch 1, at 16k / 32k / 64k / 128k tokens: (forward, backward) TFLOP/s (NVIDIA/cudnn-frontend
#: benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv @bb37575d; its
#: `flops()` counts causal FLOPs as half and backward as 2.5 x forward, as this model does).
B200_CUDNN_SDPA_TFLOPS = ((1332.415, 1074.776), (1419.000, 1108.688), (1382.330, 1073.059), (1355.418, 1047.843))
#: flash-attn's FlashAttention-2 on the same B200 artifact (backend `flash_attention`), same shapes and lengths.
B200_FLASH2_TFLOPS = ((425.128, 336.635), (435.762, 345.634), (441.285, 348.981), (443.738, 348.253))
#: FlashAttention v1 on A100 as fractions of peak (Dao 2023 sec. 1): forward 30-50%, backward 25-35%; the
#: midpoints as one (forward, backward) point.
A100_FLASH_V1_PEAK_FRACTIONS = (((0.30 + 0.50) / 2.0, (0.25 + 0.35) / 2.0),)


def forward_backward_rate(forward_tflops: float, backward_tflops: float) -> float:
    """Attention forward + backward rate at the FLOP ratio 1 : FLASH_BACKWARD_RATIO (TFLOP/s):
    (1 + r) / (1 / fwd + r / bwd), the time-weighted harmonic mean."""
    return (1.0 + FLASH_BACKWARD_RATIO) / (1.0 / forward_tflops + FLASH_BACKWARD_RATIO / backward_tflops)


def forward_over_backward(points) -> float:
    """rho = mean forward rate / mean backward rate of (forward, backward[, ...]) measured points."""
    forward = sum(p[0] for p in points) / len(points)
    backward = sum(p[1] for p in points) / len(points)
    return forward / backward


def forward_time_share(rate_ratio: float) -> float:
    """phi = 1 / (1 + r rho): the forward's share of one attention core's forward + backward time when the
    forward runs rho times the backward's rate and does 1 / r of its FLOPs (module docstring)."""
    if not rate_ratio > 0.0:
        raise ValueError(f"forward / backward rate ratio must be > 0, got {rate_ratio}")
    return 1.0 / (1.0 + FLASH_BACKWARD_RATIO * rate_ratio)


#: rho of each kernel a training ceiling comes from (module docstring)
FORWARD_OVER_BACKWARD = {
    "flash2": forward_over_backward(H200_FLASH2_HD128_TFLOPS),
    "flash2_blackwell": forward_over_backward(B200_FLASH2_TFLOPS),
    "cudnn_blackwell": forward_over_backward(B200_CUDNN_SDPA_TFLOPS),
    "ck_cdna3": forward_over_backward(MI300X_CK_FA2_TFLOPS),
    "flash_v1": forward_over_backward(A100_FLASH_V1_PEAK_FRACTIONS),
}


def kernel_forward_over_backward(family: str | None, kernel: AttentionKernel) -> float:
    """rho of the kernel the step's attention ceiling stands for: FlashAttention v1's under FLASH_V1;
    on Blackwell cuDNN's (FLASH) or flash-attn's (FLASH2); on CDNA3 ROCm's CK FlashAttention-2; else
    flash-attn's FlashAttention-2 (the Ampere, Hopper and default ceilings)."""
    if kernel is AttentionKernel.FLASH_V1:
        return FORWARD_OVER_BACKWARD["flash_v1"]
    if family == "blackwell":
        return FORWARD_OVER_BACKWARD["flash2_blackwell" if kernel is AttentionKernel.FLASH2 else "cudnn_blackwell"]
    if family == "cdna3":
        return FORWARD_OVER_BACKWARD["ck_cdna3"]
    return FORWARD_OVER_BACKWARD["flash2"]


def split_forward_backward(forward_backward_seconds, family: str | None, kernel: AttentionKernel):
    """(forward, backward) seconds of one fused attention core whose forward + backward takes
    `forward_backward_seconds`: phi and 1 - phi of it, phi = forward_time_share(kernel's rho)."""
    phi = forward_time_share(kernel_forward_over_backward(family, kernel))
    return phi * forward_backward_seconds, (1.0 - phi) * forward_backward_seconds


__all__ = ["A100_FLASH_V1_PEAK_FRACTIONS", "B200_CUDNN_SDPA_TFLOPS", "B200_FLASH2_TFLOPS", "FLASH_BACKWARD_RATIO",
           "FORWARD_OVER_BACKWARD", "H200_FLASH2_HD128_TFLOPS", "forward_backward_rate", "forward_over_backward",
           "forward_time_share", "kernel_forward_over_backward", "split_forward_backward"]
