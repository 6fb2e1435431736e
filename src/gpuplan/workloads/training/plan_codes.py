"""Integer codes of the plan axes that are enums or choices, for the vectorised formulas: a plan
search scores ~10^5-10^6 plans as numpy arrays, so each value is an integer there. A code is an
`IntEnum` member (it compares and broadcasts as its integer); `RECOMPUTE_CODE` / `SHARDING_CODE`
map a spec enum to its code (FSDP = ZeRO-3) and `RECOMPUTE_OF_CODE` / `SHARDING_OF_CODE` map back.
Sharding codes are ordered by what is sharded, so `sharding >= ShardingCode.ZERO2` reads "the
gradients are sharded" (ZeRO stages 1-3, Rajbhandari et al. 2020 sec. 5)."""

from __future__ import annotations

from enum import IntEnum

from gpuplan.specs.plan import Recompute, Sharding


class RecomputeCode(IntEnum):
    NONE = 0
    SELECTIVE = 1
    FULL = 2


class ShardingCode(IntEnum):
    """What ZeRO / FSDP shards over the data-parallel group: nothing, + optimizer states (ZERO1),
    + gradients (ZERO2), + parameters (ZERO3 = FSDP)."""

    NONE = 0
    ZERO1 = 1
    ZERO2 = 2
    ZERO3 = 3


class ExpertTpCode(IntEnum):
    """The expert tensor-parallel choice of a plan search: etp = tp (Megatron's default) or etp = 1
    (ep folded over the tp ranks too, Megatron-core MoE parallel folding)."""

    TP = 0
    ONE = 1


RECOMPUTE_CODE = {Recompute.NONE: RecomputeCode.NONE, Recompute.SELECTIVE: RecomputeCode.SELECTIVE,
                  Recompute.FULL: RecomputeCode.FULL}
SHARDING_CODE = {Sharding.NONE: ShardingCode.NONE, Sharding.ZERO1: ShardingCode.ZERO1, Sharding.ZERO2: ShardingCode.ZERO2,
                 Sharding.ZERO3: ShardingCode.ZERO3, Sharding.FSDP: ShardingCode.ZERO3}
RECOMPUTE_OF_CODE = {code: recompute for recompute, code in RECOMPUTE_CODE.items()}
#: ZeRO-3 reads back as Sharding.ZERO3 (FSDP is the same code)
SHARDING_OF_CODE = {code: sharding for sharding, code in SHARDING_CODE.items() if sharding is not Sharding.FSDP}
