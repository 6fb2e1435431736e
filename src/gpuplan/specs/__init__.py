"""Typed, validated spec objects built from the catalog (DESIGN.md "specs" layer).

Units live in field names: *_bytes, *_gbps (gigaBYTES/s, decimal), *_gbit_s (network line
rate, gigabits/s), *_tflops (1e12 FLOP/s), *_w (watts), *_mhz.

The package imports nothing when it is imported (PEP 562 `__getattr__`): `from gpuplan.specs import
Gpu` imports `specs.gpu` then, and `gpuplan.specs.choices` (the plan's enums, what the CLI's options
need) stays free of pydantic and numpy (issue 35).
"""

from __future__ import annotations

import importlib
from typing import Any

#: module -> the names the package gives
_SOURCES: dict[str, tuple[str, ...]] = {
    "gpuplan.specs.gpu": ("DTYPES", "Gpu", "PeakTflops"),
    "gpuplan.specs.interconnect": ("Interconnect",),
    "gpuplan.specs.system": ("System",),
    "gpuplan.specs.host": ("HostCpu",),
    "gpuplan.specs.cloud": ("CloudPrice",),
    "gpuplan.specs.model": ("FfnKind", "MlaSpec", "ModelSpec", "MoeSpec"),
    "gpuplan.specs.mixers": ("FfnSlot", "GatedDeltaNetSpec", "Mamba2Spec", "MixerKind", "RgLruSpec", "ShortConvSpec"),
    "gpuplan.specs.choices": ("Precision", "Recompute", "Sharding"),
    "gpuplan.specs.plan": ("TrainPlan",),
    "gpuplan.specs.execution": ("AttentionKernel", "Execution", "Framework"),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = [
    "DTYPES", "Gpu", "PeakTflops", "Interconnect", "System", "HostCpu", "CloudPrice",
    "FfnKind", "MlaSpec", "ModelSpec", "MoeSpec", "FfnSlot", "GatedDeltaNetSpec", "Mamba2Spec", "MixerKind",
    "RgLruSpec", "ShortConvSpec", "Precision", "Recompute", "Sharding", "TrainPlan",
    "AttentionKernel", "Execution", "Framework",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuplan.specs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
