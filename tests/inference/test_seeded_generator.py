"""arrivals.SeededGenerator: np.random.default_rng(seed) made at its first use (issue 35), the
same draws."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from gpuplan.workloads.inference.sim.arrivals import (ArrivalKind, LengthDistribution, LengthKind, SeededGenerator,
                                                      make_workload)


def test_draws_are_the_seeded_generators():
    lazy, eager = SeededGenerator(42), np.random.default_rng(42)
    assert np.array_equal(lazy.exponential(0.5, 100), eager.exponential(0.5, 100))
    assert np.array_equal(lazy.integers(0, 1000, 50), eager.integers(0, 1000, 50))  # the stream continues


@pytest.mark.parametrize("kind", [ArrivalKind.POISSON, ArrivalKind.CLOSED_LOOP, ArrivalKind.BURST])
def test_workloads_equal_an_eager_generators(kind):
    lens = dict(input_len=LengthDistribution(512, LengthKind.LOGNORMAL, 1.0),
                output_len=LengthDistribution(128, LengthKind.UNIFORM, 0.5))
    lazy = make_workload(SeededGenerator(7), 300, kind, rate=5.0, concurrency=16, **lens)
    eager = make_workload(np.random.default_rng(7), 300, kind, rate=5.0, concurrency=16, **lens)
    for a, b in zip((lazy.arrival_s, lazy.input_len, lazy.output_len), (eager.arrival_s, eager.input_len,
                                                                          eager.output_len)):
        assert np.array_equal(a, b)


def test_nothing_drawn_makes_no_generator():
    rng = SeededGenerator(1)
    make_workload(rng, 10, ArrivalKind.CLOSED_LOOP, concurrency=4, input_len=LengthDistribution(100),
                  output_len=LengthDistribution(10))
    assert rng._rng is None
    assert copy.copy(rng)._seed == 1  # a copy reads its slots, not the Generator's attributes
