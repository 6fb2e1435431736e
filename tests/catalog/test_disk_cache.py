"""The built-in catalog's on-disk cache (catalog.disk_cache): the same catalog as parsing, keyed by
content, written atomically, and harmless where it cannot be written or read."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan import catalog
from gpuplan.catalog import DATA_DIR, disk_cache


def _builtin_fresh(monkeypatch, cache: str) -> catalog.Catalog:
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", cache)
    catalog._builtin.cache_clear()
    try:
        return catalog._builtin()
    finally:
        catalog._builtin.cache_clear()


def _dump(cat: catalog.Catalog) -> dict:
    return {table: {k: v.model_dump() for k, v in getattr(cat, table).items()}
            for table in ("gpus", "interconnects", "systems", "clouds", "hosts")} | {"sources": cat.sources}


def test_cached_catalog_equals_the_parsed_one(monkeypatch, tmp_path):
    parsed = _builtin_fresh(monkeypatch, "off")  # no cache: parsed and validated
    first = _builtin_fresh(monkeypatch, str(tmp_path))  # parsed, then written
    files = list(tmp_path.glob("catalog-*.pickle"))
    assert len(files) == 1 and not list(tmp_path.glob(".*.tmp"))  # written whole, no temporary left
    second = _builtin_fresh(monkeypatch, str(tmp_path))  # read back
    assert _dump(parsed) == _dump(first) == _dump(second)
    assert second.system("dgx-h100").gpu == "h100-sxm5-80gb"


def test_a_changed_data_file_or_reader_is_a_new_key(tmp_path):
    data = tmp_path / "gpus.toml"
    data.write_text((DATA_DIR / "gpus.toml").read_text())
    before = disk_cache.content_key([data])
    assert disk_cache.content_key([data]) == before  # deterministic
    data.write_text(data.read_text().replace("tdp_w = 700", "tdp_w = 701", 1))
    assert disk_cache.content_key([data]) != before


def test_unwritable_or_corrupt_cache_falls_back_to_parsing(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    # a cache folder that cannot exist (its parent is a file): nothing written, the catalog still loads
    cat = _builtin_fresh(monkeypatch, str(blocker / "cache"))
    assert "h100-sxm5-80gb" in cat.gpus
    assert disk_cache.store("catalog", "k", cat) is False
    # a truncated or foreign file under the right name is a miss, and is replaced by a good one
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", str(tmp_path))
    key = catalog.builtin_cache_key()
    (tmp_path / f"catalog-{key}.pickle").write_bytes(b"\x80\x05truncated")
    assert disk_cache.load("catalog", key) is None
    cat = _builtin_fresh(monkeypatch, str(tmp_path))
    assert "h100-sxm5-80gb" in cat.gpus
    assert isinstance(disk_cache.load("catalog", key), catalog.Catalog)


@pytest.mark.parametrize("value", ["off", "0", "", "none"])
def test_cache_can_be_turned_off(monkeypatch, value):
    monkeypatch.setenv("GPUPLAN_CACHE_DIR", value)
    assert disk_cache.cache_dir() is None
    assert disk_cache.load("catalog", "any") is None


def test_default_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUPLAN_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert disk_cache.cache_dir() == Path(tmp_path) / "gpuplan"
