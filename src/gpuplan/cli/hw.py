"""CLI: `gpuplan hw` -- the GPU / accelerator catalog: list, show, compare, interconnects, prices.
Parses, calls `gpuplan.api.hw_*`, renders."""

from __future__ import annotations

from typing import List, Optional

import typer

from gpuplan import api
from gpuplan.cli.render import console, fmt, print_json, table as _table


def table(title, columns, rows, keep_whole: int = 1, **kwargs):
    """render.table with the id column kept whole."""
    return _table(title, columns, rows, keep_whole=keep_whole, **kwargs)

hw_app = typer.Typer(help="GPUs and accelerators in the catalog (every figure sourced).", no_args_is_help=True)

_UNITS = {  # field -> unit printed after the value in `hw show`
    "memory_gib": "GiB", "memory_bandwidth_gbps": "GB/s", "l2_mib": "MiB", "smem_per_sm_kib": "KiB",
    "boost_clock_mhz": "MHz", "scaleup_bandwidth_gbps": "GB/s per direction", "tdp_w": "W", "price_usd": "USD",
}


def _with_unit(value, unit: str) -> str:
    return "-" if value is None else f"{fmt(value)} {unit}".rstrip()


@hw_app.command("list")
def list_gpus(
    vendor: Optional[str] = typer.Option(None, "--vendor", help="Only this vendor (nvidia, amd, google)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List GPUs: memory, bandwidth, dense BF16/FP8 peaks, TDP."""
    result = api.hw_list(vendor)
    if as_json:
        print_json(result.to_dict())
        return
    gpus = result.gpus

    def dense(g, dtype):
        p = g.peak_tflops.get(dtype)
        return p.dense if p else None

    rows = [
        (g.id, g.vendor, g.memory_gib, g.memory_bandwidth_gbps, dense(g, "bf16"), dense(g, "fp8"), g.tdp_w)
        for g in gpus
    ]
    console.print(table(
        "GPUs (peak TFLOP/s are dense; `gpuplan hw show ID` for names, sparse peaks and sources)",
        ["id", "vendor", "memory GiB", "memory GB/s", "BF16 TFLOP/s", "FP8 TFLOP/s", "TDP W"], rows,
    ))


@hw_app.command("show")
def show_gpu(
    gpu_id: str = typer.Argument(..., metavar="ID", help="GPU id, e.g. h100-sxm5-80gb."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every figure of one GPU with its unit and source."""
    result = api.hw_show(gpu_id)
    if as_json:
        print_json(result.to_dict())
        return
    gpu, rec = result.gpu, result.to_dict()
    rec["l2_mib"] = gpu.l2_bytes / 2**20 if gpu.l2_bytes else None
    rec["smem_per_sm_kib"] = gpu.smem_per_sm_bytes / 2**10 if gpu.smem_per_sm_bytes else None
    fields = [
        "vendor", "architecture", "compute_capability", "sm_count", "boost_clock_mhz", "memory_gib", "memory_type",
        "memory_bandwidth_gbps", "l2_mib", "smem_per_sm_kib", "registers_per_sm", "max_threads_per_sm",
        "scaleup_link", "scaleup_bandwidth_gbps", "pcie_gen", "tdp_w", "launch_year", "price_usd",
    ]
    plain = {"launch_year", "pcie_gen", "compute_capability"}  # identifiers, not quantities: no separators
    rows = [
        (f, str(rec[f]) if f in plain else _with_unit(rec[f], _UNITS.get(f, "")))
        for f in fields if rec.get(f) is not None
    ]
    console.print(table(f"{gpu.name} ({gpu.id})", ["field", "value"], rows, name="gpu"))
    peaks = [(d, p.dense, p.sparse) for d, p in gpu.peak_tflops.items()]
    console.print(table("peak TFLOP/s (int8: TOP/s)", ["dtype", "dense", "sparse (2:4)"], peaks, name="peaks"))
    if gpu.notes:
        console.print(f"notes: {gpu.notes}", markup=False)
    console.print("sources:")
    for key, src in gpu.sources.items():
        console.print(f"  {key}: {src}", markup=False, soft_wrap=True)


@hw_app.command("compare")
def compare(
    gpu_ids: List[str] = typer.Argument(..., metavar="ID ID ...", help="Two or more GPU ids; ratios are to the first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Side-by-side table of GPUs with each value's ratio to the first."""
    compared = api.hw_compare(gpu_ids)
    if as_json:
        print_json(compared.to_dict())
        return
    result = compared.comparison

    def cell(row, gid):
        v = row.values[gid]
        if v is None:
            return "-"
        text = _with_unit(v, row.unit)
        r = row.ratio_to_baseline[gid]
        return text if gid == result.baseline or r is None else f"{text} ({r:.2f}x)"

    rows = [[row.label] + [cell(row, gid) for gid in result.gpus] for row in result.metrics]
    console.print(table(f"compared with {result.baseline} (dense peaks; ratio in brackets)", ["metric"] + result.gpus, rows))
    console.print("sources:")
    for gid in result.gpus:  # each distinct source once per GPU, with the rows it backs
        backs: dict[str, list[str]] = {}
        for row in result.metrics:
            src = row.sources.get(gid)
            if src:
                backs.setdefault(src, []).append(row.label)
        for src, labels in backs.items():
            console.print(f"  {gid} ({', '.join(labels)}): {src}", markup=False, soft_wrap=True)


@hw_app.command("interconnects")
def interconnects(
    kind: Optional[str] = typer.Option(None, "--kind", help="Only this kind (nvlink, nvswitch, xgmi, ici, pcie, infiniband, ethernet, efa, omnipath)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Links and fabrics: per-direction and bidirectional bandwidth, line rate, latency."""
    result = api.hw_interconnects(kind)
    if as_json:
        print_json(result.to_dict())
        return
    links = result.interconnects
    rows = [
        (i.id, i.name, i.kind, i.per_direction_gbps, i.bidirectional_gbps, i.line_rate_gbit_s, i.latency_us, i.in_network_reduction)
        for i in links
    ]
    console.print(table(
        "interconnects (scale-up: per GPU, all links; NIC/PCIe: per port)",
        ["id", "name", "kind", "GB/s per direction", "GB/s bidirectional", "line Gb/s", "latency us", "in-network reduction"], rows,
        secondary=["GB/s bidirectional", "latency us"],
    ))


@hw_app.command("hosts")
def hosts(
    host_ids: Optional[list[str]] = typer.Argument(None, metavar="[ID]...", help="Only these host CPU ids."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Host CPU parts side by side: cores, memory bandwidth and PCIe lanes per socket, with sources."""
    result = api.hw_hosts(host_ids or ())
    if as_json:
        print_json(result.to_dict())
        return
    parts = result.hosts
    rows = [(h.id, h.name, h.cores, h.memory_type, h.memory_channels, h.memory_bandwidth_gbps,
             f"Gen{h.pcie_gen}" if h.pcie_gen else None, h.pcie_lanes, h.tdp_w) for h in parts]
    console.print(table("host CPUs (per socket; memory bandwidth theoretical)",
                        ["id", "name", "cores", "memory", "channels", "GB/s", "PCIe", "lanes", "TDP W"], rows,
                        secondary=["TDP W", "channels"]))
    console.print("sources:")
    for h in parts:
        for key, src in h.sources.items():
            console.print(f"  {h.id} {key}: {src}", markup=False, soft_wrap=True)


@hw_app.command("prices")
def prices(
    gpu_id: Optional[str] = typer.Argument(None, metavar="[ID]", help="Only prices for this GPU id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Dated, sourced cloud prices in USD per GPU-hour (cheapest first)."""
    result = api.hw_prices(gpu_id)
    if as_json:
        print_json(result.to_dict())
        return
    entries = result.prices
    rows = [(c.id, c.gpu, c.usd_per_gpu_hour, c.pricing_model, c.date, c.instance) for c in entries]
    console.print(table("cloud prices (USD per GPU-hour; dated; `--json` for sources and notes)",
                        ["id", "gpu", "USD/GPU-h", "pricing", "read on", "instance"], rows, keep_whole=2,
                        secondary=["instance", "read on"]))


def register(app: typer.Typer) -> None:
    """Add `gpuplan hw` to the root app."""
    app.add_typer(hw_app, name="hw")
