"""Power-capped parts (`Gpu.peak_rated_power_w`): the sustained clock falls as the cube root of the power
ratio (CMOS dynamic power P = a C V^2 f, V ~ f over the DVFS range)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.workloads.training.step.compute import power_limit_clock_ratio, sustained_clock_ratio


def test_grand_teton_h100_at_500_w():
    # torchtitan llama3_h100_202412 'Hardware': H100 SXM 96GB at a 500 W limit; its peaks are the 700 W
    # H100 SXM's -> (500 / 700)^(1/3) = 0.71429^(1/3) = 0.89390
    catalog = load_catalog()
    capped = catalog.gpu("h100-sxm5-96gb")
    assert power_limit_clock_ratio(capped) == pytest.approx(0.89390, abs=1e-5)
    # the 700 W part quotes its own peaks: no cap
    full = catalog.gpu("h100-sxm5-80gb")
    assert power_limit_clock_ratio(full) == 1.0
    assert sustained_clock_ratio(capped) == pytest.approx(sustained_clock_ratio(full) * 0.89390, abs=1e-5)


@given(tdp=st.floats(min_value=100, max_value=2000), rated=st.floats(min_value=100, max_value=2000))
def test_power_cap_never_raises_the_clock(tdp, rated):
    gpu = load_catalog().gpu("h100-sxm5-96gb").model_copy(update={"tdp_w": tdp, "peak_rated_power_w": rated})
    ratio = power_limit_clock_ratio(gpu)
    assert 0.0 < ratio <= 1.0
    if tdp >= rated:
        assert ratio == 1.0
    else:
        assert ratio == pytest.approx((tdp / rated) ** (1 / 3), rel=1e-12)
