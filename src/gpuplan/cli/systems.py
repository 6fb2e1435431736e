"""CLI: `gpuplan systems` -- nodes (DGX/HGX, cloud instances, racks) in the catalog. Parses, calls
`gpuplan.api.systems_*`, renders."""

from __future__ import annotations

import typer

from gpuplan import api
from gpuplan.cli.render import console, fmt, print_json, table as _table


def table(title, columns, rows, keep_whole: int = 1, **kwargs):
    """render.table with the id column kept whole."""
    return _table(title, columns, rows, keep_whole=keep_whole, **kwargs)


systems_app = typer.Typer(help="Systems: GPUs per node, scale-up domain, NICs, power (every figure sourced).", no_args_is_help=True)


@systems_app.command("list")
def list_systems(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List systems (a GPU id also names a single-GPU box; see `gpuplan hw list`)."""
    result = api.systems_list()
    if as_json:
        print_json(result.to_dict())
        return
    systems = [s for s, _ in result.systems]
    rows = [
        (s.id, s.gpu, s.gpus_per_node, s.scaleup_domain_gpus, s.scaleup_bandwidth_gbps,
         f"{s.nics_per_node}x {fmt(s.nic_gbit_s)} Gb/s {s.nic_kind}" if s.nics_per_node else "-",
         s.scaleout_gbps_per_gpu, s.system_power_w)
        for s in systems
    ]
    console.print(table(
        "systems (bandwidths per GPU per direction)",
        ["id", "gpu", "GPUs/node", "NVLink domain", "scale-up GB/s", "NICs", "scale-out GB/s", "power W"], rows, keep_whole=2,
        secondary=["power W", "GPUs/node"],
    ))


@systems_app.command("show")
def show_system(
    system_id: str = typer.Argument(..., metavar="ID", help="System id (e.g. dgx-h100) or GPU id (single-GPU box)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every figure of one system with its unit and source."""
    result = api.systems_show(system_id)
    if as_json:
        print_json(result.to_dict())
        return
    system, rec = result.system, result.to_dict()
    units = {
        "scaleup_bandwidth_gbps": "GB/s per GPU per direction", "nic_gbit_s": "Gb/s per NIC",
        "scaleout_gbps_per_gpu": "GB/s per GPU per direction", "host_memory_gib": "GiB",
        "gpu_memory_gib": "GiB", "node_gpu_memory_gib": "GiB", "system_power_w": "W", "rack_units": "U", "price_usd": "USD",
        "host_memory_bandwidth_gbps": "GB/s per node (theoretical)", "host_link_gbps": "GB/s per GPU per direction",
    }
    fields = [
        "gpu", "gpu_name", "gpus_per_node", "gpu_memory_gib", "node_gpu_memory_gib", "scaleup_domain_gpus",
        "scaleup_interconnect", "scaleup_bandwidth_gbps", "scaleup_switched", "nvls", "nics_per_node", "nic_gbit_s",
        "nic_kind", "scaleout_interconnect", "scaleout_gbps_per_gpu", "sharp", "cpu", "host_cpu", "host_sockets",
        "host_memory_gib", "host_memory_bandwidth_gbps", "host_link", "host_link_gbps",
        "system_power_w", "rack_units", "price_usd",
    ]
    rows = [(f, f"{fmt(rec[f])} {units.get(f, '')}".rstrip()) for f in fields if rec.get(f) is not None]
    host, tier = rec.get("host"), rec.get("host_memory_tier")
    if host is not None:
        rows.append(("host CPU (per socket)", f"{host['name']}: {host['cores']} cores, {fmt(host['memory_bandwidth_gbps'])} GB/s "
                     f"{host['memory_type']}" + (f", {host['pcie_lanes']} PCIe Gen{host['pcie_gen']} lanes"
                                                 if host.get("pcie_lanes") else "")))
    if tier is not None:
        cap = f"{fmt(tier['capacity_gib_per_gpu'])} GiB per GPU at " if tier.get("capacity_gib_per_gpu") else ""
        rows.append(("host memory tier", f"{cap}{fmt(tier['gbps_per_gpu_per_direction'])} GB/s per direction over "
                     f"{tier['link']} (coherent: GPU-addressable)"))
    console.print(table(f"{system.name} ({system.id})", ["field", "value"], rows))
    if system.notes:
        console.print(f"notes: {system.notes}", markup=False)
    console.print("sources:")
    for key, src in system.sources.items():
        console.print(f"  {key}: {src}", markup=False, soft_wrap=True)
    if result.host is not None:
        console.print(f"host CPU sources ({result.host.id}):")
        for key, src in result.host.sources.items():
            console.print(f"  {key}: {src}", markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `gpuplan systems` to the root app."""
    app.add_typer(systems_app, name="systems")
