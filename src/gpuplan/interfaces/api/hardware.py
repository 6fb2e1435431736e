"""`gpuplan.api` for the hardware catalog: `hw_list`, `hw_show`, `hw_compare`, `hw_interconnects`,
`hw_prices`, `hw_hosts`, `systems_list`, `systems_show`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from gpuplan.errors import InputError, UnknownIdError
from gpuplan.interfaces.api._common import Result, catalog, gpu_of, resolve_gpu, resolve_system
from gpuplan.specs import CloudPrice, Gpu, HostCpu, Interconnect, System


def gpu_record(gpu: Gpu) -> dict:
    """The JSON object for one GPU: every spec field plus `memory_gib` (binary) for convenience."""
    record = gpu.model_dump()
    record["memory_gib"] = gpu.memory_gib
    return record


def system_record(system: System, gpu: Gpu, host: HostCpu | None = None) -> dict:
    """The JSON object for one system: every spec field plus per-GPU scale-out and memory totals, its
    host CPU part (`host`, with its sources) and, where the GPUs address host memory coherently,
    `host_memory_tier` (capacity per GPU and the bandwidth each GPU reaches it at)."""
    record = system.model_dump()
    record["scaleout_gbps_per_gpu"] = system.scaleout_gbps_per_gpu
    record["host_memory_gib"] = system.host_memory_bytes / 2**30 if system.host_memory_bytes else None
    record["gpu_memory_gib"] = gpu.memory_gib
    record["node_gpu_memory_gib"] = gpu.memory_gib * system.gpus_per_node
    record["gpu_name"] = gpu.name
    record["host"] = host.model_dump() if host is not None else None
    record["host_memory_tier"] = ({
        "capacity_gib_per_gpu": (system.host_memory_bytes / 2**30 / system.gpus_per_node
                                 if system.host_memory_bytes else None),
        "gbps_per_gpu_per_direction": system.host_link_gbps,
        "link": system.host_link,
    } if system.unified_memory else None)
    return record


def _host_of(system: System) -> HostCpu | None:
    return catalog().host(system.host_cpu) if system.host_cpu else None


@dataclass(frozen=True)
class GpusResult(Result):
    """`hw_list`: the GPUs (a list in JSON)."""

    gpus: tuple[Gpu, ...]

    def json_data(self) -> list:
        return [gpu_record(g) for g in self.gpus]


@dataclass(frozen=True)
class GpuResult(Result):
    """`hw_show`: one GPU."""

    gpu: Gpu

    def json_data(self) -> dict:
        return gpu_record(self.gpu)


def hw_list(vendor: str | None = None) -> GpusResult:
    """Catalog GPUs, optionally of one vendor (nvidia, amd, google)."""
    gpus = list(catalog().gpus.values())
    if vendor is not None:
        vendors = sorted({g.vendor for g in gpus})
        if vendor.lower() not in vendors:
            raise InputError(f"vendor: unknown vendor '{vendor}'; allowed: {', '.join(vendors)}", field="vendor")
        gpus = [g for g in gpus if g.vendor == vendor.lower()]
    return GpusResult(tuple(gpus))


def hw_show(gpu: str | Gpu) -> GpuResult:
    """Every figure of one GPU with its unit and source."""
    return GpuResult(resolve_gpu(gpu))


@dataclass(frozen=True)
class CompareResult(Result):
    """`hw_compare`: `comparison` is catalog.compare.GpuComparison (ratios to the first GPU)."""

    comparison: Any

    def json_data(self) -> Any:
        return self.comparison


def hw_compare(gpus: Sequence[str | Gpu]) -> CompareResult:
    """Side-by-side figures of two or more GPUs with each value's ratio to the first."""
    from gpuplan.catalog.compare import compare_gpus

    gpus = list(gpus)
    if len(gpus) < 2:
        raise InputError("gpus: give at least two GPU ids to compare, e.g. `gpuplan hw compare a100-sxm4-80gb h100-sxm5-80gb`",
                         field="gpus")
    return CompareResult(compare_gpus([resolve_gpu(g) for g in gpus]))


@dataclass(frozen=True)
class InterconnectsResult(Result):
    """`hw_interconnects`: links and fabrics (a list in JSON)."""

    interconnects: tuple[Interconnect, ...]

    def json_data(self) -> list:
        return [i.model_dump() for i in self.interconnects]


def hw_interconnects(kind: str | None = None) -> InterconnectsResult:
    """Links and fabrics, optionally of one kind (nvlink, nvswitch, infiniband, ...)."""
    links = list(catalog().interconnects.values())
    if kind is not None:
        kinds = sorted({i.kind for i in links})
        if kind not in kinds:
            raise InputError(f"kind: unknown interconnect kind '{kind}'; allowed: {', '.join(kinds)}", field="kind")
        links = [i for i in links if i.kind == kind]
    return InterconnectsResult(tuple(links))


@dataclass(frozen=True)
class PricesResult(Result):
    """`hw_prices`: dated cloud prices (a list in JSON)."""

    prices: tuple[CloudPrice, ...]

    def json_data(self) -> list:
        return [c.model_dump() for c in self.prices]


def hw_prices(gpu: str | Gpu | None = None) -> PricesResult:
    """Cloud prices in USD per GPU-hour: one GPU's (every pricing model, cheapest first) or all (by GPU, then price)."""
    cat = catalog()
    if gpu is not None:
        entries = cat.cloud_prices(resolve_gpu(gpu).id, pricing_model=None)
    else:
        entries = sorted(cat.clouds.values(), key=lambda c: (c.gpu, c.usd_per_gpu_hour))
    return PricesResult(tuple(entries))


@dataclass(frozen=True)
class SystemsResult(Result):
    """`systems_list`: (system, its GPU) pairs (a list in JSON)."""

    systems: tuple[tuple[System, Gpu], ...]

    def json_data(self) -> list:
        return [system_record(s, g, _host_of(s)) for s, g in self.systems]


@dataclass(frozen=True)
class SystemResult(Result):
    """`systems_show`: one system and its GPU."""

    system: System
    gpu: Gpu
    host: HostCpu | None = None

    def json_data(self) -> dict:
        return system_record(self.system, self.gpu, self.host)


@dataclass(frozen=True)
class HostsResult(Result):
    """`hw_hosts`: host CPU parts (a list in JSON)."""

    hosts: tuple[HostCpu, ...]

    def json_data(self) -> list:
        return [h.model_dump() for h in self.hosts]


def hw_hosts(ids: Sequence[str] = ()) -> HostsResult:
    """Host CPU parts (every one, or those named), each figure with its source."""
    cat = catalog()
    try:
        return HostsResult(tuple(cat.host(i) for i in ids) if ids else tuple(cat.hosts.values()))
    except UnknownIdError as exc:  # the request's field is `ids` (the web API's error names it)
        raise UnknownIdError(str(exc), field="ids") from None


def systems_list() -> SystemsResult:
    """Catalog systems (a GPU id also names a single-GPU box)."""
    cat = catalog()
    return SystemsResult(tuple((s, cat.gpu(s.gpu)) for s in cat.systems.values()))


def systems_show(system: str | System) -> SystemResult:
    """Every figure of one system (a GPU id names a single-GPU box)."""
    spec = resolve_system(system)
    return SystemResult(spec, gpu_of(spec), _host_of(spec))
