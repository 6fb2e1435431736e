"""CLI: `gpuplan plan`, the main job: what to build or rent for a model, how long, how much.
Parses, calls `gpuplan.api.plan`, renders."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from gpuplan import api
from gpuplan.cli.aliases import renamed
from gpuplan.cli.fine_tuning_options import OPTIMIZER_IMPL
from gpuplan.cli.stack_options import COMPILE, DEEPSPEED_RELEASE, DETERMINISTIC, FRAMEWORK, NO_GRAD_ACCUM_FUSION
from gpuplan.cli.progress import progress_bar
from gpuplan.cli.render import console, fmt, print_json, table
from gpuplan.output_files import check_output_path, write_atomic
from gpuplan.specs.choices import OptimizerImpl


def plan_cmd(
    model: Optional[str] = typer.Argument(
        None, metavar="MODEL", help=f"Bundled model name or config.json path (default {api.DEFAULT_MODEL})."),
    model_option: Optional[str] = typer.Option(None, "--model", hidden=True, help="Old spelling of MODEL."),
    system: Optional[str] = typer.Option(None, "--system", help=f"Catalog system id (default {api.DEFAULT_SYSTEM}; "
                                         "goal finetune: the hardware ladder from one RTX 4090 to a DGX B200)."),
    goal: str = typer.Option("train", "--goal", help="train, serve or finetune (full / LoRA / QLoRA compared on hardware)."),
    tokens: str = typer.Option("300B", "--tokens", help="Training tokens (e.g. 300B, 15T)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Fix the GPU count (default: smallest that meets --days)."),
    seq_len: Optional[int] = typer.Option(
        None, "--seq-len", help="Training tokens per sequence (default: min(the model's max positions, 4096))."),
    global_batch: Optional[int] = typer.Option(
        None, "--global-batch",
        help="Training sequences per step (default: per plan, the multiple of dp x micro-batch nearest 2^22 ~ 4.2M tokens)."),
    days: float = typer.Option(30.0, "--days", help="Target training time in days."),
    rate: float = typer.Option(api.DEFAULT_RATE, "--rate", help="Serving: requests per second."),
    ttft_ms: float = typer.Option(api.DEFAULT_TTFT_MS, "--ttft-ms", help="Serving: p90 time-to-first-token objective (ms)."),
    tpot_ms: float = typer.Option(api.DEFAULT_TPOT_MS, "--tpot-ms", help="Serving: p90 time-per-output-token objective (ms)."),
    input_len: int = typer.Option(api.DEFAULT_INPUT_LEN, "--input-len", help="Serving: prompt tokens per request."),
    output_len: int = typer.Option(api.DEFAULT_OUTPUT_LEN, "--output-len", help="Serving: output tokens per request."),
    years: float = typer.Option(4.0, "--years", help="Depreciation period for the on-prem comparison."),
    utilization: float = typer.Option(0.7, "--utilization", help="Fraction of hours the cluster is busy."),
    cloud_usd_per_gpu_hour: Optional[float] = typer.Option(None, "--cloud-usd-per-gpu-hour", help="Cloud price override."),
    system_price_usd: Optional[float] = typer.Option(None, "--system-price-usd", help="Node price override."),
    pue: Optional[float] = typer.Option(None, "--pue", help="Power usage effectiveness (default 1.3; same as --set pue=)."),
    grid_kg_co2_per_kwh: Optional[float] = typer.Option(None, "--grid-kg-co2-per-kwh", help="Grid carbon intensity, kg CO2/kWh (default 0.39)."),
    grid_kg_per_kwh: Optional[float] = typer.Option(None, "--grid-kg-per-kwh", hidden=True),
    electricity_usd_per_kwh: Optional[float] = typer.Option(None, "--electricity-usd-per-kwh", help="Electricity price, $/kWh (default 0.10)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override an assumption KEY=VALUE (see `gpuplan dc assumptions`)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Write an HTML report with plots to this file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    lora_rank: Optional[int] = typer.Option(None, "--lora-rank", min=1, help="Goal finetune: LoRA rank r of LoRA and QLoRA (default 8, PEFT's)."),
    lora_targets: Optional[str] = typer.Option(None, "--lora-targets", help="Goal finetune: attn, qv (default), all_linear, "
                                               "or a '+'-joined list such as q_proj+v_proj+down_proj."),
    emit: Optional[str] = typer.Option(None, "--emit", help="Goal train: print only the training plan of the chosen GPU "
                                       "count as a launch config: megatron, nemo, torchtitan, deepspeed or maxtext (docs/deploy.md)."),
    framework: Optional[str] = FRAMEWORK,
    compile: Optional[str] = COMPILE,
    optimizer_impl: Optional[OptimizerImpl] = OPTIMIZER_IMPL,
    deepspeed_release: Optional[str] = DEEPSPEED_RELEASE,
    deterministic: bool = DETERMINISTIC,
    no_grad_accum_fusion: bool = NO_GRAD_ACCUM_FUSION,
) -> None:
    """Train (or serve) a model: parallel plan, cluster, fabric, racks, power, cooling, on-prem vs cloud cost.

    With no arguments: the seed question 'design a DGX-based infrastructure for training a 175B
    parameter model' (GPT-3 175B, 300B tokens, DGX H100). Goal train: --framework, --compile,
    --optimizer-impl and --deepspeed-release shape the plan search as they shape `gpuplan train`'s."""
    impl = optimizer_impl.value if optimizer_impl is not None else None
    if html is not None:
        check_output_path(html, "--html")  # before the work: a folder or unwritable path fails fast
    with progress_bar("plan: GPU counts") as bar:
        result = api.plan(
            renamed(model, model_option, "MODEL", "--model", default=api.DEFAULT_MODEL), system, goal=goal, tokens=tokens,
            gpus=gpus, days=days, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, input_len=input_len, output_len=output_len,
            years=years, utilization=utilization, cloud_usd_per_gpu_hour=cloud_usd_per_gpu_hour,
            system_price_usd=system_price_usd, overrides=set_, pue=pue, grid_kg_co2_per_kwh=grid_kg_co2_per_kwh,
            grid_kg_per_kwh=grid_kg_per_kwh, electricity_usd_per_kwh=electricity_usd_per_kwh,
            seq_len=seq_len, global_batch=global_batch, progress=bar, lora_rank=lora_rank, lora_targets=lora_targets,
            framework=framework, compile=compile, optimizer_impl=impl, deepspeed_release=deepspeed_release,
            deterministic=deterministic, grad_accum_fusion=not no_grad_accum_fusion,
        )
    if goal == "finetune":
        from gpuplan.errors import InputError

        if emit or html is not None:
            raise InputError("--emit / --html: not available with --goal finetune (give `gpuplan train ... --finetune` "
                             "the chosen plan)", field="emit" if emit else "html")
        if as_json:
            print_json(result.to_dict())
            return
        _print_fine_tuning(result.to_dict())
        return
    if emit:  # only the config on stdout: the plan `train` finds on the GPU count chosen here
        from gpuplan.cli.train import emit_text
        from gpuplan.errors import InputError

        if goal != "train":
            raise InputError("--emit: with --goal serve, use `gpuplan serve plan --emit`", field="emit")
        emit_text(api.emit_plan_training(emit, model=renamed(model, model_option, "MODEL", "--model", default=api.DEFAULT_MODEL),
                                         system=result.report.system_id, gpus=result.report.cluster.fabric.gpus, tokens=tokens,
                                         seq_len=seq_len, global_batch=global_batch, framework=framework,
                                         compile=compile, optimizer_impl=impl, deepspeed_release=deepspeed_release), emit)
        return
    if html is not None:
        write_atomic(html, result.html(), field="--html")
    if as_json:
        print_json(result.to_dict())
        return
    rep = result.report
    c, w = rep.cluster, rep.workload
    console.print(rep.answer)
    rows = [("estimator", w.estimator), ("GPUs", c.fabric.gpus), ("nodes", c.fabric.nodes), ("days", w.days),
            ("GPU-hours", w.gpu_hours)] + [(k, v) for k, v in w.details.items() if not isinstance(v, (dict, list))]
    rows += [("leaf / spine / core", f"{c.fabric.leaf_switches} / {c.fabric.spine_switches} / {c.fabric.core_switches}"),
             ("cables / transceivers", f"{c.fabric.cables} / {c.fabric.transceivers}"), ("bisection (TB/s)", c.fabric.bisection_tbps)]
    if c.power is not None and c.racks is not None:
        rows += [("racks (compute + network)", f"{c.racks.compute_racks} + {c.racks.network_racks}"),
                 ("rack kW / cooling", f"{c.racks.compute_rack_kw:.1f} / {c.racks.cooling.value}"),
                 ("IT / facility kW", f"{c.power.it_power_kw:,.0f} / {c.power.facility_power_kw:,.0f}"),
                 ("annual energy cost ($)", c.power.annual_cost_usd),
                 (f"average draw IT / facility kW ({c.power.utilization:.0%} busy at "
                  f"{c.power.loaded_power_fraction_of_nameplate:.0%} of nameplate)",
                  f"{c.power.average_it_power_kw:,.0f} / {c.power.average_facility_power_kw:,.0f}"),
                 ("annual energy cost at the average draw ($)", c.power.average_annual_cost_usd)]
    run = rep.training_run
    if run is not None and run.energy is not None:
        rows += [("run: average IT / facility kW", f"{run.power.it_power_w / 1e3:,.0f} / {run.power.facility_power_w / 1e3:,.0f}"),
                 ("run: energy (MWh)", run.energy.energy_mwh), ("run: CO2 (t)", run.energy.co2_tonnes),
                 ("run: electricity ($)", run.energy.electricity_usd)]
    rows += [("PUE / grid kg CO2 per kWh / $ per kWh",
              f"{rep.assumptions.pue:g} / {rep.assumptions.grid_kg_co2_per_kwh:g} / {rep.assumptions.electricity_usd_per_kwh:g}")]
    if c.tco:
        t = c.tco
        rows += [("capex ($)", t.capex_usd), ("opex per year ($)", t.opex_usd_per_year),
                 ("on-prem $/GPU-hour", t.on_prem_usd_per_gpu_hour),
                 (f"cloud $/GPU-hour ({t.cloud_price_source.split(':', 1)[0]})", t.cloud_usd_per_gpu_hour),
                 ("breakeven months", t.breakeven_months), ("breakeven utilisation", t.breakeven_utilization)]
        rows += [(f"workload {k}", v) for k, v in rep.workload_cost.items()]
    console.print(table(f"plan: {rep.goal.value} {rep.model} on {rep.system_id}", ["item", "value"], rows))
    for note in rep.notes:
        console.print(f"note: {note}")
    if result.stack is not None:  # the training stack the searches assumed (api.framework_choice)
        stack = result.stack.json()
        console.print(f"{stack['framework']} defaults assumed:")
        for line in stack["framework_defaults_assumed"]:
            console.print(f"  {line}")
    console.print("prices and assumptions: `gpuplan plan --json` or `gpuplan dc assumptions`")


