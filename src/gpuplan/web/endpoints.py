"""The HTTP API's table: one endpoint per `gpuplan` command, read off the `gpuplan.api` functions.

An endpoint is named by the command's words (`gpuplan serve plan` -> `POST /api/v1/serve/plan`),
calls the api function of the same name (`api.serve_plan`) with the request's JSON fields as keyword
arguments, and answers `result.to_dict()`: exactly what the command prints with `--json`.

The request fields are the function's own parameters (names, defaults), typed for JSON:

- a parameter annotated with a sequence (`Sequence[str]`) is a list of strings;
- `bool`, `int`, `float` annotations keep their type (`int | float` is a float);
- anything naming a spec object (`str | ModelSpec`, `str | Gpu`) is its id, a string;
- `overrides` is a list of KEY=VALUE strings (`--set`);
- a string holds at most MAX_TEXT_CHARS characters and a list at most MAX_LIST_ITEMS items (the
  longest real values: an expression, a list of MIG profiles), so no field makes unbounded work.

Fields that name a model or a dataset (PATH_FIELDS) take bundled names only: the CLI also reads a
config.json or a CSV from a path there, which over HTTP would read the server's disk (app.py
refuses such a value).

Parameters that would make the server read or write a path it was given (`plot`, `file`, `path`, `adapter`),
old spellings of renamed options and Python-only arguments (`progress`, a TrainPlan) are not
offered. `command(endpoint, fields)` writes the `gpuplan ...` line that prints the same JSON.
"""

from __future__ import annotations

import inspect
import shlex
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Optional, Union

from pydantic import Field, StringConstraints

from gpuplan import api

#: longest string field (a predicate expression, a model name, a list of formats)
MAX_TEXT_CHARS = 10_000
#: longest list field (MIG profiles requested, GEMM shapes, values to encode)
MAX_LIST_ITEMS = 10_000
Text = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)]
TextList = Annotated[list[Text], Field(max_length=MAX_LIST_ITEMS)]
#: fields whose value the CLI may read as a path (a config.json, a CSV of lengths): bundled names only
PATH_FIELDS = frozenset({"model", "draft_model", "lengths"})

#: parameters never offered over HTTP (module docstring)
HIDDEN = frozenset({"progress", "plan", "plot", "file", "path", "adapter", "grid_kg_per_kwh", "price_kwh"})

#: the shared plan options of `fit *` (api.fit_* take them as **plan_kw; cli/fit.py lists them)
FIT_PLAN_FIELDS: dict[str, tuple[Any, Any]] = {
    "tp": (int, 1), "pp": (int, 1), "dp": (Optional[int], None), "cp": (int, 1), "ep": (int, 1), "vpp": (int, 1),
    "micro_batch": (int, 1), "global_batch": (Optional[int], None), "seq_len": (Optional[int], None),
    "recompute": (Text, "none"), "sharding": (Text, "none"), "precision": (Text, "bf16"),
    "grad_precision": (Text, "fp32"), "sequence_parallel": (Optional[bool], None), "flash_attention": (bool, True),
    # fine-tuning: one object of the CLI's options ({"finetune": "qlora", "lora_rank": 64, "offload": "params"})
    "fine_tuning": (Optional[dict], None), "grad_accum": (Optional[int], None),
    # the stack and its torch.compile'd parts (interfaces.api.compile_option): the loss's memory reads them
    "framework": (Optional[Text], None), "compile": (Optional[Text], None),
    # DualPipe and the memory savings of the plan (interfaces.api.pipeline_options, memory_saving_options)
    "pipeline_schedule": (Optional[Text], None), "memory_savings": (Optional[Text], None),
}


