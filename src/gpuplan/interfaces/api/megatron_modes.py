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


def cuda_graph_fields(scope: str | None, framework: Framework) -> dict:
    """The TrainPlan / SearchSpace field of `--cuda-graph-scope` (comma-separated scopes, or none):
    {"cuda_graph_scope": frozenset} where one is set, else {}. InputError (field cuda_graph_scope) for an
    unknown or inconsistent scope (Megatron-core's own rules, TrainPlan) or a framework other than Megatron."""
    from pydantic import ValidationError

    from gpuplan.specs import TrainPlan
    from gpuplan.specs.execution import CudaGraphScope, cuda_graph_scope_of

    if scope is None:
        return {}
    allowed = "none or a comma-separated set of " + ", ".join(m.value for m in CudaGraphScope)
    try:
        parsed = cuda_graph_scope_of(scope)
        TrainPlan(cuda_graph_scope=parsed)
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InputError(f"--cuda-graph-scope: {msg.removeprefix('cuda_graph_scope: ')}", field="cuda_graph_scope",
                         allowed=allowed) from None
    except ValueError as exc:
        raise InputError(f"--cuda-graph-scope: {str(exc).removeprefix('cuda_graph_scope: ')}", field="cuda_graph_scope",
                         allowed=allowed) from None
    if not parsed:
        return {}
    if framework not in (Framework.MEGATRON, Framework.OTHER):
        raise InputError(f"--cuda-graph-scope: a Megatron-LM option; the framework is {framework.value} "
                         "(use --framework megatron or leave it out)", field="cuda_graph_scope", allowed="framework megatron")
    return {"cuda_graph_scope": parsed}


def megatron_modes_json(deterministic: bool, grad_accum_fusion: bool) -> dict:
    """The `--json` keys of the options: `deterministic` and `grad_accum_fusion` (booleans)."""
    return {"deterministic": bool(deterministic), "grad_accum_fusion": bool(grad_accum_fusion)}


def stack_mode_fields(deterministic: bool, grad_accum_fusion: bool, cuda_graph_scope: str | None,
                      checkpoint_early_stop: bool | None, framework: Framework) -> dict:
    """The plan fields of every execution-mode option `train` takes, checked against `framework`:
    Megatron's modes (`megatron_mode_fields`), its CUDA graphs (`cuda_graph_fields`) and the activation
    checkpoint's early stop (api.checkpoint_early_stop_option)."""
    from gpuplan.interfaces.api.checkpoint_early_stop_option import checkpoint_early_stop_fields
    return {**megatron_mode_fields(deterministic, grad_accum_fusion, framework),
            **cuda_graph_fields(cuda_graph_scope, framework),
            **checkpoint_early_stop_fields(checkpoint_early_stop, framework)}


__all__ = ["cuda_graph_fields", "megatron_mode_fields", "megatron_modes_json", "stack_mode_fields"]
