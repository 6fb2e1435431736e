"""Communication hidden behind compute: the exposed time of a transfer that overlaps a window of compute.

A collective of `busy` seconds launched beside `window` seconds of independent compute finishes
max(0, busy - window) after the compute, and while both run the compute is slowed by the share of
the GPU the communication holds (`contention`: its SMs, `parallel_groups.collective_sm_fraction`, or
the `training.overlap_contention` knob): exposed = max(0, busy - window) + contention x min(busy,
window) (Calculon's processor_usage; the terms of `data`, `pipeline` and `expert` that overlap).
"""

from __future__ import annotations

import numpy as np


def exposed_behind(busy, window, contention):
    """max(0, busy - window) + contention x min(busy, window) (module docstring), elementwise over
    broadcast arrays: the same operations in the same order as that expression, computed in place on
    its two temporaries where `contention` broadcasts into them (a plan search's arrays are up to a
    few MB, so the allocations and page touches of the expression's three others are saved)."""
    exposed = np.subtract(busy, window)
    hidden = np.minimum(busy, window)
    if isinstance(exposed, np.ndarray) and np.broadcast_shapes(exposed.shape, np.shape(contention)) == exposed.shape:
        np.maximum(0.0, exposed, out=exposed)
        np.multiply(contention, hidden, out=hidden)
        return np.add(exposed, hidden, out=exposed)
    return np.maximum(0.0, exposed) + contention * hidden


__all__ = ["exposed_behind"]
