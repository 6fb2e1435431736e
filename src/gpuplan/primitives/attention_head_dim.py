"""Attention-kernel efficiency by head dimension, relative to the head dimension the ceilings were sourced at.

Every attention ceiling (serving `efficiency.attention_ceiling.<family>`, training
`training.attention_ceiling.<family>`) was measured at head_dim 128. A FlashAttention-class kernel
tiles the head dimension d in one block (64 / 96 / 128 / 256 wide), so d sets the FLOPs per byte of
K, V loaded and per softmax exponential, and a d between kernel widths pads up to the next one. The
measured rate at d, over the rate at 128, is the factor

    head_dim_efficiency(family, d, pass) = R(d) / R(128)

R from the benchmark of the kernel family each generation's ceiling comes from, causal, at the
longest sequence of the source (the plateau), piecewise-linear in d between sourced head dims and
held constant beyond the outermost ones (no extrapolated trend):

- Hopper, forward (serving; FlashAttention-3, as `efficiency.attention_ceiling.hopper`): Shah et al.
  2024 (arXiv 2407.08608) Fig. 5 (b, d, f), H100 SXM5, BF16, causal, 16k tokens: FlashAttention-3
  473 / 616 / 642 TFLOP/s at d = 64 / 128 / 256 -> 0.768 / 1 / 1.042.
- Hopper, forward + backward (training; FlashAttention-2, as `training.attention_ceiling.hopper`):
  gpuplan's own SDPA microbenchmark on one H200 (benchmarks/device_h200/sdpa_hd.json: torch 2.11
  FLASH_ATTENTION backend = FlashAttention-2, causal, bf16, batch 2, 4,096 tokens, heads x d = 4,096),
  forward + backward 232.7 / 186.4 / 232.8 / 255.9 / 231.6 / 224.3 TFLOP/s at d = 64 / 80 / 96 / 128 /
  192 / 256 -> 0.909 / 0.728 / 0.910 / 1 / 0.905 / 0.877 (d = 80 runs FlashAttention-2's 96-wide
  kernel: 80 / 96 of its work is useful). Cross-check: Dao 2023 (FlashAttention-2, arXiv 2307.08691)
  H100 forward + backward figure (sec. 4.1; causal, 16k) 284 / 328 at d = 64 / 128 = 0.866.
- Ampere, both passes (FlashAttention-2, as both Ampere ceilings): Dao 2023 Fig. 4 (c, d), A100 SXM4,
  forward + backward, causal, 16k tokens: 171 / 189 TFLOP/s at d = 64 / 128 -> 0.905 / 1 (the paper
  benchmarks no d above 128, so d > 128 holds 1). The forward-only Ampere panel is not used.
- FlashAttention v1 (`flash_v1=True`: training stacks of 2022-23, `AttentionKernel.FLASH_V1`), Ampere:
  Dao 2023 Fig. 4 (c, d), FlashAttention bars, causal, 8k tokens (its longest clean point): 92 / 91
  TFLOP/s at d = 64 / 128 -> 1.011 / 1. v1's small-d rate is not below its d = 128 rate (its
  bottleneck is the non-matmul work FlashAttention-2 removed), so FlashAttention-2's table must not
  be applied to it.
- Blackwell, CDNA3 and others: no head-dim source for the kernels their ceilings come from -> 1.

Serving keeps its second bound, softmax exponentials (workloads/inference/cost/attention_softmax):
t = max(FLOPs / (F x factor), exps / X). The factor scales only the FLOP term, and the two are a max,
not a product, so nothing counts twice; on Blackwell (factor 1) the exp bound alone carries the
small-d slowdown FlashAttention-4 measures. On Hopper at d = 64 the sourced FlashAttention-3 rate,
473 TFLOP/s = 473e12 / (4 x 64) = 1.85e12 exponentials/s, is below the exp bound's 132 SMs x
2.118e10 = 2.80e12/s: the measured small-d loss there is not the exp wall, so the factor adds what
the exp bound does not.

The head dimension of a model is `attention_head_dim`: d, or for MLA (q.k over d_qk, p.v over d_v)
the mean (d_qk + d_v) / 2, which gives the same FLOPs per (query, key) pair and head, 4 d, as a
d-wide head (DeepSeek-V3: (192 + 128) / 2 = 160).
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from gpuplan.specs import ModelSpec

#: the head dimension every attention ceiling was sourced at (catalog/data/ceilings.toml [[attention]],
#: training.attention_ceiling.* sources: FlashAttention-2/-3/-4 and cuDNN benchmarks at head_dim 128)
REFERENCE_HEAD_DIM = 128


class AttentionPass(str, Enum):
    """Which passes of the attention core a ceiling times: serving runs the forward, training both."""

    FORWARD = "forward"
    FORWARD_BACKWARD = "forward_backward"


#: FlashAttention-3 forward, causal, 16k tokens, H100 SXM5 BF16 (Shah et al. 2024 Fig. 5 b, d, f), TFLOP/s
HOPPER_FA3_FORWARD_TFLOPS = ((64, 473.0), (128, 616.0), (256, 642.0))
#: FlashAttention-2 forward + backward, causal, 4,096 tokens, H200 BF16 (benchmarks/device_h200/sdpa_hd.json,
#: torch FLASH_ATTENTION backend, `fwd_bwd_tflops`), TFLOP/s
HOPPER_FA2_FORWARD_BACKWARD_TFLOPS = ((64, 232.69), (80, 186.37), (96, 232.82), (128, 255.87), (192, 231.58),
                                      (256, 224.26))
#: FlashAttention-2 forward + backward, causal, 16k tokens, A100 SXM4 (Dao 2023 Fig. 4 c, d), TFLOP/s
AMPERE_FA2_FORWARD_BACKWARD_TFLOPS = ((64, 171.0), (128, 189.0))

#: FlashAttention (v1) forward + backward, causal, 8k tokens, A100 SXM4 (Dao 2023 Fig. 4 c, d), TFLOP/s
AMPERE_FLASH_V1_FORWARD_BACKWARD_TFLOPS = ((64, 92.0), (128, 91.0))

#: (family, pass) -> the sourced (head_dim, TFLOP/s) points of that generation's ceiling kernel
HEAD_DIM_RATES = {
    ("hopper", AttentionPass.FORWARD): HOPPER_FA3_FORWARD_TFLOPS,
    ("hopper", AttentionPass.FORWARD_BACKWARD): HOPPER_FA2_FORWARD_BACKWARD_TFLOPS,
    ("ampere", AttentionPass.FORWARD): AMPERE_FA2_FORWARD_BACKWARD_TFLOPS,
    ("ampere", AttentionPass.FORWARD_BACKWARD): AMPERE_FA2_FORWARD_BACKWARD_TFLOPS,
}
#: family -> FlashAttention v1's sourced points (`flash_v1=True`)
FLASH_V1_HEAD_DIM_RATES = {"ampere": AMPERE_FLASH_V1_FORWARD_BACKWARD_TFLOPS}
HEAD_DIM_SOURCES = {
    ("hopper", AttentionPass.FORWARD): "FlashAttention-3 (arXiv 2407.08608) Fig. 5 b/d/f: H100 causal 16k, "
                                       "473 / 616 / 642 TFLOP/s at head_dim 64 / 128 / 256",
    ("hopper", AttentionPass.FORWARD_BACKWARD): "benchmarks/device_h200/sdpa_hd.json: H200 torch FlashAttention-2 "
                                                "causal fwd+bwd at head_dim 64-256",
    ("ampere", AttentionPass.FORWARD): "FlashAttention-2 (arXiv 2307.08691) Fig. 4 c/d: A100 causal 16k fwd+bwd, "
                                       "171 / 189 TFLOP/s at head_dim 64 / 128",
    ("ampere", AttentionPass.FORWARD_BACKWARD): "FlashAttention-2 (arXiv 2307.08691) Fig. 4 c/d: A100 causal 16k "
                                                "fwd+bwd, 171 / 189 TFLOP/s at head_dim 64 / 128",
}


def head_dim_efficiency(family: str | None, head_dim: float, attention_pass: AttentionPass,
                        flash_v1: bool = False) -> float:
    """R(d) / R(REFERENCE_HEAD_DIM) of the generation's ceiling kernel (module docstring): piecewise-linear
    in d between the sourced points HEAD_DIM_RATES[(family, pass)] (FLASH_V1_HEAD_DIM_RATES[family] for
    FlashAttention v1), constant outside them; 1 for a family without a source."""
    points = (FLASH_V1_HEAD_DIM_RATES.get(family or "") if flash_v1
              else HEAD_DIM_RATES.get((family or "", AttentionPass(attention_pass))))
    if points is None:
        return 1.0
    dims = np.array([d for d, _ in points], dtype=float)
    rates = np.array([r for _, r in points], dtype=float)
    return float(np.interp(float(head_dim), dims, rates) / np.interp(float(REFERENCE_HEAD_DIM), dims, rates))


def attention_head_dim(model: ModelSpec) -> float:
    """The head dimension an attention kernel runs at: model.head_dim, or for MLA the mean of the
    query-key and value head dims, (qk_nope + qk_rope + v) / 2 (same FLOPs per pair and head, 4 d)."""
    if model.mla is not None:
        a = model.mla
        return (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim) / 2.0
    return float(model.head_dim)


__all__ = ["AttentionPass", "FLASH_V1_HEAD_DIM_RATES", "HEAD_DIM_RATES", "HEAD_DIM_SOURCES", "REFERENCE_HEAD_DIM", "attention_head_dim",
           "head_dim_efficiency"]
