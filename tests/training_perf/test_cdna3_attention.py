"""Training attention ceiling on CDNA3 (MI300X), from the ROCm blog by Zyphra (2024-12-10)."""

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.workloads.training.step.compute import training_attention_ceiling


def test_mi300x_training_attention_at_most_h100_fa2_plus_4_percent():
    # Zyphra: MI300X FA2 forward about H100's, their best backward 4% above H100's at 8k tokens; H100
    # FlashAttention-2 forward + backward 335 TFLOP/s (Dao 2023) -> 335 x 1.04 = 348.4 TFLOP/s of the
    # MI300X's 1307.4 dense BF16 (ROCm MI300X spec table) = 0.26648
    gpu = load_catalog().gpu("mi300x")
    assert gpu.family == "cdna3"
    assert training_attention_ceiling(gpu) == pytest.approx(348.4 / 1307.4, rel=1e-12)
    # below the Hopper-derived default (0.34) it replaced for this family
    assert training_attention_ceiling(gpu) < 0.34
