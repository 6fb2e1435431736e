"""The hardware catalog: data files shipped in `catalog/data/` loaded into validated specs.

Files: gpus.toml ([[gpu]]), interconnects.toml ([[interconnect]]), systems.toml ([[system]]),
hosts.toml ([[host]]: host CPU parts), clouds.toml ([[cloud]]), sources.toml (source keys -> document/URL). A user file with the same
tables (`--catalog FILE`, or the GPUPLAN_CATALOG environment variable, several joined with the
OS path separator) adds entries or overrides them by id, validated the same way.

Units are converted once, here: a key ending in `_gib`, `_mib`, `_kib` (binary) or `_gb`, `_tb`
(decimal) becomes the field `<stem>_bytes`. Nothing downstream converts units again.
"""

from __future__ import annotations

import typing

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuplan.catalog import ceilings as _ceilings  # noqa: F401 - registers the measured-ceiling knobs
from gpuplan.errors import InputError, unknown_id
from gpuplan.specs import CloudPrice, Gpu, HostCpu, Interconnect, System
from gpuplan.validation_rules import INT64_MAX, check_number, decode_utf8, load_toml_text

DATA_DIR = Path(__file__).with_name("data")
ENV_VAR = "GPUPLAN_CATALOG"

#: Short GPU names as NVIDIA's datasheets and the seed questions use them -> the catalog part they
#: mean (documented in docs/hardware.md). Only names with one conventional reading: "H100" in
#: NVIDIA's tables and MLPerf is the SXM5 80 GB part; the others of the family are named when the
#: alias is used. An exact catalog id always wins over an alias.
GPU_ALIASES: dict[str, str] = {
    "h100": "h100-sxm5-80gb",
    "h100-sxm": "h100-sxm5-80gb",
    "h100-pcie": "h100-pcie-80gb",
    "h100-nvl": "h100-nvl-94gb",
    "h200": "h200-sxm-141gb",
    "h200-nvl": "h200-nvl-141gb",
    "a100": "a100-sxm4-80gb",
    "a100-80gb": "a100-sxm4-80gb",
    "a100-40gb": "a100-sxm4-40gb",
    "v100": "v100-sxm2-32gb",
    "h800": "h800-sxm5-80gb",
}

#: called with a one-line note when an alias is resolved (the CLI prints it to stderr; gpuplan.notices).
from gpuplan.notices import alias_listeners  # noqa: E402
_announced: set[str] = set()

_BYTES_SUFFIX = {"_gib": 2**30, "_mib": 2**20, "_kib": 2**10, "_gb": 10**9, "_tb": 10**12}
_TABLES = {"gpu": Gpu, "interconnect": Interconnect, "host": HostCpu, "system": System, "cloud": CloudPrice}
#: source prefix of the host figures the loader derives (recomputed on every load, so a user file that
#: replaces a CPU or a link moves them too)
_DERIVED_HOST = "DERIVED (catalog):"


