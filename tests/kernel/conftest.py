"""Fixtures for the kernel tests."""

from __future__ import annotations

import pytest

from gpuplan.specs import Gpu


@pytest.fixture
def h100() -> Gpu:
    """H100 SXM5 figures as in the catalog (../shared/reference/hardware.md 1.1: 989.4 dense bf16
    TFLOP/s = 1,979 sparse / 2; 3.35 TB/s; 132 SMs; 1.98 GHz boost), built here so the roofline
    tests do not depend on the state of the catalog files."""
    return Gpu(
        id="h100-sxm5-80gb", name="NVIDIA H100 SXM5 80GB", vendor="nvidia", architecture="Hopper GH100",
        compute_capability="9.0", sm_count=132, boost_clock_mhz=1980,
        peak_tflops={"bf16": {"dense": 989.4, "sparse": 1978.9}, "fp8": {"dense": 1978.9, "sparse": 3957.8}},
        memory_bytes=80 * 2**30, memory_type="HBM3", memory_bandwidth_gbps=3350, tdp_w=700,
        sources={"default": "S_H100_PAGE (test copy)"},
    )
