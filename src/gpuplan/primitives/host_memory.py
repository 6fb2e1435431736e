"""Host memory bandwidth of a system, and what GPU traffic staged through it can reach.

- Host memory bandwidth per node (`host_memory_bytes_s`): the system's `host_memory_bandwidth_gbps`
  (sockets x the host CPU's theoretical per-socket bandwidth) x `training.offload.host_memory_efficiency`,
  or, for a system whose host CPU the catalog does not name (a PCIe box built from a GPU id),
  `training.offload.host_memory_bytes_s` (a dual-channel DDR4 workstation). Streamed by the CPU
  optimizer step under offload (workloads.training.offload) and by collectives staged through host
  memory (below).
- Collectives without peer-to-peer (the bound applied in `primitives.collectives._intra_limit_gbps`): where the GPUs of a PCIe box have no
  driver P2P (GeForce cards, `Gpu.pcie_p2p` false: S_TINY_P2P) NCCL's P2P transport is unavailable
  and it connects the ranks of a node through its SHM transport (NVIDIA/nccl src/transport/shm.cc:
  the sender's data goes to a buffer in pinned host memory, the receiver reads it from there;
  NCCL_P2P_DISABLE selects the same path on any box). Every byte a rank sends is therefore written
  to host DRAM once and read from it once, and all r ranks of a ring send at once, so host memory
  carries 2 r x the per-rank bus bandwidth: per rank at most host_memory_bytes_s / (2 r). The PCIe
  links are not the limit here (each byte still crosses the sender's link once upstream and the
  receiver's once downstream: catalog.pcie_box_system). On a dual-channel DDR4 workstation
  (40 GB/s) two GPUs get 10 GB/s each, against 25.6 GB/s of PCIe 4.0 x16; a GeForce pair measured
  card to card through the host on a consumer Threadripper board reaches 3.3-5.6 GB/s
  unidirectional (CUDA p2pBandwidthLatencyTest, forum.level1techs.com 'GPU -> GPU expected
  bandwidth', 2022: the PHB path), so this bound is the optimistic end.
"""

from __future__ import annotations

from gpuplan import knobs
from gpuplan.specs import Gpu, System

#: Host memory bandwidth the CPU optimizer step streams at, per node. A dual-channel DDR4-3200
#: workstation has 2 x 8 B x 3200 MT/s = 51.2 GB/s (JEDEC DDR4); STREAM-class kernels reach about 80%
#: of that: 40 GB/s. A dual-socket server has several times more (e.g. 2 x 8 channels of DDR4-3200 =
#: 409.6 GB/s): set this knob (`--set` / a calibration profile) for such a host.
HOST_MEMORY_BYTES_S = knobs.register(
    "training.offload.host_memory_bytes_s", unit="bytes/s", default=40e9, low=1e9, high=5e12,
    source="dual-channel DDR4-3200 workstation: 51.2 GB/s theoretical (JEDEC) x ~0.8 achievable (STREAM-class)",
    scales="the CPU optimizer step under offload (DeepSpeedCPUAdam / torchao CPUOffloadOptimizer), per node; "
           "collectives staged through host memory on a PCIe box without P2P")
#: Fraction of a host's theoretical memory bandwidth the CPU optimizer step streams at: the same ~0.8
#: STREAM-class fraction the workstation default above assumes (one DGX A100 reached 148 GB/s of one
#: socket's 204.8 with 32 threads, 0.72: ../shared/reference wave3-facts.md 5.2, SECONDARY).
HOST_MEMORY_EFFICIENCY = knobs.register(
    "training.offload.host_memory_efficiency", unit="fraction", default=0.8, low=0.2, high=1.0,
    source="STREAM-class kernels reach ~80% of theoretical DDR bandwidth (the workstation default's rule); "
           "DGX A100 STREAM 148 of 204.8 GB/s per socket with 32 threads (gist v0dro, SECONDARY)",
    scales="the CPU optimizer step under offload on a system whose host CPU the catalog names")

#: Host DRAM accesses per byte a rank sends through NCCL's SHM transport: one write by the sender,
#: one read by the receiver (module docstring).
SHM_HOST_ACCESSES_PER_BYTE = 2.0


def host_memory_bytes_s(system: System) -> float:
    """Host memory bandwidth per node, B/s (module docstring)."""
    if system.host_memory_bandwidth_gbps is None:
        return knobs.value("training.offload.host_memory_bytes_s")
    return system.host_memory_bandwidth_gbps * 1e9 * knobs.value("training.offload.host_memory_efficiency")


def staged_through_host(system: System, gpu: Gpu | None) -> bool:
    """Whether GPU-to-GPU traffic inside the box goes through host memory: the GPUs have no driver
    P2P (`Gpu.pcie_p2p` false) and their scale-up fabric is the PCIe host link itself."""
    return (gpu is not None and gpu.pcie_p2p is False and system.scaleup_interconnect is not None
            and system.scaleup_interconnect == system.host_link)


__all__ = ["HOST_MEMORY_BYTES_S", "HOST_MEMORY_EFFICIENCY", "SHM_HOST_ACCESSES_PER_BYTE", "host_memory_bytes_s",
           "staged_through_host"]
