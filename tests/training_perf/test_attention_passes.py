"""The attention core's forward and backward passes at their own measured rates (workloads.training.step.
attention_passes): the forward's share of the forward + backward time, each kernel's measured rate ratio,
and what a recompute charges. Every expected number is derived by hand in the comment beside it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import Precision
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.workloads.training.plan_codes import RecomputeCode
from gpuplan.workloads.training.step import attention_passes as ap
from gpuplan.workloads.training.step.compute import attention_core_seconds, layer_compute
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext


def test_equal_rates_split_by_flops():
    # rho = 1: forward FLOPs / (forward + backward FLOPs) = 1 / (1 + 2.5) = 0.285714 (the old split)
    assert ap.forward_time_share(1.0) == pytest.approx(1.0 / 3.5, rel=1e-15)


def test_flash_attention_2_forward_over_backward_from_the_h200_benchmark():
    # benchmarks/device_h200/sdpa_hd.json, flash backend, head_dim 128: forward 301.285, backward 241.328
    # TFLOP/s -> rho = 1.248445; phi = 1 / (1 + 2.5 x 1.248445) = 1 / 4.121113 = 0.242653
    assert ap.FORWARD_OVER_BACKWARD["flash2"] == pytest.approx(1.248445, rel=1e-6)
    assert ap.forward_time_share(ap.FORWARD_OVER_BACKWARD["flash2"]) == pytest.approx(0.242653, rel=1e-5)


def test_flash_v1_forward_over_backward_from_the_flashattention_2_paper():
    # Dao 2023 sec. 1: FlashAttention's forward reaches 30-50% of peak, its backward 25-35% on A100:
    # midpoints 0.40 / 0.30 = 4 / 3; phi = 1 / (1 + 2.5 x 4 / 3) = 3 / 13 = 0.230769
    assert ap.FORWARD_OVER_BACKWARD["flash_v1"] == pytest.approx(4.0 / 3.0, rel=1e-12)
    assert ap.forward_time_share(4.0 / 3.0) == pytest.approx(3.0 / 13.0, rel=1e-12)


def test_blackwell_and_cdna3_ratios_from_their_ceiling_sources():
    # cuDNN 9.13 on B200: forward (1332.415 + 1419.000 + 1382.330 + 1355.418) / 4 = 1372.29075,
    # backward (1074.776 + 1108.688 + 1073.059 + 1047.843) / 4 = 1076.0915 -> 1.275255
    assert ap.FORWARD_OVER_BACKWARD["cudnn_blackwell"] == pytest.approx(1372.29075 / 1076.0915, rel=1e-9)
    assert ap.FORWARD_OVER_BACKWARD["cudnn_blackwell"] == pytest.approx(1.275255, rel=1e-6)
    # flash-attn on B200: forward (425.128 + 435.762 + 441.285 + 443.738) / 4 = 436.47825, backward
    # (336.635 + 345.634 + 348.981 + 348.253) / 4 = 344.87575 -> 1.265610
    assert ap.FORWARD_OVER_BACKWARD["flash2_blackwell"] == pytest.approx(1.265610, rel=1e-6)
    # ROCm CK FlashAttention-2 on MI300X: forward (353.22 + 355.51 + 339.62 + 309.60) / 4 = 339.4875,
    # backward (194.43 + 202.12 + 205.43 + 206.66) / 4 = 202.16 -> 1.679301
    assert ap.FORWARD_OVER_BACKWARD["ck_cdna3"] == pytest.approx(1.679301, rel=1e-6)


def test_the_kernel_picks_its_ratio():
    k = AttentionKernel
    assert ap.kernel_forward_over_backward("hopper", k.FLASH) == ap.FORWARD_OVER_BACKWARD["flash2"]
    assert ap.kernel_forward_over_backward("ampere", k.FLASH) == ap.FORWARD_OVER_BACKWARD["flash2"]
    assert ap.kernel_forward_over_backward("hopper", k.FLASH2) == ap.FORWARD_OVER_BACKWARD["flash2"]
    assert ap.kernel_forward_over_backward("ampere", k.FLASH_V1) == ap.FORWARD_OVER_BACKWARD["flash_v1"]
    assert ap.kernel_forward_over_backward("blackwell", k.FLASH) == ap.FORWARD_OVER_BACKWARD["cudnn_blackwell"]
    assert ap.kernel_forward_over_backward("blackwell", k.FLASH2) == ap.FORWARD_OVER_BACKWARD["flash2_blackwell"]
    assert ap.kernel_forward_over_backward("cdna3", k.FLASH) == ap.FORWARD_OVER_BACKWARD["ck_cdna3"]
    assert ap.kernel_forward_over_backward(None, k.FLASH) == ap.FORWARD_OVER_BACKWARD["flash2"]


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_a_non_positive_ratio_is_refused(bad):
    with pytest.raises(ValueError, match="must be > 0"):
        ap.forward_time_share(bad)


@settings(max_examples=80, deadline=None)
@given(rho=st.floats(0.05, 20.0), slower=st.floats(1.001, 5.0), seconds=st.floats(1e-9, 1e3))
def test_split_keeps_the_total_and_a_faster_forward_takes_less(rho, slower, seconds):
    phi = ap.forward_time_share(rho)
    assert 0.0 < phi < 1.0
    assert ap.forward_time_share(rho * slower) < phi
    # phi is the forward's time share of forward + backward at rates rho : 1 and FLOPs 1 : 2.5
    assert phi == pytest.approx((1.0 / rho) / (1.0 / rho + 2.5), rel=1e-12)
    fwd, bwd = ap.split_forward_backward(seconds, "hopper", AttentionKernel.FLASH)
    assert fwd + bwd == pytest.approx(seconds, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(fwd=st.floats(10.0, 3000.0), bwd=st.floats(10.0, 3000.0))
def test_forward_backward_rate_is_the_time_weighted_mean(fwd, bwd):
    # one forward's FLOPs F at fwd, 2.5 F at bwd: 3.5 F / (F / fwd + 2.5 F / bwd)
    assert ap.forward_backward_rate(fwd, bwd) == pytest.approx(3.5 / (1.0 / fwd + 2.5 / bwd), rel=1e-12)
    assert min(fwd, bwd) * (1 - 1e-12) <= ap.forward_backward_rate(fwd, bwd) <= max(fwd, bwd) * (1 + 1e-12)


@pytest.fixture(scope="module")
def h100_llama():
    c = load_catalog()
    system = c.system("dgx-h100")
    gpu = c.gpu(system.gpu)
    return StepContext.build(load_model("llama-3-8b"), system, gpu, 32768, Precision.BF16, Framework.MEGATRON)


def test_core_split_at_the_kernels_ratio(h100_llama):
    # forward / (forward + backward) of the core = phi of FlashAttention-2 = 0.242653 (above)
    g = PlanAxes.build(h100_llama, 1, 1, 8, 1, 1, 1, 1, 8, int(RecomputeCode.NONE), False, 1)
    fwd, bwd = (float(x) for x in attention_core_seconds(h100_llama, g))
    assert fwd / (fwd + bwd) == pytest.approx(0.242653, rel=1e-5)


def test_recompute_charges_the_forward_share(h100_llama):
    # selective recompute re-runs the core's forward only: its charge is the forward's 0.242653 of the
    # core's forward + backward, not the FLOP share 1 / 3.5 = 0.285714; full recompute re-runs the layer
    # forward, which holds that same forward
    lay = {}
    for rc in RecomputeCode:
        g = PlanAxes.build(h100_llama, 1, 1, 8, 1, 1, 1, 1, 8, int(rc), False, 1)
        lay[rc] = layer_compute(h100_llama, g)
    attn = float(lay[RecomputeCode.NONE].attn_fwd + lay[RecomputeCode.NONE].attn_bwd)
    assert float(lay[RecomputeCode.SELECTIVE].layer_recompute) == pytest.approx(0.242653 * attn, rel=1e-5)
    assert float(lay[RecomputeCode.NONE].layer_recompute) == 0.0
    assert float(lay[RecomputeCode.FULL].layer_recompute) == pytest.approx(float(lay[RecomputeCode.FULL].layer_fwd), rel=1e-12)
    assert float(lay[RecomputeCode.FULL].layer_fwd) > float(lay[RecomputeCode.SELECTIVE].layer_recompute)
