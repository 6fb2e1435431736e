"""Bundled model configs (catalog/data/models) and `load_model`, the one way to get a ModelSpec by name or path."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from gpuplan.errors import InputError, unknown_id
from gpuplan.input_files import input_stat, path_kind
from gpuplan.models.hf_config import announce_warnings, model_from_hf_config, read_config_file
from gpuplan.models.hub_ids import hub_id_of_source, hub_key
from gpuplan.specs.model import ModelSpec

_DATA = "catalog/data/models"


def _data_dir() -> Path:
    # the package's folder, as importlib.resources.files("gpuplan") gives it for a package on disk
    # (as catalog.DATA_DIR), without importing importlib.resources and its zip reader (~5 ms of a start)
    return Path(__file__).parents[1] / _DATA


@lru_cache(maxsize=1)
def _index() -> dict[str, dict[str, str]]:
    return json.loads((_data_dir() / "_index.json").read_text(encoding="utf-8"))["models"]


def bundled_model_names() -> list[str]:
    """Every bundled model name, in catalog order."""
    return list(_index())


@lru_cache(maxsize=1)
def _hub_aliases() -> dict[str, str]:
    """Hugging Face repo keys (`models.hub_ids.hub_key`) of the bundled configs -> bundled name.

    A bundled file `meta-llama--Llama-2-7b-hf.json` answers to `meta-llama/Llama-2-7b-hf`, to
    `meta-llama--Llama-2-7b-hf` and to its huggingface.co URL (case-insensitive), and so does the repo
    id of its source URL, so users can name models as the Hub does, offline."""
    aliases: dict[str, str] = {}
    for name, entry in _index().items():
        for text in (Path(entry["file"]).stem, hub_id_of_source(entry.get("source"))):
            key = hub_key(text) if text and ("--" in text or "/" in text) else None
            if key:
                aliases.setdefault(key, name)
    return aliases


def bundled_name_for_hub_id(text: str) -> str | None:
    """The bundled model a Hugging Face repo id (or `org--name`, or a huggingface.co URL) names;
    None when the text is not a repo id or no bundled model came from it. THE resolver of Hub ids
    (models.hub_ids for the rule; used by `load_model`, PEFT adapter configs and interfaces.deploy)."""
    key = hub_key(text)
    return _hub_aliases().get(key) if key else None


def bundled_model_source(name: str) -> str:
    return _index()[name]["source"]


#: the code that turns a bundled config.json into a ModelSpec: a change to any of it is a new cache key
MODEL_CODE = ("models/*.py", "specs/*.py", "validation_rules.py", "input_files.py", "errors.py", "units.py",
              "notices.py", "catalog/disk_cache.py")


@lru_cache(maxsize=None)
def _load_bundled(name: str) -> ModelSpec:
    """The bundled model `name`, kept on disk per content of its config.json and of the code reading
    it (catalog.disk_cache, as the built-in catalog): building a ModelSpec builds pydantic's validator
    of the class and loads pydantic's plugins (importlib.metadata), ~0.04 CPU-s of a `serve run`;
    unpickling it ~0.1 ms. A cached spec's config warnings are announced as a parsed one's are."""
    import pydantic

    from gpuplan.catalog import disk_cache

    entry = _index()[name]
    path = _data_dir() / entry["file"]
    key = disk_cache.content_key([path], code=MODEL_CODE,
                                 salt=f"model {name} {entry['source']} pydantic {pydantic.VERSION}")
    cached = disk_cache.load(f"model-{name}", key)
    if isinstance(cached, ModelSpec) and cached.name == name:
        announce_warnings(cached)
        return cached
    spec = model_from_hf_config(read_config_file(path), name=name, source=entry["source"])
    disk_cache.store(f"model-{name}", key, spec)
    return spec


def load_model(name_or_path: str) -> ModelSpec:
    """A bundled name (`llama-3-70b`), a config.json path, or a directory holding config.json.

    Unknown names raise UnknownIdError listing the closest bundled names.
    """
    key = str(name_or_path).strip()
    if key.lower() in _index():
        return _load_bundled(key.lower())
    path = Path(key).expanduser() if key and "\x00" not in key else None
    kind = path_kind(path) if path is not None else None  # None: nothing there (or a name too long to be a path)
    if kind is None and (hub_name := bundled_name_for_hub_id(key)) is not None:
        return _load_bundled(hub_name)
    if kind == "folder":
        cfg_path = path / "config.json"
        if path_kind(cfg_path) is None:
            raise InputError(f"model: directory '{path}' holds no config.json", field="model")
        return model_from_hf_config(read_config_file(cfg_path), name=path.name, source=str(cfg_path))
    if kind is not None:  # a file or a pipe (read_config_file refuses devices and sockets)
        return model_from_hf_config(read_config_file(path), name=path.stem, source=str(path))
    if key.endswith(".json") or "/" in key:
        input_stat(key, "model", "config.json")  # says why: no such file, name too long, a loop, ...
    raise unknown_id("model", key, bundled_model_names())
