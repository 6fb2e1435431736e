"""`gpuplan hw` and `gpuplan systems` through typer's CliRunner."""

from __future__ import annotations

import json
import re

import pytest

from gpuplan.cli.main import app


def _run(runner, *args):
    return runner.invoke(app, list(args))


def test_hw_show_json_contract(runner):
    result = _run(runner, "hw", "show", "h100-sxm5-80gb", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("id", "name", "memory_bytes", "memory_bandwidth_gbps", "peak_tflops", "tdp_w", "sources"):
        assert key in data
    assert data["id"] == "h100-sxm5-80gb"
    # nvidia.com H100 page: BF16 1,979 TFLOPS with sparsity -> 989.4 dense
    assert data["peak_tflops"]["bf16"] == {"dense": 989.4, "sparse": 1978.9}
    assert data["peak_tflops"]["fp64"]["sparse"] is None
    assert data["memory_bytes"] == 80 * 2**30 and data["memory_gib"] == 80
    assert data["tdp_w"] == 700 and data["memory_bandwidth_gbps"] == 3350
    assert "nvidia.com" in data["sources"]["default"]


def test_hw_show_table_prints_units(runner):
    result = _run(runner, "hw", "show", "mi300x")
    assert result.exit_code == 0
    assert "5,300 GB/s" in result.stdout and "192 GiB" in result.stdout and "750 W" in result.stdout
    assert "2,615" in result.stdout  # FP8 dense 2614.9 at 4 significant figures


def test_hw_list_and_vendor_filter(runner, catalog):
    data = json.loads(_run(runner, "hw", "list", "--json").stdout)
    assert len(data) == len(catalog.gpus)
    amd = json.loads(_run(runner, "hw", "list", "--vendor", "amd", "--json").stdout)
    assert {g["id"] for g in amd} == {"mi250x", "mi300x", "mi325x", "mi355x"}
    assert _run(runner, "hw", "list").exit_code == 0


def test_hw_list_unknown_vendor(runner):
    result = _run(runner, "hw", "list", "--vendor", "intel")
    assert result.exit_code == 2
    assert "vendor" in result.stderr and "nvidia" in result.stderr


def test_unknown_gpu_id_is_one_line_with_closest(runner):
    result = _run(runner, "hw", "show", "h100-sxm9")  # ("h100-sxm" is now an alias, docs/hardware.md)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0].startswith("error: unknown GPU 'h100-sxm9'")
    assert "h100-sxm5-80gb" in lines[0]


def test_hw_compare_ratios(runner):
    result = _run(runner, "hw", "compare", "a100-sxm4-80gb", "h100-sxm5-80gb", "b200", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["baseline"] == "a100-sxm4-80gb"
    rows = {m["key"]: m for m in data["metrics"]}
    # A100 page 2,039 GB/s vs H100 page 3,350 GB/s: 3350 / 2039 = 1.643
    assert rows["memory_bandwidth_gbps"]["ratio_to_baseline"]["h100-sxm5-80gb"] == pytest.approx(1.643, abs=1e-3)
    # BF16 dense 2250 (HGX B200) / 312 (A100) = 7.21
    assert rows["bf16_dense_tflops"]["ratio_to_baseline"]["b200"] == pytest.approx(7.21, abs=0.01)
    assert rows["fp8_dense_tflops"]["ratio_to_baseline"]["b200"] is None  # A100 has no FP8
    table = _run(runner, "hw", "compare", "a100-sxm4-80gb", "h100-sxm5-80gb")
    assert table.exit_code == 0 and "(1.64x)" in table.stdout


def test_hw_compare_needs_two_and_known_ids(runner):
    assert _run(runner, "hw", "compare", "b200").exit_code == 2
    bad = _run(runner, "hw", "compare", "b200", "mi300")
    assert bad.exit_code == 2 and "mi300x" in bad.stderr


def test_hw_interconnects_and_prices(runner):
    links = json.loads(_run(runner, "hw", "interconnects", "--json").stdout)
    nvlink5 = next(i for i in links if i["id"] == "nvlink5")
    assert (nvlink5["per_direction_gbps"], nvlink5["bidirectional_gbps"]) == (900, 1800)  # NVLink page: 1.8 TB/s per GPU
    assert _run(runner, "hw", "interconnects", "--kind", "efa").exit_code == 0
    assert _run(runner, "hw", "interconnects", "--kind", "token-ring").exit_code == 2
    prices = json.loads(_run(runner, "hw", "prices", "h100-sxm5-80gb", "--json").stdout)
    assert prices and all(p["gpu"] == "h100-sxm5-80gb" and p["date"] for p in prices)
    assert [p["usd_per_gpu_hour"] for p in prices] == sorted(p["usd_per_gpu_hour"] for p in prices)


def _systems_md_ids(validation_dir):
    # every id of every table of SYSTEMS.md: systems, the third split's TPU pods and mi355x-platform, and
    # the GPU ids used as single GPUs or PCIe boxes (rtx-3090, rtx-a6000, a10g, v100-sxm2-16gb, ...)
    text = (validation_dir / "SYSTEMS.md").read_text()
    return re.findall(r"^\| `([a-z0-9.\-]+)` \|", text, flags=re.M)


def test_systems_show_every_systems_md_id(runner, validation_dir):
    ids = _systems_md_ids(validation_dir)
    assert len(ids) >= 32
    assert {"mi355x-platform", "tpu-v5p-pod", "tpu7x-pod", "rtx-3090", "a10g", "v100-sxm2-16gb"} <= set(ids)
    for system_id in ids:
        result = _run(runner, "systems", "show", system_id, "--json")
        assert result.exit_code == 0, (system_id, result.output)
        data = json.loads(result.stdout)
        assert data["id"] == system_id and data["gpus_per_node"] >= 1 and data["sources"]


def test_systems_list_and_show(runner, catalog):
    data = json.loads(_run(runner, "systems", "list", "--json").stdout)
    assert {s["id"] for s in data} == set(catalog.systems)
    dgx = json.loads(_run(runner, "systems", "show", "dgx-h100", "--json").stdout)
    # DGX H100: 8 x 400 Gb/s / 8 bits / 8 GPUs = 50 GB/s per GPU; 8 x 80 GiB
    assert dgx["scaleout_gbps_per_gpu"] == 50.0 and dgx["node_gpu_memory_gib"] == 640
    table = _run(runner, "systems", "show", "gb200-nvl72")
    assert table.exit_code == 0 and "900 GB/s per GPU per direction" in table.stdout
    unknown = _run(runner, "systems", "show", "dgx-h1000")
    assert unknown.exit_code == 2 and "dgx-h100" in unknown.stderr


def test_compare_has_no_cross_vendor_core_ratio(catalog):
    from gpuplan.catalog.compare import compare_gpus

    result = compare_gpus([catalog.gpu("h100-sxm5-80gb"), catalog.gpu("mi300x"), catalog.gpu("h200-sxm-141gb")])
    cores = next(m for m in result.metrics if m.key == "sm_count")
    # an SM is not a CU: no ratio across vendors; same vendor: 132 / 132 = 1
    assert cores.ratio_to_baseline == {"h100-sxm5-80gb": 1.0, "mi300x": None, "h200-sxm-141gb": 1.0}
    bw = next(m for m in result.metrics if m.key == "memory_bandwidth_gbps")
    assert bw.ratio_to_baseline["mi300x"] == pytest.approx(5300 / 3350)  # ROCm 5.3 TB/s vs H100 page 3.35 TB/s


def test_compare_shows_each_parts_own_measured_ceiling_with_its_source(catalog):
    """Measured rows come from catalog/data/ceilings.toml, the part's own entry only (a generation's
    stand-in is not a measurement of this part)."""
    from gpuplan.catalog.compare import compare_gpus

    result = compare_gpus([catalog.gpu("h100-sxm5-80gb"), catalog.gpu("mi300x"), catalog.gpu("h100-pcie-80gb")])
    gemm = next(m for m in result.metrics if m.key == "measured_bf16_gemm_tflops")
    # mamf-finder table (stas00/ml-engineering): H100 SXM 794.5 TFLOP/s, MI300X 668.4 (TunableOp)
    assert gemm.values == {"h100-sxm5-80gb": 794.5, "mi300x": 668.4, "h100-pcie-80gb": None}
    assert gemm.ratio_to_baseline["mi300x"] == pytest.approx(668.4 / 794.5)
    assert "mamf-finder" in gemm.sources["h100-sxm5-80gb"] and gemm.sources["h100-pcie-80gb"] is None
    hbm = next(m for m in result.metrics if m.key == "measured_hbm_copy_gbps")
    # BabelStream Copy on Azure ND H100 v5: 2.90 TB/s; ND MI300X v5: 4.11 TB/s
    assert hbm.values["h100-sxm5-80gb"] == 2900 and hbm.values["mi300x"] == 4110
    assert "BabelStream" in hbm.sources["mi300x"]