def _convert_units(raw: dict[str, Any]) -> dict[str, Any]:
    """Rename `x_gib: 80` to `x_bytes: 85899345920` (and the same for `sources` keys)."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        for suffix, scale in _BYTES_SUFFIX.items():
            if key.endswith(suffix) and isinstance(value, (int, float)) and not isinstance(value, bool):
                check_number(value, key, gt=0, le=INT64_MAX / scale)  # finite, and the bytes fit int64
                out[key[: -len(suffix)] + "_bytes"] = int(round(value * scale))
                break
        else:
            out[key] = value
    if isinstance(out.get("sources"), dict):
        srcs = {}
        for key, value in out["sources"].items():
            for suffix in _BYTES_SUFFIX:
                if key.endswith(suffix):
                    key = key[: -len(suffix)] + "_bytes"
                    break
            srcs[key] = value
        out["sources"] = srcs
    return out


def _expand_sources(entry: dict[str, Any], registry: dict[str, dict[str, str]]) -> None:
    """Replace a leading source key (`S_H100_PAGE`, optionally followed by `: detail`) by its citation."""
    srcs = entry.get("sources")
    if not isinstance(srcs, dict):
        return
    for key, value in list(srcs.items()):
        if not isinstance(value, str):
            continue
        head, sep, rest = value.partition(":")
        ref = registry.get(head.strip())
        if ref:
            cite = ref.get("title", head.strip())
            if ref.get("url"):
                cite += f" <{ref['url']}>"
            srcs[key] = cite + (f": {rest.strip()}" if sep else "")


def _numeric(annotation: Any) -> bool:
    """True for int, float and their optional forms (`int | None`)."""
    args = typing.get_args(annotation) or (annotation,)
    return any(a in (int, float) for a in args) and not any(a in (str, bool) for a in args)


def _check_number_types(cls: Any, data: Any, where: str) -> None:
    """InputError for a TOML string or boolean where the spec takes a number (`tdp_w = "700"`,
    `sm_count = true`): pydantic would coerce them ("700" -> 700.0, true -> 1), a file's typo
    silently becoming a figure. Recurses into nested specs (`peak_tflops.bf16.dense`)."""
    fields = getattr(cls, "model_fields", None)
    if fields is None or not isinstance(data, dict):
        return
    for name, value in data.items():
        f = fields.get(name)
        if f is None:
            continue
        ann = f.annotation
        if _numeric(ann) and isinstance(value, (str, bool)):
            raise InputError(f"{where}: field {name}: must be a number, got {value!r}"[:300], field=name,
                             allowed="a number")
        inner = typing.get_args(ann)
        if typing.get_origin(ann) is dict and len(inner) == 2 and isinstance(value, dict):
            for key, item in value.items():
                _check_number_types(inner[1], item, f"{where}: {name}.{key}")
        elif hasattr(ann, "model_fields"):
            _check_number_types(ann, value, f"{where}: {name}")


def _check_int64(data: Any, where: str) -> None:
    """InputError for a TOML integer past int64: the TOML spec requires integers to be 64-bit signed
    ("if an integer cannot be represented losslessly, an error must be thrown"), Python's tomllib
    reads any size. Iterative (a deeply nested file cannot recurse)."""
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > INT64_MAX:
            raise InputError(f"{where}: integer {node} is past the 64-bit range TOML allows", field="catalog",
                             allowed="integers within int64 (TOML spec)")


def _format_validation_error(origin: str, table: str, entry_id: str, exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "(entry)"
    return f"catalog {origin}: {table} '{entry_id}': field {loc}: {err['msg']}"


@dataclass
class Catalog:
    gpus: dict[str, Gpu] = field(default_factory=dict)
    interconnects: dict[str, Interconnect] = field(default_factory=dict)
    systems: dict[str, System] = field(default_factory=dict)
    clouds: dict[str, CloudPrice] = field(default_factory=dict)
    hosts: dict[str, HostCpu] = field(default_factory=dict)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)

    def _store(self, table: str) -> dict:
        return {"gpu": self.gpus, "interconnect": self.interconnects, "system": self.systems, "cloud": self.clouds,
                "host": self.hosts}[table]

    def add_file(self, path: Path, origin: str | None = None) -> None:
        """Validate and add every entry of one TOML file (entries override existing ids)."""
        origin = origin or str(path)
        from gpuplan.input_files import MAX_SETTINGS_BYTES, read_input_bytes

        raw_bytes = read_input_bytes(path, "catalog", max_bytes=MAX_SETTINGS_BYTES, what="TOML file")
        data = load_toml_text(decode_utf8(raw_bytes, f"catalog {origin}", "catalog"), f"catalog {origin}", "catalog")
        _check_int64(data, f"catalog {origin}")
        sources = data.get("sources", {})
        if not isinstance(sources, dict) or not all(isinstance(v, dict) for v in sources.values()):
            raise InputError(f"catalog {origin}: `sources` must be a table of tables ([sources.KEY])", field="sources")
        unknown = set(data) - set(_TABLES) - {"sources"}
        if unknown:
            raise InputError(
                f"catalog {origin}: unknown table(s) {sorted(unknown)}; allowed: {', '.join(sorted(_TABLES))}, sources",
                field="catalog",
            )
        self.sources.update(sources)
        for table, cls in _TABLES.items():
            entries = data.get(table, [])
            if not isinstance(entries, list):
                raise InputError(f"catalog {origin}: `{table}` must be an array of tables ([[{table}]])", field=table)
            for raw in entries:
                if not isinstance(raw, dict):
                    raise InputError(f"catalog {origin}: `{table}` must be an array of tables ([[{table}]])", field=table)
                entry_id = str(raw.get("id", "?"))[:80]
                try:
                    entry = _convert_units(dict(raw))
                except InputError as exc:
                    raise InputError(f"catalog {origin}: {table} '{entry_id}': {exc}", field=exc.field,
                                     allowed=exc.allowed) from None
                _expand_sources(entry, self.sources)
                _check_number_types(cls, entry, f"catalog {origin}: {table} '{entry_id}'")
                try:
                    spec = cls.model_validate(entry)
                except ValidationError as exc:
                    raise InputError(_format_validation_error(origin, table, entry_id, exc), field=table) from None
                self._store(table)[spec.id] = spec
        self._check_references(origin)

    def _check_references(self, origin: str) -> None:
        for sys in self.systems.values():
            if sys.gpu not in self.gpus:
                raise InputError(f"catalog {origin}: system '{sys.id}': field gpu: unknown GPU '{sys.gpu}'", field="gpu")
            for f in ("scaleup_interconnect", "scaleout_interconnect"):
                ref = getattr(sys, f)
                if ref is not None and ref not in self.interconnects:
                    raise InputError(f"catalog {origin}: system '{sys.id}': field {f}: unknown interconnect '{ref}'", field=f)
        for sys_id, sys in list(self.systems.items()):
            self.systems[sys_id] = self._with_host_figures(sys, origin)
        for cloud in self.clouds.values():
            if cloud.gpu not in self.gpus:
                raise InputError(f"catalog {origin}: cloud '{cloud.id}': field gpu: unknown GPU '{cloud.gpu}'", field="gpu")

    def _with_host_figures(self, sys: System, origin: str) -> System:
        """`sys` with its host references checked and the host figures it does not state derived:
        host_link_gbps = the link's per-direction GB/s / gpus_per_host_link; host_memory_bandwidth_gbps
        = host_sockets x the CPU's per-socket GB/s (specs.host)."""
        if sys.host_cpu is not None and sys.host_cpu not in self.hosts:
            raise InputError(f"catalog {origin}: system '{sys.id}': field host_cpu: unknown host CPU '{sys.host_cpu}'",
                             field="host_cpu")
        link = None
        if sys.host_link is None and sys.host_link_gbps is None:
            gpu = self.gpus.get(sys.gpu)
            gen = box_pcie_gen(gpu) if gpu is not None else None
            if gen is not None and f"pcie{gen}-x16" in self.interconnects:  # the card's own slot
                sys = sys.model_copy(update={"host_link": f"pcie{gen}-x16", "sources": {
                    **sys.sources, "host_link": f"{_DERIVED_HOST} the PCIe x16 generation of GPU '{gpu.id}'"
                    f"{' (ASSUMED: its entry states none)' if gpu.pcie_gen is None else ''}; no host link stated"}})
        if sys.host_link is not None:
            link = self.interconnects.get(sys.host_link)
            if link is None:
                raise InputError(f"catalog {origin}: system '{sys.id}': field host_link: unknown interconnect "
                                 f"'{sys.host_link}'", field="host_link")
        update: dict = {}
        sources = dict(sys.sources)
        if link is not None and (sys.host_link_gbps is None or sources.get("host_link_gbps", "").startswith(_DERIVED_HOST)):
            update["host_link_gbps"] = link.per_direction_gbps / sys.gpus_per_host_link
            sources["host_link_gbps"] = (f"{_DERIVED_HOST} {link.id} {link.per_direction_gbps:g} GB/s per direction"
                                         f" / {sys.gpus_per_host_link} GPU(s) per link; {link.id}: "
                                         f"{link.sources.get('default', '')}")
        if sys.host_cpu is not None and (sys.host_memory_bandwidth_gbps is None
                                         or sources.get("host_memory_bandwidth_gbps", "").startswith(_DERIVED_HOST)):
            cpu = self.hosts[sys.host_cpu]
            sockets = sys.host_sockets or 1
            update["host_memory_bandwidth_gbps"] = sockets * cpu.memory_bandwidth_gbps
            sources["host_memory_bandwidth_gbps"] = (f"{_DERIVED_HOST} {sockets} x {cpu.memory_bandwidth_gbps:g} GB/s"
                                                     f" per socket of host CPU '{cpu.id}'")
        if not update:
            return sys
        return sys.model_copy(update={**update, "sources": sources})

    def host(self, host_id: str) -> HostCpu:
        try:
            return self.hosts[host_id.lower()]
        except KeyError:
            raise unknown_id("host CPU", host_id, sorted(self.hosts)) from None

    # -- lookups --------------------------------------------------------------------------------
    def gpu(self, gpu_id: str) -> Gpu:
        key = self.resolve_gpu_id(gpu_id)
        try:
            return self.gpus[key]
        except KeyError:
            raise unknown_id("GPU", gpu_id, sorted(set(self.gpus) | set(GPU_ALIASES))) from None

    def resolve_gpu_id(self, gpu_id: str) -> str:
        """The catalog id for `gpu_id`: itself when it is an id, else its GPU_ALIASES target
        (announced once to `alias_listeners`, naming the family's other parts)."""
        key = str(gpu_id).strip().lower()
        if key in self.gpus or key not in GPU_ALIASES or GPU_ALIASES[key] not in self.gpus:
            return key
        target = GPU_ALIASES[key]
        if key not in _announced:
            _announced.add(key)
            family = key.split("-")[0]
            others = sorted(g for g in self.gpus if g.startswith(family + "-") and g != target)
            more = f" (other {family.upper()} parts: {', '.join(others)})" if others else ""
            for listener in alias_listeners:
                listener(f"'{gpu_id}' means {target}{more}")
        return target

    def system(self, system_id: str) -> System:
        key = system_id.lower()
        if key in self.systems:
            return self.systems[key]
        gpu_key = self.resolve_gpu_id(key)
        if gpu_key in self.gpus:  # a GPU id names one GPU or a PCIe box of them (validation/SYSTEMS.md)
            return self.gpu_box(self.gpus[gpu_key])
        raise unknown_id("system", system_id, sorted(self.systems))

    def gpu_box(self, gpu: Gpu) -> System:
        """The system a bare GPU id names: `pcie_box_system` over the catalog's PCIe x16 link of the
        GPU's generation (`box_pcie_gen`), or `single_gpu_system` when it has none (TPUs, superchips
        and OAM modules reached through their own fabric, Jetson modules)."""
        gen = box_pcie_gen(gpu)
        link = self.interconnects.get(f"pcie{gen}-x16") if gen else None
        if link is None:
            return single_gpu_system(gpu)
        return pcie_box_system(gpu, link, assumed_gen=gpu.pcie_gen is None)

    def interconnect(self, interconnect_id: str) -> Interconnect:
        try:
            return self.interconnects[interconnect_id.lower()]
        except KeyError:
            raise unknown_id("interconnect", interconnect_id, sorted(self.interconnects)) from None

    def widest_system_for(self, gpu_id: str) -> System:
        """The catalog system with the largest scale-up (NVLink) domain built from `gpu_id`, or the
        single-GPU box when no system uses it: the fabric a tensor-parallel deployment would get."""
        gpu = self.gpu(gpu_id)
        systems = [s for s in self.systems.values() if s.gpu == gpu.id]
        if not systems:
            return self.gpu_box(gpu)
        return max(systems, key=lambda s: (s.scaleup_domain_gpus, s.scaleup_bandwidth_gbps or 0.0))

    def system_gpu(self, system_id: str) -> Gpu:
        return self.gpu(self.system(system_id).gpu)

    def cloud_prices(self, gpu_id: str, pricing_model: str | None = "on-demand") -> list[CloudPrice]:
        """Prices for one GPU type, cheapest first: on-demand only by default; `pricing_model=None`
        gives every kind (reserved, capacity-block, spot too)."""
        return sorted(
            (c for c in self.clouds.values()
             if c.gpu == gpu_id and (pricing_model is None or c.pricing_model == pricing_model)),
            key=lambda c: c.usd_per_gpu_hour,
        )


