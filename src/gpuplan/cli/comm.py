"""CLI: `gpuplan comm OP --system ID --gpus N --size S` - time and nccl-tests bandwidths of one
collective (gpuplan.primitives.collectives); `--sweep` prints a table over message sizes. Parses,
calls `gpuplan.api.comm`, renders."""

from __future__ import annotations

from typing import Optional

import typer

from gpuplan import api
from gpuplan.cli.aliases import renamed
from gpuplan.cli.render import console, print_json, table

OPS = "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv"


def register(app: typer.Typer) -> None:
    """Add `gpuplan comm`."""

    @app.command("comm")
    def comm(
        collective: str = typer.Argument(..., help=f"Collective: {OPS}."),
        system: str = typer.Option(api.DEFAULT_SYSTEM, "--system", help="System id (gpuplan systems list)."),
        gpus: int = typer.Option(..., "--gpus", help="GPUs in the group."),
        size: str = typer.Option("1GiB", "--size", help="Message size as nccl-tests counts it, e.g. 1GiB, 64MB."),
        algorithm: str = typer.Option("auto", "--algorithm", help="ring, tree, nvls, hierarchical or auto."),
        gpus_per_domain: Optional[int] = typer.Option(
            None, "--gpus-per-domain", help="Group ranks per NVLink domain (default: packed)."),
        gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", hidden=True, help="Old spelling of --gpus-per-domain."),
        sweep: bool = typer.Option(False, "--sweep", help="Table over sizes 1KiB..16GiB (x4 steps)."),
        as_json: bool = typer.Option(False, "--json", help="JSON output."),
    ) -> None:
        """Time, algbw and busbw (nccl-tests definitions) of one collective on a system."""
        result = api.comm(collective, system, gpus, size=size, algorithm=algorithm, sweep=sweep,
                          gpus_per_domain=renamed(gpus_per_domain, gpus_per_node, "--gpus-per-domain", "--gpus-per-node"))
        if as_json:
            print_json(result.to_dict())
            return
        results = result.results
        rows = [(f"{int(r.size_bytes):,}", r.algorithm.value, r.protocol.value, r.time_s * 1e6, r.algbw_gbps,
                 r.busbw_gbps) for r in results]
        title = f"{collective} on {gpus} GPUs of {system} ({results[0].domains} domain(s) x {results[0].gpus_per_domain})"
        console.print(table(title, ["size_bytes", "algorithm", "protocol", "time_us", "algbw_gbps", "busbw_gbps"], rows))
