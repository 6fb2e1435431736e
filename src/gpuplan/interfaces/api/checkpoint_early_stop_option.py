"""`--checkpoint-early-stop / --no-checkpoint-early-stop` of `train`: whether the plan's full activation
checkpointing stops its recompute once every saved tensor is rebuilt (PyTorch's non-reentrant
`torch.utils.checkpoint` with early stop; the model: workloads.training.step.checkpoint_early_stop),
checked once and turned into the TrainPlan / SearchSpace field `checkpoint_early_stop`. Not given, the
framework's default holds (`Framework.checkpoint_stops_early`: fsdp on, torchtitan off since its PR
#1580 of 2025-08-29). A user sets it for a torchtitan run before that PR (or with
`activation_checkpoint.early_stop = true`), or off for a Composer run with reentrant checkpointing."""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.specs.execution import Framework


def checkpoint_early_stop_fields(early_stop: bool | None, framework: Framework) -> dict:
    """The TrainPlan / SearchSpace field of the option ({} when not given); InputError when early stop is
    asked of a stack whose checkpoint is reentrant (`Framework.checkpoint_early_stop_allowed`)."""
    if early_stop is None:
        return {}
    if early_stop and not Framework(framework).checkpoint_early_stop_allowed:
        raise InputError(f"--checkpoint-early-stop: {Framework(framework).value} checkpoints reentrantly (the whole "
                         "layer re-runs); early stop needs fsdp, torchtitan, transformers or other",
                         field="checkpoint_early_stop", allowed="framework fsdp, torchtitan, transformers, other")
    return {"checkpoint_early_stop": bool(early_stop)}


__all__ = ["checkpoint_early_stop_fields"]
