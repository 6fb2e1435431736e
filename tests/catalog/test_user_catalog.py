"""User catalog files (--catalog FILE, GPUPLAN_CATALOG): validated like the built-in one; errors name
the file, the entry and the field; exit code 2 from the CLI."""

from __future__ import annotations

import json

import pytest

from gpuplan.catalog import load_catalog, set_user_catalogs
from gpuplan.cli.main import app
from gpuplan.errors import InputError

GOOD_GPU = """
[[gpu]]
id = "my-accel"
name = "My accelerator"
vendor = "acme"
architecture = "X1"
memory_gib = 64
memory_type = "HBM3"
memory_bandwidth_gbps = 4000
tdp_w = 600
[gpu.peak_tflops]
bf16 = { dense = 1000, sparse = 2000 }
[gpu.sources]
default = "ACME X1 datasheet rev 2, table 1"
"""


def _write(tmp_path, text, name="mine.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_cli_catalog_option_adds_a_gpu(runner, tmp_path):
    path = _write(tmp_path, GOOD_GPU)
    result = runner.invoke(app, ["--catalog", str(path), "hw", "show", "my-accel", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["memory_bytes"] == 64 * 2**30 and data["peak_tflops"]["bf16"]["dense"] == 1000


def test_env_var_overrides_a_builtin_entry(monkeypatch, tmp_path):
    override = GOOD_GPU.replace('id = "my-accel"', 'id = "h100-sxm5-80gb"').replace("4000", "3000")
    monkeypatch.setenv("GPUPLAN_CATALOG", str(_write(tmp_path, override)))
    load_catalog.cache_clear()
    assert load_catalog().gpu("h100-sxm5-80gb").memory_bandwidth_gbps == 3000
    monkeypatch.delenv("GPUPLAN_CATALOG")
    load_catalog.cache_clear()
    assert load_catalog().gpu("h100-sxm5-80gb").memory_bandwidth_gbps == 3350  # built-in untouched


@pytest.mark.parametrize(
    "text, fragments",
    [
        ("[[gpu]\nid = ", ["mine.toml", "not valid TOML"]),
        (GOOD_GPU.replace('tdp_w = 600', 'tdp_w = 600\nwatts = 3'), ["mine.toml", "gpu 'my-accel'", "watts"]),
        (GOOD_GPU.replace('default = "ACME X1 datasheet rev 2, table 1"', 'memory_type = "x"'),
         ["mine.toml", "gpu 'my-accel'", "without a source"]),
        (GOOD_GPU.replace("sparse = 2000", "sparse = 500"), ["mine.toml", "gpu 'my-accel'", "peak_tflops.bf16", "below dense"]),
        (GOOD_GPU.replace("bf16 =", "bf17 ="), ["mine.toml", "gpu 'my-accel'", "bf17"]),
        (GOOD_GPU.replace('default =', 'memroy_bandwidth_gbps = "typo"\ndefault ='), ["gpu 'my-accel'", "memroy_bandwidth_gbps"]),
        ('[[system]]\nid = "box"\nname = "b"\ngpu = "nope"\ngpus_per_node = 1\nscaleup_domain_gpus = 1\n'
         '[system.sources]\ndefault = "my notes"\n', ["mine.toml", "system 'box'", "field gpu", "nope"]),
        ("[[rack]]\nid = 1\n", ["mine.toml", "unknown table", "rack"]),
    ],
)
def test_bad_user_catalog_names_file_entry_field(tmp_path, runner, text, fragments):
    path = _write(tmp_path, text)
    set_user_catalogs([str(path)])
    with pytest.raises(InputError) as info:
        load_catalog()
    for fragment in fragments:
        assert fragment in str(info.value)
    set_user_catalogs([])
    result = runner.invoke(app, ["--catalog", str(path), "hw", "list"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert "mine.toml" in result.stderr or "unknown table" in result.stderr


def test_missing_user_catalog_file(runner, tmp_path):
    result = runner.invoke(app, ["--catalog", str(tmp_path / "absent.toml"), "hw", "list"])
    assert result.exit_code == 2 and "absent.toml" in result.stderr and "no such file" in result.stderr
