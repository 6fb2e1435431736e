"""A node (DGX/HGX/cloud instance/rack-scale system): GPUs, scale-up domain, NICs, power."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gpuplan.specs._base import SourcedSpec

NicKind = Literal["infiniband", "roce", "efa", "omnipath", "tcp", "dcn", "none"]  # dcn: Google's data-centre network between TPU slices


class System(SourcedSpec):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    gpu: str  # GPU id in the catalog
    gpus_per_node: int = Field(gt=0)
    #: GPUs reachable over the scale-up fabric (NVLink/NVSwitch): 8 for DGX H100, 72 for GB200 NVL72, 1 for a single GPU
    scaleup_domain_gpus: int = Field(gt=0)
    scaleup_interconnect: str | None = None  # interconnect id
    #: per GPU, per direction, GB/s, as this system wires it (may be below the GPU's own figure)
    scaleup_bandwidth_gbps: float | None = Field(default=None, gt=0)
    scaleup_switched: bool = True  # NVSwitch (any-to-any at full rate) vs point-to-point mesh
    #: the scale-up fabric is an ICI torus of this many axes (2: TPU v5e / v6e, 3: v5p / TPU7x); the
    #: chip's `scaleup_bandwidth_gbps` (per direction) is spread over 2 links per axis
    ici_torus_axes: int | None = Field(default=None, ge=2, le=3)
    #: an axis of a slice has wrap-around links when its length is a multiple of this (on 3-axis tori
    #: only when every axis is: whole cubes); None: no torus
    ici_wraparound_length: int | None = Field(default=None, gt=0)
    nvls: bool = False  # NVLink SHARP in-switch reduction available
    nics_per_node: int = Field(default=0, ge=0)  # compute-fabric NICs (storage NICs excluded)
    nic_gbit_s: float | None = Field(default=None, gt=0)  # per NIC port, line rate
    nic_kind: NicKind = "none"
    scaleout_interconnect: str | None = None  # interconnect id of the NIC fabric
    sharp: bool = False  # in-network reduction on the scale-out fabric
    cpu: str | None = None
    host_memory_bytes: int | None = Field(default=None, gt=0)
    #: host CPU part (a catalog `host` id) and how many sockets of it one node has
    host_cpu: str | None = None
    host_sockets: int | None = Field(default=None, gt=0)
    #: the link each GPU reaches host memory over (interconnect id: pcie5-x16, nvlink-c2c, ...)
    host_link: str | None = None
    #: GPUs sharing one host link (2 on a GB200 / GB300 superchip: one Grace, two GPUs)
    gpus_per_host_link: int = Field(default=1, gt=0)
    #: CPU <-> GPU bandwidth per GPU per direction, GB/s; filled on load from `host_link` /
    #: `gpus_per_host_link` when not stated (TPU hosts state it from the scaling book)
    host_link_gbps: float | None = Field(default=None, gt=0)
    #: theoretical host memory bandwidth of one node, GB/s; filled on load = sockets x the CPU's
    host_memory_bandwidth_gbps: float | None = Field(default=None, gt=0)
    #: the GPUs address host memory coherently over the host link (GH200 / GB200 / GB300 NVLink-C2C):
    #: host memory is a second, slower tier of GPU memory, not only an offload target
    unified_memory: bool = False
    system_power_w: float | None = Field(default=None, gt=0)  # max system power of one node
    rack_units: int | None = Field(default=None, gt=0)
    price_usd: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _torus_is_not_switched(self):
        if self.ici_torus_axes is not None and (self.scaleup_switched or self.ici_wraparound_length is None):
            raise ValueError("ici_torus_axes: a torus is not switched (scaleup_switched = false) and needs "
                             "ici_wraparound_length")
        return self

    @property
    def scaleout_gbps_per_gpu(self) -> float:
        """Scale-out bandwidth per GPU per direction, GB/s = nics x Gbit/s / 8 / GPUs per node."""
        if not self.nics_per_node or not self.nic_gbit_s:
            return 0.0
        return self.nics_per_node * self.nic_gbit_s / 8.0 / self.gpus_per_node
