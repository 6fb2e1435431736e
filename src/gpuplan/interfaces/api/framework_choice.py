"""The training stack a search runs for, as `train` and `plan` both take it: `--framework`, `--compile`,
`--optimizer-impl` and `--deepspeed-release`, resolved once into the values the plan search and the
step-time and memory models read (`plan_search.SearchSpace` fields, the `framework` of
`totals.estimate_training`), and the `framework_defaults_assumed` lines a result reports.

One path for both commands: `gpuplan plan --framework X` hands `estimate_training` the same framework
and SearchSpace fields as `gpuplan train --framework X` (the compiled parts from
`compile_option.compile_flags`, the release through `deepspeed_release.with_deepspeed_release`, the
AdamW implementation as `FineTuning.optimizer_impl` of an ordinary plan), so the plan a `plan` search picks
has the step time `train` gives that plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.interfaces.api._common import parse_enum
from gpuplan.interfaces.api.compile_option import compile_defaults_assumed, compile_flags, compile_label
from gpuplan.interfaces.api.deepspeed_release import parse_deepspeed_release
from gpuplan.interfaces.api.megatron_modes import megatron_mode_fields, megatron_modes_json
from gpuplan.specs.choices import Optimizer, OptimizerImpl
from gpuplan.specs.execution import DeepSpeedRelease, Framework


def framework_defaults_assumed(framework: Framework, deepspeed_release: DeepSpeedRelease, compile_given: bool,
                               optimizer_impl: OptimizerImpl | None, optimizer: Optimizer = Optimizer.ADAMW,
                               cuda_graph_scope=frozenset()) -> list[str]:
    """The `framework_defaults_assumed` lines of a prediction (`train --json`, `plan --json`): the
    framework's documented defaults with its DeepSpeed release first (specs.execution.assumed_defaults_of),
    torchtitan's compile default where `--compile` was not given (compile_option), then the optimizer
    step assumed (workloads.training.step.optimizer_impl.assumed_line), last; for Megatron without
    `--cuda-graph-scope` the no-graphs default (`MEGATRON_NO_GRAPHS`) just before it."""
    from gpuplan.specs.execution import assumed_defaults_of
    from gpuplan.workloads.training.step.optimizer_impl import assumed_line

    graphs = [MEGATRON_NO_GRAPHS] if framework in (Framework.MEGATRON, Framework.OTHER) and not cuda_graph_scope else []
    return [*assumed_defaults_of(framework, deepspeed_release), *compile_defaults_assumed(framework, compile_given),
            *graphs, assumed_line(optimizer_impl, optimizer)]


#: the `framework_defaults_assumed` line of a Megatron prediction without `--cuda-graph-scope`
MEGATRON_NO_GRAPHS = ("CUDA graphs: none (Megatron-core's default cuda_graph_impl none); the Megatron-Bridge "
                      "performance recipes set them per model and GPU (e.g. full_iteration for Qwen3 MXFP8 on GB200, "
                      "26.08): --cuda-graph-scope")


@dataclass(frozen=True)
class FrameworkChoice:
    """`--framework --compile --optimizer-impl --deepspeed-release` of an ordinary (pre-)training search,
    resolved: `framework` the stack timed (given, else the system's default), `compiled` its
    (compiled_model, compiled_loss), `compile_given` whether --compile decided them, `optimizer_impl`
    the AdamW implementation (None: the framework's fused step) and `deepspeed_release` (None: not
    given, the current engine)."""

    framework: Framework
    framework_given: bool
    compiled: tuple[bool, bool]
    compile_given: bool
    optimizer_impl: OptimizerImpl | None
    deepspeed_release: DeepSpeedRelease | None
    deterministic: bool = False  # Megatron's deterministic mode (api.megatron_modes)
    grad_accum_fusion: bool = True  # Megatron's gradient-accumulation fusion (api.megatron_modes)

    def search_fields(self) -> dict:
        """The SearchSpace fields of this choice (plan_search.SearchSpace: compiled_model, compiled_loss,
        optimizer_impl, deepspeed_release), the ones `train` sets for the same options."""
        fields = {"compiled_model": self.compiled[0], "compiled_loss": self.compiled[1],
                  "optimizer_impl": self.optimizer_impl}
        if self.deepspeed_release is not None:
            fields["deepspeed_release"] = self.deepspeed_release
        fields.update(megatron_mode_fields(self.deterministic, self.grad_accum_fusion, self.framework))
        return fields

    def json(self) -> dict:
        """The `--json` keys of the stack: `framework`, `framework_given` (false: the system's default),
        `compile` (the --compile choice in effect), `optimizer_impl` (null: the fused step),
        `deepspeed_release` (null unless deepspeed) and `framework_defaults_assumed`."""
        release = self.deepspeed_release or DeepSpeedRelease.CURRENT
        return {
            "framework": self.framework.value, "framework_given": self.framework_given,
            "compile": compile_label(*self.compiled),
            "optimizer_impl": self.optimizer_impl.value if self.optimizer_impl is not None else None,
            "deepspeed_release": release.value if self.framework is Framework.DEEPSPEED else None,
            "framework_defaults_assumed": framework_defaults_assumed(self.framework, release, self.compile_given,
                                                                     self.optimizer_impl),
            **megatron_modes_json(self.deterministic, self.grad_accum_fusion),
        }


def framework_choice(framework: str | Framework | None, system, *, compile: str | None = None,
                     optimizer_impl: str | OptimizerImpl | None = None,
                     deepspeed_release: str | DeepSpeedRelease | None = None, deterministic: bool = False,
                     grad_accum_fusion: bool = True) -> FrameworkChoice:
    """The options resolved and checked as `train` checks them: the framework (None: the system's,
    framework_defaults.default_framework), `--compile` (compile_option.compile_flags), `--optimizer-impl`
    (specs.choices.OptimizerImpl; every implementation times the AdamW of ordinary training) and
    `--deepspeed-release` (deepspeed_release.parse_deepspeed_release), `--deterministic` and
    `--no-grad-accum-fusion` (Megatron only, api.megatron_modes). Bad input: InputError naming the option."""
    from gpuplan.workloads.training.framework_defaults import default_framework

    fw = parse_enum(Framework, framework, "framework") if framework is not None else default_framework(system)
    compiled = compile_flags(compile, fw)
    impl = parse_enum(OptimizerImpl, optimizer_impl, "optimizer_impl") if optimizer_impl is not None else None
    release = parse_deepspeed_release(deepspeed_release, fw)
    megatron_mode_fields(deterministic, grad_accum_fusion, fw)  # refuses them for another framework
    return FrameworkChoice(fw, framework is not None, compiled, compile is not None, impl, release,
                           bool(deterministic), bool(grad_accum_fusion))


__all__ = ["FrameworkChoice", "framework_choice", "framework_defaults_assumed"]
