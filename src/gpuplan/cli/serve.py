"""CLI: `gpuplan serve run MODEL ...` (one estimate), `gpuplan serve plan MODEL ...` (capacity plan),
`gpuplan serve frontier MODEL ...` (throughput vs interactivity). Parses, calls `gpuplan.api.serve_*`,
renders.

`gpuplan serve MODEL ...` (no subcommand name) still means `serve run MODEL ...`: `ServeGroup`
routes a first argument that is not a subcommand name to `run`; help shows `run` like the others.
"""

from __future__ import annotations

from typing import List, Optional

import typer
from typer.core import TyperGroup

from gpuplan import api
from gpuplan.cli.aliases import renamed
from gpuplan.cli.progress import progress_bar
from gpuplan.cli.render import console, echo, err_console, fmt, print_json, table


class ServeGroup(TyperGroup):
    """`serve MODEL ...` means `serve run MODEL ...`; `serve run|plan|frontier ...` are subcommands."""

    def parse_args(self, ctx, args: List[str]) -> List[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


serve_app = typer.Typer(cls=ServeGroup, help="Serving: latency, throughput, memory and capacity of an LLM deployment. "
                        "`gpuplan serve MODEL ...` is short for `gpuplan serve run MODEL ...`.",
                        no_args_is_help=True, add_completion=False, rich_markup_mode=None)

_GPU_HELP = f"GPU id (gpuplan hw list; default {api.DEFAULT_GPU}, or the --system's GPU)."
_SYSTEM_HELP = "System id for the TP fabric (default: the GPU's widest catalog system)."


#: the serving-feature options `serve run` and `serve plan` share (length distributions,
#: speculative decoding, prefix caching)
_INPUT_DIST_OPTION = typer.Option(None, "--input-dist", help="Prompt length distribution: N, uniform:LO:HI, "
                                              "normal:MEAN:STD, lognormal:MEAN:CV (optionally :max=M).")
_OUTPUT_DIST_OPTION = typer.Option(None, "--output-dist", help="Output length distribution (as --input-dist).")
_LENGTHS_OPTION = typer.Option(None, "--lengths", help="Both lengths: a CSV of input_len,output_len pairs "
                                          "or a dataset (sharegpt-vllm, openorca-mlperf).")
_SPEC_TOKENS_OPTION = typer.Option(0, "--spec-tokens", help="Speculative decoding: tokens drafted per step (k).")
_SPEC_ACCEPTANCE_OPTION = typer.Option(None, "--spec-acceptance", help="Per-token acceptance rate of drafted tokens, 0-1.")
_DRAFT_MODEL_OPTION = typer.Option(None, "--draft-model", help="Draft model (bundled name or config.json).")
_MTP_OPTION = typer.Option(0, "--mtp", help="Draft with N MTP layers of the target instead of a draft model.")
_PREFIX_HIT_RATE_OPTION = typer.Option(0.0, "--prefix-hit-rate", help="Prefix caching: fraction of prompt tokens found in the cache, 0-1.")
#: the serving engine and its overrides (`serve run` and `serve plan`; workloads.inference.engines)
_KV_DTYPE_OPTION = typer.Option(None, "--kv-dtype", help="fp32, tf32, fp16, bf16, fp8, mxfp8, int8, mxfp6, int4, "
                                "mxfp4, nvfp4; default the --engine's choice for the weights (tensorrt-llm: fp8 for "
                                "fp8 / nvfp4 checkpoints), else bf16.")
_ENGINE_OPTION = typer.Option(api.DEFAULT_ENGINE, "--engine", help="Serving engine whose documented defaults run: "
                              "generic (default: gpuplan's own, chunked prefill, 256 sequences / 8192 tokens per step, "
                              "KV within memory.usable_fraction of total memory, 16-token blocks, TensorRT-LLM's TP all-reduce), "
                              "tensorrt-llm, vllm, sglang, lmdeploy or tgi (scheduler, KV memory rule and fraction, block "
                              "size, batch limits, CUDA-graph padding, TP all-reduce; docs/serving.md).")
_MEMORY_FRACTION_OPTION = typer.Option(None, "--memory-fraction", help="KV memory fraction of the engine's rule, 0-1 "
                                       "(of total memory: vllm gpu_memory_utilization, sglang mem_fraction_static; "
                                       "of free memory: tensorrt-llm free_gpu_memory_fraction, lmdeploy "
                                       "cache_max_entry_count); default the engine's.")
_PREFIX_CACHE_TOKENS_OPTION = typer.Option(None, "--prefix-cache-tokens", help="Tokens of KV the prefix cache holds "
                                                      "(default: one request's cached prefix).")


_EMIT_HELP = ("Print only a launch config of the prediction: vllm, sglang, trtllm (the engine command; the run uses that "
              "engine's profile) or k8s (manifests of --engine's container); docs/deploy.md.")


@serve_app.command("run")
def run(
    model: Optional[str] = typer.Argument(None, help="Bundled model name (gpuplan model list) or a config.json path."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help=_GPU_HELP),
    system: Optional[str] = typer.Option(None, "--system", help=_SYSTEM_HELP),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel GPUs per replica."),
    pp: int = typer.Option(1, "--pp", help="Pipeline stages per replica."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel GPUs (MoE models; divides the experts, <= tp x pp)."),
    attention_dp: int = typer.Option(1, "--attention-dp", help="Attention data-parallel groups (divides tp): "
                                     "attention over tp/attention-dp GPUs per group, each group its own requests."),
    attention_dp_balance: bool = typer.Option(False, "--attention-dp-balance", help="The engine's attention-DP balance "
                                              "scheduler on (TensorRT-LLM attention_dp_config.enable_balance): groups "
                                              "lose less to the slowest one (docs/serving.md)."),
    input_len: int = typer.Option(api.DEFAULT_INPUT_LEN, "--input-len", help="Prompt tokens per request."),
    output_len: int = typer.Option(api.DEFAULT_OUTPUT_LEN, "--output-len", help="Generated tokens per request."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Poisson arrivals, requests/s."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Closed loop: requests in flight."),
    batch: Optional[int] = typer.Option(None, "--batch", help="One static batch of this size."),
    weight_dtype: str = typer.Option("bf16", "--weight-dtype", help="fp32, tf32, fp16, bf16, fp8, mxfp8, int8, mxfp6, int4, mxfp4, nvfp4."),
    kv_dtype: Optional[str] = _KV_DTYPE_OPTION,
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="static, continuous, chunked (decodes first, prompts fill the token budget in chunks; vLLM V1, TensorRT-LLM) or prefill-first (prefill-only steps while prompts wait, decodes stall; SGLang's default); default the --engine's (chunked for generic)."),
    engine: str = _ENGINE_OPTION,
    memory_fraction: Optional[float] = _MEMORY_FRACTION_OPTION,
    input_dist: Optional[str] = _INPUT_DIST_OPTION,
    output_dist: Optional[str] = _OUTPUT_DIST_OPTION,
    lengths: Optional[str] = _LENGTHS_OPTION,
    spec_tokens: int = _SPEC_TOKENS_OPTION,
    spec_acceptance: Optional[float] = _SPEC_ACCEPTANCE_OPTION,
    draft_model: Optional[str] = _DRAFT_MODEL_OPTION,
    mtp: int = _MTP_OPTION,
    prefix_hit_rate: float = _PREFIX_HIT_RATE_OPTION,
    prefix_cache_tokens: Optional[int] = _PREFIX_CACHE_TOKENS_OPTION,
    usd_per_gpu_hour: Optional[float] = typer.Option(None, "--usd-per-gpu-hour", help="Price of the GPU (default: "
                                                     "the cheapest catalog cloud price) for the cost per request "
                                                     "and per million input / output tokens."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    emit: Optional[str] = typer.Option(None, "--emit", help=_EMIT_HELP),
    from_: Optional[str] = typer.Option(None, "--from", help="Predict an engine command (vllm serve, python -m "
                                        "sglang.launch_server, trtllm-serve), as text or a file path, on --gpu."),
) -> None:
    """Estimate TTFT, TPOT, throughput and memory of MODEL served on --gpu with --tp."""
    if from_ is not None:
        _run_from(from_, model, gpu, system, emit, as_json, weight_dtype, input_len=input_len, output_len=output_len,
                  rate=rate, concurrency=concurrency, batch=batch, input_dist=input_dist, output_dist=output_dist,
                  lengths=lengths, prefix_hit_rate=prefix_hit_rate, prefix_cache_tokens=prefix_cache_tokens)
        return
    if model is None:
        raise typer.BadParameter("give MODEL (or --from a launch command)", param_hint="MODEL")
    if emit:
        engine = api.serve_engine_for(emit, engine if engine != api.DEFAULT_ENGINE else None)
    result = api.serve_run(model, gpu, system=system, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp, input_len=input_len, output_len=output_len,
                           rate=rate, concurrency=concurrency, batch=batch, weight_dtype=weight_dtype,
                           kv_dtype=kv_dtype, scheduler=scheduler, engine=engine, memory_fraction=memory_fraction,
                           input_dist=input_dist, output_dist=output_dist, lengths=lengths, spec_tokens=spec_tokens,
                           spec_acceptance=spec_acceptance, draft_model=draft_model, mtp=mtp, prefix_hit_rate=prefix_hit_rate,
                           prefix_cache_tokens=prefix_cache_tokens, usd_per_gpu_hour=usd_per_gpu_hour,
                           attention_dp_balance=attention_dp_balance)
    if emit:  # only the command or manifests on stdout, so they can be redirected to a file
        typer.echo(api.emit_serve(result, emit, system), nl=False)
        return
    rep = result.report
    if as_json:
        print_json(result.to_dict())
        return
    band = result.to_dict().get("band_80pct") or {}
    rows = [(k, v, f"{fmt(band[k][0])} .. {fmt(band[k][1])}" if k in band else "") for k, v in rep.__dict__.items()]
    console.print(table(f"gpuplan serve {model} on {rep.tp} x {rep.gpu} ({rep.load}, engine {rep.engine})",
                        ["quantity", "value", "80% band"], rows))
    for cls, info in (band.get("regimes") or {}).items():
        if info.get("novelty", "seen") != "seen":
            state = f" - {info['reason']} (band: errors of public rows predicted with that held out)"
        elif not info["validated"]:
            state = " - band borrowed from a broader regime (too few public rows of its own)"
        else:
            state = ""
        console.print(f"80% {cls} band: cross-validated errors of {info['rows']} public rows ({info['regime']}){state}")
    for warning in result.warnings:
        err_console.print(f"warning: {warning}")


def _run_from(source, model, gpu, system, emit, as_json, weight_dtype, **load) -> None:
    """`serve run --from`: the prediction of an engine command (interfaces.api.deploy.serve_run_from)."""
    from gpuplan.errors import InputError

    if emit is not None or model is not None:
        raise InputError("from: the command names the model and engine; give --from without MODEL or --emit", field="from")
    result = api.serve_run_from(source, gpu, system=system, weight_dtype=weight_dtype if weight_dtype != "bf16" else None,
                                **load)
    if as_json:
        print_json(result.to_dict())
        return
    rep = result.serve.report
    console.print(table(f"gpuplan serve --from ({result.to_dict()['read_from']}): {rep.model} on {rep.tp * rep.pp} x "
                        f"{rep.gpu} ({rep.load})", ["quantity", "value"], list(rep.__dict__.items())))
    for option in result.launch.unmodelled:
        console.print(f"not modelled: {option}")
    for warning in result.serve.warnings:
        err_console.print(f"warning: {warning}")


@serve_app.command("plan")
def plan(
    model: str = typer.Argument(..., help="Bundled model name or config.json path."),
    rate: float = typer.Option(api.DEFAULT_RATE, "--rate", help="Requests/s to serve."),
    ttft_ms: float = typer.Option(api.DEFAULT_TTFT_MS, "--ttft-ms", help="p90 time-to-first-token objective, ms."),
    tpot_ms: float = typer.Option(api.DEFAULT_TPOT_MS, "--tpot-ms", help="p90 time-per-output-token objective, ms."),
    gpu: Optional[List[str]] = typer.Option(
        None, "--gpu", help=f"GPU id(s) to choose from: repeat or comma-separate (default {api.DEFAULT_GPU})."),
    gpus_from: Optional[str] = typer.Option(None, "--gpus-from", hidden=True, help="Old spelling of --gpu."),
    system: Optional[str] = typer.Option(None, "--system", help="Catalog system id whose scale-up fabric every GPU type is "
                                         "served on (default: each GPU's widest catalog system; see `gpuplan systems list`)."),
    usd_per_gpu_hour: Optional[float] = typer.Option(None, "--usd-per-gpu-hour", help="Price of every GPU type "
                                                     "(default: the cheapest catalog cloud price per type)."),
    input_len: int = typer.Option(api.DEFAULT_INPUT_LEN, "--input-len", help="Prompt tokens per request."),
    output_len: int = typer.Option(api.DEFAULT_OUTPUT_LEN, "--output-len", help="Generated tokens per request."),
    weight_dtype: str = typer.Option("bf16", "--weight-dtype", help="fp32, tf32, fp16, bf16, fp8, mxfp8, int8, mxfp6, int4, mxfp4, nvfp4."),
    kv_dtype: Optional[str] = _KV_DTYPE_OPTION,
    pue: Optional[float] = typer.Option(None, "--pue", help="Power usage effectiveness, >= 1 (default 1.3; same as --set pue=)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override an assumption KEY=VALUE (see `gpuplan dc assumptions`)."),
    disaggregated: bool = typer.Option(False, "--disaggregated", help="Also search disaggregated prefill/decode pools "
                                       "(GPU type, layout and P:D ratio) and compare them with co-located serving."),
    pd_ratio: Optional[str] = typer.Option(None, "--pd-ratio", help="With --disaggregated: fix prefill:decode instances, e.g. 2:1."),
    kv_link: Optional[str] = typer.Option(None, "--kv-link", help="With --disaggregated: auto (default), nvlink or network."),
    prefill_gpu: Optional[List[str]] = typer.Option(None, "--prefill-gpu", help="With --disaggregated: GPU id(s) of the prefill pool."),
    decode_gpu: Optional[List[str]] = typer.Option(None, "--decode-gpu", help="With --disaggregated: GPU id(s) of the decode pool."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write a latency-throughput plot (.png/.svg/.pdf)."),
    input_dist: Optional[str] = _INPUT_DIST_OPTION,
    output_dist: Optional[str] = _OUTPUT_DIST_OPTION,
    lengths: Optional[str] = _LENGTHS_OPTION,
    spec_tokens: int = _SPEC_TOKENS_OPTION,
    spec_acceptance: Optional[float] = _SPEC_ACCEPTANCE_OPTION,
    draft_model: Optional[str] = _DRAFT_MODEL_OPTION,
    mtp: int = _MTP_OPTION,
    prefix_hit_rate: float = _PREFIX_HIT_RATE_OPTION,
    prefix_cache_tokens: Optional[int] = _PREFIX_CACHE_TOKENS_OPTION,
    engine: str = _ENGINE_OPTION,
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="static, continuous, chunked or prefill-first "
                                            "(as `serve run`); default the --engine's."),
    memory_fraction: Optional[float] = _MEMORY_FRACTION_OPTION,
    confidence: Optional[float] = typer.Option(
        None, "--confidence", help="Plan so the objectives hold at the pessimistic edge of each GPU type's serving "
        "latency error band (0.8: the shipped 80% bands; p90s x exp(q90) within the objectives). Default: the "
        "point prediction."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    emit: Optional[str] = typer.Option(None, "--emit", help=_EMIT_HELP + " The best layout, with its replica count."),
) -> None:
    """Fewest GPUs (type and TP) serving --rate within the TTFT / TPOT objectives, with cost and energy;
    with --disaggregated the cheapest of co-located and disaggregated prefill/decode serving."""
    if emit:
        engine = api.serve_engine_for(emit, engine if engine != api.DEFAULT_ENGINE else None)
    gpus = renamed(gpu or None, [gpus_from] if gpus_from else None, "--gpu", "--gpus-from", default=[api.DEFAULT_GPU])
    with progress_bar("serve plan") as bar:
        result = api.serve_plan(model, gpus, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, input_len=input_len,
                                output_len=output_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, pue=pue,
                                system=system, usd_per_gpu_hour=usd_per_gpu_hour, overrides=set_, progress=bar, disaggregated=disaggregated, pd_ratio=pd_ratio,
                                kv_link=kv_link, prefill_gpus=prefill_gpu, decode_gpus=decode_gpu, plot=plot,
                                input_dist=input_dist, output_dist=output_dist, lengths=lengths,
                                spec_tokens=spec_tokens, spec_acceptance=spec_acceptance, draft_model=draft_model,
                                mtp=mtp, prefix_hit_rate=prefix_hit_rate, prefix_cache_tokens=prefix_cache_tokens,
                                engine=engine, scheduler=scheduler, memory_fraction=memory_fraction,
                                confidence=confidence)
    if emit:  # only the command or manifests on stdout
        typer.echo(api.emit_serve(result, emit, system), nl=False)
        return
    if disaggregated:
        _print_disaggregated(model, result, as_json)
        return
    if as_json:
        print_json(result.to_dict())
        return
    res = result.plan
    a, kwh_per_m = result.assumptions, result.kwh_per_million_output_tokens
    b = res.best
    echo(f"engine: {res.engine}")
    echo(f"best: {b.gpus} x {b.gpu} ({b.replicas} {'replica' if b.replicas == 1 else 'replicas'} of {b.layout}, concurrency {b.concurrency} each); "
               f"${fmt(b.usd_per_million_output_tokens)} per million output tokens"
               + (f"; {fmt(kwh_per_m)} kWh per million output tokens at PUE {a.pue:g}" if kwh_per_m is not None else ""))
    echo(f"each replica meets the objectives under Poisson arrivals at {fmt(b.open_loop_requests_per_s)} req/s "
         f"(serve run --tp {b.tp} --rate {fmt(b.open_loop_requests_per_s)} gives the same): p90 TTFT "
         f"{fmt(b.open_loop_ttft_p90_ms)} ms, TPOT {fmt(b.open_loop_tpot_p90_ms)} ms")
    _echo_token_costs(b)
    if result.best_regime is not None:
        echo(f"regime of the best layout: {result.best_regime['reason']}")
    if result.confidence is not None:
        for gid, m in result.confidence["by_gpu"].items():
            echo(f"confidence {result.confidence['level']:g} on {gid}: p90s planned x{m['latency_factor']:.2f} "
                 f"(TTFT <= {fmt(m['ttft_objective_ms'])} ms, TPOT <= {fmt(m['tpot_objective_ms'])} ms predicted; "
                 f"band {m['band_regime']}: {m['reason']})")
    rows = [(c.layout, c.replicas, c.gpus, c.open_loop_requests_per_s, c.open_loop_ttft_p90_ms, c.open_loop_tpot_p90_ms,
             c.usd_per_million_output_tokens, c.concurrency, c.ttft_p90_ms, c.tpot_p90_ms, c.why_not_best)
            for c in res.candidates]
    console.print(table("candidates (p90s under Poisson arrivals at each replica's share of the rate; the closed "
                        "loop's concurrency and p90s gave the first guess)",
                        ["layout", "replicas", "gpus", "req_per_s_per_replica", "ttft_p90_ms", "tpot_p90_ms",
                         "usd_per_m_tokens", "closed_concurrency", "closed_ttft_p90_ms", "closed_tpot_p90_ms", "why"],
                        rows, keep_whole=1,
                        secondary=["why", "closed_tpot_p90_ms", "closed_ttft_p90_ms", "closed_concurrency",
                                   "req_per_s_per_replica"]))
    for r in res.rejected:
        echo(f"cannot serve: {r.layout}: {r.why}")
    if result.plot_file:
        typer.echo(f"plot written: {result.plot_file}")


def _echo_token_costs(b) -> None:
    """The best plan's cost split between prefill and decode (workloads/inference/plan/token_costs.py)."""
    if getattr(b, "usd_per_million_input_tokens", None) is None:
        return
    typer.echo(f"cost split by engine-step time (prefill {100 * b.prefill_time_fraction:.0f}%): "
               f"${fmt(b.usd_per_million_input_tokens)} per million input tokens + "
               f"${fmt(b.usd_per_million_output_tokens_decode)} per million output tokens "
               f"= ${fmt(b.usd_per_request)} per request (the all-in figure above charges every GPU-second to "
               "the output tokens)")


#: rows of the disaggregated plan's table (the JSON has every option)
PLAN_TABLE_ROWS = 14


def _print_disaggregated(model: str, result, as_json: bool) -> None:
    """`serve plan --disaggregated`: one table of co-located and disaggregated options."""
    if as_json:
        print_json(result.to_dict())
        return
    res = result.plan
    b = res.best
    energy = "" if result.kwh_per_million_output_tokens is None else (
        f"; {fmt(result.kwh_per_million_output_tokens)} kWh per million output tokens at PUE {result.assumptions.pue:g}")
    typer.echo(f"engine: {res.engine}")
    typer.echo(f"best: {b.mode.value} {b.layout}: {b.gpus} GPUs, ${fmt(b.usd_per_million_output_tokens)} per million "
               f"output tokens (p90 TTFT {fmt(b.ttft_p90_ms)} ms, TPOT {fmt(b.tpot_p90_ms)} ms){energy}")
    _echo_token_costs(b)
    if res.best_colocated is not None and res.best_disaggregated is not None and res.disaggregated_saving_percent is not None:
        pct = res.disaggregated_saving_percent
        verdict = "same cost" if abs(pct) < 0.5 else f"{abs(pct):.0f}% {'cheaper' if pct > 0 else 'costlier'}"
        typer.echo(f"best disaggregated vs best co-located: {verdict} "
                   f"({res.best_disaggregated.gpus} vs {res.best_colocated.gpus} GPUs)")
    elif res.best_disaggregated is None:
        typer.echo("no disaggregated layout meets the objectives")
    elif res.best_colocated is None:
        typer.echo("no co-located layout meets the objectives")
    keep = [o for o in res.options if o.meets_slo][:PLAN_TABLE_ROWS]
    for extra in (res.best_colocated, res.best_disaggregated):
        if extra is not None and extra not in keep:
            keep.append(extra)
    unfit = [o.layout for o in res.options if o.gpus is None and o.why_not_best.startswith("does not fit")]
    keep += [o for o in res.options if not o.meets_slo and o.layout not in unfit][:max(0, PLAN_TABLE_ROWS + 4 - len(keep))]
    rows = [(f"{'co-loc' if o.mode.value == 'colocated' else 'disagg'} {o.layout}", o.gpus, o.kv_link or "-",
             o.ttft_p90_ms, o.tpot_p90_ms, o.usd_per_million_output_tokens, o.why_not_best) for o in keep]
    console.print(table(f"serving options for {model} at {res.rate_requests_per_s:g} req/s (p90 TTFT <= {res.ttft_slo_ms:g} ms, "
                        f"TPOT <= {res.tpot_slo_ms:g} ms)",
                        ["option", "gpus", "kv", "ttft_p90_ms", "tpot_p90_ms", "usd_per_m_out", "why"], rows, keep_whole=1,
                        secondary=["why"]))
    if unfit:
        typer.echo("do not fit in GPU memory: " + ", ".join(unfit))
    if len(res.options) > len(keep) + len(unfit):
        typer.echo(f"{len(res.options) - len(keep) - len(unfit)} more options in --json")
    if result.plot_file:
        typer.echo(f"plot written: {result.plot_file}")


@serve_app.command("frontier")
def frontier_cmd(
    model: str = typer.Argument(..., help="Bundled model name or config.json path."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help=_GPU_HELP),
    system: Optional[str] = typer.Option(None, "--system", help=_SYSTEM_HELP),
    input_len: int = typer.Option(api.DEFAULT_INPUT_LEN, "--input-len", help="Prompt tokens per request."),
    output_len: int = typer.Option(api.DEFAULT_OUTPUT_LEN, "--output-len", help="Generated tokens per request."),
    weight_dtype: str = typer.Option("bf16", "--weight-dtype", help="fp32, tf32, fp16, bf16, fp8, mxfp8, int8, mxfp6, int4, mxfp4, nvfp4."),
    kv_dtype: Optional[str] = _KV_DTYPE_OPTION,
    plot: Optional[str] = typer.Option(None, "--plot", help="Write the frontier plot (.png/.svg/.pdf)."),
    engine: str = _ENGINE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Tokens/s per GPU against tokens/s per user over TP and concurrency."""
    with progress_bar("serve frontier") as bar:
        result = api.serve_frontier(model, gpu, system=system, input_len=input_len, output_len=output_len,
                                    weight_dtype=weight_dtype, kv_dtype=kv_dtype, progress=bar, plot=plot,
                                    engine=engine)
    if as_json:
        print_json(result.to_dict())
        return
    pts = result.points
    console.print(table(f"frontier {model} on {gpu or api.DEFAULT_GPU}", ["tp", "concurrency", "tokens_per_s_per_gpu",
                                                                          "tokens_per_s_per_user", "ttft_p90_ms"],
                        [(p.tp, p.concurrency, p.tokens_per_s_per_gpu, p.tokens_per_s_per_user, p.ttft_p90_ms) for p in pts]))
    if result.plot_file:
        typer.echo(f"plot written: {result.plot_file}")


def register(app: typer.Typer) -> None:
    """Add `gpuplan serve` (run, plan, frontier; `serve MODEL` = `serve run MODEL`)."""
    app.add_typer(serve_app, name="serve")
