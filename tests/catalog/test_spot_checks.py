"""Catalog figures against their cited sources (each expected number's source in a comment)."""

from __future__ import annotations

import pytest

from gpuplan.units import GIB


def test_h100_sxm5(catalog):
    h100 = catalog.gpu("h100-sxm5-80gb")
    # nvidia.com/en-us/data-center/h100 (retrieved 2026-10-08): BF16 Tensor Core* 1,979 TFLOPS, "* With sparsity";
    # dense = 1/2 (hpctech datasheet copy: "Specifications 1/2 lower without sparsity")
    assert h100.peak("bf16") == pytest.approx(989.4)
    assert h100.peak("bf16", sparse=True) == pytest.approx(1978.9)
    assert h100.peak("fp8") == pytest.approx(1978.9)  # FP8* 3,958 / 2
    assert h100.peak("tf32") == pytest.approx(494.7)  # TF32* 989 / 2
    assert h100.peak("fp64") == 34  # FP64 34 TFLOPS (dense, no sparsity)
    assert h100.memory_bandwidth_gbps == 3350  # "3.35TB/s"
    assert h100.memory_bytes == 80 * GIB  # 80GB HBM3 = 5 x 16 GiB stacks
    assert h100.tdp_w == 700  # "Up to 700W"
    assert h100.scaleup_bandwidth_gbps == 450  # NVLink 900GB/s bidirectional / 2
    # scaling book GPU chapter: "H100 990e12 / 3.35e12 = 295" FLOP/B critical intensity
    assert h100.ridge_flops_per_byte("bf16") == pytest.approx(295.3, abs=0.1)


def test_a100(catalog):
    # nvidia.com/en-us/data-center/a100: 80GB SXM 2,039 GB/s; BFLOAT16 312 | 624*
    a100 = catalog.gpu("a100-sxm4-80gb")
    assert a100.memory_bandwidth_gbps == 2039
    assert (a100.peak("bf16"), a100.peak("bf16", sparse=True)) == (312, 624)
    # A100 40GB datasheet (UPB PC2 wiki copy): 1,555 GB/s HBM2, 400 W
    a100_40 = catalog.gpu("a100-sxm4-40gb")
    assert (a100_40.memory_bandwidth_gbps, a100_40.tdp_w) == (1555, 400)


def test_h200_h800_h100_96gb(catalog):
    # nvidia.com/en-us/data-center/h200: 141GB, 4.8TB/s, same FLOPs as H100 SXM
    h200 = catalog.gpu("h200-sxm-141gb")
    assert (h200.memory_bytes, h200.memory_bandwidth_gbps, h200.peak("bf16")) == (141 * GIB, 4800, 989.4)
    # DeepSeek-V3 report / SYSTEMS.md hgx-h800: NVLink 400 GB/s bidirectional = 200 per direction
    assert catalog.gpu("h800-sxm5-80gb").scaleup_bandwidth_gbps == 200
    # torchtitan llama3_h100_202412 "Hardware": 96GB HBM2e at 2.4 TB/s, 500 W
    h96 = catalog.gpu("h100-sxm5-96gb")
    assert (h96.memory_bytes, h96.memory_bandwidth_gbps, h96.tdp_w) == (96 * GIB, 2400, 500)


def test_blackwell(catalog):
    # nvidia.com HGX page, HGX B200 (8 GPUs): FP16/BF16 36 PF sparse -> 36000 / 8 / 2 = 2250 dense per GPU;
    # FP4 144 | 72 PF -> 9000 dense per GPU; FP64 296 TF -> 37 per GPU
    b200 = catalog.gpu("b200")
    assert b200.peak("bf16") == 2250
    assert b200.peak("fp4") == 9000
    assert b200.peak("fp64") == 37
    assert b200.memory_bytes == 180 * GIB  # MIG guide "B200 180GB"
    # GB200 NVL72 page: NVFP4 1,440 PF sparse / 72 GPUs / 2 = 10,000 dense; 576 TB/s / 72 = 8 TB/s
    gb200 = catalog.gpu("gb200")
    assert (gb200.peak("fp4"), gb200.memory_bandwidth_gbps) == (10_000, 8000)
    # RTX PRO 6000 Blackwell (GPU database pages, SECONDARY): 96 GB GDDR7, 1,792 GB/s, 600 W, FP4 4.03 PF sparse
    rtx = catalog.gpu("rtx-pro-6000")
    assert (rtx.memory_bytes, rtx.memory_bandwidth_gbps, rtx.tdp_w) == (96 * GIB, 1792, 600)
    assert rtx.peak("fp4", sparse=True) == pytest.approx(4030.4)


