"""CLI: `gpuplan comm OP --system ID --gpus N --size S` - time and nccl-tests bandwidths of one
collective (gpuplan.primitives.collectives); `--sweep` prints a table over message sizes."""

from __future__ import annotations

from typing import Optional

import typer

from gpuplan.cli.render import console, print_json, table
from gpuplan.errors import InputError

OPS = "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv"


def _result_json(r) -> dict:
    return {
        "collective": r.collective.value, "algorithm": r.algorithm.value, "protocol": r.protocol.value,
        "size_bytes": r.size_bytes, "num_gpus": r.num_gpus, "gpus_per_domain": r.gpus_per_domain,
        "domains": r.domains, "time_s": r.time_s, "time_us": r.time_s * 1e6, "algbw_gbps": r.algbw_gbps,
        "busbw_gbps": r.busbw_gbps, "latency_s": r.latency_s, "bandwidth_s": r.bandwidth_s,
    }


def register(app: typer.Typer) -> None:
    """Add `gpuplan comm`."""

    @app.command("comm")
    def comm(
        collective: str = typer.Argument(..., help=f"Collective: {OPS}."),
        system: str = typer.Option(..., "--system", help="System id (gpuplan systems list), e.g. dgx-h100."),
        gpus: int = typer.Option(..., "--gpus", help="GPUs in the group."),
        size: str = typer.Option("1GiB", "--size", help="Message size as nccl-tests counts it, e.g. 1GiB, 64MB."),
        algorithm: str = typer.Option("auto", "--algorithm", help="ring, tree, nvls, hierarchical or auto."),
        gpus_per_domain: Optional[int] = typer.Option(
            None, "--gpus-per-node", help="Group ranks per NVLink domain (default: packed)."),
        sweep: bool = typer.Option(False, "--sweep", help="Table over sizes 1KiB..16GiB (x4 steps)."),
        as_json: bool = typer.Option(False, "--json", help="JSON output."),
    ) -> None:
        """Time, algbw and busbw (nccl-tests definitions) of one collective on a system."""
        from gpuplan.catalog import get_gpu, get_system
        from gpuplan.primitives.collectives import collective_time
        from gpuplan.units import parse_bytes

        spec = get_system(system)
        gpu = get_gpu(spec.gpu)
        if gpus < 2:
            raise InputError(f"gpus: a collective needs at least 2 GPUs, got {gpus}", field="gpus")
        sizes = [1024 * 4**i for i in range(13)] if sweep else [parse_bytes(size, field="size")]
        results = [collective_time(collective, s, spec, gpus, algorithm, gpu, gpus_per_domain) for s in sizes]
        if as_json:
            print_json([_result_json(r) for r in results] if sweep else _result_json(results[0]))
            return
        rows = [(f"{int(r.size_bytes):,}", r.algorithm.value, r.protocol.value, r.time_s * 1e6, r.algbw_gbps,
                 r.busbw_gbps) for r in results]
        title = f"{collective} on {gpus} GPUs of {system} ({results[0].domains} domain(s) x {results[0].gpus_per_domain})"
        console.print(table(title, ["size_bytes", "algorithm", "protocol", "time_us", "algbw_gbps", "busbw_gbps"], rows))
