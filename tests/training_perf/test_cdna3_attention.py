"""Training attention ceiling on CDNA3 (MI300X): PyTorch SDPA's ROCm kernel, bounded by the stock ROCm
FlashAttention-2 measured on MI300X (ROCm/flash-attention issue #142)."""

import pytest

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
