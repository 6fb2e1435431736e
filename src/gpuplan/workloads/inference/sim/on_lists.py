"""The event-driven loop interpreted on Python lists: `events._simulate_events` for a process that
runs its kernels as plain Python (jit.py), with the same numbers.

Interpreted, the loop's time goes to numpy scalars: every element read from an array is a numpy
scalar, and arithmetic on numpy scalars costs ~8x Python's (`kernels.blocks_kv_bytes` on np.int64
blocks: 2.2 us a call, on Python ints 0.27 us; timeit, 2026-11-28). Here the state `_event_state`
allocates, the requests and the step tables are copied into lists (`tolist`: Python ints, floats,
bools of the same values), `_run_events` runs on them, and the lists are written back into the
arrays (the results and a closed loop's arrivals).

The same numbers: a Python float operation is the IEEE-754 double operation numpy performs, and an
int64 that stays below 2^53 converts to the same double; the loop writes ints into int arrays and
floats into float arrays (tests/inference/test_interpreted_lists.py checks each list after runs of
every scheduler), so reading a value back gives the value numpy would. Python refuses a division
by zero that numpy's scalars (and numba's `error_model="numpy"`) turn into inf, NaN or 0: the
ArithmeticError leaves the run to the compiled loop (simulator._event_loop), as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuplan.workloads.inference.sim import events


class Row(list):
    """A list standing for a 1-d array in the loop (the kernels read `shape[0]`)."""

    __slots__ = ()

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)


class Grid(list):
    """A list of rows standing for a 2-d array, indexed `[i, j]` as the kernels do."""

    __slots__ = ()

    def __getitem__(self, ij):
        i, j = ij
        return list.__getitem__(self, i)[j]

    def __setitem__(self, ij, value) -> None:
        i, j = ij
        list.__getitem__(self, i)[j] = value

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self), len(list.__getitem__(self, 0)) if len(self) else 0)


def as_lists(value: Any) -> Any:
    """`value` with every array (in namedtuples, recursively) replaced by a Row or Grid of its
    elements as Python scalars; anything else unchanged."""
    if isinstance(value, np.ndarray):
        if value.ndim == 1:
            return Row(value.tolist())
        if value.ndim == 2:
            return Grid(value.tolist())
        raise TypeError(f"no list form for a {value.ndim}-d array")
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(as_lists(v) for v in value))
    return value


def write_back(lists: Any, arrays: Any) -> None:
    """Copy each Row / Grid of `lists` into the array it came from in `arrays` (as_lists)."""
    if isinstance(arrays, np.ndarray):
        arrays[...] = np.asarray(list(lists), dtype=arrays.dtype).reshape(arrays.shape)
    elif isinstance(arrays, tuple) and hasattr(arrays, "_fields"):
        for lst, arr in zip(lists, arrays):
            write_back(lst, arr)


def simulate_events_on_lists(R, E, K, coef, tables, step_limit: int = events.NO_STEP_LIMIT) -> tuple:
    """`events._simulate_events(R, E, K, coef, tables, True, step_limit)` run on lists (module
    docstring); only while the kernels are plain Python functions."""
    state = events._event_state(R, E, K, True)
    R_l, tables_l, state_l = as_lists(R), as_lists(tables), as_lists(state)
    steps, preemptions, ntr, busy, pf_busy = events._run_events(R_l, E, K, coef, tables_l, state_l, step_limit)
    write_back(R_l, R)
    write_back(state_l, state)
    return (state.prog.first, state.prog.finish, R.arrival, steps, preemptions, state.trace_t[:ntr].copy(),
            state.trace_b[:ntr].copy(), busy, pf_busy)
