"""Calibration profiles: a TOML file of knob values with the provenance of each, written by
`gpuplan calibrate fit` (and `gpuplan bench`) and applied with `--calibration FILE` /
`GPUPLAN_CALIBRATION` / `gpuplan.api.apply(...)`.

A profile is

    [profile]                       format, created (UTC, ISO 8601), gpuplan_version, method
    [error]                         error before/after on the rows used (in-sample and leave-one-out)
    [[sources]]                     path, sha256 of the file's bytes, rows
    [rows]                          ids = [...] (the rows the fit used)
    [knobs."NAME"]                  value, uncertainty (1 sigma, the knob's unit), default, unit

Applying a profile is `knobs.overridden({name: value})` for the whole command; every value is
checked against the registry first (an unknown knob or a value outside the knob's range is one
`InputError`). While a profile is applied, `active_profile()` names it, and every result's JSON
carries `calibration: {profile, knobs: {name: value}}` (interfaces/api/_common.py).

Writing goes through gpuplan.output_files (atomic; a path that is not a regular file is refused).
"""

from __future__ import annotations

import json
import math
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from gpuplan import knobs
from gpuplan.errors import InputError

PROFILE_FORMAT = 1
#: Environment variable naming a profile to apply to every command (as `--calibration`).
ENV_VAR = "GPUPLAN_CALIBRATION"

_LOCAL = threading.local()


@dataclass(frozen=True)
class Profile:
    """A loaded profile: where it came from and the knob values it sets (validated)."""

    path: str
    values: dict[str, float]
    uncertainties: dict[str, float | None] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"profile": self.path, "knobs": dict(self.values)}


def _toml_loads(text: str) -> dict:
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:  # pragma: no cover - 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def load_profile(path: str | os.PathLike) -> Profile:
    """Read and validate a profile (module docstring). InputError, one line, for a missing file,
    bad TOML, no [knobs] table, an unknown knob or a value outside the knob's range."""
    from gpuplan.interfaces.fitting.knob_catalog import load_all

    from gpuplan.input_files import MAX_SETTINGS_BYTES, read_input_text

    p = Path(path)
    text = read_input_text(p, "calibration", max_bytes=MAX_SETTINGS_BYTES, what="profile")
    try:
        data = _toml_loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"calibration: {p.name} is not a TOML profile ({msg})", field="calibration") from None
    table = data.get("knobs")
    if not isinstance(table, dict) or not table:
        raise InputError(f"calibration: {p.name} has no [knobs.\"NAME\"] tables with a value", field="calibration")
    load_all()
    raw: dict[str, float] = {}
    unc: dict[str, float | None] = {}
    for name, entry in table.items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"calibration: {p.name}: knob {name}: value must be a number, got {value!r}",
                             field="calibration")
        raw[name] = float(value)
        u = entry.get("uncertainty") if isinstance(entry, dict) else None
        unc[name] = float(u) if isinstance(u, (int, float)) and not isinstance(u, bool) else None
    values = check_profile_values(raw, where=p.name)
    meta = {k: v for k, v in data.items() if k != "knobs"}
    return Profile(path=str(p), values=values, uncertainties=unc, meta=meta)


def check_profile_values(values: Mapping[str, float], where: str = "profile") -> dict[str, float]:
    """`knobs.check_values`, its errors as one-line InputErrors naming the knob and the allowed range."""
    try:
        return knobs.check_values(values)
    except KeyError as exc:
        raise InputError(f"calibration: {where}: unknown knob {exc.args[0]}; see `gpuplan calibrate knobs`",
                         field="calibration") from None
    except ValueError as exc:
        raise InputError(f"calibration: {where}: {exc}", field="calibration") from None


def _stack() -> list[Profile]:
    stack = getattr(_LOCAL, "profiles", None)
    if stack is None:
        stack = _LOCAL.profiles = []
    return stack


@contextmanager
def apply_profile(profile: Profile | str | os.PathLike) -> Iterator[Profile]:
    """Within the block every knob of the profile has the profile's value, and `active_profile()`
    returns it. Accepts a Profile or a path (loaded and validated here)."""
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    with knobs.overridden(prof.values):
        _stack().append(prof)
        try:
            yield prof
        finally:
            _stack().pop()


def active_profile() -> Profile | None:
    """The innermost applied profile, or None."""
    stack = _stack()
    return stack[-1] if stack else None


def calibration_block() -> dict | None:
    """`{profile, knobs: {name: value}}` of the applied profile (None when none is applied): the
    `calibration` key of every result's JSON."""
    prof = active_profile()
    return None if prof is None else prof.to_dict()


# -- writing --------------------------------------------------------------------------------------
def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError("TOML profile values must be finite")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _table(lines: list[str], header: str, entries: Mapping) -> None:
    lines.append(f"\n[{header}]")
    for k, v in entries.items():
        if v is None:
            continue
        lines.append(f"{k} = {_toml_value(v)}")


def profile_toml(meta: Mapping, error: Mapping, sources: list[Mapping], row_ids: list[str],
                 knob_entries: Mapping[str, Mapping]) -> str:
    """The text of a profile (module docstring). `knob_entries`: name -> {value, uncertainty, ...}."""
    lines = ["# gpuplan calibration profile: apply with `gpuplan --calibration THIS_FILE ...`",
             "# or GPUPLAN_CALIBRATION=THIS_FILE; see docs/calibration.md"]
    _table(lines, "profile", {"format": PROFILE_FORMAT, **meta})
    _table(lines, "error", error)
    for src in sources:
        lines.append("\n[[sources]]")
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in src.items() if v is not None)
    _table(lines, "rows", {"ids": list(row_ids)})
    for name, entry in knob_entries.items():
        _table(lines, f"knobs.{json.dumps(name)}", entry)
    return "\n".join(lines) + "\n"


__all__ = ["ENV_VAR", "PROFILE_FORMAT", "Profile", "active_profile", "apply_profile", "calibration_block",
           "check_profile_values", "load_profile", "profile_toml"]
