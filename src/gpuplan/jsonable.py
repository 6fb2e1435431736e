"""Plain JSON data from gpuplan's result objects: the one conversion every `--json` and API answer
uses (`gpuplan.api.to_jsonable`). A bottom utility: it imports no gpuplan layer, so the CLI can render
without importing the API."""

from __future__ import annotations

import dataclasses
import math
from enum import Enum
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data from dataclasses / pydantic models / enums / numpy scalars (NaN, inf -> None)."""
    if hasattr(obj, "model_dump"):
        return to_jsonable(obj.model_dump())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and getattr(obj, "shape", None) == ():
        return to_jsonable(obj.item())
    if hasattr(obj, "tolist"):
        return to_jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
