"""Blackwell training attention below the 16k-token plateau (workloads.training.step.blackwell_attention_length)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import model_from_arch_row
from gpuplan.specs.execution import AttentionKernel
from gpuplan.workloads.training.step import blackwell_attention_length as bal
from gpuplan.workloads.training.step.compute import attention_core_seconds
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

#: cudnn-frontend sdpa_benchmark_training B200 artifact @bb37575d, the ceilings' own plateau (16k-128k mean
#: of (1 + 2.5) / (1 / fwd + 2.5 / bwd)): cuDNN 1146.8, FlashAttention-2 366.87 TFLOP/s (step.compute)
CUDNN_PLATEAU, FLASH2_PLATEAU = 1146.78, 366.87


def test_eight_thousand_tokens_by_hand():
    # cuDNN 8k: 3.5 / (1 / 1171.278 + 2.5 / 942.509) = 998.2 -> 998.2 / 1146.8 = 0.8704
    assert bal.length_factor(AttentionKernel.FLASH, 8192, CUDNN_PLATEAU) == pytest.approx(0.8704, abs=2e-4)
    # FlashAttention-2 8k: 3.5 / (1 / 399.925 + 2.5 / 318.004) = 337.77 -> 337.77 / 366.87 = 0.9207
    assert bal.length_factor(AttentionKernel.FLASH2, 8192, FLASH2_PLATEAU) == pytest.approx(0.9207, abs=2e-4)


def test_plateau_and_ends():
    # from 16k on the ceiling's own figure; below 512 the 512-token row (cuDNN: 3.5 / (1/83.991 + 2.5/134.164)
    # = 3.5 / (0.011906 + 0.018634) = 114.60 -> 0.0999)
    for n in (16384, 65536, 1 << 20):
        assert bal.length_factor(AttentionKernel.FLASH, n, CUDNN_PLATEAU) == 1.0
    assert bal.length_factor(AttentionKernel.FLASH, 128, CUDNN_PLATEAU) == pytest.approx(0.0999, abs=2e-4)
    # log-linear between rows: 2^12.5 tokens is the mean of the 4k and 8k factors; 4k cuDNN: 3.5 /
    # (1/855.678 + 2.5/701.265) = 739.2 -> 0.6446
    mid = bal.length_factor(AttentionKernel.FLASH, 2 ** 12.5, CUDNN_PLATEAU)
    assert mid == pytest.approx((0.6446 + 0.8704) / 2, abs=3e-4)
    # 12k: between 8k's 0.8704 and 16k's 1 at log2(12288) - 13 = 0.585 of the way
    assert bal.length_factor(AttentionKernel.FLASH, 12288, CUDNN_PLATEAU) == pytest.approx(
        0.8704 + 0.58496 * (1 - 0.8704), abs=3e-4)


@pytest.mark.parametrize(("gpu_id", "kernel", "expected"), [
    ("b200", AttentionKernel.FLASH, True), ("gb200", AttentionKernel.FLASH2, True),
    ("b200", AttentionKernel.FLASH_V1, False), ("b200", AttentionKernel.UNFUSED, False),
    ("h100-sxm5-80gb", AttentionKernel.FLASH, False), ("a100-sxm4-80gb", AttentionKernel.FLASH2, False),
])
def test_only_blackwells_measured_kernels(gpu_id, kernel, expected):
    assert bal.applies(load_catalog().gpu(gpu_id), kernel) is expected


def test_the_attention_core_at_8k_on_a_b200_is_the_factor_slower():
    # same model at 8k and at 16k tokens per sequence with the tokens per micro-batch kept (mb 2 x 8k vs
    # 1 x 16k): causal FLOPs per token double at 16k, so time(8k) / time(16k) = 0.5 / 0.8704 with cuDNN
    row = {"id": "x-1", "model": "m", "layers": "2", "hidden": "4096", "heads": "32", "kv_heads": "8",
           "ffn": "14336", "ffn_kind": "swiglu", "vocab": "32000", "seq_len": "8192"}
    model = model_from_arch_row(row)
    cat = load_catalog()
    system = cat.system("dgx-b200")
    gpu = cat.gpu(system.gpu)
    times = {}
    for seq, mb in ((8192, 2), (16384, 1)):
        ctx = StepContext.build(model, system, gpu, seq, "bf16", "megatron", AttentionKernel.FLASH, False)
        g = PlanAxes.build(ctx, 1, 1, 8, 1, 1, 1, mb, 1, 0, False, 0)
        times[seq] = float(attention_core_seconds(ctx, g)[0])
    assert times[8192] / times[16384] == pytest.approx(0.5 / 0.8704, rel=3e-4)


@settings(max_examples=60, deadline=None)
@given(a=st.floats(1, 1e6), b=st.floats(1, 1e6), kernel=st.sampled_from([AttentionKernel.FLASH, AttentionKernel.FLASH2]))
def test_the_factor_grows_with_length_and_stops_at_one(a, b, kernel):
    plateau = CUDNN_PLATEAU if kernel is AttentionKernel.FLASH else FLASH2_PLATEAU
    lo, hi = sorted((a, b))
    f_lo, f_hi = (float(bal.length_factor(kernel, x, plateau)) for x in (lo, hi))
    assert 0.0 < f_lo <= f_hi + 1e-12 <= 1.0 + 1e-12
