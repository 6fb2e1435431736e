"""`train`'s DeepSpeed release (specs.execution.DeepSpeedRelease): the option's parsing, how it reaches
the searched space and the given plan, and the `train --json` keys that report it."""

from __future__ import annotations

import dataclasses

from gpuplan.errors import InputError
from gpuplan.specs import TrainPlan
from gpuplan.specs.execution import DeepSpeedRelease, Framework, deepspeed_release_of

#: what `--deepspeed-release` accepts (specs.execution.deepspeed_release_of)
DEEPSPEED_RELEASE_ALLOWED = "current, or a DeepSpeed version such as 0.5 or 0.14 (below 0.6: the 2021 ZeRO-3 engine)"


def parse_deepspeed_release(raw: str | DeepSpeedRelease | None, framework: Framework) -> DeepSpeedRelease | None:
    """`--deepspeed-release`: None when not given; else the release (specs.execution.deepspeed_release_of),
    an InputError naming the option and the allowed values for anything else or for a plan that does
    not run DeepSpeed."""
    if raw is None:
        return None
    try:
        release = deepspeed_release_of(raw)
    except ValueError:
        raise InputError(f"--deepspeed-release: '{raw}' is not {DEEPSPEED_RELEASE_ALLOWED}", field="deepspeed_release",
                         allowed=DEEPSPEED_RELEASE_ALLOWED) from None
    if framework is not Framework.DEEPSPEED:
        raise InputError(f"--deepspeed-release: applies to --framework deepspeed, not {framework.value}",
                         field="deepspeed_release", allowed="with --framework deepspeed")
    return release


def with_deepspeed_release(space, plan: TrainPlan | None, raw: str | DeepSpeedRelease | None, framework: Framework):
    """(space, plan) running the release `raw` names (`parse_deepspeed_release`); unchanged when it is
    None (the given plan's own release, else the current engine)."""
    release = parse_deepspeed_release(raw, framework)
    if release is None:
        return space, plan
    plan = plan.model_copy(update={"deepspeed_release": release}) if plan is not None else None
    return dataclasses.replace(space, deepspeed_release=release), plan


def framework_json(framework: Framework, plan: TrainPlan) -> dict:
    """The `train --json` keys on the stack: `framework` (searched / timed for) and `deepspeed_release`
    ("current" or "0.5"; null for other frameworks). `framework_defaults_assumed` is
    TrainResult.defaults_assumed (the release's lines first: `assumed_defaults_of`)."""
    return {"framework": framework.value,
            "deepspeed_release": plan.deepspeed_release.value if framework is Framework.DEEPSPEED else None}


__all__ = ["DEEPSPEED_RELEASE_ALLOWED", "framework_json", "parse_deepspeed_release", "with_deepspeed_release"]
