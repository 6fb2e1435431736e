"""Offload to the host: the link between GPU and host, and the optimizer step on the CPU.

- Host <-> GPU link: the system's `host_link_gbps` (per GPU, per direction: the catalog's host link,
  PCIe x16 of the host's generation or NVLink-C2C on Grace superchips shared by the GPUs on it;
  catalog.Catalog._with_host_figures), at `training.offload.pcie_efficiency` of that (pinned-memory
  copies; ../shared/validation SYSTEMS.md takes "PCIe 4.0 x16 per GPU, about 25 GB/s per
  direction" of the 32 GB/s line rate, 25 / 32 = 0.78; nvbandwidth measures 55.4 of 64 GB/s on
  PCIe 5.0 (0.87) and 359-377 of 450 GB/s on NVLink-C2C (0.80-0.84), ../shared/reference
  wave3-facts.md 5.1 / 5.3). NVMe (ZeRO-Infinity) reads and writes through
  `training.offload.nvme_bytes_s` per GPU.
- CPU optimizer step (DeepSpeed `DeepSpeedCPUAdam`, torchao `CPUOffloadOptimizer`; ZeRO-Offload,
  Ren et al. 2021 sec. 4.2: a SIMD Adam whose step streams the fp32 states): memory-bound on the
  host, `optimizer_states.step_bytes_per_element` with fp32 states and master (the offloaded
  optimizer keeps them in fp32: DeepSpeed's `single_partition_of_fp32_groups`) over the host memory
  bandwidth shared by the GPUs of the node (`primitives.host_memory.host_memory_bytes_s`: the
  system's `host_memory_bandwidth_gbps` x `training.offload.host_memory_efficiency`, or
  `training.offload.host_memory_bytes_s` for a PCIe box whose host CPU the catalog does not name).
"""

from __future__ import annotations

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.primitives.host_memory import host_memory_bytes_s
from gpuplan.specs.system import System

PCIE_EFFICIENCY = knobs.register(
    "training.offload.pcie_efficiency", unit="fraction", default=25.0 / 32.0, low=0.3, high=1.0,
    source="../shared/validation SYSTEMS.md: 'PCIe 4.0 x16 per GPU, about 25 GB/s per direction' of the 32 GB/s "
           "line rate (catalog pcie4-x16; pinned host-to-device copies, as CUDA's bandwidthTest measures)",
    scales="host <-> GPU copies of offloaded parameters, gradients and optimizer updates (PCIe or NVLink-C2C)")
#: NVMe bandwidth per GPU for ZeRO-Infinity: one PCIe Gen4 x4 NVMe drive per GPU; the fastest Gen4
#: drives read 7.45 GB/s sequentially (Samsung 990 PRO, announced 2022-08: "sequential read speeds of
#: up to 7,450 MB/s", near the 8 GB/s of a Gen4 x4 link), writes are slower: 7 GB/s.
NVME_BYTES_S = knobs.register(
    "training.offload.nvme_bytes_s", unit="bytes/s", default=7e9, low=1e8, high=1e11,
    source="one PCIe Gen4 x4 NVMe drive per GPU: Samsung 990 PRO up to 7,450 MB/s sequential read (slashcam.com, 2022-08-28); ~7 GB/s",
    scales="ZeRO-Infinity parameter and optimizer traffic (offload nvme)")


def host_link_bytes_s(system: System) -> float:
    """Achievable host <-> GPU bandwidth per GPU per direction, B/s (module docstring)."""
    if system.host_link_gbps is None:
        raise InputError(f"offload: system '{system.id}' states no host link (host_link or host_link_gbps in the "
                         "catalog); offload needs one", field="offload")
    return system.host_link_gbps * 1e9 * knobs.value("training.offload.pcie_efficiency")


def host_link_seconds(nbytes, system: System, nvme: bool = False):
    """Seconds to move `nbytes` between one GPU of `system` and the host (through NVMe as well with
    ZeRO-Infinity: the slower of the two links sets the rate). Works on numpy arrays."""
    rate = host_link_bytes_s(system)
    if nvme:
        rate = min(rate, knobs.value("training.offload.nvme_bytes_s"))
    return nbytes / rate


def cpu_optimizer_seconds(elements, bytes_per_element: float, gpus_sharing_host, system: System):
    """Seconds of the optimizer step on the CPU for `elements` trainable elements of one GPU, the
    node's host bandwidth shared by `gpus_sharing_host` GPUs stepping at once. Works on arrays."""
    return elements * bytes_per_element * gpus_sharing_host / host_memory_bytes_s(system)


__all__ = ["cpu_optimizer_seconds", "host_link_bytes_s", "host_link_seconds", "host_memory_bytes_s"]
