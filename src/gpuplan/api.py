"""`gpuplan.api`: the stable Python surface (implemented in gpuplan.interfaces.api; see its docstring).

Importing it imports nothing else: each name is imported from its module on first use (PEP 562), so
a command loads only what it calls (issue 35).
"""

from __future__ import annotations

from typing import Any

from gpuplan.interfaces.api import __all__, export  # noqa: F401


def __getattr__(name: str) -> Any:
    value = export(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
