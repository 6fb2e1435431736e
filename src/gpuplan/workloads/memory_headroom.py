"""The memory headroom: how much of a GPU's memory a plan may use (one knob for training and serving).

    usable_bytes = memory.usable_fraction x GPU memory           (default 0.90)

A plan is accepted (training plan search, `train` with a given plan, `fit`, serving capacity) only
if its modelled per-GPU memory is at most `usable_bytes`. The modelled total already counts the
CUDA context and NCCL buffers as line items; the 10% kept free covers what the model does not
itemise and what a run meets in practice: the PyTorch caching allocator's fragmentation and
reserved-but-unallocated blocks (PyTorch "CUDA semantics: memory management" documents reserved >
allocated), cuBLAS/cuDNN workspaces, NCCL's lazily allocated channels and transient peaks. It is
the same 0.9 vLLM uses by default for all of an engine's memory (`gpu_memory_utilization=0.9`,
vLLM engine arguments documentation); serving's KV budget is `usable_fraction x total - weights
- workspace - reserve` (workloads/inference/memory.py, vLLM's rule).

Set it for one scope with `headroom_scope(0.05)` (the CLI's `--memory-headroom 0.05`),
`knobs.overridden({"memory.usable_fraction": 0.95})`, or `--set usable_memory_fraction=0.95` on
the commands that take `--set` (facilities.assumptions lists it). Validation rows evaluate the
published plan they describe and are not screened by it.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from gpuplan import knobs

KNOB = "memory.usable_fraction"
#: default fraction of GPU memory a plan may use (module docstring for the reason)
USABLE_MEMORY_FRACTION = knobs.register(
    KNOB, unit="fraction", default=0.90, low=0.10, high=1.0,
    source="vLLM gpu_memory_utilization default 0.9 (vLLM engine arguments documentation); PyTorch CUDA "
           "semantics: the caching allocator reserves more than it allocates (fragmentation)",
    scales="the memory a training plan, a fit answer or a serving engine (its KV budget) may use",
)


def usable_fraction() -> float:
    """The fraction of GPU memory plans may use now (the knob, with any override in scope)."""
    return knobs.value(KNOB)


def usable_memory_bytes(capacity_bytes: float) -> float:
    """`usable_fraction() x capacity_bytes`: the most memory a plan may use on a GPU of that size."""
    return usable_fraction() * float(capacity_bytes)


def headroom_note(capacity_bytes: float) -> str:
    """'72.0 GiB usable of 80 GiB (memory headroom 10%; ...)' for messages."""
    frac = usable_fraction()
    return (f"{usable_memory_bytes(capacity_bytes) / 2**30:,.1f} GiB usable of {capacity_bytes / 2**30:,.0f} GiB "
            f"(memory headroom {1 - frac:.0%}; --memory-headroom or --set usable_memory_fraction=)")


@contextmanager
def headroom_scope(headroom: float, field: str = "memory_headroom") -> Iterator[None]:
    """Run a block with `headroom` (fraction kept free, 0 <= headroom <= 0.9) of every GPU's memory."""
    from gpuplan.validation_rules import check_number

    check_number(headroom, field, ge=0.0, le=0.9)
    # rounded: 1.0 - 0.9 is 0.09999999999999998 in binary floating point, below the knob's 0.1
    with knobs.overridden({KNOB: round(1.0 - float(headroom), 12)}):
        yield


__all__ = ["KNOB", "USABLE_MEMORY_FRACTION", "headroom_note", "headroom_scope", "usable_fraction", "usable_memory_bytes"]