def single_gpu_system(gpu: Gpu) -> System:
    """A one-GPU box named by the GPU's id: no scale-up or scale-out fabric, power = GPU TDP."""
    return System(
        id=gpu.id, name=f"1x {gpu.name}", gpu=gpu.id, gpus_per_node=1, scaleup_domain_gpus=1,
        scaleup_switched=False, system_power_w=gpu.tdp_w,
        sources={
            "default": f"single-GPU box built from catalog GPU '{gpu.id}' (validation/SYSTEMS.md convention)",
            "system_power_w": f"GPU TDP of '{gpu.id}' (host power not included)",
        },
    )


#: PCIe generation of a card whose catalog entry states none (a user's entry, say): PCIe 4.0 x16,
#: ../shared/validation/SYSTEMS.md's convention for a GPU id as a system ("PCIe 4.0 x16 per GPU, about
#: 25 GB/s per direction, unless `notes` say otherwise"). ASSUMED, and the box says so.
ASSUMED_PCIE_GEN = 4


def box_pcie_gen(gpu: Gpu) -> int | None:
    """PCIe generation of the box a bare GPU id names: the entry's `pcie_gen`; else ASSUMED_PCIE_GEN
    for a card with no scale-up link of its own and not `integrated` (a GPU with neither is a card in
    a PCIe slot: how else would it reach a host); None for TPUs, superchips and OAM modules whose
    entry names their own fabric (`scaleup_link`) and for system-on-chip modules (single boxes)."""
    if gpu.pcie_gen is not None:
        return gpu.pcie_gen
    if gpu.integrated or gpu.scaleup_link is not None:
        return None
    return ASSUMED_PCIE_GEN


