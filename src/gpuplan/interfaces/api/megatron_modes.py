"""Megatron's execution modes as `train` and `plan` take them: `--deterministic` (Megatron-LM
`--deterministic-mode`) and `--no-grad-accum-fusion` (`--no-gradient-accumulation-fusion`), checked
once and turned into the TrainPlan / SearchSpace fields the step model reads (`deterministic`,
`grad_accum_fusion`; workloads.training.step.deterministic and .grad_accumulation). Both are
Megatron-LM options: another framework is refused with the option named."""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.specs.execution import Framework


def megatron_mode_fields(deterministic: bool, grad_accum_fusion: bool, framework: Framework) -> dict:
    """The TrainPlan / SearchSpace fields of the options, only those set away from their defaults
    ({} for neither); InputError when one is set for a framework other than Megatron."""
    fields = {}
    if deterministic:
        fields["deterministic"] = True
    if not grad_accum_fusion:
        fields["grad_accum_fusion"] = False
    if fields and framework is not Framework.MEGATRON:
        name = "deterministic" if deterministic else "no_grad_accum_fusion"
        raise InputError(f"--{name.replace('_', '-')}: a Megatron-LM option; the framework is {framework.value} "
                         "(use --framework megatron or leave it out)", field=name, allowed="framework megatron")
    return fields


def megatron_modes_json(deterministic: bool, grad_accum_fusion: bool) -> dict:
    """The `--json` keys of the options: `deterministic` and `grad_accum_fusion` (booleans)."""
    return {"deterministic": bool(deterministic), "grad_accum_fusion": bool(grad_accum_fusion)}


__all__ = ["megatron_mode_fields", "megatron_modes_json"]
