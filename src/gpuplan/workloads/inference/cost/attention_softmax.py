"""Softmax exponentials as a second bound on the attention core of a serving step.

A FlashAttention-class kernel evaluates one exponential per (query, key) pair and query head
(P = exp(S - rowmax), online softmax). On NVIDIA GPUs the exponential runs on the special function
units (MUFU.EX2), 16 results per clock per SM (CUDA C++ Programming Guide, "Arithmetic
Instructions" throughput table: base-2 exponential), and that rate did not grow from Hopper to
Blackwell while the tensor cores doubled (FlashAttention-4, Zadouri, Hoehnerbach, Shah, Liu,
Thakkar, Dao 2026; together.ai / Colfax blog "FlashAttention-4": "From the Hopper H100 to the
Blackwell B200 ... BF16 tensor core throughput increases from 1 to 2.25 PFLOPs, while both the SFU
count and shared memory bandwidth remains unchanged"; the B200 forward's "main performance
bottleneck lies ... in the SFU units for softmax exponential"). So the core's time is

    t = max(FLOPs / F_attention, exponentials / X),   exponentials = pairs x query heads
    X = SMs x ATTENTION_EXP_PER_SM_S              (`attention_exp_per_s`)

which, with FLOPs = pairs x pair_flops, is FLOPs' own rate over a FLOP-equivalent per pair

    pair_flops_equivalent = max(pair_flops, query_heads x F_attention / X)   (`softmax_bound_pair_flops`)

so the step-time formula (kernels.step_seconds) keeps its one attention rate. Where it binds: an
fp8 core on Blackwell (twice the bf16 tensor rate, the same exponential rate: FP8 attention runs no
faster than the exp wall), and small head dimensions (fewer FLOPs per exponential). A 16-bit core
at head_dim 128 on Ampere or Hopper, or on Blackwell, stays FLOP-bound or at the wall itself.
"""

from __future__ import annotations

from gpuplan import knobs
from gpuplan.specs import Gpu

#: Softmax exponentials an exp-bound attention forward sustains per SM per second. FlashAttention-4
#: on B200 reaches 1605 TFLOP/s BF16 forward at head_dim 128 (together.ai / Colfax blog; 71% of
#: 2250), a kernel its authors show bound by the exponential (part of it emulated by polynomials on
#: the FMA units): 4 x 128 FLOPs per (pair, head) -> 1605e12 / 512 = 3.135e12 exponentials/s over
#: the B200's 148 SMs = 2.118e10 per SM per second. Raw MUFU at ~1.9 GHz would be 16 x 1.9e9 =
#: 3.0e10; the range allows more emulation.
ATTENTION_EXP_PER_SM_S = knobs.register(
    "efficiency.attention_exp_per_sm_s", unit="1/s", default=1605e12 / (4 * 128) / 148, low=1e9, high=6e10,
    source="FlashAttention-4 (Zadouri et al. 2026; together.ai / Colfax blog): 1605 TFLOP/s BF16 forward at "
           "head_dim 128 on B200 (148 SMs), exp-bound -> 1605e12 / (4 x 128) / 148 = 2.118e10 exponentials per SM-s; "
           "MUFU 16 per clock per SM (CUDA C++ Programming Guide throughput table), unchanged Hopper -> Blackwell",
    scales="the attention core's softmax exponentials per second per SM (serving prefill and decode)")


def attention_exp_per_s(gpu: Gpu) -> float:
    """Softmax exponentials per second of one GPU: X = gpu.sm_count_or_default x knob
    `efficiency.attention_exp_per_sm_s` (ATTENTION_EXP_PER_SM_S)."""
    return float(gpu.sm_count_or_default) * float(knobs.value("efficiency.attention_exp_per_sm_s"))


def softmax_bound_pair_flops(pair_flops: float, query_heads: float, attention_flops_per_s: float,
                             exp_per_s: float) -> float:
    """FLOP-equivalent of one (query, key) pair over `query_heads` heads at the attention rate
    F = `attention_flops_per_s` when each pair and head also costs one exponential at X = `exp_per_s`:
    max(pair_flops, query_heads x F / X) (module docstring: max(FLOPs / F, exps / X) = that / F)."""
    if query_heads <= 0:
        return float(pair_flops)
    return max(float(pair_flops), float(query_heads) * float(attention_flops_per_s) / float(exp_per_s))
