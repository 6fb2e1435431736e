"""Training attention ceiling on CDNA3 (MI300X): PyTorch SDPA's ROCm kernel, bounded by the stock ROCm
FlashAttention-2 measured on MI300X (ROCm/flash-attention issue #142)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.workloads.training.step.cdna3_attention import MI300X_CK_FA2_TFLOPS, MI300X_DENSE_BF16_TFLOPS
from gpuplan.workloads.training.step.compute import FLASH_BACKWARD_RATIO, forward_backward_rate, training_attention_ceiling


def test_mi300x_training_attention_is_the_measured_rocm_flash2_rate():
    # ROCm/flash-attention issue #142 (MI300X, ROCm 6.3.2, head_dim 128, 16k tokens, batch 1/2/4/8):
    # forward + backward 223.08, 230.54, 231.57, 228.36 TFLOP/s -> mean 913.55 / 4 = 228.3875, of the
    # MI300X's 1307.4 dense BF16 TFLOP/s (AMD MI300X data sheet) = 0.174689
    gpu = load_catalog().gpu("mi300x")
    assert gpu.family == "cdna3"
    assert training_attention_ceiling(gpu) == pytest.approx(228.3875 / 1307.4, rel=1e-12)
    assert training_attention_ceiling(gpu) == pytest.approx(0.174689, abs=1e-6)
    # the same ceiling for the MI325X (CDNA3, same kernels)
    assert training_attention_ceiling(load_catalog().gpu("mi325x")) == pytest.approx(0.174689, abs=1e-6)


def test_the_peak_it_divides_by_is_the_catalogs():
    # the fraction multiplies the catalog's dense BF16 peak; the source's rates are absolute TFLOP/s
    assert load_catalog().gpu("mi300x").matmul_peak_tflops("bf16") == pytest.approx(MI300X_DENSE_BF16_TFLOPS)


@pytest.mark.parametrize("fwd, bwd, fwd_bwd", MI300X_CK_FA2_TFLOPS)
def test_the_printed_forward_backward_is_the_flop_weighted_harmonic_mean(fwd, bwd, fwd_bwd):
    # flash-attn's benchmark times forward + backward as one call at 3.5 x the forward FLOPs; its printed
    # rate sits within 2.5% of (1 + 2.5) / (1 / fwd + 2.5 / bwd) (the two timed apart), which checks that
    # the columns were read in the right order and counted with the backward ratio this model uses
    assert FLASH_BACKWARD_RATIO == 2.5
    assert forward_backward_rate(fwd, bwd) == pytest.approx(fwd_bwd, rel=0.025)


def test_below_the_hopper_flash2_ceiling():
    # the backward is MI300X's weak side (194-207 TFLOP/s against its 310-356 forward): the fraction of
    # peak lies below H100's FlashAttention-2 335 / 989 = 0.339
    cat = load_catalog()
    assert training_attention_ceiling(cat.gpu("mi300x")) < training_attention_ceiling(cat.gpu("h100-sxm"))


def test_llama3_8b_layer_attention_seconds_on_mi300x():
    # tao's shape: Llama-3-8B (32 heads x 128), one micro-batch of 8192 tokens, tp = cp = 1, bf16.
    # Causal forward FLOPs per layer = 2 (d_qk + d_v) x heads x s (s + 1) / 2 = 256 x 32 x 8192 x 8193
    # = 5.49822e11; at 0.174689 x 1307.4 TFLOP/s = 228.39 TFLOP/s (SM fill 32 x 64 blocks / 304 CUs >= 1,
    # sustained clock ratio 1: no CDNA3 measurement) -> 2.40738 ms per forward's FLOPs, forward + backward
    # 3.5 x = 8.42583 ms (at the previous 0.266 ceiling: 1.578 ms per forward's FLOPs). The CK kernel's
    # forward runs rho = 339.4875 / 202.16 = 1.67930 times its backward's rate (means of the four batches):
    # the forward takes 1 / (1 + 2.5 x 1.67930) = 0.192372 of it, 1.62090 ms, the backward 6.80493 ms
    from gpuplan.models import load_model
    from gpuplan.specs import Precision
    from gpuplan.specs.execution import Framework
    from gpuplan.workloads.training.step.compute import attention_core_seconds
    from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

    cat = load_catalog()
    system = cat.system("mi300x-platform")
    gpu = cat.gpu(system.gpu)
    ctx = StepContext.build(load_model("llama-3-8b"), system, gpu, 8192, Precision.BF16, Framework.TORCHTITAN)
    g = PlanAxes.build(ctx, 1, 1, 8, 1, 1, 1, 1, 1, 2, False, 3)
    fwd, bwd = attention_core_seconds(ctx, g)
    flops = 256 * 32 * 8192 * 8193
    assert flops == pytest.approx(5.49822e11, rel=1e-5)
    assert float(fwd + bwd) == pytest.approx(3.5 * flops / (228.3875e12), rel=1e-6)
    assert float(fwd) == pytest.approx(1.62090e-3, rel=1e-4)
    assert float(bwd) == pytest.approx(6.80493e-3, rel=1e-4)


@settings(max_examples=30, deadline=None)
@given(head_dim=st.sampled_from([32, 64, 80, 96, 128, 160, 192, 256]))
def test_cdna3_has_no_head_dim_factor(head_dim):
    # no head-dim sweep of a CDNA3 training attention kernel is sourced (primitives.attention_head_dim):
    # the ceiling is the head_dim-128 measurement at every head dimension
    gpu = load_catalog().gpu("mi300x")
    assert training_attention_ceiling(gpu, head_dim=head_dim) == pytest.approx(228.3875 / 1307.4, rel=1e-12)
