"""Shared pieces of the API: ids resolved to specs at the boundary, enum parsing, the one
system-for-a-GPU rule, the one sequence-length default, and the result base class.

Every `gpuplan.api` function accepts either catalog / bundled ids (strings such as "gpt3-175b",
"dgx-h100", "h100-sxm5-80gb") or the spec objects themselves (ModelSpec, Gpu, System, TrainPlan);
this module turns the first into the second, once, so that workloads only ever see specs.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, TypeVar

from gpuplan.errors import InputError
from gpuplan.jsonable import to_jsonable  # noqa: F401  (the API surface: api.to_jsonable)
from gpuplan.specs import Gpu, ModelSpec, System

#: Defaults shared by every command that takes the idea (docs/options.md is the table of them).
from gpuplan.interfaces.api.defaults import DEFAULT_GPU, DEFAULT_MODEL, DEFAULT_SYSTEM  # noqa: E402,F401

E = TypeVar("E", bound=Enum)


class Result:
    """Base of every API result: `to_dict()` is exactly what the CLI prints with `--json`
    (a dict, or a list for the `list`-style commands)."""

    def json_data(self) -> Any:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def to_dict(self) -> Any:
        """The JSON data; while a calibration profile is applied (`--calibration`, `api.apply`), a
        dict result also carries `calibration: {profile, knobs: {name: value}}`."""
        data = to_jsonable(self.json_data())
        if isinstance(data, dict) and "calibration" not in data:
            from gpuplan.interfaces.calibration.profile import calibration_block

            block = calibration_block()
            if block is not None:
                data["calibration"] = block
        return data


# -- ids -> specs -------------------------------------------------------------------------------
def catalog():
    from gpuplan.catalog import load_catalog

    return load_catalog()


def resolve_model(model: str | ModelSpec, field: str = "model") -> ModelSpec:
    """A ModelSpec from a bundled name, a config.json path or directory, or a ModelSpec; an error
    names `field` (the argument that gave it: `model`, `draft_model`)."""
    if isinstance(model, ModelSpec):
        return model
    if not isinstance(model, str):
        raise InputError(f"{field}: expected a model name, config path or ModelSpec, got {type(model).__name__}",
                         field=field)
    from gpuplan.models import load_model

    if field == "model":
        return load_model(model)
    try:
        return load_model(model)
    except InputError as exc:  # the draft model's name, not the target's
        raise InputError(f"{field}: {exc}", field=field, allowed=getattr(exc, "allowed", None)) from None


def resolve_gpu(gpu: str | Gpu) -> Gpu:
    """A Gpu from a catalog GPU id or a Gpu."""
    if isinstance(gpu, Gpu):
        return gpu
    if not isinstance(gpu, str):
        raise InputError(f"gpu: expected a GPU id or Gpu, got {type(gpu).__name__}", field="gpu")
    return catalog().gpu(gpu)


def resolve_system(system: str | System) -> System:
    """A System from a catalog system id (a GPU id names a single-GPU box) or a System."""
    if isinstance(system, System):
        return system
    if not isinstance(system, str):
        raise InputError(f"system: expected a system id or System, got {type(system).__name__}", field="system")
    return catalog().system(system)


def gpu_of(system: System) -> Gpu:
    """The catalog GPU a system is built from."""
    return catalog().gpu(system.gpu)


def system_and_gpu(system: str | System | None, gpu: str | Gpu | None, *, default_gpu: str = DEFAULT_GPU,
                   replica_gpus: int = 1) -> tuple[System, Gpu]:
    """The one rule that picks hardware from `--system` and `--gpu` (docs/options.md):

    - `system` given: its GPU; a `gpu` given as well must be that GPU.
    - only `gpu` (or neither: `default_gpu`): the GPU's widest catalog system
      (`Catalog.widest_system_for`, the largest scale-up domain), which must hold `replica_gpus`
      GPUs in one scale-up domain.
    """
    if system is not None:
        sys_spec = resolve_system(system)
        sys_gpu = gpu_of(sys_spec)
        if gpu is not None and resolve_gpu(gpu).id != sys_gpu.id:
            raise InputError(f"gpu: system '{sys_spec.id}' is built from {sys_gpu.id}, not {resolve_gpu(gpu).id}; "
                             "give --system or --gpu, or matching ones", field="gpu")
        return sys_spec, sys_gpu
    gpu_spec = resolve_gpu(gpu if gpu is not None else default_gpu)
    sys_spec = widest_system(gpu_spec)
    if replica_gpus > sys_spec.scaleup_domain_gpus:
        raise InputError(f"system: no catalog system has {replica_gpus} x {gpu_spec.id} in one scale-up domain "
                         f"(widest: {sys_spec.id}, {sys_spec.scaleup_domain_gpus}); pass --system", field="system")
    return sys_spec, gpu_spec


def widest_system(gpu: Gpu) -> System:
    """`Catalog.widest_system_for`, also for a GPU that is not in the catalog (its PCIe box,
    `Catalog.gpu_box`)."""
    cat = catalog()
    if gpu.id not in cat.gpus:
        return cat.gpu_box(gpu)
    return cat.widest_system_for(gpu.id)


def parse_enum(cls: type[E], raw: str | E, name: str) -> E:
    """An enum member from itself or its value (case-insensitive); InputError listing the allowed values."""
    if isinstance(raw, cls):
        return raw
    try:
        return cls(str(raw).lower())
    except ValueError:
        allowed = ", ".join(v.value for v in cls)
        raise InputError(f"--{name.replace('_', '-')}: '{raw}' is not one of {allowed}", field=name) from None


def default_seq_len(model: ModelSpec) -> int:
    """The one `--seq-len` default: the model's published recipe (catalog.recipes), else
    min(max positions, 4096) (workloads.training.plan_search.default_seq_len); interfaces.planning.defaults."""
    from gpuplan.interfaces.planning.defaults import training_defaults

    return training_defaults(model, None, None)[0]


def count(value: str | float | int | None, name: str) -> float | None:
    """A count from a number or text such as '300B', '15T', '3.14e23' (None stays None)."""
    if value is None:
        return None
    from gpuplan.units import parse_count

    return parse_count(value, field=name)


def positive(value: int | None, name: str) -> None:
    """InputError unless `value` is None or an integer >= 1."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InputError(f"--{name.replace('_', '-')} must be >= 1", field=name)


