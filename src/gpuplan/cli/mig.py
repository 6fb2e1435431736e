"""CLI: `gpuplan mig plan | profiles` (Multi-Instance GPU partitioning). Parses, calls
`gpuplan.api.mig_*`, renders."""

from __future__ import annotations

from typing import List, Optional

import typer

from gpuplan import api
from gpuplan.cli.render import console, err_console, print_json, table

mig = typer.Typer(help="Multi-Instance GPU: profiles, placement rules, fewest-GPU plans.", no_args_is_help=True)


@mig.command("plan")
def plan_cmd(
    profiles: List[str] = typer.Argument(..., help="Requested instances, e.g. 3g.40gb 2g.20gb 1g.10gb (repeat for several)."),
    gpu: str = typer.Option(api.DEFAULT_GPU, "--gpu", help="Catalog GPU id (A100 40/80GB, H100, H200, B200)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="GPUs available (default: as many as needed)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Place the requested MIG instances on the fewest GPUs, or explain why they do not fit."""
    result = api.mig_plan(profiles, gpu, gpus)
    if as_json:
        print_json(result.to_dict())
        if not result.plan.feasible:
            raise typer.Exit(code=2)  # infeasible request: the JSON says why, the exit code says no
        return
    p = result.plan
    rows = [(f"GPU {g.gpu_index}", " + ".join(f"{i.profile}@{i.start_slice}" for i in g.instances),
             f"{g.memory_slices_used}/8", f"{g.compute_slices_used}/7") for g in p.placements]
    console.print(table(f"{p.gpu_id} ({p.family}): {p.gpus_used} GPU(s)", ["GPU", "instances @ start slice", "memory", "compute"], rows))
    if not p.feasible:
        err_console.print(f"infeasible: {p.reason}")
        raise typer.Exit(code=2)


@mig.command("profiles")
def profiles_cmd(
    gpu: str = typer.Option(api.DEFAULT_GPU, "--gpu", help="Catalog GPU id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """MIG profiles of one GPU (slices, memory, SMs, placements) and its maximal geometries."""
    result = api.mig_profiles(gpu)
    if as_json:
        print_json(result.to_dict())
        return
    spec, family, infos, geos = result.gpu, result.family, result.profiles, result.geometries
    console.print(table(f"{spec.id} ({family}) MIG profiles", ["profile", "id", "compute/7", "memory/8", "GiB (nominal)", "SMs", "max", "placements"],
                        [(i.profile, i.lgip_id, i.compute_slices, i.memory_slices, i.memory_nominal_gib, i.sm_count, i.max_instances, i.placements) for i in infos]))
    console.print(f"{len(geos)} maximal geometries (no instance can be added), e.g.:")
    for g in geos[:: max(1, len(geos) // 10)][:10]:
        console.print(f"  {g}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(mig, name="mig")
