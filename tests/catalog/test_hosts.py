"""Host CPUs and host links as catalog parts (catalog/data/hosts.toml, System.host_*): figures against
their sources, the figures the loader derives, and bad input.

Sources of the expected numbers: NVIDIA GB200 NVL72 page (per Grace up to 480 GB LPDDR5X at up to 512
GB/s; rack 'up to 17 TB LPDDR5X, up to 18.4 TB/s'; NVLink-C2C 900 GB/s); Tom's Hardware on Genoa (12
channels x DDR5-4800 = 460.8 GB/s per socket, 8 x DDR4-3200 = 204.8 GB/s for Rome); heise on the Xeon 6
6776P (8 channels DDR5-6400, 88 PCIe 5.0 lanes, DGX B300); H100 page (PCIe Gen5 128 GB/s bidirectional)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.specs import HostCpu


def test_host_parts_match_their_sources():
    c = load_catalog()
    assert c.host("epyc-7742").memory_bandwidth_gbps == 204.8  # Tom's Hardware: Rome 204.8 GB/s per socket
    assert c.host("epyc-9554").memory_bandwidth_gbps == 460.8  # Tom's Hardware: Genoa 460.8 GB/s per socket
    grace = c.host("grace")
    assert (grace.cores, grace.memory_bandwidth_gbps) == (72, 512)  # GB200 page: 72 cores, up to 512 GB/s
    x6776p = c.host("xeon-6776p")
    # heise: 8 channels DDR5-6400 -> 8 x 6400 x 8 B = 409.6 GB/s; 88 PCIe 5.0 lanes; 64 cores, 350 W
    assert (x6776p.memory_bandwidth_gbps, x6776p.pcie_lanes, x6776p.pcie_gen, x6776p.cores) == (409.6, 88, 5, 64)


def test_systems_name_their_hosts_and_links():
    c = load_catalog()
    h100 = c.system("dgx-h100")
    # 2 x Xeon 8480C x (8 channels x 4800 MT/s x 8 B = 307.2) = 614.4 GB/s; PCIe 5.0 x16 = 64 GB/s per direction
    assert (h100.host_cpu, h100.host_sockets, h100.host_memory_bandwidth_gbps) == ("xeon-8480c", 2, 614.4)
    assert (h100.host_link, h100.host_link_gbps) == ("pcie5-x16", 64.0)
    nvl = c.system("gb200-nvl72")
    # 36 Grace x 512 GB/s = 18,432 GB/s: NVIDIA's rack figure 'up to 18.4 TB/s' of LPDDR5X
    assert nvl.host_memory_bandwidth_gbps == pytest.approx(18.4e3, rel=2e-3)
    # NVLink-C2C 900 GB/s bidirectional = 450 per direction, one Grace for two GPUs: 225 per GPU
    assert (nvl.host_link, nvl.host_link_gbps, nvl.unified_memory) == ("nvlink-c2c", 225.0, True)
    # B200 / B300 are PCIe Gen6 parts, but their x86 hosts are Gen5: the link runs at Gen5
    assert c.system("dgx-b200").host_link == c.system("dgx-b300").host_link == "pcie5-x16"
    # scaling book: PCIe ~1.6e10 B/s per TPU, 3.2e10 on v6e
    assert (c.system("tpu-v5p-pod").host_link_gbps, c.system("tpu-v6e-pod").host_link_gbps) == (16.0, 32.0)
    # the derived figures say so in their sources
    assert h100.sources["host_memory_bandwidth_gbps"].startswith("DERIVED")
    for system in c.systems.values():  # every host figure a system carries has a source
        for f in ("host_cpu", "host_link", "host_link_gbps", "host_memory_bandwidth_gbps"):
            if getattr(system, f) is not None and f != "host_cpu":
                assert f in system.sources or "default" in system.sources, (system.id, f)


def test_systems_show_prints_the_host(runner):
    out = runner.invoke(app, ["systems", "show", "gb200-nvl72", "--json"])
    assert out.exit_code == 0, out.output
    rec = json.loads(out.stdout)
    assert rec["host"]["id"] == "grace" and rec["host"]["sources"]
    # 17 TB (decimal, as printed) / 72 GPUs = 219.9 GiB of coherent host memory per GPU at 225 GB/s
    assert rec["host_memory_tier"]["capacity_gib_per_gpu"] == pytest.approx(17e12 / 2**30 / 72)
    assert rec["host_memory_tier"]["gbps_per_gpu_per_direction"] == 225.0
    text = runner.invoke(app, ["systems", "show", "dgx-h100"])
    assert text.exit_code == 0 and "Xeon Platinum 8480C" in text.stdout and "host CPU sources" in text.stdout
    assert json.loads(runner.invoke(app, ["systems", "show", "dgx-h100", "--json"]).stdout)["host_memory_tier"] is None
    hosts = runner.invoke(app, ["hw", "hosts", "grace", "epyc-9575f", "--json"])
    assert hosts.exit_code == 0 and [h["id"] for h in json.loads(hosts.stdout)] == ["grace", "epyc-9575f"]
    table = runner.invoke(app, ["hw", "hosts"])
    assert table.exit_code == 0 and "xeon-6776p" in table.stdout and "heise" in table.stdout
    bad = runner.invoke(app, ["hw", "hosts", "epyc-1"])
    assert bad.exit_code == 2 and "host CPU" in bad.output


def _host(**over):
    base = dict(id="x", name="x", vendor="acme", architecture="x", cores=8, memory_type="DDR5", memory_channels=8,
                memory_mt_s=4800, memory_bandwidth_gbps=307.2, sources={"default": "datasheet"})
    return HostCpu.model_validate({**base, **over})


@given(st.integers(1, 24), st.sampled_from([2133, 3200, 4800, 5600, 6400, 8800]))
def test_bandwidth_is_channels_times_rate(channels, mt_s):
    # one 64-bit DDR channel moves 8 bytes per transfer
    assert _host(memory_channels=channels, memory_mt_s=mt_s,
                 memory_bandwidth_gbps=channels * mt_s * 8 / 1000).memory_bandwidth_gbps == pytest.approx(channels * mt_s * 0.008)


def test_bad_host_entries_name_the_field(runner, tmp_path):
    with pytest.raises(ValidationError, match="memory_bandwidth_gbps"):
        _host(memory_bandwidth_gbps=300.0)
    path = tmp_path / "mine.toml"
    path.write_text('[[system]]\nid = "box"\nname = "box"\ngpu = "h100-sxm5-80gb"\ngpus_per_node = 8\n'
                    'scaleup_domain_gpus = 8\nhost_cpu = "pentium-4"\n[system.sources]\ndefault = "mine"\n')
    out = runner.invoke(app, ["--catalog", str(path), "systems", "show", "box"])
    assert out.exit_code == 2 and "field host_cpu: unknown host CPU 'pentium-4'" in out.output


def test_hw_compare_gives_each_value_its_source(runner):
    out = runner.invoke(app, ["hw", "compare", "tpu-v6e", "tpu7x", "--json"])
    assert out.exit_code == 0, out.output
    rows = {r["key"]: r for r in json.loads(out.stdout)["metrics"]}
    # TPU7x TDP: the pod's ~10 MW / 9,216 chips (Hot Chips 2025 report); TPU v6e: no figure, no source
    assert "10 MW" in rows["tdp_w"]["sources"]["tpu7x"] and rows["tdp_w"]["sources"]["tpu-v6e"] is None
    assert "cloud.google.com/tpu/docs/v6e" in rows["bf16_dense_tflops"]["sources"]["tpu-v6e"]
    text = runner.invoke(app, ["hw", "compare", "tpu-v6e", "tpu7x"]).stdout
    assert "sources:" in text and "tpu7x (TDP)" in text
