"""A link or fabric technology (NVLink 4, PCIe Gen5 x16, NDR InfiniBand, ...)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpuplan.specs._base import SourcedSpec

InterconnectKind = Literal["nvlink", "nvswitch", "xgmi", "ici", "pcie", "infiniband", "ethernet", "efa", "omnipath"]


class Interconnect(SourcedSpec):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    kind: InterconnectKind
    #: per GPU (scale-up links: all links of one GPU together) or per port (NICs), per direction, GB/s
    per_direction_gbps: float = Field(gt=0)
    #: both directions together, GB/s (= 2 x per_direction for full-duplex links)
    bidirectional_gbps: float = Field(gt=0)
    line_rate_gbit_s: float | None = Field(default=None, gt=0)  # per port, for NICs
    links: int | None = Field(default=None, gt=0)  # links per GPU (NVLink)
    latency_us: float | None = Field(default=None, gt=0)  # one-way small-message latency
    in_network_reduction: bool = False  # NVLS (NVSwitch gen3+) or SHARP (InfiniBand)
    year: int | None = None
