"""Renamed options keep their old spelling as a hidden alias (scripts rely on it): `renamed`
returns the value given under either spelling (docs/options.md lists the renames)."""

from __future__ import annotations

from typing import Any, TypeVar

from gpuplan.errors import InputError

T = TypeVar("T")


def renamed(new: T, old: Any, new_flag: str, old_flag: str, default: T | None = None) -> T:
    """`new` (None = not given) or the hidden `old` alias; both given and different is an error;
    neither: `default`."""
    if old is None or (isinstance(old, (list, tuple)) and not old):
        return default if new is None else new
    if new is not None and not (isinstance(new, (list, tuple)) and not new) and new != old:
        raise InputError(f"{new_flag}: given twice, also as its old spelling {old_flag}; give {new_flag} only",
                         field=new_flag.lstrip("-").replace("-", "_"))
    return old