@dataclass(frozen=True)
class Endpoint:
    """One command: `words` as typed after `gpuplan`, the api function, its positional arguments
    (in order) and flag spellings that differ from `--<name with dashes>`."""

    words: tuple[str, ...]
    fn_name: str
    positional: tuple[str, ...] = ()
    flags: dict[str, str] = field(default_factory=dict)
    extra: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    #: the command's words when they differ from the path's (`train/config` is `gpuplan train ... --emit T`)
    cli_words: tuple[str, ...] | None = None
    #: whether the command line ends in --json (an emitted config is printed as text)
    json_flag: bool = True

    @property
    def path(self) -> str:
        return "/api/v1/" + "/".join(self.words)

    @property
    def fn(self) -> Callable[..., Any]:
        return getattr(api, self.fn_name)

    def flag(self, name: str) -> str:
        return self.flags.get(name, "--" + name.replace("_", "-"))

    def fields(self) -> dict[str, tuple[Any, Any]]:
        """name -> (JSON type, default; `...` when required), from the api function's signature."""
        out: dict[str, tuple[Any, Any]] = {}
        for p in inspect.signature(self.fn).parameters.values():
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name in HIDDEN:
                continue
            default = ... if p.default is p.empty else p.default
            if isinstance(default, tuple):  # `gemm: Sequence[str] = ()`
                default = list(default)
            if hasattr(default, "value") and not isinstance(default, (int, float, str)):  # an enum default
                default = default.value
            out[p.name] = (json_type(p.name, str(p.annotation), default), default)
        out.update(self.extra)
        return out


def json_type(name: str, annotation: str, default: Any) -> Any:
    """The JSON type of one api parameter (module docstring)."""
    if name == "overrides":
        return Optional[TextList]
    if "dict" in annotation:  # a record of options (`fine_tuning`): a JSON object
        return Optional[dict] if default is None or "None" in annotation else dict
    if "Sequence" in annotation or "list" in annotation:
        # `str | Sequence[str]` (formats, serve_plan's gpus): one string or several
        base: Any = Union[Text, TextList] if annotation.startswith("str") else TextList
    elif annotation.startswith("bool"):
        base = bool
    elif "str" not in annotation and "float" in annotation:
        base = float
    elif "str" not in annotation and annotation.startswith("int"):
        base = int
    else:
        base = Text
    return Optional[base] if default is None or "None" in annotation else base


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(("train",), "train", positional=("model",), flags={"overrides": "--set"}),
    Endpoint(("plan",), "plan", positional=("model",), flags={"overrides": "--set"}),
    Endpoint(("fit", "train"), "fit_train", positional=("model",), extra=FIT_PLAN_FIELDS),
    Endpoint(("fit", "max-batch"), "fit_max_batch", positional=("model",), extra=FIT_PLAN_FIELDS),
    Endpoint(("fit", "max-seq"), "fit_max_seq", positional=("model",), extra=FIT_PLAN_FIELDS),
    Endpoint(("fit", "min-gpus"), "fit_min_gpus", positional=("model",), extra=FIT_PLAN_FIELDS),
    Endpoint(("serve", "run"), "serve_run", positional=("model",)),
    Endpoint(("serve", "plan"), "serve_plan", positional=("model",),
             flags={"gpus": "--gpu", "overrides": "--set", "prefill_gpus": "--prefill-gpu", "decode_gpus": "--decode-gpu"}),
    Endpoint(("serve", "frontier"), "serve_frontier", positional=("model",)),
    # the emitted launch configs (interfaces.api.launch_configs): `gpuplan train|serve run|serve plan ... --emit T`
    Endpoint(("train", "config"), "train_config", positional=("model",), flags={"overrides": "--set", "target": "--emit"},
             cli_words=("train",), json_flag=False),
    Endpoint(("serve", "run", "config"), "serve_run_config", positional=("model",), flags={"target": "--emit"},
             cli_words=("serve", "run"), json_flag=False),
    Endpoint(("serve", "plan", "config"), "serve_plan_config", positional=("model",),
             flags={"gpus": "--gpu", "overrides": "--set", "prefill_gpus": "--prefill-gpu", "decode_gpus": "--decode-gpu",
                    "target": "--emit"}, cli_words=("serve", "plan"), json_flag=False),
    Endpoint(("comm",), "comm", positional=("collective",)),
    Endpoint(("model", "show"), "model_show", positional=("model",)),
    Endpoint(("model", "list"), "model_list"),
    Endpoint(("hw", "list"), "hw_list"),
    Endpoint(("hw", "show"), "hw_show", positional=("gpu",)),
    Endpoint(("hw", "compare"), "hw_compare", positional=("gpus",)),
    Endpoint(("hw", "interconnects"), "hw_interconnects"),
    Endpoint(("hw", "prices"), "hw_prices", positional=("gpu",)),
    Endpoint(("hw", "hosts"), "hw_hosts", positional=("ids",)),
    Endpoint(("systems", "list"), "systems_list"),
    Endpoint(("systems", "show"), "systems_show", positional=("system",)),
    Endpoint(("dc", "fabric"), "dc_fabric", flags={"overrides": "--set"}),
    Endpoint(("dc", "power"), "dc_power", flags={"overrides": "--set"}),
    Endpoint(("dc", "tco"), "dc_tco", flags={"overrides": "--set"}),
    Endpoint(("dc", "assumptions"), "dc_assumptions", flags={"overrides": "--set"}),
    Endpoint(("mig", "plan"), "mig_plan", positional=("profiles",)),
    Endpoint(("mig", "profiles"), "mig_profiles"),
    Endpoint(("calibrate", "knobs"), "calibrate_knobs"),
    Endpoint(("kernel", "occupancy"), "kernel_occupancy"),
    Endpoint(("kernel", "roofline"), "kernel_roofline"),
    Endpoint(("kernel", "access"), "kernel_access"),
    Endpoint(("kernel", "banks"), "kernel_banks"),
    Endpoint(("kernel", "divergence"), "kernel_divergence"),
    Endpoint(("kernel", "amdahl"), "kernel_amdahl"),
    Endpoint(("kernel", "gustafson"), "kernel_gustafson"),
    Endpoint(("kernel", "little"), "kernel_little"),
    Endpoint(("formats", "table"), "formats_table"),
    Endpoint(("formats", "compare"), "formats_compare"),
    Endpoint(("formats", "encode"), "formats_encode", positional=("values",), flags={"format_name": "--format"}),
    Endpoint(("formats", "decode"), "formats_decode", positional=("codes",), flags={"format_name": "--format"}),
    Endpoint(("formats", "matmul"), "formats_matmul"),
)

