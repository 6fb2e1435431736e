"""`--compile`: which parts of a torchtitan step run under torch.compile, the user's words for the
plan's `compiled_model` / `compiled_loss` (specs.plan.TrainPlan; the models that read them:
`workloads.training.step.compute.elementwise_seconds`, `workloads.training.loss_memory`).

The choices are torchtitan's own `compile.components` (torchtitan/config/job_config.py, class
`Compile`, v0.2.0 2025-10-17 to v0.2.2 2026-02-20: `components` is a list of "model" and "loss",
default both): `none`, `model` (each transformer block, `apply_compile`), `loss` (the cross entropy,
`build_cross_entropy_loss`) or `model+loss` (what `compile.enable = true` compiles by default).

Not given, the framework's default decides: torchtitan's `compile.enable` defaults to False at every
release (v0.1.0's `training.compile: bool = False`; v0.2.x `Compile.enable: bool = False`), so the
plan runs eagerly and `train` lists that among `framework_defaults_assumed`. Other stacks are not
modelled under torch.compile (Megatron-core and MaxText fuse their own kernels; the PyTorch / FSDP
and DeepSpeed loops are counted eager), so a compile other than `none` needs `--framework torchtitan`, but
for a fine-tuning plan on another PyTorch loop (`model` only, see `compile_flags`).
"""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.specs.execution import Framework

#: each choice of `--compile` -> (compiled_model, compiled_loss)
COMPILE_CHOICES: dict[str, tuple[bool, bool]] = {
    "none": (False, False), "model": (True, False), "loss": (False, True), "model+loss": (True, True),
}

#: the line `train` adds to `framework_defaults_assumed` when torchtitan's default decides compile
TORCHTITAN_COMPILE_DEFAULT = (
    "torch.compile off (compile.enable = False, torchtitan/config/job_config.py v0.2.2): eager blocks and loss; "
    "--compile model+loss is compile.enable = true with its default components [\"model\", \"loss\"]"
)


def compile_flags(value: str | None, framework: Framework, fine_tuning=None) -> tuple[bool, bool]:
    """(compiled_model, compiled_loss) of `--compile VALUE` run by `framework`; None: the framework's
    default, off (module docstring). InputError naming --compile for an unknown choice, or for a
    compiled part no model reads: torchtitan reads both; a LoRA / QLoRA plan on another PyTorch loop
    (fsdp, other: finetune_memory.PYTORCH_LOOPS) reads the compiled model only, in its activation
    memory (finetune_activations: an eager SwiGLU keeps silu's output) and, on `other`, in its step time
    (step.compute.eager_native_modules: eager PyTorch modules counted op by op)."""
    if value is None:
        return False, False
    key = str(value).strip().lower().replace(" ", "")
    if key not in COMPILE_CHOICES:
        allowed = ", ".join(COMPILE_CHOICES)
        raise InputError(f"--compile: {value!r} is not one of {allowed}", field="compile", allowed=allowed)
    flags = COMPILE_CHOICES[key]
    from gpuplan.workloads.training.finetune_memory import PYTORCH_LOOPS

    fine_tuning_loop = fine_tuning is not None and not fine_tuning.ordinary and framework in PYTORCH_LOOPS
    if fine_tuning_loop and flags == (True, False):
        return flags
    if any(flags) and framework is not Framework.TORCHTITAN:
        raise InputError(f"--compile: torch.compile is modelled for --framework torchtitan, and as 'model' for "
                         f"LoRA / QLoRA on fsdp or other (the plan runs {framework.value}); give --compile none "
                         f"or --framework torchtitan", field="compile",
                         allowed="none")
    return flags


def compile_label(compiled_model: bool, compiled_loss: bool) -> str:
    """The `--compile` choice of a plan's two flags (the `compile` key of `train --json`'s plans)."""
    return next(k for k, v in COMPILE_CHOICES.items() if v == (bool(compiled_model), bool(compiled_loss)))


def compile_defaults_assumed(framework: Framework, given: bool) -> tuple[str, ...]:
    """The compile line of `framework_defaults_assumed`: torchtitan's default when `--compile` was not given."""
    return (TORCHTITAN_COMPILE_DEFAULT,) if framework is Framework.TORCHTITAN and not given else ()


__all__ = ["COMPILE_CHOICES", "TORCHTITAN_COMPILE_DEFAULT", "compile_defaults_assumed", "compile_flags", "compile_label"]
