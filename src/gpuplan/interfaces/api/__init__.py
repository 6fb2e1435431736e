"""`gpuplan.api`: the stable Python surface. The CLI parses options, calls one of these functions
and renders the result; `result.to_dict()` is exactly what the command prints with `--json`.

Names follow the command line: `gpuplan serve plan` is `serve_plan`, `gpuplan hw show` is
`hw_show`. Every function accepts catalog / bundled ids as strings ("gpt3-175b", "dgx-h100",
"h100-sxm5-80gb") or the spec objects (ModelSpec, Gpu, System, TrainPlan); ids are resolved here,
at the boundary. Options and their defaults: docs/options.md.

    >>> from gpuplan import api
    >>> api.train("gpt3-175b", "dgx-h100", 1024, tokens="300B").to_dict()["days"]  # doctest: +SKIP

`with api.memory_headroom(0.05): ...` runs the block with 5% of each GPU's memory kept free instead
of the default 10% (gpuplan.workloads.memory_headroom; `overrides={"usable_memory_fraction": 0.95}`
does the same for one call of train / plan / serve_plan).

The package imports nothing when it is imported: each name is imported from its module the first
time it is asked for (PEP 562 `__getattr__`), so `gpuplan hw list` loads the catalog and not the
serving simulator, and the CLI can build its options without loading the API (issue 35).
"""

from __future__ import annotations

import importlib
from typing import Any

_API = "gpuplan.interfaces.api"

#: module -> the names it gives the API (in the order `__all__` lists them)
_SOURCES: dict[str, tuple[str, ...]] = {
    "gpuplan.facilities.run_cost": ("price_source",),
    f"{_API}._common": ("Result", "to_jsonable"),
    f"{_API}.defaults": (
        "DEFAULT_MODEL", "DEFAULT_SYSTEM", "DEFAULT_GPU", "DEFAULT_GPUS", "DEFAULT_INPUT_LEN", "DEFAULT_OUTPUT_LEN",
        "DEFAULT_RATE", "DEFAULT_TTFT_MS", "DEFAULT_TPOT_MS", "DEFAULT_ENGINE", "VALIDATION_SETS",
    ),
    f"{_API}.serving": ("SERVING_ENGINES", "serve", "serve_run", "serve_plan", "serve_plan_disaggregated"),
    f"{_API}.serving_frontier": ("serve_frontier",),
    f"{_API}.validation": ("validate", "validate_cv"),
    f"{_API}.training": ("train", "fit_train", "fit_max_batch", "fit_max_seq", "fit_min_gpus"),
    f"{_API}.planning": ("plan", "dc_fabric", "dc_power", "dc_tco", "dc_assumptions"),
    f"{_API}.calibration": ("calibrate_knobs", "calibrate_fit", "calibrate_import", "load_profile", "apply", "bench"),
    f"{_API}.comm": ("comm",),
    f"{_API}.models": ("model_show", "model_params", "model_list"),
    f"{_API}.hardware": ("hw_list", "hw_show", "hw_compare", "hw_interconnects", "hw_prices", "hw_hosts", "systems_list",
                         "systems_show"),
    f"{_API}.mig": ("mig_plan", "mig_profiles"),
    f"{_API}.kernel": ("kernel_occupancy", "kernel_roofline", "kernel_access", "kernel_banks", "kernel_divergence",
                       "kernel_amdahl", "kernel_gustafson", "kernel_little"),
    f"{_API}.formats": ("formats_table", "formats_compare", "formats_encode", "formats_decode", "formats_matmul"),
    "gpuplan.workloads.memory_headroom": ("memory_headroom",),
    f"{_API}.deploy": ("emit_train", "emit_fit", "emit_plan_training", "emit_serve", "train_from", "serve_run_from",
                       "train_options_for", "serve_engine_for", "written_for"),
    f"{_API}.launch_configs": ("train_config", "serve_run_config", "serve_plan_config"),
}
#: a name whose attribute in its module is called differently
_ATTRIBUTE = {"memory_headroom": "headroom_scope"}
#: name -> module
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = [name for names in _SOURCES.values() for name in names]

# Every function above checks its numeric arguments with the CLI's rules and messages at the call
# (`checked_numbers`: finite, int64, ranges, caps), so a script gets the same one-line InputError a
# command line does.
#: functions that take results or names, not numbers to check
_UNCHECKED = ("to_jsonable", "price_source", "memory_headroom", "emit_train", "emit_fit", "emit_serve", "written_for",
              "train_options_for", "serve_engine_for")

_resolved: dict[str, Any] = {}


def export(name: str) -> Any:
    """The API's `name` (a function wrapped by `checked_numbers`, or a constant), imported from its
    module on first use; AttributeError for a name the API does not have."""
    if name in _resolved:
        return _resolved[name]
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuplan.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _ATTRIBUTE.get(name, name))
    if callable(value) and not isinstance(value, type) and name not in _UNCHECKED:
        from gpuplan.interfaces.api._common import checked_numbers

        value = checked_numbers(value)
    _resolved[name] = value
    return value


def __getattr__(name: str) -> Any:
    # A submodule of the same name (`comm`) is set on the package when it is first imported, which
    # would hide the function: `export` reads the table, never the package's attributes.
    value = export(name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
