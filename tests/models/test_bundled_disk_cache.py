"""Bundled models kept on disk (models/bundled.py `_load_bundled`, catalog.disk_cache): the same spec
as parsing, keyed by the config's and the reader's content, warnings announced on a hit too, and a
`serve run` on a warm cache builds no pydantic validator (issue 35)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuplan
from gpuplan.catalog import disk_cache
from gpuplan.models import bundled
from gpuplan.notices import config_warning_listeners

SRC = str(Path(gpuplan.__file__).resolve().parents[1])


def _fresh(monkeypatch, cache: str, name: str):
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", cache)
    bundled._load_bundled.cache_clear()
    try:
        return bundled._load_bundled(name)
    finally:
        bundled._load_bundled.cache_clear()


@pytest.mark.parametrize("name", ["llama-3-8b", "deepseek-v3", "mixtral-8x7b"])
def test_cached_model_equals_the_parsed_one(monkeypatch, tmp_path, name):
    parsed = _fresh(monkeypatch, "off", name)
    first = _fresh(monkeypatch, str(tmp_path), name)  # parsed, then written
    assert len(list(tmp_path.glob(f"model-{name}-*.pickle"))) == 1
    second = _fresh(monkeypatch, str(tmp_path), name)  # read back
    assert parsed.model_dump() == first.model_dump() == second.model_dump()
    assert parsed == second and hash(parsed) == hash(second)
    assert second.model_fields_set == parsed.model_fields_set


def test_warnings_of_a_cached_model_are_announced(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", str(tmp_path))
    _fresh(monkeypatch, str(tmp_path), "gpt2")
    (path,) = tmp_path.glob("model-gpt2-*.pickle")
    key = path.stem.removeprefix("model-gpt2-")
    spec = disk_cache.load("model-gpt2", key)
    disk_cache.store("model-gpt2", key, spec.model_copy(update={"warnings": ("a cached warning",)}))
    heard: list[str] = []
    config_warning_listeners.append(heard.append)
    try:
        got = _fresh(monkeypatch, str(tmp_path), "gpt2")
    finally:
        config_warning_listeners.remove(heard.append)
    assert got.warnings == ("a cached warning",) and heard == ["a cached warning"]


def test_a_foreign_file_under_the_key_is_parsed_again(monkeypatch, tmp_path):
    _fresh(monkeypatch, str(tmp_path), "llama-3-8b")
    (path,) = tmp_path.glob("model-llama-3-8b-*.pickle")
    key = path.stem.removeprefix("model-llama-3-8b-")
    disk_cache.store("model-llama-3-8b", key, {"not": "a model"})
    assert _fresh(monkeypatch, str(tmp_path), "llama-3-8b").layers == 32  # Llama-3-8B config.json: 32 layers


def test_pruning_keeps_other_models_whose_name_extends_this_one(tmp_path, monkeypatch):
    # disk_cache keeps the 8 newest files of a name; `model-llama-3-<key>` files never count
    # `model-llama-3-8b-<key>` as theirs
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", str(tmp_path))
    other = "b" * 64
    assert disk_cache.store("model-llama-3-8b", other, 1)
    for i in range(10):
        assert disk_cache.store("model-llama-3", f"{i:064x}", i)
    assert disk_cache.load("model-llama-3-8b", other) == 1
    assert len(list(tmp_path.glob("model-llama-3-0*.pickle"))) == 8


def test_serve_run_on_a_warm_cache_builds_no_validator(tmp_path):
    # ModelSpec is the one pydantic model `serve run` validates; from the cache it is unpickled, so
    # pydantic never loads its plugins (pydantic/plugin/_loader.py imports importlib.metadata)
    probe = ("import json, sys\nfrom gpuplan.cli.main import main\ntry:\n    main(sys.argv[2:])\n"
             "except SystemExit:\n    pass\njson.dump(sorted(sys.modules), open(sys.argv[1], 'w'))\n")
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "GPUPLAN_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "modules.json"
    for _ in range(2):  # the first run fills the cache
        subprocess.run([sys.executable, "-c", probe, str(out), "serve", "run", "llama-3-8b"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    modules = set(json.loads(out.read_text()))
    assert "gpuplan.workloads.inference.sim.events" in modules  # it did simulate
    assert "pydantic.plugin._loader" not in modules and "importlib.metadata" not in modules
