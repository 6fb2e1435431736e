"""CLI: `gpuplan plan`, the main job: what to build or rent for a model, how long, how much."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from gpuplan.cli.render import console, print_json, table


def plan_cmd(
    model: str = typer.Option("gpt3-175b", "--model", help="Model id (catalog or HF config name)."),
    system: str = typer.Option("dgx-h100", "--system", help="Catalog system id."),
    goal: str = typer.Option("train", "--goal", help="train or serve."),
    tokens: str = typer.Option("300B", "--tokens", help="Training tokens (e.g. 300B, 15T)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Fix the GPU count (default: smallest that meets --days)."),
    days: float = typer.Option(30.0, "--days", help="Target training time in days."),
    rate: float = typer.Option(10.0, "--rate", help="Serving: requests per second."),
    ttft_ms: float = typer.Option(2000.0, "--ttft-ms", help="Serving: p90 time-to-first-token objective (ms)."),
    tpot_ms: float = typer.Option(50.0, "--tpot-ms", help="Serving: p90 time-per-output-token objective (ms)."),
    input_len: int = typer.Option(2048, "--input-len", help="Serving: prompt tokens per request."),
    output_len: int = typer.Option(256, "--output-len", help="Serving: output tokens per request."),
    years: float = typer.Option(4.0, "--years", help="Depreciation period for the on-prem comparison."),
    utilization: float = typer.Option(0.7, "--utilization", help="Fraction of hours the cluster is busy."),
    cloud_usd_per_gpu_hour: Optional[float] = typer.Option(None, "--cloud-usd-per-gpu-hour", help="Cloud price override."),
    system_price_usd: Optional[float] = typer.Option(None, "--system-price-usd", help="Node price override."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override an assumption KEY=VALUE (see `gpuplan dc assumptions`)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Write an HTML report with plots to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Train (or serve) a model: parallel plan, cluster, fabric, racks, power, cooling, on-prem vs cloud cost.

    With no arguments: the seed question 'design a DGX-based infrastructure for training a 175B
    parameter model' (GPT-3 175B, 300B tokens, DGX H100)."""
    from gpuplan.errors import InputError
    from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, parse_overrides
    from gpuplan.interfaces.plan import Goal, html_report, plan
    from gpuplan.output_files import check_output_path, write_atomic
    from gpuplan.units import parse_count

    if html is not None:
        check_output_path(html, "--html")  # before the work: a folder or unwritable path fails fast

    try:
        goal_enum = Goal(goal.lower())
    except ValueError:
        raise InputError(f"goal: '{goal}' is not one of: train, serve", field="goal") from None
    a = DEFAULT_ASSUMPTIONS.with_overrides(parse_overrides(set_))
    rep = plan(goal_enum, model, system, tokens=parse_count(tokens, "tokens"), gpus=gpus, target_days=days, rate_per_s=rate,
               ttft_ms=ttft_ms, tpot_ms=tpot_ms, input_len=input_len, output_len=output_len,
               years=years, utilization=utilization, cloud_usd_per_gpu_hour=cloud_usd_per_gpu_hour,
               system_price_usd=system_price_usd, assumptions=a)
    if html is not None:
        write_atomic(html, html_report(rep), field="--html")
    c, w = rep.cluster, rep.workload
    if as_json:
        t = c.tco
        print_json({
            "goal": rep.goal, "model": rep.model, "system": rep.system_id, "answer": rep.answer, "notes": rep.notes,
            "estimator": w.estimator, "gpus": c.fabric.gpus, "nodes": c.fabric.nodes, "days": w.days, "gpu_hours": w.gpu_hours,
            "workload_details": w.details,
            "fabric": {k: getattr(c.fabric, k) for k in ("leaf_switches", "spine_switches", "core_switches", "cables",
                                                       "transceivers", "bisection_tbps", "tiers_count")},
            "racks": c.racks, "power": c.power,
            "tco": {k: getattr(t, k) for k in ("capex_usd", "opex_usd_per_year", "on_prem_usd_per_gpu_hour",
                                             "cloud_usd_per_gpu_hour", "breakeven_months", "breakeven_utilization",
                                             "capex_breakdown_usd", "opex_breakdown_usd_per_year")} if t else None,
            "workload_cost_usd": rep.workload_cost, "prices": c.prices, "assumptions": c.assumptions,
        })
        return
    console.print(rep.answer)
    rows = [("estimator", w.estimator), ("GPUs", c.fabric.gpus), ("nodes", c.fabric.nodes), ("days", w.days),
            ("GPU-hours", w.gpu_hours)] + [(k, v) for k, v in w.details.items()]
    rows += [("leaf / spine / core", f"{c.fabric.leaf_switches} / {c.fabric.spine_switches} / {c.fabric.core_switches}"),
             ("cables / transceivers", f"{c.fabric.cables} / {c.fabric.transceivers}"), ("bisection (TB/s)", c.fabric.bisection_tbps),
             ("racks (compute + network)", f"{c.racks.compute_racks} + {c.racks.network_racks}"),
             ("rack kW / cooling", f"{c.racks.compute_rack_kw:.1f} / {c.racks.cooling.value}"),
             ("IT / facility kW", f"{c.power.it_power_kw:,.0f} / {c.power.facility_power_kw:,.0f}"),
             ("annual energy cost ($)", c.power.annual_cost_usd)]
    if c.tco:
        t = c.tco
        rows += [("capex ($)", t.capex_usd), ("opex per year ($)", t.opex_usd_per_year),
                 ("on-prem $/GPU-hour", t.on_prem_usd_per_gpu_hour), ("cloud $/GPU-hour", t.cloud_usd_per_gpu_hour),
                 ("breakeven months", t.breakeven_months), ("breakeven utilisation", t.breakeven_utilization)]
        rows += [(f"workload {k}", v) for k, v in rep.workload_cost.items()]
    console.print(table(f"plan: {rep.goal.value} {rep.model} on {rep.system_id}", ["item", "value"], rows))
    for note in rep.notes:
        console.print(f"note: {note}")
    console.print("prices and assumptions: `gpuplan plan --json` or `gpuplan dc assumptions`")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("plan")(plan_cmd)
