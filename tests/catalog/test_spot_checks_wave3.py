"""Spot checks of the parts added for issue 29 (Blackwell Ultra, AMD platforms, PCIe boxes, TPU7x and TPU
pods) against their cited sources; each expected number's source is in the comment beside it."""

from __future__ import annotations

import pytest

from gpuplan.units import GIB


def test_blackwell_ultra_gpus(catalog):
    b300 = catalog.gpu("b300")
    # nvidia.com HGX page, HGX B300 column (8 GPUs): FP4 144 sparse | 108 dense PF -> 108 / 8 = 13.5 PF dense;
    # FP8 72 PF sparse -> 72 / 2 / 8 = 4.5 PF; FP16/BF16 36 PF sparse -> 2.25 PF; FP64 10 TF -> 1.25 TF
    assert b300.peak("fp4") == 13500 and b300.peak("fp4", sparse=True) == 18000
    assert (b300.peak("fp8"), b300.peak("bf16"), b300.peak("fp64")) == (4500, 2250, 1.25)
    # NVIDIA 'Inside Blackwell Ultra' blog: 160 SMs, 288 GB HBM3E, 8 TB/s per GPU
    assert (b300.sm_count, b300.memory_bytes, b300.memory_bandwidth_gbps) == (160, 288 * GIB, 8000)
    assert b300.scaleup_link == "nvlink5" and b300.scaleup_bandwidth_gbps == 900  # 1.8 TB/s bidirectional / 2
    gb300 = catalog.gpu("gb300")
    # GB300 NVL72 rack dense / 72: FP4 1,080 PF -> 15 PF ('15 PetaFLOPS dense NVFP4', NVIDIA blog); FP8 360 -> 5;
    # BF16 180 -> 2.5 PF; 576 TB/s -> 8 TB/s; Verda: 279 GB, 1.4 kW
    assert (gb300.peak("fp4"), gb300.peak("fp8"), gb300.peak("bf16")) == (15000, 5000, 2500)
    assert (gb300.memory_bytes, gb300.memory_bandwidth_gbps, gb300.tdp_w) == (279 * GIB, 8000, 1400)


def test_blackwell_ultra_systems(catalog):
    dgx = catalog.system("dgx-b300")
    # DGX B300: 8 x ConnectX-8 at 800 Gb/s, one per GPU -> 8 x 800 / 8 bits / 8 GPUs = 100 GB/s per GPU per direction
    assert (dgx.gpus_per_node, dgx.scaleout_gbps_per_gpu, dgx.scaleout_interconnect) == (8, 100.0, "ib-xdr")
    nvl = catalog.system("gb300-nvl72")
    # 72 GPUs on 18 NVLink switches (130 TB/s / 72 = 1.8 TB/s bidirectional = 900 per direction); 72 ConnectX-8
    # at 800 Gb/s -> 100 GB/s per GPU
    assert (nvl.scaleup_domain_gpus, nvl.scaleup_bandwidth_gbps, nvl.scaleout_gbps_per_gpu) == (72, 900, 100.0)
    # awesomeagents: GB200 NVL72 '$2-3 million per rack' (midpoint), GB300 NVL72 'estimated $3-4 million'
    assert catalog.system("gb200-nvl72").price_usd == 2_500_000 and nvl.price_usd == 3_500_000
    # CoreWeave pricing (2026-09-20): GB200 NVL72 $42.00 per hour for 4 GPUs -> 10.50 per GPU-hour
    cw = catalog.clouds["coreweave-gb200-nvl72"]
    assert cw.usd_per_gpu_hour * cw.gpus == pytest.approx(42.0)
    assert catalog.cloud_prices("b300")[0].usd_per_gpu_hour == 7.40  # Hyperstack on-demand B300 $7.40


def test_amd_platforms(catalog):
    # ROCm MoRI docs: 8x MI300X/MI325X with 8x ConnectX-7, 8x MI355X with 8x Pollara 400, 1:1 GPU to NIC
    # -> 8 x 400 Gb/s / 8 bits / 8 GPUs = 50 GB/s per GPU per direction
    for system_id, gpu, mesh in (("mi300x-platform", "mi300x", 448), ("mi325x-platform", "mi325x", 448),
                                 ("mi355x-platform", "mi355x", 535.5)):
        s = catalog.system(system_id)
        assert (s.gpu, s.gpus_per_node, s.scaleout_gbps_per_gpu, s.nic_kind) == (gpu, 8, 50.0, "roce")
        # ml-engineering XGMI table: 7 links x 64 GB/s = 448 (MI300X/MI325X), 7 x 76.5 = 535.5 (MI355X), no switch
        assert (s.scaleup_bandwidth_gbps, s.scaleup_switched) == (mesh, False)
    # SYSTEMS.md mi355x-platform: 288 GB HBM3E at 8.0 TB/s
    mi355 = catalog.gpu("mi355x")
    assert (mi355.memory_bytes, mi355.memory_bandwidth_gbps) == (288 * GIB, 8000)


