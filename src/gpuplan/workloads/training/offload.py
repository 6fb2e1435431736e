"""Offload to the host: the link between GPU and host, and the optimizer step on the CPU.

- Host <-> GPU link: PCIe x16 per GPU (`Gpu.pcie_gen`, generation 4 where the catalog does not say),
  per direction 16 lanes x the generation's rate x its encoding / 8 (PCI-SIG: Gen3 8 GT/s, Gen4 16,
  Gen5 32 with 128b/130b; Gen6 64 GT/s with FLIT mode, 242 of 256 bytes payload): 15.75, 31.5, 63,
  121 GB/s; at `training.offload.pcie_efficiency` of that (pinned-memory copies; ../shared/validation
  SYSTEMS.md takes "PCIe 4.0 x16 per GPU, about 25 GB/s per direction", 25 / 31.5 = 0.79).
  NVMe (ZeRO-Infinity) reads and writes through `training.offload.nvme_bytes_s` per GPU.
- CPU optimizer step (DeepSpeed `DeepSpeedCPUAdam`, torchao `CPUOffloadOptimizer`; ZeRO-Offload,
  Ren et al. 2021 sec. 4.2: a SIMD Adam whose step streams the fp32 states): memory-bound on the
  host, `optimizer_states.step_bytes_per_element` with fp32 states and master (the offloaded
  optimizer keeps them in fp32: DeepSpeed's `single_partition_of_fp32_groups`) over the host memory
  bandwidth shared by the GPUs of the node (`training.offload.host_memory_bytes_s`).
"""

from __future__ import annotations

from gpuplan import knobs
from gpuplan.specs.gpu import Gpu

#: Per-direction GB/s of a PCIe x16 slot by generation (module docstring, PCI-SIG rates).
PCIE_X16_GBPS = {3: 16 * 8 * 128 / 130 / 8, 4: 16 * 16 * 128 / 130 / 8, 5: 16 * 32 * 128 / 130 / 8,
                 6: 16 * 64 * 242 / 256 / 8}
#: Generation assumed where the catalog gives none: PCIe Gen4, the A100 / Ampere / Ada generation.
DEFAULT_PCIE_GEN = 4

PCIE_EFFICIENCY = knobs.register(
    "training.offload.pcie_efficiency", unit="fraction", default=25.0 / 31.5, low=0.3, high=1.0,
    source="../shared/validation SYSTEMS.md: 'PCIe 4.0 x16 per GPU, about 25 GB/s per direction' of 31.5 GB/s "
           "(pinned host-to-device copies, as CUDA's bandwidthTest measures)",
    scales="host <-> GPU copies of offloaded parameters, gradients and optimizer updates")
#: Host memory bandwidth the CPU optimizer step streams at, per node. A dual-channel DDR4-3200
#: workstation has 2 x 8 B x 3200 MT/s = 51.2 GB/s (JEDEC DDR4); STREAM-class kernels reach about 80%
#: of that: 40 GB/s. A dual-socket server has several times more (e.g. 2 x 8 channels of DDR4-3200 =
#: 409.6 GB/s): set this knob (`--set` / a calibration profile) for such a host.
HOST_MEMORY_BYTES_S = knobs.register(
    "training.offload.host_memory_bytes_s", unit="bytes/s", default=40e9, low=1e9, high=5e12,
    source="dual-channel DDR4-3200 workstation: 51.2 GB/s theoretical (JEDEC) x ~0.8 achievable (STREAM-class)",
    scales="the CPU optimizer step under offload (DeepSpeedCPUAdam / torchao CPUOffloadOptimizer), per node")
#: NVMe bandwidth per GPU for ZeRO-Infinity: one PCIe Gen4 x4 NVMe drive per GPU; the fastest Gen4
#: drives read 7.45 GB/s sequentially (Samsung 990 PRO, announced 2022-08: "sequential read speeds of
#: up to 7,450 MB/s", near the 8 GB/s of a Gen4 x4 link), writes are slower: 7 GB/s.
NVME_BYTES_S = knobs.register(
    "training.offload.nvme_bytes_s", unit="bytes/s", default=7e9, low=1e8, high=1e11,
    source="one PCIe Gen4 x4 NVMe drive per GPU: Samsung 990 PRO up to 7,450 MB/s sequential read (slashcam.com, 2022-08-28); ~7 GB/s",
    scales="ZeRO-Infinity parameter and optimizer traffic (offload nvme)")


def pcie_bytes_s(gpu: Gpu) -> float:
    """Achievable host <-> GPU bandwidth per direction, B/s (module docstring)."""
    gen = gpu.pcie_gen or DEFAULT_PCIE_GEN
    return PCIE_X16_GBPS[gen] * 1e9 * knobs.value("training.offload.pcie_efficiency")


def host_link_seconds(nbytes, gpu: Gpu, nvme: bool = False):
    """Seconds to move `nbytes` between this GPU and the host (through NVMe as well with ZeRO-Infinity:
    the slower of the two links sets the rate). Works on numpy arrays."""
    rate = pcie_bytes_s(gpu)
    if nvme:
        rate = min(rate, knobs.value("training.offload.nvme_bytes_s"))
    return nbytes / rate


def cpu_optimizer_seconds(elements, bytes_per_element: float, gpus_sharing_host):
    """Seconds of the optimizer step on the CPU for `elements` trainable elements of one GPU, the
    node's host bandwidth shared by `gpus_sharing_host` GPUs stepping at once. Works on arrays."""
    return elements * bytes_per_element * gpus_sharing_host / knobs.value("training.offload.host_memory_bytes_s")


__all__ = ["PCIE_X16_GBPS", "cpu_optimizer_seconds", "host_link_seconds", "pcie_bytes_s"]
