"""A PEFT LoRA `adapter_config.json` -> `AdapterConfig`, offline: which modules it adapts, at what rank,
and which base model it was trained on.

Fields read (peft/tuners/lora/config.py `LoraConfig`, PEFT 0.13-0.17; defaults in brackets):
`peft_type` ("LORA"; other PEFT methods are refused by name), `base_model_name_or_path` (a Hugging
Face repo id or a local path), `r` [8], `lora_alpha` [8], `lora_dropout` [0.0], `target_modules` (a
list of module-name suffixes, a regular expression, or "all-linear"), `exclude_modules`,
`layers_to_transform` (an int or a list of layer indexes), `rank_pattern` ({pattern: rank}),
`use_dora` [false], `lora_bias` [false], `bias` ["none"], `modules_to_save`.

Which modules an adapter adapts (peft/tuners/tuners_utils.py `check_target_module_exists`; `targets`):
- `exclude_modules` first: a string is `re.fullmatch`ed against the full module name, a list matches
  a name equal to an entry or ending with `.entry`;
- a string `target_modules` is `re.fullmatch`ed against the full module name (layers_to_transform is
  not applied then);
- a list matches a name equal to an entry or ending with `.entry`; then, when `layers_to_transform`
  is given, only modules whose layer index (the number after `layers.`) is in it;
- "all-linear" (peft/utils/constants.py INCLUDE_LINEAR_LAYERS_SHORTHAND): every linear layer but the
  output layer (`_maybe_include_all_linear_layers`).
The rank of a module: the first `rank_pattern` key that matches its name as `(.*\\.)?(key)$`
(peft/utils/other.py `get_pattern_key`), else `r`.

The base is found through THE resolver of Hugging Face ids (`models.bundled.bundled_name_for_hub_id`).
"""

from __future__ import annotations

import math

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplan.errors import InputError
from gpuplan.input_files import MAX_SETTINGS_BYTES, path_kind, read_input_bytes
from gpuplan.validation_rules import decode_utf8, load_json_text

ALL_LINEAR = "all-linear"
FIELD = "adapter"
#: LoraConfig fields that change the adapter's parameter count and are not modelled (refused by name)
_UNMODELLED = ("use_qalora", "layer_replication")


@dataclass(frozen=True)
class AdapterConfig:
    """One PEFT LoRA adapter config (module docstring). `target_modules` is a tuple of suffixes, a
    regular expression (`target_regex`) or ALL_LINEAR."""

    source: str
    base_model: str | None
    rank: int
    alpha: float
    dropout: float
    target_modules: tuple[str, ...] = ()
    target_regex: str | None = None
    exclude_modules: tuple[str, ...] = ()
    exclude_regex: str | None = None
    layers_to_transform: tuple[int, ...] | None = None
    rank_pattern: tuple[tuple[str, int], ...] = ()
    use_dora: bool = False
    lora_bias: bool = False
    bias: str = "none"
    modules_to_save: tuple[str, ...] = field(default=())

    @property
    def all_linear(self) -> bool:
        return self.target_modules == (ALL_LINEAR,)

    def excluded(self, name: str) -> bool:
        if self.exclude_regex is not None:
            return re.fullmatch(self.exclude_regex, name) is not None
        return any(name == t or name.endswith("." + t) for t in self.exclude_modules)

    def targets(self, name: str, layer: int | None, linear_not_output: bool = True) -> bool:
        """Whether PEFT adapts the module `name` (of decoder layer `layer`, None outside the layers);
        `linear_not_output`: the module is a linear layer other than the output layer (all-linear)."""
        if self.excluded(name):
            return False
        if self.target_regex is not None:
            return re.fullmatch(self.target_regex, name) is not None
        if self.all_linear:
            found = linear_not_output
        else:
            found = any(name == t or name.endswith("." + t) for t in self.target_modules)
        if found and self.layers_to_transform is not None:
            found = layer is not None and layer in self.layers_to_transform
        return found

    def rank_of(self, name: str) -> int:
        """The module's rank: the first matching `rank_pattern` key's, else `r` (module docstring)."""
        for key, rank in self.rank_pattern:
            if re.match(rf"(.*\.)?({key})$", name):
                return rank
        return self.rank


def adapter_config_file(path: str | Path) -> Path | None:
    """The adapter_config.json a path names (the file, or a folder holding one and no config.json),
    None when it names something else. Reads nothing but the folder listing."""
    p = Path(str(path)).expanduser()
    kind = path_kind(p)
    if kind == "folder":
        cand = p / "adapter_config.json"
        return cand if path_kind(cand) is not None and path_kind(p / "config.json") is None else None
    if kind is not None and p.name.endswith(".json"):
        return p
    return None


def read_json(path: Path) -> dict[str, Any]:
    raw = read_input_bytes(path, FIELD, max_bytes=MAX_SETTINGS_BYTES, what="adapter_config.json")
    what = f"adapter config '{path}'"
    data = load_json_text(decode_utf8(raw, what, FIELD), what, FIELD)
    if not isinstance(data, dict):
        raise InputError(f"{what}: expected a JSON object", field=FIELD)
    return data


def is_adapter_dict(data: dict[str, Any]) -> bool:
    """A PEFT config (it states `peft_type`), not a model's config.json."""
    return "peft_type" in data


