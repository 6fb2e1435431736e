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


def test_user_gpu_without_price_or_pcie_gen_is_a_pcie_box_with_null_costs(runner, tmp_path):
    # issue 29 Done-when: a user's catalog GPU with no price answers `train` and `plan` as a PCIe box.
    # The entry states no pcie_gen and no scale-up link: SYSTEMS.md's PCIe 4.0 x16 convention, 32 GB/s
    # per direction (catalog pcie4-x16), marked ASSUMED in the box's sources.
    path = _write(tmp_path, GOOD_GPU)
    show = runner.invoke(app, ["--catalog", str(path), "systems", "show", "my-accel", "--json"])
    assert show.exit_code == 0, show.output
    box = json.loads(show.stdout)
    assert (box["gpus_per_node"], box["scaleup_interconnect"], box["scaleup_bandwidth_gbps"]) == (8, "pcie4-x16", 32.0)
    assert "ASSUMED" in box["sources"]["scaleup_bandwidth_gbps"]
    train = runner.invoke(app, ["--catalog", str(path), "train", "llama-3-8b", "--system", "my-accel", "--gpus", "8",
                                "--json"])
    assert train.exit_code == 0, train.output
    t = json.loads(train.stdout)
    assert t["cost_usd"] is None and t["usd_per_gpu_hour"] is None and "no price known" in t["price_source"]
    assert t["energy_mwh"] > 0  # 600 W TDP given: energy is still estimated
    plan = runner.invoke(app, ["--catalog", str(path), "plan", "llama-3-8b", "--system", "my-accel", "--gpus", "8",
                               "--tokens", "100B", "--json"])
    assert plan.exit_code == 0, plan.output
    p = json.loads(plan.stdout)
    assert p["tco"] is None and p["workload_cost_usd"] is None
    assert "no price known for 'my-accel'" in p["cost_reason"]
    assert p["gpus"] == 8 and p["days"] > 0 and p["training_run"]["energy_mwh"] > 0
    # a price given answers the cost again
    priced = runner.invoke(app, ["--catalog", str(path), "plan", "llama-3-8b", "--system", "my-accel", "--gpus", "8",
                                 "--tokens", "100B", "--system-price-usd", "200000", "--cloud-usd-per-gpu-hour", "3",
                                 "--json"])
    assert priced.exit_code == 0, priced.output
    assert json.loads(priced.stdout)["tco"]["cloud_usd_per_gpu_hour"] == 3.0
