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
"""

from gpuplan.facilities.run_cost import price_source
from gpuplan.interfaces.api._common import DEFAULT_GPU, DEFAULT_MODEL, DEFAULT_SYSTEM, Result, checked_numbers, to_jsonable
from gpuplan.interfaces.api.calibration import apply, bench, calibrate_fit, calibrate_import, calibrate_knobs, load_profile
from gpuplan.interfaces.api.comm import comm
from gpuplan.interfaces.api.deploy import (
    emit_fit, emit_plan_training, emit_serve, emit_train, serve_engine_for, serve_run_from, train_from, train_options_for,
    written_for,
)
from gpuplan.interfaces.api.launch_configs import serve_plan_config, serve_run_config, train_config
from gpuplan.interfaces.api.formats import (
    formats_compare, formats_decode, formats_encode, formats_matmul, formats_table,
)
from gpuplan.interfaces.api.hardware import (
    hw_compare, hw_interconnects, hw_list, hw_prices, hw_show, systems_list, systems_show,
)
from gpuplan.interfaces.api.kernel import (
    kernel_access, kernel_amdahl, kernel_banks, kernel_divergence, kernel_gustafson, kernel_little, kernel_occupancy,
    kernel_roofline,
)
from gpuplan.interfaces.api.mig import mig_plan, mig_profiles
from gpuplan.interfaces.api.models import model_list, model_params, model_show
from gpuplan.interfaces.api.planning import dc_assumptions, dc_fabric, dc_power, dc_tco, plan
from gpuplan.interfaces.api.serving import (
    DEFAULT_ENGINE, DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN, DEFAULT_RATE, DEFAULT_TPOT_MS, DEFAULT_TTFT_MS, SERVING_ENGINES,
    serve, serve_plan, serve_plan_disaggregated, serve_run,
)
from gpuplan.interfaces.api.serving_frontier import serve_frontier
from gpuplan.interfaces.api.training import DEFAULT_GPUS, fit_max_batch, fit_max_seq, fit_min_gpus, fit_train, train
from gpuplan.interfaces.api.validation import VALIDATION_SETS, validate, validate_cv
from gpuplan.workloads.memory_headroom import headroom_scope as memory_headroom

__all__ = [
    "Result", "to_jsonable", "price_source",
    "DEFAULT_MODEL", "DEFAULT_SYSTEM", "DEFAULT_GPU", "DEFAULT_GPUS", "DEFAULT_INPUT_LEN", "DEFAULT_OUTPUT_LEN",
    "DEFAULT_RATE", "DEFAULT_TTFT_MS", "DEFAULT_TPOT_MS", "DEFAULT_ENGINE", "SERVING_ENGINES", "VALIDATION_SETS",
    "train", "fit_train", "fit_max_batch", "fit_max_seq", "fit_min_gpus",
    "serve", "serve_run", "serve_plan", "serve_plan_disaggregated", "serve_frontier",
    "plan", "validate", "validate_cv", "calibrate_knobs", "calibrate_fit", "calibrate_import", "load_profile", "apply", "bench", "comm",
    "model_show", "model_params", "model_list",
    "hw_list", "hw_show", "hw_compare", "hw_interconnects", "hw_prices", "systems_list", "systems_show",
    "dc_fabric", "dc_power", "dc_tco", "dc_assumptions",
    "mig_plan", "mig_profiles",
    "kernel_occupancy", "kernel_roofline", "kernel_access", "kernel_banks", "kernel_divergence", "kernel_amdahl",
    "kernel_gustafson", "kernel_little",
    "formats_table", "formats_compare", "formats_encode", "formats_decode", "formats_matmul",
    "memory_headroom",
    "emit_train", "emit_fit", "emit_plan_training", "emit_serve", "train_from", "serve_run_from", "train_options_for",
    "serve_engine_for", "written_for", "train_config", "serve_run_config", "serve_plan_config",
]

# Every function above checks its numeric arguments with the CLI's rules and messages at the call
# (`checked_numbers`: finite, int64, ranges, caps), so a script gets the same one-line InputError a
# command line does.
#: functions that take results or names, not numbers to check
_UNCHECKED = ("to_jsonable", "price_source", "memory_headroom", "emit_train", "emit_fit", "emit_serve", "written_for",
              "train_options_for", "serve_engine_for")
for _name in __all__:
    _fn = globals()[_name]
    if callable(_fn) and not isinstance(_fn, type) and _name not in _UNCHECKED:
        globals()[_name] = checked_numbers(_fn)
del _name, _fn