#: GPUs in the PCIe box a bare GPU id names: a dual-socket x86 server has 128-160 PCIe lanes, room for
#: eight x16 slots (AWS g5.48xlarge: 8 x A10G; 8-GPU PCIe L40S / RTX servers). More GPUs need NICs.
PCIE_BOX_MAX_GPUS = 8


def pcie_box_system(gpu: Gpu, link: Interconnect, assumed_gen: bool = False) -> System:
    """Up to PCIE_BOX_MAX_GPUS of `gpu` in one host on PCIe x16 (`link`, per direction), no NVLink
    and no NICs (validation/SYSTEMS.md: a GPU id as `system` with more than one GPU). The host's
    PCIe root complex / switches let every GPU reach every other at its own x16 rate, so the box is
    a switched scale-up domain of `link.per_direction_gbps` per GPU (the collectives' achievable
    fraction applies on top: 0.8 x 32 = 25.6 GB/s on PCIe 4.0, against the 24.5 GB/s nccl-tests
    busbw of six RTX 4090s, S_TINY_P2P). Without driver P2P (`Gpu.pcie_p2p` false, GeForce) NCCL
    stages every transfer through pinned host memory: each byte still crosses the sender's link
    once (to the host) and the receiver's once (from it), so the same per-direction bound holds,
    and host memory carries each byte twice, which bounds the collectives further
    (primitives.host_memory). One GPU of the box is the old
    single-GPU box: power = GPU TDP each (host power not included)."""
    p2p = {True: "P2P over PCIe", False: "no driver P2P: transfers staged through host memory",
           None: "P2P support not stated"}[gpu.pcie_p2p]
    return System(
        id=gpu.id, name=f"PCIe box of 1-{PCIE_BOX_MAX_GPUS}x {gpu.name} ({link.name}, {p2p})", gpu=gpu.id,
        gpus_per_node=PCIE_BOX_MAX_GPUS, scaleup_domain_gpus=PCIE_BOX_MAX_GPUS, scaleup_interconnect=link.id,
        scaleup_bandwidth_gbps=link.per_direction_gbps, scaleup_switched=True, nvls=False,
        host_link=link.id, host_link_gbps=link.per_direction_gbps,
        system_power_w=PCIE_BOX_MAX_GPUS * gpu.tdp_w if gpu.tdp_w else None,
        notes=f"A GPU id as a system: up to {PCIE_BOX_MAX_GPUS} GPUs on PCIe in one host, no NVLink, no NICs; {p2p}.",
        sources={
            "default": f"PCIe box built from catalog GPU '{gpu.id}' (validation/SYSTEMS.md convention: PCIe x16 per GPU,"
                       " no NVLink unless stated); gpus_per_node = catalog.PCIE_BOX_MAX_GPUS (eight x16 slots of a"
                       " dual-socket host)",
            "scaleup_bandwidth_gbps": (f"ASSUMED: the catalog entry of '{gpu.id}' states no pcie_gen; SYSTEMS.md's"
                                       f" PCIe 4.0 x16 convention (catalog.ASSUMED_PCIE_GEN). " if assumed_gen else "")
                                      + f"{link.id}: {link.sources.get('default', '')}",
            "system_power_w": f"{PCIE_BOX_MAX_GPUS} x GPU TDP of '{gpu.id}' (host power not included)",
            "host_link_gbps": f"each card's own x16 slot to the host: {link.id} per direction",
        },
    )