def _int(data: dict, key: str, default: int, what: str) -> int:
    v = data.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0 or v > 1 << 16:
        raise InputError(f"{what}: {key} must be a whole number from 1 to 65536, got {v!r}", field=FIELD)
    return v


def _names(value: Any, key: str, what: str) -> tuple[tuple[str, ...], str | None]:
    """(suffixes, regex) of a target_modules / exclude_modules value."""
    if value is None:
        return (), None
    if isinstance(value, str):
        if value == ALL_LINEAR:
            return (ALL_LINEAR,), None
        try:
            re.compile(value)
        except re.error as exc:
            raise InputError(f"{what}: {key} is not a valid regular expression ({exc})", field=FIELD) from None
        return (), value
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(dict.fromkeys(value)), None
    raise InputError(f"{what}: {key} must be a list of module names, a regular expression or 'all-linear'",
                     field=FIELD)


def adapter_from_dict(data: dict[str, Any], source: str) -> AdapterConfig:
    """An AdapterConfig from a parsed adapter_config.json (module docstring); InputError naming the
    key for anything PEFT would not build or gpuplan does not model."""
    what = f"adapter config '{source}'"
    peft_type = str(data.get("peft_type", "")).upper()
    if peft_type != "LORA":
        raise InputError(f"{what}: peft_type {data.get('peft_type')!r} is not modelled (allowed: LORA)",
                         field=FIELD, allowed="LORA")
    for key in _UNMODELLED:
        if data.get(key):
            raise InputError(f"{what}: {key} is not modelled (its parameter count differs from LoRA's)", field=FIELD)
    targets, regex = _names(data.get("target_modules"), "target_modules", what)
    if not targets and regex is None:
        raise InputError(f"{what}: target_modules is empty (PEFT then uses the architecture's default "
                         "list: give it explicitly)", field=FIELD)
    excl, excl_regex = _names(data.get("exclude_modules"), "exclude_modules", what)
    layers = data.get("layers_to_transform")
    if isinstance(layers, int) and not isinstance(layers, bool):
        layers = [layers]
    if layers is not None and not (isinstance(layers, list) and all(isinstance(i, int) and i >= 0 for i in layers)):
        raise InputError(f"{what}: layers_to_transform must be a layer index or a list of them", field=FIELD)
    pattern = data.get("rank_pattern") or {}
    if not isinstance(pattern, dict):
        raise InputError(f"{what}: rank_pattern must be an object {{pattern: rank}}", field=FIELD)
    ranks = tuple((str(k), _int(pattern, k, 8, what)) for k in pattern)
    for key, _ in ranks:
        try:
            re.compile(key)
        except re.error as exc:
            raise InputError(f"{what}: rank_pattern key {key!r} is not a valid regular expression ({exc})",
                             field=FIELD) from None
    bias = str(data.get("bias", "none"))
    if bias not in ("none", "all", "lora_only"):
        raise InputError(f"{what}: bias must be none, all or lora_only, got {bias!r}", field=FIELD)
    save = data.get("modules_to_save") or []
    if not (isinstance(save, list) and all(isinstance(s, str) for s in save)):
        raise InputError(f"{what}: modules_to_save must be a list of module names", field=FIELD)
    base = data.get("base_model_name_or_path")
    dropout = data.get("lora_dropout", 0.0)
    alpha = data.get("lora_alpha", 8)
    for key, v in (("lora_dropout", dropout), ("lora_alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InputError(f"{what}: {key} must be a finite number, got {v!r}", field=FIELD)
    if not 0.0 <= dropout <= 1.0:  # torch.nn.Dropout refuses p outside [0, 1]
        raise InputError(f"{what}: lora_dropout must be between 0 and 1, got {dropout!r}", field=FIELD)
    return AdapterConfig(
        source=source, base_model=str(base) if base else None, rank=_int(data, "r", 8, what), alpha=float(alpha),
        dropout=float(dropout), target_modules=targets, target_regex=regex, exclude_modules=excl,
        exclude_regex=excl_regex, layers_to_transform=None if layers is None else tuple(layers), rank_pattern=ranks,
        use_dora=bool(data.get("use_dora", False)), lora_bias=bool(data.get("lora_bias", False)), bias=bias,
        modules_to_save=tuple(save))


def read_adapter_config(path: str | Path) -> AdapterConfig:
    """The AdapterConfig of an adapter_config.json (or a folder holding one); InputError otherwise."""
    found = adapter_config_file(path)
    if found is None:
        kind = path_kind(Path(str(path)).expanduser())
        why = "no such file or folder" if kind is None else "not an adapter_config.json (or a folder holding one)"
        raise InputError(f"adapter: '{str(path)[:200]}': {why}", field=FIELD, allowed="a PEFT adapter_config.json")
    data = read_json(found)
    if not is_adapter_dict(data):
        raise InputError(f"adapter: '{found}' states no peft_type: not a PEFT adapter_config.json", field=FIELD)
    return adapter_from_dict(data, str(found))


__all__ = ["ALL_LINEAR", "AdapterConfig", "adapter_config_file", "adapter_from_dict", "is_adapter_dict", "read_adapter_config",
           "read_json"]
