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
  (40 GB/s) two GPUs get 10 GB/s each, against 25.6 GB/s of PCIe 4.0 x16.
- The staged card-to-card path itself (`staged_card_to_card_bytes_s`, the second bound): measured,
  a copy from one GeForce card to another through the host bridge is far below both the link and
  host memory. Two RTX 3070 Ti on an X399 board (Threadripper 2950X, PCIe 3.0 x16 slots, `nvidia-smi
  topo -m`: PHB), CUDA p2pBandwidthLatencyTest / BusGrind (forum.level1techs.com/t/185531 'GPU -> GPU
  expected bandwidth', 2022): unidirectional 3.32 GB/s (UMA) and 5.55 (NUMA mode); bidirectional
  4.88 / 4.98 (UMA) and 7.50 / 6.82 (NUMA): 3 to 6 x below the 15.75 GB/s PCIe 3.0 x16 line rate, so
  the bridge path, not the link, sets it (no scaling by PCIe generation). A ring collective sends and
  receives on every rank at once, so a rank gets half the bidirectional figure per direction: the
  mean of the four bidirectional entries, (4.88 + 4.98 + 7.50 + 6.82) / 4 = 6.045 GB/s, over 2 =
  3.02 GB/s per rank (`collectives.staged_card_to_card_bytes_s`; a box whose host bridge is
  faster sets it). Per rank, the lower of the two bounds applies (the host-memory bound takes over
  beyond about 6 ranks of a 40 GB/s workstation).
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

#: Per-rank, per-direction bandwidth of GPU-to-GPU traffic staged through the host bridge (GeForce,
#: no P2P), both directions busy: half the mean bidirectional card-to-card figure measured through
#: the PHB path (module docstring): (4.88 + 4.98 + 7.50 + 6.82) / 4 / 2 GB/s.
STAGED_BIDIRECTIONAL_MEASURED_GBPS = (4.88, 4.98, 7.50, 6.82)
STAGED_CARD_TO_CARD_BYTES_S = knobs.register(
    "collectives.staged_card_to_card_bytes_s", unit="bytes/s",
    default=sum(STAGED_BIDIRECTIONAL_MEASURED_GBPS) / len(STAGED_BIDIRECTIONAL_MEASURED_GBPS) / 2.0 * 1e9,
    low=1e8, high=1e11,
    source="forum.level1techs.com/t/185531 (2022): 2x RTX 3070 Ti, X399 / Threadripper 2950X, PHB path, "
           "p2pBandwidthLatencyTest bidirectional 4.88 / 4.98 (UMA), 7.50 / 6.82 GB/s (NUMA); mean 6.045, "
           "half per direction with both directions busy",
    scales="per-rank bandwidth of collectives staged through the host on a PCIe box without P2P (GeForce)")
#: Host DRAM accesses per byte a rank sends through NCCL's SHM transport: one write by the sender,
#: one read by the receiver (module docstring).
SHM_HOST_ACCESSES_PER_BYTE = 2.0


def host_memory_bytes_s(system: System) -> float:
    """Host memory bandwidth per node, B/s (module docstring)."""
    if system.host_memory_bandwidth_gbps is None:
        return knobs.value("training.offload.host_memory_bytes_s")
    return system.host_memory_bandwidth_gbps * 1e9 * knobs.value("training.offload.host_memory_efficiency")


def staged_card_to_card_bytes_s() -> float:
    """Per-rank, per-direction bandwidth of the staged card-to-card path, B/s (module docstring)."""
    return knobs.value("collectives.staged_card_to_card_bytes_s")


def staged_through_host(system: System, gpu: Gpu | None) -> bool:
    """Whether GPU-to-GPU traffic inside the box goes through host memory: the GPUs have no driver
    P2P (`Gpu.pcie_p2p` false) and their scale-up fabric is the PCIe host link itself."""
    return (gpu is not None and gpu.pcie_p2p is False and system.scaleup_interconnect is not None
            and system.scaleup_interconnect == system.host_link)


__all__ = ["HOST_MEMORY_BYTES_S", "HOST_MEMORY_EFFICIENCY", "SHM_HOST_ACCESSES_PER_BYTE", "STAGED_BIDIRECTIONAL_MEASURED_GBPS",
           "STAGED_CARD_TO_CARD_BYTES_S", "host_memory_bytes_s", "staged_card_to_card_bytes_s", "staged_through_host"]
