"""Percentiles of a simulation's per-request samples: `np.percentile(x, percents)` bit for bit,
without importing `numpy.ma`.

numpy's default method ('linear', Hyndman & Fan type 7) partitions the sample at the indexes it
needs, and names them through `np.unique`, which imports `numpy.ma` (10-35 ms of a process's start
on the 2-core machine, issue 35). Here the same arithmetic on a copy partitioned at those indexes (a
partition leaves at each index the value a full sort puts there), following numpy 2.x `_quantile` / `_get_indexes` /
`_lerp` (numpy/lib/_function_base_impl.py) operation for operation, in float64 (Python floats):

    q = p / 100;  h = (n - 1) q;  i = floor(h);  j = i + 1;  i = j = n - 1 where h >= n - 1
    g = h - i  (with numpy's i = -1 stand-in for the last index where h >= n - 1)
    result = v[i] + (v[j] - v[i]) g,  or v[j] - (v[j] - v[i]) (1 - g) where g >= 0.5

(the second form keeps the interpolation exact at the right end). tests/inference/test_percentiles.py
checks it against np.percentile, signed zeros included.
"""

from __future__ import annotations

import math

import numpy as np


def linear_percentiles(x: np.ndarray, percents: tuple[float, ...]) -> tuple[float, ...]:
    """`np.percentile(x, percents)` (method 'linear') of a non-empty 1-d sample of finite values,
    as Python floats, bit for bit (module docstring). The sample is partitioned at the indexes the
    percents need (`np.partition`, O(n), as numpy does), not sorted: a 200,000-request run's
    percentiles cost a sort of each sample otherwise."""
    v = np.asarray(x, dtype=np.float64)
    n = v.size
    picks = []
    for p in percents:
        h = float(n - 1) * (p / 100)
        if h >= n - 1:  # numpy's index -1: the largest value at both ends, g measured from -1
            i = j = n - 1
            g = h - (-1)
        else:
            i = math.floor(h)
            j = i + 1
            g = h - i
        picks.append((i, j, g))
    part = np.partition(v, sorted({k for i, j, _ in picks for k in (i, j)}))
    out = []
    for i, j, g in picks:
        a, b = float(part[i]), float(part[j])
        diff = b - a
        out.append(b - diff * (1 - g) if g >= 0.5 else a + diff * g)
    return tuple(out)
