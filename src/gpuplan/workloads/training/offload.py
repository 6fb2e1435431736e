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
  bandwidth shared by the GPUs of the node: the system's `host_memory_bandwidth_gbps` (sockets x the
  host CPU's theoretical per-socket bandwidth) x `training.offload.host_memory_efficiency`, or, for a
  system whose host CPU the catalog does not name (a PCIe box), `training.offload.host_memory_bytes_s`.
"""

from __future__ import annotations

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.specs.system import System

PCIE_EFFICIENCY = knobs.register(
    "training.offload.pcie_efficiency", unit="fraction", default=25.0 / 32.0, low=0.3, high=1.0,
    source="../shared/validation SYSTEMS.md: 'PCIe 4.0 x16 per GPU, about 25 GB/s per direction' of the 32 GB/s "
           "line rate (catalog pcie4-x16; pinned host-to-device copies, as CUDA's bandwidthTest measures)",
    scales="host <-> GPU copies of offloaded parameters, gradients and optimizer updates (PCIe or NVLink-C2C)")
#: Host memory bandwidth the CPU optimizer step streams at, per node. A dual-channel DDR4-3200
#: workstation has 2 x 8 B x 3200 MT/s = 51.2 GB/s (JEDEC DDR4); STREAM-class kernels reach about 80%
#: of that: 40 GB/s. A dual-socket server has several times more (e.g. 2 x 8 channels of DDR4-3200 =
#: 409.6 GB/s): set this knob (`--set` / a calibration profile) for such a host.
HOST_MEMORY_BYTES_S = knobs.register(
    "training.offload.host_memory_bytes_s", unit="bytes/s", default=40e9, low=1e9, high=5e12,
    source="dual-channel DDR4-3200 workstation: 51.2 GB/s theoretical (JEDEC) x ~0.8 achievable (STREAM-class)",
    scales="the CPU optimizer step under offload (DeepSpeedCPUAdam / torchao CPUOffloadOptimizer), per node")
#: Fraction of a host's theoretical memory bandwidth the CPU optimizer step streams at: the same ~0.8
#: STREAM-class fraction the workstation default above assumes (one DGX A100 reached 148 GB/s of one
#: socket's 204.8 with 32 threads, 0.72: ../shared/reference wave3-facts.md 5.2, SECONDARY).
HOST_MEMORY_EFFICIENCY = knobs.register(
    "training.offload.host_memory_efficiency", unit="fraction", default=0.8, low=0.2, high=1.0,
    source="STREAM-class kernels reach ~80% of theoretical DDR bandwidth (the workstation default's rule); "
           "DGX A100 STREAM 148 of 204.8 GB/s per socket with 32 threads (gist v0dro, SECONDARY)",
    scales="the CPU optimizer step under offload on a system whose host CPU the catalog names")
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


def host_memory_bytes_s(system: System) -> float:
    """Host memory bandwidth the CPU optimizer step streams at, per node, B/s (module docstring)."""
    if system.host_memory_bandwidth_gbps is None:
        return knobs.value("training.offload.host_memory_bytes_s")
    return system.host_memory_bandwidth_gbps * 1e9 * knobs.value("training.offload.host_memory_efficiency")


def cpu_optimizer_seconds(elements, bytes_per_element: float, gpus_sharing_host, system: System):
    """Seconds of the optimizer step on the CPU for `elements` trainable elements of one GPU, the
    node's host bandwidth shared by `gpus_sharing_host` GPUs stepping at once. Works on arrays."""
    return elements * bytes_per_element * gpus_sharing_host / host_memory_bytes_s(system)


__all__ = ["cpu_optimizer_seconds", "host_link_bytes_s", "host_link_seconds", "host_memory_bytes_s"]
