"""sim/on_lists.py: the interpreted event loop on Python lists gives the numpy-scalar interpreted
loop's numbers bit for bit, and writes ints into int arrays and floats into float arrays (what makes
a list's value the one the array would hold). Compiled runs are compared in test_kernel_tiers.py
(whose interpreted runs now go through the lists). Both run in a fresh interpreter, where the
kernels are plain Python."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import gpuplan

SRC = str(Path(gpuplan.__file__).resolve().parents[1])


def _tier_scenarios() -> str:
    spec = importlib.util.spec_from_file_location("kernel_tiers", Path(__file__).with_name("test_kernel_tiers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._SCENARIOS


#: runs every scenario of test_kernel_tiers.py; each event-loop call is run three ways: numpy
#: scalars (`_simulate_events` interpreted), lists, and lists with each list's element types checked
#: against its array's dtype before it is written back
_CHILD = r'''
import copy, json, sys
import numpy as np
from gpuplan.workloads.inference import jit
from gpuplan.workloads.inference.sim import events, on_lists, simulator
jit.set_interpreted_steps(10**12)
checked = {"arrays": 0, "bad": []}
real_write_back = on_lists.write_back


def typed_write_back(lists, arrays):
    if isinstance(arrays, np.ndarray):
        want = {"i": int, "f": float, "b": bool}[arrays.dtype.kind]
        flat = [v for row in lists for v in row] if arrays.ndim == 2 else list(lists)
        checked["arrays"] += 1
        # np.empty arrays never written keep their tolist() values, of the right type as well
        if any(type(v) is not want for v in flat):
            checked["bad"].append(str(arrays.dtype))
        real_write_back(lists, arrays)
    elif isinstance(arrays, tuple):  # each array checked, counted and written once
        for lst, arr in zip(lists, arrays):
            typed_write_back(lst, arr)


on_lists.write_back = typed_write_back
mismatch = []
real_lists = simulator.simulate_events_on_lists


def both(R, E, K, coef, tables, step_limit):
    scalar = events._simulate_events(R._replace(arrival=R.arrival.copy()), E, K, coef, tables, True, step_limit)
    got = real_lists(R, E, K, coef, tables, step_limit)
    for a, b in zip(scalar, got):
        if isinstance(a, np.ndarray):
            same = a.dtype == b.dtype and np.array_equal(a, b) and bool((np.signbit(a) == np.signbit(b)).all())
        else:
            same = a == b
        if not same:
            mismatch.append(repr((a, b))[:200])
    return got


simulator.simulate_events_on_lists = both
out = results()
assert not jit.compiled() and "numba" not in sys.modules
print(json.dumps({"scenarios": len(out), "checked": checked, "mismatch": mismatch}))
'''


def test_lists_equal_numpy_scalars_and_keep_each_arrays_type():
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-c", _tier_scenarios() + _CHILD], env=env, capture_output=True, text=True,
                         timeout=600, check=True)
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["scenarios"] == 9  # test_kernel_tiers.SCENARIOS
    assert report["mismatch"] == []
    assert report["checked"]["bad"] == []
    # each event-loop run writes back 5 request arrays + 42 state arrays (Progress 8, Decoding 9, two
    # LinkedLists 6, BlockRing 6, two Heaps 6, Calendar 2, batch, to_dec, preempted, two traces 5);
    # at least one run per scenario
    assert report["checked"]["arrays"] % (5 + 42) == 0 and report["checked"]["arrays"] >= 9 * (5 + 42)


def test_list_forms_index_and_shape_as_arrays_do():
    import numpy as np

    from gpuplan.workloads.inference.sim.on_lists import Grid, Row, as_lists, write_back

    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    g = as_lists(a)
    assert isinstance(g, Grid) and g.shape == (2, 3) and g[1, 2] == 5 and type(g[1, 2]) is int
    g[0, 1] = 40
    r = as_lists(np.array([0.5, -0.0]))
    assert isinstance(r, Row) and r.shape == (2,) and type(r[0]) is float
    r[1] = 2.25
    write_back(g, a)
    b = np.array([0.5, -0.0])
    write_back(r, b)
    assert a.tolist() == [[0, 40, 2], [3, 4, 5]] and b.tolist() == [0.5, 2.25]