# -- numbers at the boundary ------------------------------------------------------------------------
#: keyword arguments that are not user quantities (callbacks, element values to encode, codes)
_UNCHECKED = frozenset({"progress", "values", "codes"})
#: integer keywords passed through `**plan_kw` (no annotation to read them from)
_INTEGER_KEYWORDS = frozenset({"tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len", "gpus"})


def _integer_param(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return "int" in text.replace("Sequence", "") and "float" not in text


def checked_numbers(fn):
    """`fn` with every numeric argument (keywords of `**kwargs` too) checked by the CLI's rules
    (gpuplan.validation_rules.check_option: finite, int64, non-negative, > 0 for counts and degrees,
    the caps) before it runs, with the CLI's one-line message naming the option (`--seq-len: must be
    an integer > 0, got nan`); an integral float given for an integer becomes the int."""
    import functools
    import inspect
    import numbers

    from gpuplan.validation_rules import INT64_MAX, check_option

    sig = inspect.signature(fn)
    integer = {name: _integer_param(p.annotation) for name, p in sig.parameters.items()}

    def check(name: str, value: Any, is_int: bool) -> Any:
        if name in _UNCHECKED or isinstance(value, bool) or not isinstance(value, numbers.Real):
            return value
        try:
            # an int given for a float option is checked as a number (a price of 0 is "a finite number > 0"),
            # unless it is past int64 (then the int64 rule names it)
            as_int = is_int or isinstance(value, numbers.Integral) and abs(value) > INT64_MAX
            return check_option("--" + name.replace("_", "-"), value, as_int)
        except InputError as exc:  # the CLI's message; the field is the keyword (what the HTTP API's forms name)
            raise InputError(str(exc), field=name, allowed=exc.allowed) from None

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        for name, value in list(bound.arguments.items()):
            if sig.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                bound.arguments[name] = {k: check(k, v, k in _INTEGER_KEYWORDS) for k, v in value.items()}
            elif sig.parameters[name].kind is not inspect.Parameter.VAR_POSITIONAL:
                bound.arguments[name] = check(name, value, integer.get(name, False))
        return fn(*bound.args, **bound.kwargs)

    return wrapper