def test_pcie_and_workstation_gpus(catalog):
    r3090 = catalog.gpu("rtx-3090")
    # GA102 whitepaper Appendix A, RTX 3090: 'Peak FP16 Tensor TFLOPS with FP32 Accumulate' 71/142; 936 GB/s;
    # 82 SMs; 1695 MHz; 350 W; GeForce: no driver P2P
    assert (r3090.peak("bf16"), r3090.peak("fp16", sparse=True), r3090.memory_bandwidth_gbps) == (71, 142, 936)
    assert (r3090.sm_count, r3090.boost_clock_mhz, r3090.tdp_w, r3090.pcie_p2p) == (82, 1695, 350, False)
    a6000 = catalog.gpu("rtx-a6000")
    # GA102 whitepaper: RTX A6000 'Peak BF16 Tensor TFLOPS with FP32 Accumulate' 154.8; 48 GB GDDR6, 768 GB/s, 300 W
    assert (a6000.peak("bf16"), a6000.memory_bytes, a6000.memory_bandwidth_gbps, a6000.tdp_w) == (
        154.8, 48 * GIB, 768, 300)
    a10g = catalog.gpu("a10g")
    # Baseten: A10G has the A10's 24 GB GDDR6 at 600 GB/s
    assert (a10g.memory_bytes, a10g.memory_bandwidth_gbps) == (24 * GIB, 600)
    v100 = catalog.gpu("v100-sxm2-16gb")
    # Volta whitepaper Table 1: V100 SXM2 16 GB HBM2, 900 GB/s, 125 TFLOPS tensor FP16
    assert (v100.memory_bytes, v100.memory_bandwidth_gbps, v100.peak("fp16")) == (16 * GIB, 900, 125)
    r4090 = catalog.gpu("rtx-4090")
    # Ada whitepaper Appendix A: FP16/BF16 with FP32 accumulate 165.2/330.4, FP8 with FP32 accumulate 330.3
    assert (r4090.peak("bf16"), r4090.peak("fp16"), r4090.peak("fp8")) == (165.2, 165.2, 330.3)
    # a GPU id as a system: PCIe 4.0 x16 box, 32 GB/s per direction (A100 page 'PCIe Gen4: 64 GB/s' bidirectional)
    for gpu_id in ("rtx-3090", "rtx-4090", "rtx-a6000", "a10g"):
        box = catalog.system(gpu_id)
        assert (box.scaleup_interconnect, box.scaleup_bandwidth_gbps, box.scaleup_domain_gpus) == ("pcie4-x16", 32, 8)


def test_tpus(catalog):
    tpu7x = catalog.gpu("tpu7x")
    # Google Cloud TPU7x page: BF16 2307, FP8 4614 TFLOPs, 192 GiB HBM at 7380 GB/s, 2 TensorCores, ICI 1200 GB/s
    # bidirectional per chip (600 per direction)
    assert (tpu7x.peak("bf16"), tpu7x.peak("fp8"), tpu7x.memory_bytes) == (2307, 4614, 192 * GIB)
    assert (tpu7x.memory_bandwidth_gbps, tpu7x.sm_count, tpu7x.scaleup_bandwidth_gbps) == (7380, 2, 600)
    assert catalog.gpu("tpu-v6e").peak("fp8") == 918  # TPU7x page comparison table: v6e FP8 918 (= BF16)
    # pods: chips per host and DCN per chip. v5e: 2 x 100 Gb/s per 8-chip host = 25 Gb/s = 3.125 GB/s per chip;
    # v6e 100 Gb/s, v5p 50 Gb/s per chip (scaling book: 12.5e9 and 6.25e9 B/s per chip)
    expect = {"tpu-v5e-pod": (8, 256, 2, 3.125), "tpu-v6e-pod": (8, 256, 2, 12.5), "tpu-v5p-pod": (4, 6144, 3, 6.25),
              "tpu7x-pod": (4, 9216, 3, 12.5)}
    for system_id, (per_host, slice_max, axes, dcn) in expect.items():
        pod = catalog.system(system_id)
        assert (pod.gpus_per_node, pod.scaleup_domain_gpus, pod.ici_torus_axes, pod.scaleout_gbps_per_gpu) == (
            per_host, slice_max, axes, dcn), system_id
    # wrap-around: an axis of 16 on v5e/v6e, whole 4x4x4 cubes on v5p (scaling book TPU chapter)
    assert catalog.system("tpu-v6e-pod").ici_wraparound_length == 16
    assert catalog.system("tpu-v5p-pod").ici_wraparound_length == 4
