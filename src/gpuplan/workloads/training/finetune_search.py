"""The plan search with fine-tuning choices shared by every plan (`plan_search.SearchSpace.fine_tuning`):
the prototype plan the memory screen reads (`memory_grid` applies `fit`'s fine-tuning rules from it),
and the layouts those choices cannot run.

- The choices' own rules (specs.finetune, and those of `TrainPlan._fine_tuning_fits_the_plan` that do
  not depend on the layout, such as `master_weights none` with an FP8 recipe) are checked once, on a
  plan with ZeRO-3 sharding: a violation is an InputError naming `fine_tuning`.
- The layout rule: `offload params` / `nvme` moves parameter shards, so it needs ZeRO-3 / FSDP
  sharding (FSDP CPUOffload(offload_params=True) offloads the flat-parameter shards FSDP owns;
  DeepSpeed's offload_param is a ZeRO stage-3 option); other shardings are dropped from the grid
  (`FINE_TUNING_SHARDING_REASON`). Gradient accumulation with the optimizer in backward cannot occur
  in a search: its plans carry the global batch the memory model reads as one pass.
"""

from __future__ import annotations

import numpy as np
from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.plan import Sharding, TrainPlan
from gpuplan.workloads.training.plan_codes import ShardingCode

#: a fine-tuning choice the layout cannot run (module docstring)
FINE_TUNING_SHARDING_REASON = "offload params moves parameter shards: it needs sharding zero3 or fsdp"


def fine_tuning_proto(proto: TrainPlan, fine_tuning: FineTuning | None) -> TrainPlan:
    """`proto` carrying `fine_tuning`, its layout-free rules checked (module docstring); None: `proto`."""
    if fine_tuning is None:
        return proto
    try:
        TrainPlan(seq_len=proto.seq_len, precision=proto.precision, sharding=Sharding.FSDP, fine_tuning=fine_tuning)
    except ValidationError as exc:
        raise InputError(exc.errors()[0]["msg"].removeprefix("Value error, "), field="fine_tuning") from None
    return proto.model_copy(update={"fine_tuning": fine_tuning})


def forbidden_layouts(proto: TrainPlan, sharding) -> np.ndarray | bool:
    """Where the grid's `sharding` (ShardingCode) cannot run `proto.fine_tuning` (module docstring)."""
    if not proto.fine_tuning.offload.moves_params:
        return False
    return np.less(sharding, ShardingCode.ZERO3)


def drop_forbidden_layouts(proto: TrainPlan, sharding, shape, invalid, rejected: dict[str, int]):
    """`invalid` (the plan search's mask of rejected grid points, of `shape`) with the layouts
    `forbidden_layouts` drops added, counted in `rejected` under FINE_TUNING_SHARDING_REASON when any."""
    fresh = np.broadcast_to(forbidden_layouts(proto, sharding), shape) & ~invalid
    if fresh.any():
        rejected[FINE_TUNING_SHARDING_REASON] = int(np.count_nonzero(fresh))
        return invalid | fresh
    return invalid


__all__ = ["FINE_TUNING_SHARDING_REASON", "FineTuning", "drop_forbidden_layouts", "fine_tuning_proto", "forbidden_layouts"]
