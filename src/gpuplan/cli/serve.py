"""CLI: `gpuplan serve MODEL ...` (one estimate), `gpuplan serve plan MODEL ...` (capacity plan),
`gpuplan serve frontier MODEL ...` (throughput vs interactivity).

`serve` is a group whose default action takes MODEL: `ServeGroup` routes any first argument that is
not a subcommand name to the hidden `run` subcommand.
"""

from __future__ import annotations

from typing import List, Optional

import typer
from typer.core import TyperGroup

from gpuplan.cli.render import console, fmt, print_json, table


class ServeGroup(TyperGroup):
    """`serve MODEL ...` means `serve run MODEL ...`; `serve plan|frontier ...` are subcommands."""

    def parse_args(self, ctx, args: List[str]) -> List[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


serve_app = typer.Typer(cls=ServeGroup, help="Serving: latency, throughput, memory and capacity of an LLM deployment.",
                        no_args_is_help=True, add_completion=False, rich_markup_mode=None)


def _deployment(model: str, gpu: str, tp: int, pp: int, weight_dtype: str, kv_dtype: str, system: Optional[str]):
    from gpuplan.catalog import load_catalog
    from gpuplan.models import load_model
    from gpuplan.workloads.inference.deployment import Deployment

    cat = load_catalog()
    gpu_spec = cat.gpu(gpu)
    sys_spec = cat.system(system) if system else _system_for(cat, gpu_spec, tp * pp)
    return Deployment(load_model(model), gpu_spec, sys_spec, tp=tp, pp=pp, weight_dtype=weight_dtype, kv_dtype=kv_dtype)


def _system_for(cat, gpu, num_gpus: int):
    """The catalog system with this GPU whose scale-up domain holds `num_gpus` (smallest first); a
    single-GPU box for one GPU."""
    if num_gpus <= 1:
        return cat.system(gpu.id)
    fits = sorted((s for s in cat.systems.values() if s.gpu == gpu.id and s.scaleup_domain_gpus >= num_gpus),
                  key=lambda s: s.scaleup_domain_gpus)
    if fits:
        return fits[0]
    from gpuplan.errors import InputError

    raise InputError(f"system: no catalog system has {num_gpus} x {gpu.id} in one scale-up domain; pass --system", field="system")


@serve_app.command("run", hidden=True)
def run(
    model: str = typer.Argument(..., help="Bundled model name (gpuplan model list) or a config.json path."),
    gpu: str = typer.Option("h100-sxm5-80gb", "--gpu", help="GPU id (gpuplan hw list)."),
    system: Optional[str] = typer.Option(None, "--system", help="System id for the TP fabric (default: one with the GPU)."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel GPUs per replica."),
    pp: int = typer.Option(1, "--pp", help="Pipeline stages per replica."),
    input_len: int = typer.Option(2048, "--input-len", help="Prompt tokens per request."),
    output_len: int = typer.Option(256, "--output-len", help="Generated tokens per request."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Poisson arrivals, requests/s."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Closed loop: requests in flight."),
    batch: Optional[int] = typer.Option(None, "--batch", help="One static batch of this size."),
    weight_dtype: str = typer.Option("bf16", "--weight-dtype", help="fp16, bf16, fp8, int8, int4, mxfp4, nvfp4."),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="fp16, bf16, fp8, int8, int4, mxfp4, nvfp4."),
    scheduler: str = typer.Option("chunked", "--scheduler", help="static, continuous or chunked."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Estimate TTFT, TPOT, throughput and memory of MODEL served on --gpu with --tp."""
    from gpuplan.errors import InputError
    from gpuplan.workloads.inference.schedulers import SchedulerConfig, SchedulerKind
    from gpuplan.workloads.inference.service import serve_estimate

    try:
        kind = SchedulerKind(scheduler)
    except ValueError:
        raise InputError(f"scheduler: unknown '{scheduler}'; allowed: static, continuous, chunked", field="scheduler") from None
    dep = _deployment(model, gpu, tp, pp, weight_dtype, kv_dtype, system)
    rep = serve_estimate(dep, input_len=input_len, output_len=output_len, rate=rate, concurrency=concurrency,
                         batch=batch, scheduler=SchedulerConfig(kind=kind))
    if as_json:
        print_json(rep)
        return
    rows = [(k, v) for k, v in rep.__dict__.items()]
    console.print(table(f"gpuplan serve {model} on {rep.tp} x {rep.gpu} ({rep.load})", ["quantity", "value"], rows))


@serve_app.command("plan")
def plan(
    model: str = typer.Argument(..., help="Bundled model name or config.json path."),
    rate: float = typer.Option(..., "--rate", help="Requests/s to serve."),
    ttft_ms: float = typer.Option(..., "--ttft-ms", help="p90 time-to-first-token objective, ms."),
    tpot_ms: float = typer.Option(..., "--tpot-ms", help="p90 time-per-output-token objective, ms."),
    gpus_from: str = typer.Option("h100-sxm5-80gb", "--gpus-from", help="Comma-separated GPU ids to choose from."),
    input_len: int = typer.Option(2048, "--input-len"),
    output_len: int = typer.Option(256, "--output-len"),
    weight_dtype: str = typer.Option("bf16", "--weight-dtype"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype"),
    pue: Optional[float] = typer.Option(None, "--pue", help="Power usage effectiveness, >= 1 (default 1.3; same as --set pue=)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override an assumption KEY=VALUE (see `gpuplan dc assumptions`)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Fewest GPUs (type and TP) serving --rate within the TTFT / TPOT objectives, with cost and energy."""
    from gpuplan.catalog import load_catalog
    from gpuplan.facilities.pricing import gpu_hour_price
    from gpuplan.models import load_model
    from gpuplan.workloads.inference.capacity import plan_capacity

    from gpuplan.cli.render import to_jsonable
    from gpuplan.facilities.assumptions import assumptions_from_options
    from gpuplan.facilities.run_cost import kwh_per_million_output_tokens, run_cost_dict, serving_day_cost

    a = assumptions_from_options(set_, pue=pue)
    cat = load_catalog()
    cands, systems = [], {}
    for gid in [g.strip() for g in gpus_from.split(",") if g.strip()]:
        g = cat.gpu(gid)
        price = gpu_hour_price(g, required=False)
        systems[g.id] = (g, cat.widest_system_for(g.id))
        cands.append((g, systems[g.id][1], price.value if price is not None else None))
    res = plan_capacity(load_model(model), cands, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, input_len=input_len,
                        output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    b = res.best
    g, sys_spec = systems[b.gpu]
    day = serving_day_cost(sys_spec, g, b.gpus, assumptions=a)
    kwh_per_m = kwh_per_million_output_tokens(day, rate * output_len)
    if as_json:
        out = to_jsonable(res)
        out["best_serving_day"] = run_cost_dict(day)
        out["best_kwh_per_million_output_tokens"] = kwh_per_m
        out["assumptions"] = {k: a.values()[k] for k in ("pue", "grid_kg_co2_per_kwh", "electricity_usd_per_kwh",
                                                         "busy_activity_fraction")}
        print_json(out)
        return
    typer.echo(f"best: {b.gpus} x {b.gpu} ({b.replicas} replicas of tp={b.tp}, concurrency {b.concurrency} each); "
               f"${fmt(b.usd_per_million_output_tokens)} per million output tokens"
               + (f"; {fmt(kwh_per_m)} kWh per million output tokens at PUE {a.pue:g}" if kwh_per_m is not None else ""))
    rows = [(c.gpu, c.tp, c.concurrency, c.ttft_p90_ms, c.tpot_p90_ms, c.replica_requests_per_s, c.replicas, c.gpus,
             c.usd_per_million_output_tokens) for c in res.candidates]
    console.print(table("candidates", ["gpu", "tp", "concurrency", "ttft_p90_ms", "tpot_p90_ms", "replica_req_per_s",
                                       "replicas", "gpus", "usd_per_m_tokens"], rows))


@serve_app.command("frontier")
def frontier_cmd(
    model: str = typer.Argument(..., help="Bundled model name or config.json path."),
    gpu: str = typer.Option("h100-sxm5-80gb", "--gpu"),
    input_len: int = typer.Option(2048, "--input-len"),
    output_len: int = typer.Option(256, "--output-len"),
    weight_dtype: str = typer.Option("bf16", "--weight-dtype"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Tokens/s per GPU against tokens/s per user over TP and concurrency."""
    from gpuplan.catalog import load_catalog
    from gpuplan.models import load_model
    from gpuplan.workloads.inference.capacity import frontier

    cat = load_catalog()
    g = cat.gpu(gpu)
    pts = frontier(load_model(model), g, cat.widest_system_for(g.id), input_len=input_len,
                   output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    if as_json:
        print_json({"points": pts})
        return
    console.print(table(f"frontier {model} on {gpu}", ["tp", "concurrency", "tokens_per_s_per_gpu", "tokens_per_s_per_user",
                                                        "ttft_p90_ms"],
                        [(p.tp, p.concurrency, p.tokens_per_s_per_gpu, p.tokens_per_s_per_user, p.ttft_p90_ms) for p in pts]))


def register(app: typer.Typer) -> None:
    """Add `gpuplan serve` (default action + plan + frontier)."""
    app.add_typer(serve_app, name="serve")
