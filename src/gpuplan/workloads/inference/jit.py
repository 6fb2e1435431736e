"""Numba when it pays: the serving model's kernels (kernels.py, sim/events.py, sim/simulator.py,
sim/decode_pool.py) are plain Python functions until the process compiles them, and a process
compiles them once its simulations have run long enough to repay it.

Compiling costs a fixed start-up: importing numba (~0.19 CPU-s) and loading the cached machine code
(~0.15 CPU-s, numba's typing and lowering registries), ~0.35 CPU-s on the 2-core machine; the same
source interpreted costs ~17 us per engine step of the event-driven loop run on Python lists
(sim/on_lists.py; ~40 us on numpy scalars) (`gpuplan serve run llama-3-8b`: 2,831 steps in
0.047 CPU-s interpreted, 0.4 ms compiled; 2026-11-28). A process
therefore runs its event-driven simulations interpreted while they total at most
`INTERPRETED_STEPS` engine steps (~0.35 CPU-s, the compile cost): the run that would pass the budget
stops there, the kernels are compiled, and it and every later run go compiled. That is the
ski-rental rule: whatever the runs to come, the process spends at most twice what the better choice
made in hindsight would have. The other loops (the step-by-step reference `_simulate`, speculative
decoding's; the decode pool's `_decode_loop`) always run compiled (`compile_kernels` first).

Interpreted and compiled runs give the same numbers: the kernels use int64 and float64 only, with
numpy's division semantics (`error_model="numpy"`) and no fastmath, so every operation is the
IEEE-754 one Python performs, in the same order (tests/inference/test_kernel_tiers.py compares
them on every scheduler, eviction, windows, prefix caching and CUDA graphs).

`kernel(**options)` is the decorator: it records the function and its numba options and returns
the function itself. `compile_kernels()` imports numba, makes each recorded function a numba
dispatcher (`numba.njit(**options)`) and puts the dispatcher wherever a module holds the plain
function (a kernel calling another finds the dispatcher, as numba requires, and so does a module
that imported it by name); kernels defined after that are compiled at once. Numba's on-disk cache
(`cache=True`) is keyed by the function's file and line, so it is the same cache as before.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

#: interpreted engine steps of the event-driven loop a process may run before compiling: about
#: numba's start-up (0.35 CPU-s) at ~17 us per step on lists (module docstring): 0.35 / 17e-6 = 20,600
INTERPRETED_STEPS = 20_000

#: (function, numba options) of each kernel recorded while interpreted
_KERNELS: list[tuple[Callable, dict[str, Any]]] = []
_STATE = {"compiled": False, "steps_left": INTERPRETED_STEPS}
_COMPILING = threading.Lock()  # one thread compiles and rebinds (the web app serves from threads)


def kernel(**options: Any) -> Callable[[Callable], Callable]:
    """Decorator of a numba kernel with `numba.njit` options: the function itself while the
    process runs interpreted, its dispatcher once it compiles (module docstring)."""

    def record(func: Callable) -> Callable:
        if _STATE["compiled"]:
            from numba import njit

            return njit(**options)(func)
        _KERNELS.append((func, options))
        return func

    return record


def compiled() -> bool:
    """Whether this process runs the kernels compiled."""
    return _STATE["compiled"]


def compile_kernels() -> None:
    """Compile every kernel (numba dispatchers, each compiled or loaded from numba's cache at its
    first call) and put each dispatcher where a module holds the plain function. Once per process."""
    with _COMPILING:
        if _STATE["compiled"]:
            return
        from numba import njit

        dispatchers = {id(func): (func, njit(**options)(func)) for func, options in _KERNELS}
        for module in list(sys.modules.values()):
            names = getattr(module, "__dict__", None)
            if not isinstance(names, dict):
                continue
            for name, value in list(names.items()):
                hit = dispatchers.get(id(value))
                if hit is not None and hit[0] is value:
                    names[name] = hit[1]
        _KERNELS.clear()
        _STATE["compiled"] = True


def interpreted_steps_left() -> int:
    """Engine steps this process may still run interpreted (0 once compiled)."""
    return 0 if _STATE["compiled"] else _STATE["steps_left"]


def spend_interpreted_steps(steps: int) -> None:
    """Count `steps` interpreted engine steps against the budget."""
    _STATE["steps_left"] = max(0, _STATE["steps_left"] - int(steps))


def set_interpreted_steps(steps: int) -> None:
    """Set the budget of interpreted engine steps this process has left (tests: a budget no run
    reaches keeps every run interpreted; 0 compiles at the next run)."""
    _STATE["steps_left"] = max(0, int(steps))


__all__ = ["INTERPRETED_STEPS", "compile_kernels", "compiled", "interpreted_steps_left", "kernel",
           "set_interpreted_steps", "spend_interpreted_steps"]