def _relief(c: dict) -> str:
    """'mb 2, checkpointing, offload params (612 GiB host)' of a fitting candidate."""
    parts = [f"mb {c['micro_batch']}"] + (["checkpointing"] if c["recompute"] == "full" else [])
    if c["offload"] != "none":
        parts.append(f"offload {c['offload']} ({c['host_offload_gib']:,.0f} GiB host)")
    return ", ".join(parts)


def _print_fine_tuning(d: dict) -> None:
    """The candidates of `plan --goal finetune` (api.fine_tuning_plan), fastest first."""
    def hours(c):
        return fmt(c["time_s"] / 3600, 3) if c["fits"] else "-"

    def band(c, key, scale=1.0):
        b = (c.get("band_80pct") or {}).get(key)
        return f"{fmt(b[0] * scale, 3)} - {fmt(b[1] * scale, 3)}" if b else "-"

    rows = []
    for c in sorted(d["candidates"], key=lambda c: (not c["fits"], c.get("time_s") or 0.0)):
        cost = c.get("cost_usd")
        rows.append((f"{c['gpus']} x {c['gpu']}", c["method"], "yes" if c["fits"] else "NO",
                     _relief(c) if c["fits"] else "-",
                     f"{c['memory_per_gpu_gib']:,.1f} / {c['gpu_memory_gib']:,.0f}" if c["memory_per_gpu_gib"] is not None else "-",
                     f"{c['tokens_per_s']:,.0f}" if c["fits"] else "-", hours(c), band(c, "days", 24.0),
                     f"{cost:,.2f}" if cost is not None else "-"))
    console.print(table(f"fine-tuning {d['model']} on {d['tokens']:,.0f} tokens of {d['seq_len']} (LoRA r {d['lora']['rank']} "
                        f"on {'+'.join(d['lora']['targets'])})",
                        ["hardware", "method", "fits", "micro-batch, memory relief", "GiB per GPU / of", "tokens/s",
                         "hours", "hours 80% band", "cost $"], rows, name="candidates"))
    console.print(d["answer"])
    for c in d["candidates"]:
        if not c["fits"]:
            console.print(f"{c['method']} on {c['gpus']} x {c['gpu']}: {c['reason']}")
    console.print("cost: rental at the catalog's cheapest on-demand price; '-' where the catalog has none "
                  "(--cloud-usd-per-gpu-hour). Run one: gpuplan train MODEL --system ID --gpus N --finetune METHOD ...")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("plan")(plan_cmd)
