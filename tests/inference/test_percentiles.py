"""sim/percentiles.py: np.percentile's 'linear' values bit for bit, without numpy.ma (issue 35)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.workloads.inference.sim.percentiles import linear_percentiles


def test_hand_computed_values():
    # 1..10: h = 9 q. p50: h = 4.5, 5 + (6 - 5) * 0.5 = 5.5; p90: h = 8.1, g = 0.1 (8.1 - 8 in
    # float64), 9 + 1 * g; p99: h = 8.91, 9 + (10 - 9) * 0.91 (from the right:
    # 10 - 1 * (1 - 0.91)); p100: the largest value
    got = linear_percentiles(np.arange(1.0, 11.0), (50, 90, 99, 100))
    assert got[0] == 5.5
    assert got[1] == 9 + (9 * 0.9 - 8)
    assert got[2] == 10 - (1 - (9 * 0.99 - 8))
    assert got[3] == 10.0
    # one value: every percentile is it
    assert linear_percentiles(np.array([3.25]), (0, 50, 99)) == (3.25, 3.25, 3.25)


def test_signed_zeros_follow_numpy():
    for x in ([-0.0, -0.0], [-0.0], [-0.0, 0.0], [0.0, -0.0, -0.0]):
        arr = np.array(x)
        want = np.percentile(arr, [0, 50, 90, 99, 100])
        got = linear_percentiles(arr, (0, 50, 90, 99, 100))
        assert [np.signbit(v) for v in got] == list(np.signbit(want))
        assert list(got) == list(want)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64, min_value=-1e300, max_value=1e300),
                min_size=1, max_size=60),
       st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=5))
def test_equals_numpy_percentile_bit_for_bit(values, percents):
    x = np.array(values, dtype=np.float64)
    want = np.percentile(x, percents)
    got = linear_percentiles(x, tuple(percents))
    assert np.array_equal(np.array(got), want)
    assert list(np.signbit(np.array(got))) == list(np.signbit(want))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=200_000), min_size=1, max_size=300))
def test_token_lengths_equal_numpy(lengths):
    # sim/lengths.py length_stats passes integer token counts
    x = np.array(lengths)
    assert np.array_equal(np.array(linear_percentiles(x, (50, 90, 99))), np.percentile(x.astype(float), [50, 90, 99]))


def test_imports_no_numpy_ma():
    probe = ("import sys, numpy as np; from gpuplan.workloads.inference.sim.percentiles import linear_percentiles;"
             "linear_percentiles(np.arange(2000.0), (50, 90, 99)); print('numpy.ma' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False"


def _large_samples(seed):
    """Samples above BRACKET_MIN_VALUES (the bracketed selection), shaped to test its brackets: a
    skewed one, sorted either way (the strided subsample is then evenly spread), periodic with the
    subsample's stride (the subsample sees one value), many ties, zeros of both signs at the
    percentile positions (the whole-sample fallback), heavy tails."""
    from gpuplan.workloads.inference.sim.percentiles import BRACKET_MIN_VALUES, SUBSAMPLE

    rng = np.random.default_rng(seed)
    n = BRACKET_MIN_VALUES + int(rng.integers(0, 3 * BRACKET_MIN_VALUES))
    stride = max(1, n // SUBSAMPLE)
    periodic = np.where(np.arange(n) % stride == 0, 1.0, rng.random(n))
    zeros = rng.random(n)
    zeros[: n // 2] = 0.0
    zeros[: n // 4] = -0.0
    return [rng.lognormal(0.0, 1.0, n), np.sort(rng.random(n)), np.sort(rng.random(n))[::-1].copy(), periodic,
            np.repeat(rng.random(50), n // 50 + 1)[:n], rng.integers(-3, 4, n).astype(float), zeros,
            rng.standard_cauchy(n)]


@settings(max_examples=8, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1),
       st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=5))
def test_large_samples_equal_numpy_percentile_bit_for_bit(seed, percents):
    # the bracketed selection (module docstring) against np.percentile itself
    for x in _large_samples(seed):
        want = np.percentile(x, percents)
        got = np.array(linear_percentiles(x, tuple(percents)))
        assert np.array_equal(got, want)
        assert list(np.signbit(got)) == list(np.signbit(want))


def test_bracket_missing_its_position_falls_back():
    # a subsample unlike the whole: every strided value is 1e9 (the subsample's brackets all sit at
    # 1e9) while the rest are 0..1; the bracket misses the median, the whole sample is partitioned
    from gpuplan.workloads.inference.sim.percentiles import BRACKET_MIN_VALUES, SUBSAMPLE, _bracketed

    n = 2 * BRACKET_MIN_VALUES
    x = np.linspace(0.5, 1.0, n)
    x[:: n // SUBSAMPLE] = 1e9
    assert _bracketed(x, [n // 2]) is None
    assert linear_percentiles(x, (50,)) == tuple(np.percentile(x, [50]))
