"""The built-in catalog kept on disk between runs, keyed by the content that builds it.

Parsing the six TOML files of `catalog/data/` and validating their ~130 entries costs about 0.05 CPU-s
at every start of the CLI (tomllib is pure Python). The validated `Catalog` is pickled once, to

    <cache dir>/catalog-<key>.pickle

where the cache dir is $GPUPLAN_CACHE_DIR, else $XDG_CACHE_HOME/gpuplan, else ~/.cache/gpuplan, and
`key` is the SHA-256 of the data files' bytes and of the source of every module that turns them into
specs (catalog/, specs/, validation_rules, input_files, errors), with the Python and pydantic
versions: a changed figure, field or rule is a new key, never a stale catalog. The measured ceilings
(catalog/data/ceilings.toml, catalog.ceilings) are kept the same way, as `ceilings-<key>.pickle`, and so is
each bundled model a process loads (`model-<name>-<key>.pickle`, models.bundled: building a ModelSpec
builds pydantic's validator and loads pydantic's plugins, ~0.04 CPU-s). Later starts unpickle
it (a few ms). The file is written atomically (a temporary file in the same folder, then
`os.replace`), so a reader never sees half a file; a folder that cannot be written (read-only home,
no home), a missing, truncated or foreign file, or GPUPLAN_CACHE_DIR=off all fall back to parsing,
silently: the cache changes how fast, never what.

User catalog files (`--catalog`, GPUPLAN_CATALOG) are not cached: they are read at every run.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from pathlib import Path
from typing import Any

#: values of GPUPLAN_CACHE_DIR that turn the cache off (as does an empty value)
_OFF = {"off", "0", "none", "false"}
#: files kept per name (checkouts of different versions sharing one home keep their own)
_KEEP = 8

_PACKAGE = Path(__file__).resolve().parents[1]  # src/gpuplan
#: the code that turns the data files into a Catalog: a change to any of it changes the key
CATALOG_CODE = ("catalog/*.py", "specs/*.py", "validation_rules.py", "input_files.py", "errors.py", "units.py")


def cache_dir() -> Path | None:
    """The folder of gpuplan's on-disk caches (module docstring), or None when turned off."""
    explicit = os.environ.get("GPUPLAN_CACHE_DIR")
    if explicit is not None:
        return None if explicit.strip().lower() in _OFF or not explicit.strip() else Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "gpuplan"
    try:
        return Path.home() / ".cache" / "gpuplan"
    except (RuntimeError, KeyError):  # no home directory
        return None


def content_key(data_files: list[Path], code: tuple[str, ...] = CATALOG_CODE, salt: str = "") -> str:
    """SHA-256 of the data files, of the source files matching `code` (globs under src/gpuplan), the
    interpreter version and `salt` (e.g. the pydantic version whose models are pickled)."""
    digest = hashlib.sha256()
    digest.update(f"{sys.version_info[:3]} pickle{pickle.HIGHEST_PROTOCOL} {salt}".encode())
    sources = sorted({p for pattern in code for p in _PACKAGE.glob(pattern)})
    for path in [*data_files, *sources]:
        digest.update(str(path.relative_to(_PACKAGE) if path.is_relative_to(_PACKAGE) else path.name).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes() if path.exists() else b"<missing>")
        digest.update(b"\0")
    return digest.hexdigest()


def load(name: str, key: str) -> Any | None:
    """The object stored under `name` and `key`, or None (no cache, no file, unreadable file)."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        with open(folder / f"{name}-{key}.pickle", "rb") as f:
            return pickle.load(f)
    except Exception:  # noqa: BLE001 - any unreadable cache is a miss (module docstring)
        return None


def store(name: str, key: str, value: Any) -> bool:
    """Write `value` under `name` and `key` atomically; False where it cannot (never raises). Of the
    files of the same `name`, the _KEEP newest stay on disk."""
    folder = cache_dir()
    if folder is None:
        return False
    import tempfile

    tmp = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        target = folder / f"{name}-{key}.pickle"
        os.replace(tmp, target)
        tmp = None
        # `name` and a 64-digit key only: `model-llama-3` must not prune `model-llama-3-8b-<key>`
        same = [p for p in folder.glob(f"{name}-*.pickle") if len(p.stem) == len(name) + 1 + len(key)]
        kept = sorted(same, key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[_KEEP:]:
            old.unlink(missing_ok=True)
        return True
    except Exception:  # noqa: BLE001 - read-only or full disk, unpicklable value: stay uncached
        return False
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
