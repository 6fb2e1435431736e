"""Every module that declares efficiency knobs, imported in one place so that the registry
(`gpuplan.knobs.REGISTRY`) is complete before it is listed, fitted or overridden.

A module registers its knobs when it is imported (`knobs.register(...)` at module level); a knob
of a module nobody imported yet is unknown to `knobs.value`. `load_all()` imports them all. A new
module that declares knobs is added to `KNOB_MODULES` (a test checks that every `knobs.register`
call in the package lives in one of them).
"""

from __future__ import annotations

import importlib

from gpuplan import knobs

#: Modules with module-level `knobs.register(...)` declarations.
KNOB_MODULES = (
    "gpuplan.catalog.ceilings",
    "gpuplan.primitives.efficiency",
    "gpuplan.primitives.nccl_tuning",
    "gpuplan.primitives.host_memory",
    "gpuplan.workloads.training.step.compute",
    "gpuplan.workloads.training.step.tensor",
    "gpuplan.workloads.training.step.context",
    "gpuplan.workloads.training.step.expert",
    "gpuplan.workloads.training.memory",
    "gpuplan.workloads.training.offload",
    "gpuplan.workloads.inference.cost.operators",
    "gpuplan.workloads.inference.cost.attention_softmax",
    "gpuplan.workloads.inference.sim.frontend",
    "gpuplan.workloads.inference.cost.tp_allreduce",
    "gpuplan.workloads.inference.cost.memory",
    "gpuplan.workloads.memory_headroom",
    "gpuplan.workloads.inference.sim.lengths",
    "gpuplan.interfaces.calibration.hierarchy",
)


def load_all() -> dict[str, knobs.Knob]:
    """Import every module of KNOB_MODULES and return the registry (name -> Knob), sorted by name."""
    for name in KNOB_MODULES:
        importlib.import_module(name)
    return dict(sorted(knobs.REGISTRY.items()))


__all__ = ["KNOB_MODULES", "load_all"]