BY_PATH = {e.path: e for e in ENDPOINTS}


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) and value != int(value) else (
        str(int(value)) if isinstance(value, float) else str(value))


def command(endpoint: Endpoint, values: dict[str, Any], *, file_arg: str | None = None) -> str:
    """The `gpuplan ... --json` line printing the same JSON as `endpoint` answers for `values`
    (only values that differ from the default are written; `file_arg` is an uploaded file's name)."""
    fields = endpoint.fields()
    words = ["gpuplan", *(endpoint.cli_words or endpoint.words)]
    if file_arg is not None:
        words.append(file_arg)
    for name in endpoint.positional:
        v = values.get(name, fields[name][1])
        if v is None or v is ...:
            continue
        words.extend(_text(x) for x in (v if isinstance(v, list) else [v]))
    for name, (_, default) in fields.items():
        if name in endpoint.positional or name not in values:
            continue
        v = values[name]
        if v is None or v == default:
            continue
        flag = endpoint.flag(name)
        if isinstance(v, dict):  # a record of options: each its own flag (`fine_tuning`: --finetune, --lora-rank ...)
            for key, x in v.items():
                if x is None:
                    continue
                sub = "--" + ("finetune" if key == "method" else key).replace("_", "-")
                words.extend([sub] if x is True else ["--no-" + sub[2:]] if x is False else [sub, _text(x)])
            continue
        if isinstance(v, bool):
            words.append(flag if v else "--no-" + flag[2:])
        elif isinstance(v, list):
            for x in v:
                words.extend([flag, _text(x)])
        else:
            words.extend([flag, _text(v)])
    if endpoint.json_flag:
        words.append("--json")
    return shlex.join(words)
