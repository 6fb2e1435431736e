"""What a launch config says, in gpuplan's terms: the records every emitter writes from and every
reader returns, and the one rule that names a model the way the engines do (a Hugging Face repo id).

- `TrainingLaunch`: the model, the TrainPlan (its framework included), the GPU count and the steps
  of a training run; `unmodelled`: the options of the read config gpuplan does not model.
- `ServingLaunch`: one serving instance: the model, tp / pp / ep / attention-DP, weight and KV
  formats, and the EngineProfile (workloads.inference.engines) whose limits it states: sequences
  and tokens per step, KV memory fraction, block size, CUDA-graph batch sizes, scheduler kind.
- `hub_id` (models.hub_ids, re-exported) / `model_from_id`: a bundled model's Hugging Face repo id
  (from its source URL) and back (models.bundled.bundled_name_for_hub_id through load_model: the one
  resolver of Hub ids); any other name is a local path the engine loads (read back through gpuplan.models).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuplan.errors import InputError
from gpuplan.models.hub_ids import hub_id
from gpuplan.specs import ModelSpec, TrainPlan

#: `--dtype` values of the vLLM and SGLang servers (both take torch dtype names) for 16/32-bit weights
TORCH_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True)
class TrainingLaunch:
    """A training run as a framework's config states it (module docstring)."""

    target: str
    model: ModelSpec
    plan: TrainPlan
    gpus: int
    steps: int | None = None
    unmodelled: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServingLaunch:
    """One serving instance as an engine's command states it (module docstring). `engine` is the
    EngineProfile in effect; `model_id` what the engine loads (repo id or path)."""

    target: str
    model: ModelSpec
    model_id: str
    engine: object  # gpuplan.workloads.inference.engines.EngineProfile
    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    unmodelled: tuple[str, ...] = field(default=())
    attention_dp_balance: bool = False  # the engine's attention-DP balance scheduler (Deployment.attention_dp_balance)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


def model_id(model: ModelSpec) -> str:
    """What an engine command names the model by: its Hub repo id, else its config's folder, else
    its name (a path the user replaces with the checkpoint's)."""
    found = hub_id(model)
    if found:
        return found
    src = model.source or ""
    if src.endswith("config.json"):
        return src[: -len("config.json")].rstrip("/") or "."
    return model.name


def model_from_id(name: str, field_name: str = "model") -> ModelSpec:
    """The ModelSpec an engine's model argument names: a bundled model by Hub repo id or name, or a
    checkpoint folder / config.json on this machine (gpuplan.models.load_model)."""
    from gpuplan.models import load_model

    if not name:
        raise InputError(f"{field_name}: the command names no model", field=field_name)
    try:
        return load_model(name)
    except (OSError, RuntimeError, ValueError) as exc:  # InputError, or a name no path can be (~user, too long)
        if not isinstance(exc, InputError):
            raise InputError(f"{field_name}: '{name[:80]}' is not a model name or a readable path", field=field_name) from None
        raise InputError(f"{field_name}: '{name}' is neither a bundled model's Hub id nor a local config "
                         f"({str(exc).split(': ', 1)[-1]})", field=field_name) from None


def weight_name(dtype) -> str:
    """A stored format's name (`bf16`, `fp8`, ...) from a StoredFormat or a string."""
    return getattr(dtype, "value", dtype)


def refuse(field_name: str, message: str, allowed: str | None = None) -> InputError:
    """The one-line error of an option the target cannot state."""
    return InputError(f"{field_name}: {message}", field=field_name, allowed=allowed)


def profile_for(engine_name: str, **limits):
    """The named engine's EngineProfile (workloads.inference.engines) with the limits a command
    stated in place of its defaults (None keeps the default)."""
    from dataclasses import replace

    from gpuplan.workloads.inference.engines import engine_profile

    base = engine_profile(engine_name)
    return replace(base, **{k: v for k, v in limits.items() if v is not None})


def memory_fraction_of(profile) -> float:
    """The KV memory fraction a command must state: the profile's, or (None) the knob its budget
    rule reads (workloads.inference.cost.memory.memory_plan): memory.usable_fraction for the total-memory
    rule, the TensorRT-LLM free-memory knob for the free-memory rule."""
    if profile.memory_fraction is not None:
        return float(profile.memory_fraction)
    from gpuplan import knobs
    from gpuplan.workloads.inference.cost.memory import KvBudgetRule
    from gpuplan.workloads.memory_headroom import usable_fraction

    if profile.rule is KvBudgetRule.FREE:
        return float(knobs.value("serving.memory.trtllm_free_gpu_memory_fraction"))
    return float(usable_fraction())
