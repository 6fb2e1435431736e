"""The training attention core on CDNA3 (MI300X, MI325X) as PyTorch runs it on ROCm.

Which kernel: PyTorch's SDPA (torchtitan's Llama calls `F.scaled_dot_product_attention`) dispatches its
flash backend on ROCm to AOTriton unless `TORCH_ROCM_FA_PREFER_CK=1` is set: `Context::getROCmFAPreferredBackend`
turns the default into `ROCmFABackend::AOTriton` ("We use aotriton backend as the default, for now";
pytorch/pytorch aten/src/ATen/Context.cpp). The torch 2.9 nightlies of August 2025 carry AOTriton 0.10b
(pytorch/pytorch PR #156499, merged 2025-06; its fused backward kernel serves small workloads only, PR #148433),
forward `attn_fwd` and backward `bwd_kernel_dk_dv` + `bwd_kernel_dq`.

Its rate: no published AOTriton forward + backward TFLOP/s at head_dim 128 and long sequences on MI300X was
found. The stock ROCm FlashAttention-2 (ROCm/flash-attention, Composable Kernel backend) was measured on
MI300X under ROCm 6.3.2 with flash-attn's `benchmarks/benchmark_flash_attention.py` (ROCm/flash-attention
issue #142, 2025-05-18; head_dim 128, 16 heads, seqlen 16384, batch 1 / 2 / 4 / 8, non-causal; FLOPs counted
as this model counts them: 4 b h s^2 d forward, 2.5 x that backward): forward 353.2 / 355.5 / 339.6 / 309.6,
backward 194.4 / 202.1 / 205.4 / 206.7, forward + backward 223.1 / 230.5 / 231.6 / 228.4 TFLOP/s. The
forward matches the ROCm blog's "slightly beats the NVIDIA H100" (Zyphra, 2024-12-10); the backward is where
MI300X loses ("the backwards pass still needs more optimization"). AOTriton's forward on MI300X tracks the
Triton-on-AMD baseline, which AMD's AITER (CK-based) outruns by 18-62% (midiareshadi.github.io,
'attn-dsl-bench'), so the CK rate bounds SDPA's from above; it is the CDNA3 training ceiling:
mean forward + backward 228.4 of 1307.4 TFLOP/s dense BF16 = 0.1747 (Zyphra's own rewritten backward,
about H100's FlashAttention-2 x 1.04 = 0.266 of peak, is not what PyTorch ships).
"""

from __future__ import annotations

#: ROCm/flash-attention issue #142 (MI300X, ROCm 6.3.2, CK backend, head_dim 128, seqlen 16384, batch
#: 1 / 2 / 4 / 8): (forward, backward, forward + backward) TFLOP/s as flash-attn's benchmark prints them.
MI300X_CK_FA2_TFLOPS = (
    (353.22, 194.43, 223.08),
    (355.51, 202.12, 230.54),
    (339.62, 205.43, 231.57),
    (309.60, 206.66, 228.36),
)
#: MI300X dense BF16 peak (TFLOP/s), the catalog's `mi300x` entry (AMD MI300X data sheet: 1307.4).
MI300X_DENSE_BF16_TFLOPS = 1307.4


def cdna3_training_attention() -> float:
    """Forward + backward attention rate on CDNA3 as a fraction of dense BF16 peak: the mean of
    MI300X_CK_FA2_TFLOPS's forward + backward column / MI300X_DENSE_BF16_TFLOPS
    ((223.08 + 230.54 + 231.57 + 228.36) / 4 = 228.39 -> 0.1747)."""
    rates = [fwd_bwd for _, _, fwd_bwd in MI300X_CK_FA2_TFLOPS]
    return sum(rates) / len(rates) / MI300X_DENSE_BF16_TFLOPS


CDNA3_TRAINING_ATTENTION_SOURCE = (
    "PyTorch SDPA on ROCm runs AOTriton (aten/src/ATen/Context.cpp default); no AOTriton fwd+bwd figure found, "
    "bounded by the stock ROCm FlashAttention-2 (CK) on MI300X, ROCm/flash-attention issue #142: fwd 310-356, "
    "bwd 194-207, fwd+bwd 223-232 TFLOP/s at head_dim 128, 16k tokens -> mean 228.4 of 1307.4 = 0.175")

__all__ = ["CDNA3_TRAINING_ATTENTION_SOURCE", "MI300X_CK_FA2_TFLOPS", "MI300X_DENSE_BF16_TFLOPS",
           "cdna3_training_attention"]
