"""The host CPU of a node: one socket's cores, memory bandwidth and PCIe lanes, every figure sourced.

A system names its CPU part (`System.host_cpu`), how many sockets it has (`System.host_sockets`) and
the link each GPU reaches the host over (`System.host_link`: PCIe x16 of a generation, or NVLink-C2C
on Grace superchips). Offload (ZeRO-Offload, FSDP CPUOffload) runs over that link and the CPU
optimizer step streams the node's host memory (`System.host_memory_bandwidth_gbps`).

Theoretical memory bandwidth per socket = channels x MT/s x 8 bytes (a 64-bit DDR channel moves 8
bytes per transfer; JEDEC DDR4 / DDR5): 8 x 3200 x 8 = 204.8 GB/s (EPYC 7742), 12 x 4800 x 8 = 460.8
GB/s (EPYC 9554). Parts whose vendor quotes a bandwidth directly (Grace: "up to 512 GB/s" of LPDDR5X)
state it with no channel count.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from gpuplan.specs._base import SourcedSpec

#: bytes one 64-bit DDR channel moves per transfer
DDR_CHANNEL_BYTES = 8


class HostCpu(SourcedSpec):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    vendor: str
    architecture: str
    cores: int = Field(gt=0)  # per socket
    memory_type: str
    memory_channels: int | None = Field(default=None, gt=0)  # per socket
    memory_mt_s: float | None = Field(default=None, gt=0)  # transfers per second per channel, millions
    #: theoretical memory bandwidth of one socket, GB/s (decimal); = channels x MT/s x 8 / 1000 when
    #: both are given (checked)
    memory_bandwidth_gbps: float = Field(gt=0)
    pcie_gen: int | None = Field(default=None, ge=3, le=6)
    pcie_lanes: int | None = Field(default=None, gt=0)  # per socket, in a 2-socket system where it differs
    tdp_w: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _bandwidth_matches_channels(self):
        if self.memory_channels is not None and self.memory_mt_s is not None:
            expected = self.memory_channels * self.memory_mt_s * DDR_CHANNEL_BYTES / 1000.0
            if abs(expected - self.memory_bandwidth_gbps) > 1e-6 * expected:
                raise ValueError(f"memory_bandwidth_gbps ({self.memory_bandwidth_gbps}) is not channels x MT/s x 8 B"
                                 f" = {expected:g} GB/s")
        return self


__all__ = ["DDR_CHANNEL_BYTES", "HostCpu"]
