"""Typed readers of config.json fields: each returns the value or raises InputError naming the field
and what is allowed (one line, exit code 2). Used by every config reader (hf_config, hybrid_config).

Booleans: JSON true / false, or the strings "true" / "false" (any case) that some published configs
carry (a string "false" is truthy in Python, so reading it with bool() would switch a feature *on*);
anything else is refused.
"""

from __future__ import annotations

from typing import Any

from gpuplan.errors import InputError
from gpuplan.validation_rules import MAX_LAYERS, MAX_WIDTH

#: config fields that count layers (capped at MAX_LAYERS); every other integer field is a width
#: or a count capped at MAX_WIDTH (see gpuplan.validation_rules for why).
LAYER_FIELDS = {"num_hidden_layers", "n_layer", "num_layers", "first_k_dense_replace", "num_nextn_predict_layers"}

_MISSING = object()


def short(value: Any, limit: int = 40) -> str:
    """repr(value), cut to `limit` characters for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def integer(cfg: dict[str, Any], *names: str, default: Any = _MISSING, minimum: int = 1) -> Any:
    """The first present, non-null field among `names` as an integer between `minimum` and
    MAX_LAYERS (layer counts) / MAX_WIDTH (everything else); `default` when none is present."""
    for name in names:
        if name in cfg and cfg[name] is not None:
            value = cfg[name]
            cap = MAX_LAYERS if name in LAYER_FIELDS else MAX_WIDTH
            if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= cap:
                allowed = f"an integer >= {minimum} and <= {cap:,}"
                raise InputError(f"config field `{name}` must be {allowed}, got {short(value)}", field=name,
                                 allowed=allowed)
            return value
    if default is _MISSING:
        raise InputError(f"config is missing `{names[0]}` (needed to size the model)", field=names[0])
    return default


def flag(cfg: dict[str, Any], *names: str, default: bool = False) -> bool:
    """The first present, non-null field among `names` as a boolean (module docstring)."""
    for name in names:
        if name in cfg and cfg[name] is not None:
            value = cfg[name]
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in ("true", "false"):
                return value.strip().lower() == "true"
            raise InputError(f"config field `{name}` must be true or false, got {short(value)}", field=name,
                             allowed="true or false")
    return default


def fraction(cfg: dict[str, Any], *names: str) -> float:
    """The first truthy field among `names` as a dropout probability in [0, 1); 0.0 if none."""
    for name in names:
        value = cfg.get(name)
        if value:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise InputError(f"config field `{name}` must be a number >= 0 and < 1, got {short(value)}", field=name,
                                 allowed=">= 0 and < 1")
            return float(value)
    return 0.0


def number(cfg: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    """A numeric field in [low, high] (a multiplier); `default` when absent or null."""
    value = cfg.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        allowed = f"a number >= {low:g} and <= {high:g}"
        raise InputError(f"config field `{name}` must be {allowed}, got {short(value)}", field=name, allowed=allowed)
    return float(value)


def text(cfg: dict[str, Any], *names: str, default: str | None = None) -> str | None:
    """The first present, non-null field among `names` as a string."""
    for name in names:
        if name in cfg and cfg[name] is not None:
            value = cfg[name]
            if not isinstance(value, str):
                raise InputError(f"config field `{name}` must be a string, got {short(value)}", field=name,
                                 allowed="a string")
            return value
    return default


def string_list(cfg: dict[str, Any], name: str) -> list[str] | None:
    """A list of strings (`layer_types`, `layers_block_type` ...), None when absent or null."""
    value = cfg.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(f"config field `{name}` must be a list of strings, got {short(value)}", field=name,
                         allowed="a list of strings")
    return value


def int_list(cfg: dict[str, Any], name: str, limit: int) -> list[int] | None:
    """A list of integers in [0, limit) (layer indices), None when absent or null."""
    value = cfg.get(name)
    if value is None:
        return None
    if (not isinstance(value, list)
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < limit for v in value)):
        allowed = f"a list of layer indices >= 0 and < {limit}"
        raise InputError(f"config field `{name}` must be {allowed}, got {short(value)}", field=name, allowed=allowed)
    return value


__all__ = ["LAYER_FIELDS", "flag", "fraction", "int_list", "integer", "number", "short", "string_list", "text"]
