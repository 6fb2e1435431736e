"""Integer codes of the plan axes that are enums in `specs.plan` (recompute, sharding), for the
vectorised formulas: a plan search scores ~10^5-10^6 plans as numpy arrays, so each enum value is
an integer there. `RECOMPUTE_CODE` / `SHARDING_CODE` map a spec enum to its code (FSDP = ZeRO-3)."""

from __future__ import annotations

from enum import IntEnum

from gpuplan.specs.plan import Recompute, Sharding


class RecomputeCode(IntEnum):
    NONE = 0
    SELECTIVE = 1
    FULL = 2


class ShardingCode(IntEnum):
    NONE = 0
    ZERO1 = 1
    ZERO2 = 2
    ZERO3 = 3


RECOMPUTE_CODE = {Recompute.NONE: 0, Recompute.SELECTIVE: 1, Recompute.FULL: 2}
SHARDING_CODE = {Sharding.NONE: 0, Sharding.ZERO1: 1, Sharding.ZERO2: 2, Sharding.ZERO3: 3, Sharding.FSDP: 3}
