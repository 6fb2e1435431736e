"""`--pipeline-schedule` and `--pipeline-flushes` of `gpuplan train` (and the API's `train`): the
pipeline schedule of an evaluated plan (specs.execution.PipelineSchedule: 1f1b or dualpipe) and its
schedule runs per optimizer step (TrainPlan.pipeline_flushes)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import parse_enum, positive
from gpuplan.specs import TrainPlan
from gpuplan.specs.execution import PipelineSchedule


def pipeline_options(plan: TrainPlan | None, schedule: str | None, flushes: int | None) -> TrainPlan | None:
    """`plan` with `--pipeline-schedule` / `--pipeline-flushes` set (TrainPlan.pipeline_schedule /
    pipeline_flushes); unchanged when neither is given. They describe one plan: with a search (plan
    None) they are an error naming the option."""
    if schedule is None and flushes is None:
        return plan
    field = "pipeline_schedule" if schedule is not None else "pipeline_flushes"
    if plan is None:
        raise InputError(f"--{field.replace('_', '-')} applies to one plan: give every parallel degree (--tp --pp --dp "
                         "--ep --vpp --micro-batch --recompute --sharding ...)", field=field)
    update: dict[str, Any] = {}
    if schedule is not None:
        update["pipeline_schedule"] = parse_enum(PipelineSchedule, schedule, "pipeline_schedule")
    if flushes is not None:
        positive(flushes, "pipeline_flushes")
        update["pipeline_flushes"] = flushes
    try:
        return TrainPlan.model_validate({**plan.model_dump(), **update})
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InputError(f"--{field.replace('_', '-')}: {msg}", field=field) from None


__all__ = ["pipeline_options"]