def test_amd_and_tpu(catalog):
    # ROCm mi300.md peak table: Matrix FP8 4096 FLOPs/clk/CU -> 2614.9 TFLOPS (dense); 5.3 TB/s
    mi300x = catalog.gpu("mi300x")
    assert mi300x.peak("fp8") == pytest.approx(2614.9)
    assert mi300x.peak("bf16") == pytest.approx(1307.4)
    assert mi300x.memory_bandwidth_gbps == 5300
    assert mi300x.memory_bytes == 192 * GIB  # ROCm gpu-arch-specs: 192 GiB
    # hand check of the ROCm derivation: 2048 FLOPs/clk/CU x 304 CUs x 2.1 GHz = 1307.4 TFLOPS
    assert 2048 * 304 * 2.1e9 / 1e12 == pytest.approx(mi300x.peak("bf16"), rel=1e-3)
    # Cloud TPU v5e docs: 197 TFLOPs bf16, 819 GBps, ICI 400 GBps bidirectional
    v5e = catalog.gpu("tpu-v5e")
    assert (v5e.peak("bf16"), v5e.memory_bandwidth_gbps, v5e.scaleup_bandwidth_gbps) == (197, 819, 200)


def test_systems(catalog):
    # DGX H100 RA: 8 GPUs, 8x 400 Gb/s ConnectX-7 -> 8 x 400 / 8 / 8 = 50 GB/s per GPU per direction
    dgx = catalog.system("dgx-h100")
    assert (dgx.gpus_per_node, dgx.scaleout_gbps_per_gpu, dgx.scaleup_bandwidth_gbps) == (8, 50.0, 450)
    # GB200 NVL72 page: 72 GPUs in one NVLink domain; scaling book: egress 4 x 18 x 400 Gb/s = 3.6 TB/s -> 50 GB/s per GPU
    nvl = catalog.system("gb200-nvl72")
    assert (nvl.scaleup_domain_gpus, nvl.scaleout_gbps_per_gpu) == (72, 50.0)
    # BLOOM model card: 4 Omni-Path 100 Gb/s links per 8-GPU node -> 4 x 100 / 8 / 8 = 6.25 GB/s per GPU
    assert catalog.system("jeanzay-a100-80gb").scaleout_gbps_per_gpu == 6.25
    # SYSTEMS.md aws-p5en: 3,200 Gb/s per node -> 3200 / 8 / 8 = 50 GB/s per GPU
    assert catalog.system("aws-p5en").scaleout_gbps_per_gpu == 50.0
    # vTrain: 800 Gb/s per node -> 12.5 GB/s per GPU
    assert catalog.system("hgx-a100-800g").scaleout_gbps_per_gpu == 12.5
    # ROCm mi300.md: 8 OAMs, 7 point-to-point links each, no switch
    mi = catalog.system("mi300x-platform")
    assert (mi.scaleup_switched, mi.scaleup_bandwidth_gbps) == (False, 448)
    # a GPU id names a PCIe box of up to 8 (SYSTEMS.md): H100 SXM5 states PCIe Gen5 -> 64 GB/s per
    # direction (H100 page 'PCIe Gen5: 128 GB/s' bidirectional), power 8 x 700 W TDP (GPUs only)
    box = catalog.system("h100-sxm5-80gb")
    assert (box.gpus_per_node, box.scaleup_domain_gpus, box.system_power_w) == (8, 8, 5600)
    assert (box.scaleup_interconnect, box.scaleup_bandwidth_gbps, box.scaleup_switched, box.nics_per_node) == (
        "pcie5-x16", 64, True, 0)
    # a TPU chip states no PCIe generation: one chip alone
    chip = catalog.system("tpu-v6e")
    assert (chip.gpus_per_node, chip.scaleup_domain_gpus) == (1, 1)


def test_cloud_prices(catalog):
    # datareceipts hyperscalers.json (retrieved 2026-11-09): p5.48xlarge $55.04/h -> 55.04 / 8 = 6.88 per GPU-hour
    p5 = catalog.clouds["aws-p5-48xlarge"]
    assert p5.usd_per_gpu_hour * p5.gpus == pytest.approx(55.04)
    # dstack PR #4110: p5en.48xlarge $63.296/h on-demand -> 7.912 per GPU-hour
    assert catalog.clouds["aws-p5en-48xlarge"].usd_per_gpu_hour * 8 == pytest.approx(63.296)
    on_demand = catalog.cloud_prices("h100-sxm5-80gb")
    assert on_demand and all(c.pricing_model == "on-demand" for c in on_demand)
    everything = catalog.cloud_prices("h100-sxm5-80gb", pricing_model=None)
    assert {c.pricing_model for c in everything} >= {"on-demand", "reserved", "capacity-block"}
    assert [c.usd_per_gpu_hour for c in everything] == sorted(c.usd_per_gpu_hour for c in everything)
