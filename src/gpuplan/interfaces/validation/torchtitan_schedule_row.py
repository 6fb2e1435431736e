"""Virtual pipeline stages of a torchtitan row that names a multi-stage schedule but not its stages per rank.

torchtitan builds its pipeline from `parallelism.pipeline_parallel_schedule`; without explicit split points
it cuts the model itself (`generate_split_points`), and for a schedule of `PipelineScheduleMulti` (several
stages per rank: Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble) it makes
`num_stages_per_rank = 2` ("Multi-stage schedules support more than 2 stages per rank, but this is the
default if no pipeline split is specified"): torchtitan/parallelisms/pipelining_utils.py @ba2469780
(2024-12-19), and the same default after PR #1072 (2025-04-07, torchtitan/distributed/pipeline.py: `1 if
is_single_stage_schedule else 2` unless `pipeline_parallel_layers_per_stage` is set). A single-stage
schedule (1F1B, GPipe) has one stage per rank.

So a torchtitan row with pp > 1 whose notes name a multi-stage schedule and whose `vpp` cell is empty ran
2 virtual stages per rank (`framework_defaults.TORCHTITAN_MULTI_STAGE_STAGES_PER_RANK`, which the torchtitan
config reader `deploy.torchtitan` takes too) (its interleaved bubble (pp - 1) / (2 m) of the micro-batches' time, not
(pp - 1) / m); a row that states `vpp` keeps it, and every other row keeps the caller's rule.
"""

from __future__ import annotations

import re

from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.framework_defaults import TORCHTITAN_MULTI_STAGE_STAGES_PER_RANK

#: Notes naming one of torch.distributed.pipelining's multi-stage schedules ("Interleaved 1F1B",
#: "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble").
_MULTI_STAGE = re.compile(r"\binterleaved|\blooped ?bfs\b|\bzbv", re.IGNORECASE)


def torchtitan_virtual_stages(notes: str, framework: Framework, pp: int) -> tuple[int, list[str]]:
    """(TORCHTITAN_MULTI_STAGE_STAGES_PER_RANK, [the note saying so]) for a torchtitan plan with pp > 1
    whose `notes` name a multi-stage schedule (module docstring; the constant lives in
    workloads.training.framework_defaults), else (1, []): the row says nothing this rule reads."""
    if framework is not Framework.TORCHTITAN or pp <= 1 or not _MULTI_STAGE.search(notes or ""):
        return 1, []
    vpp = TORCHTITAN_MULTI_STAGE_STAGES_PER_RANK
    return vpp, [f"vpp={vpp} (torchtitan's default stages per rank of a multi-stage schedule, unstated)"]


__all__ = ["torchtitan_virtual_stages"]