_user_files: tuple[str, ...] = ()


def set_user_catalogs(paths: list[str] | tuple[str, ...]) -> None:
    """Set the user catalog files (from `--catalog`); they are applied after GPUPLAN_CATALOG."""
    global _user_files
    files = tuple(str(p) for p in paths)
    if files != _user_files:  # each CLI invocation sets them (to none, too): nothing leaks between runs
        _user_files = files
        load_catalog.cache_clear()


#: the built-in files, sources first so that entries can cite keys; then the tables in dependency order
_BUILTIN_FILES = ("sources", "gpus", "interconnects", "hosts", "systems", "clouds")


def builtin_cache_key() -> str:
    """The on-disk cache key of the built-in catalog: its files, the code reading them, the pydantic
    version whose models are pickled (catalog.disk_cache)."""
    import pydantic

    from gpuplan.catalog import disk_cache

    return disk_cache.content_key([DATA_DIR / f"{name}.toml" for name in _BUILTIN_FILES],
                                  salt=f"pydantic {pydantic.VERSION}")


@lru_cache(maxsize=4)
def _builtin() -> Catalog:
    """The built-in catalog: from the on-disk cache when the data files and the code reading them are
    unchanged (catalog.disk_cache), else parsed and validated, then cached."""
    from gpuplan.catalog import disk_cache

    paths = [DATA_DIR / f"{name}.toml" for name in _BUILTIN_FILES]
    key = builtin_cache_key()
    cached = disk_cache.load("catalog", key)
    if isinstance(cached, Catalog):
        return cached
    cat = Catalog()
    for name, path in zip(_BUILTIN_FILES, paths):
        if path.exists():
            cat.add_file(path, origin=f"built-in {name}.toml")
    disk_cache.store("catalog", key, cat)
    return cat


@lru_cache(maxsize=4)
def load_catalog() -> Catalog:
    """The built-in catalog plus user files (GPUPLAN_CATALOG, then --catalog), validated."""
    base = _builtin()
    user = [p for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p] + list(_user_files)
    if not user:
        return base
    cat = Catalog(
        gpus=dict(base.gpus), interconnects=dict(base.interconnects), systems=dict(base.systems),
        clouds=dict(base.clouds), hosts=dict(base.hosts), sources=dict(base.sources),
    )
    for path in user:
        if not path.strip():
            raise InputError("--catalog: empty path; give a .toml file", field="catalog", allowed="a TOML file")
        cat.add_file(Path(path))
    return cat


def get_gpu(gpu_id: str) -> Gpu:
    return load_catalog().gpu(gpu_id)


def get_system(system_id: str) -> System:
    return load_catalog().system(system_id)


def get_interconnect(interconnect_id: str) -> Interconnect:
    return load_catalog().interconnect(interconnect_id)
