"""Goodput of a training run (facilities.goodput): Daly's checkpoint interval and expected wall time."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS
from gpuplan.facilities.goodput import (
    CHECKPOINT_BYTES_PER_PARAM, daly_interval_s, expected_wall_s, training_goodput,
)


@pytest.mark.parametrize("mtbf_h, minutes", [(24, 117), (6, 57), (0.25, 9.1)])
def test_daly_interval_reproduces_dalys_worked_examples(mtbf_h, minutes):
    # Daly (FGCS 2006) worked examples with a 5-minute checkpoint: M = 24 h -> 117 min, 6 h -> 57 min,
    # 15 min -> 9.1 min (../shared/reference/wave3-facts.md section 7.2)
    assert daly_interval_s(300.0, mtbf_h * 3600.0) / 60.0 == pytest.approx(minutes, abs=0.5 if minutes > 10 else 0.05)


def test_daly_interval_is_m_when_the_checkpoint_takes_longer_than_2m():
    assert daly_interval_s(7200.0, 3000.0) == 3000.0


def test_expected_wall_time_by_hand():
    # T = 100 h, delta = 0.1 h, tau = 1 h, R = 0.4 h, M = 10 h:
    # W = 100 (1 + 0.1) / (1 - (0.4 + 1.1 / 2) / 10) = 110 / 0.905 = 121.547 h
    assert expected_wall_s(100.0, 0.1, 1.0, 0.4, 10.0) == pytest.approx(110.0 / 0.905, rel=1e-12)
    # M shorter than R + tau / 2: never finishes
    assert expected_wall_s(100.0, 0.1, 1.0, 5.0, 5.0) == math.inf


def test_llama3_interruption_rate_gives_one_interruption_every_three_hours_at_16k_gpus():
    # Llama 3 report: 419 unexpected interruptions in 54 days on 16,384 H100 -> M = 54 x 24 / 419 = 3.09 h
    g = training_goodput(86400.0 * 54, 16384, 405e9)
    assert g.mtbf_s / 3600.0 == pytest.approx(54 * 24 / 419, rel=1e-12)
    # checkpoint of 405B at 14 B/param = 5.67 TB written at 2 TB/s (Tectonic sustained) = 2.835 s
    assert g.checkpoint_bytes == pytest.approx(405e9 * CHECKPOINT_BYTES_PER_PARAM)
    assert g.checkpoint_stall_s == pytest.approx(405e9 * 14 / 2e12, rel=1e-9)
    # the report states "higher than 90% effective training time" over the snapshot: the model's
    # interruptions (M = 3.09 h), 10-minute restarts and Daly-optimal checkpoints agree (92.4%)
    assert 90 < g.goodput_pct < 100


def test_overrides_reach_the_goodput():
    # no interruptions: expected == ideal, goodput 100%
    a = DEFAULT_ASSUMPTIONS.with_overrides({"gpu_interruptions_per_gpu_hour": 0.0})
    g = training_goodput(86400.0, 1024, 70e9, a)
    assert g.expected_s == 86400.0 and g.goodput_pct == 100.0


@given(ideal=st.floats(1.0, 1e8), gpus=st.integers(1, 200_000), params=st.floats(1e6, 2e12))
def test_goodput_is_a_percentage_and_expected_is_never_faster(ideal, gpus, params):
    g = training_goodput(ideal, gpus, params)
    assert 0.0 <= g.goodput_pct <= 100.0
    assert g.expected_s >= ideal
