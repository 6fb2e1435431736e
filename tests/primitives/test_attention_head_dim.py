"""Head-dim factor of the attention ceilings (gpuplan.primitives.attention_head_dim), from the sourced points."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import get_gpu
from gpuplan.models import load_model
from gpuplan.primitives.attention_head_dim import AttentionPass, attention_head_dim, head_dim_efficiency
from gpuplan.primitives.efficiency import attention_ceiling

FWD, FWD_BWD = AttentionPass.FORWARD, AttentionPass.FORWARD_BACKWARD


def test_hopper_forward_is_flashattention3_figure5():
    # FlashAttention-3 (arXiv 2407.08608) Fig. 5b/5d/5f, causal, 16k: 473 / 616 / 642 TFLOP/s at d 64 / 128 / 256
    assert head_dim_efficiency("hopper", 64, FWD) == pytest.approx(473 / 616)  # 0.768
    assert head_dim_efficiency("hopper", 128, FWD) == pytest.approx(1.0)
    assert head_dim_efficiency("hopper", 256, FWD) == pytest.approx(642 / 616)  # 1.042
    # linear in d between 64 and 128: d = 96 is halfway, (473 + 616) / 2 / 616
    assert head_dim_efficiency("hopper", 96, FWD) == pytest.approx((473 + 616) / 2 / 616)
    # d = 192 halfway between 128 and 256: (616 + 642) / 2 / 616
    assert head_dim_efficiency("hopper", 192, FWD) == pytest.approx((616 + 642) / 2 / 616)


def test_hopper_training_is_the_h200_flashattention2_measurement():
    # benchmarks/device_h200/sdpa_hd.json, backend flash, fwd_bwd_tflops: 232.69 (d 64), 186.37 (80),
    # 232.82 (96), 255.87 (128), 231.58 (192), 224.26 (256)
    assert head_dim_efficiency("hopper", 64, FWD_BWD) == pytest.approx(232.69 / 255.87, rel=1e-4)  # 0.909
    assert head_dim_efficiency("hopper", 80, FWD_BWD) == pytest.approx(186.37 / 255.87, rel=1e-4)  # 0.728
    assert head_dim_efficiency("hopper", 96, FWD_BWD) == pytest.approx(232.82 / 255.87, rel=1e-4)
    assert head_dim_efficiency("hopper", 256, FWD_BWD) == pytest.approx(224.26 / 255.87, rel=1e-4)
    # DeepSeek MLA (192 + 128) / 2 = 160: halfway between the 128 and 192 points
    assert head_dim_efficiency("hopper", 160, FWD_BWD) == pytest.approx((255.87 + 231.58) / 2 / 255.87, rel=1e-4)


def test_ampere_is_flashattention2_figure4_and_held_beyond_128():
    # FlashAttention-2 (arXiv 2307.08691) Fig. 4c/4d, A100 causal 16k fwd+bwd: 171 / 189 TFLOP/s at d 64 / 128
    for p in (FWD, FWD_BWD):
        assert head_dim_efficiency("ampere", 64, p) == pytest.approx(171 / 189)  # 0.905
        assert head_dim_efficiency("ampere", 256, p) == 1.0  # no sourced point above 128: held


def test_unsourced_families_and_the_reference_are_one():
    for fam in ("blackwell", "cdna3", None, "unknown"):
        assert head_dim_efficiency(fam, 64, FWD) == 1.0
    for fam in ("hopper", "ampere"):
        for p in (FWD, FWD_BWD):
            assert head_dim_efficiency(fam, 128, p) == pytest.approx(1.0)


def test_held_constant_outside_the_sourced_range():
    assert head_dim_efficiency("hopper", 32, FWD) == head_dim_efficiency("hopper", 64, FWD)
    assert head_dim_efficiency("hopper", 512, FWD_BWD) == head_dim_efficiency("hopper", 256, FWD_BWD)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["hopper", "ampere", "blackwell"]), st.floats(1, 4096), st.sampled_from(list(AttentionPass)))
def test_factor_is_within_the_sourced_extremes(family, d, p):
    f = head_dim_efficiency(family, d, p)
    # every sourced ratio lies in [186.37 / 255.87 = 0.728, 642 / 616 = 1.042]
    assert 0.72 <= f <= 1.05


def test_attention_head_dim_of_mla_is_the_mean_of_qk_and_v():
    # DeepSeek-V3 config: qk_nope 128 + qk_rope 64 = 192, v 128 -> (192 + 128) / 2 = 160
    assert attention_head_dim(load_model("deepseek-ai/DeepSeek-V3")) == 160.0
    # Gemma-2 9B config head_dim 256
    assert attention_head_dim(load_model("google/gemma-2-9b")) == 256.0


def test_serving_ceiling_scales_by_the_factor():
    h100 = get_gpu("h100-sxm5-80gb")
    # catalog ceilings.toml [[attention]] hopper 0.66, x 473 / 616 at d = 64
    assert attention_ceiling(h100, "bf16", 64) == pytest.approx(0.66 * 473 / 616)
    assert attention_ceiling(h100) == pytest.approx(0.66)


def test_training_ceiling_scales_by_the_forward_backward_factor():
    from gpuplan.specs.execution import AttentionKernel
    from gpuplan.workloads.training.step.compute import training_attention_ceiling
    h100 = get_gpu("h100-sxm5-80gb")
    # training.attention_ceiling.hopper = 335 / 989 (Dao 2023), x 232.69 / 255.87 at d = 64 (sdpa_hd.json)
    assert training_attention_ceiling(h100, AttentionKernel.FLASH, 64) == pytest.approx(
        335 / 989 * 232.69 / 255.87, rel=1e-4)
    assert training_attention_ceiling(h100, AttentionKernel.FLASH) == pytest.approx(335 / 989)


def test_hopper_small_head_dim_stays_flop_bound_not_double_counted_by_the_exp_bound():
    from gpuplan.workloads.inference.cost.attention_softmax import attention_exp_per_s, softmax_bound_pair_flops
    h100 = get_gpu("h100-sxm5-80gb")
    flops_s = 989e12 * attention_ceiling(h100, "bf16", 64)  # 989 x 0.66 x 473 / 616 = 501.2 TFLOP/s
    # X = 132 SMs x 1605e12 / (4 x 128) / 148 = 2.796e12 exp/s; F / X = 179 FLOPs per exp < 4 x 64 = 256
    assert flops_s / attention_exp_per_s(h100) == pytest.approx(179.3, rel=2e-3)
    assert softmax_bound_pair_flops(256.0, 1, flops_s, attention_exp_per_s(h100)) == 256.0


def test_flash_v1_uses_its_own_table():
    # Dao 2023 Fig. 4c/4d, FlashAttention (v1) bars, A100 causal 8k fwd+bwd: 92 / 91 TFLOP/s at d 64 / 128
    assert head_dim_efficiency("ampere", 64, FWD_BWD, flash_v1=True) == pytest.approx(92 / 91)
    assert head_dim_efficiency("hopper", 64, FWD_BWD, flash_v1=True) == 1.0  # no v1 source on Hopper
    from gpuplan.specs.execution import AttentionKernel
    from gpuplan.workloads.training.step.compute import training_attention_ceiling
    a100 = get_gpu("a100-sxm4-80gb")
    # training.attention_ceiling.ampere = 180 / 312 (Dao 2023), x 92 / 91 at d = 64 under FLASH_V1
    assert training_attention_ceiling(a100, AttentionKernel.FLASH_V1, 64) == pytest.approx(180 / 312 * 92 / 91)
