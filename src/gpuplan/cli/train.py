"""CLI: `gpuplan train` - best parallelism plan, step time and the totals of a training run.

With no arguments it answers the README's question: GPT-3 175B on 1024 GPUs of DGX H100 for
300B tokens. Giving any of --tp/--pp/--dp/--cp/--ep/--etp/--vpp/--micro-batch/--recompute/--sharding
evaluates that one plan instead of searching (defaults: gpuplan.api.train). Parses, calls
`gpuplan.api.train`, renders.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from gpuplan import api
from gpuplan.cli.progress import progress_bar
from gpuplan.cli.fine_tuning_options import (
    BASE_DTYPE, DOUBLE_QUANT, FINETUNE, GRAD_ACCUM, LORA_DROPOUT, LORA_RANK, LORA_TARGETS, MASTER_WEIGHTS, OFFLOAD,
    CHUNKED_LOSS, OFFLOAD_ACTIVATIONS,
    OPTIMIZER, OPTIMIZER_IMPL, BASE_MATMUL_KEEPS_INPUT, OPTIMIZER_IN_BACKWARD, LOGITS_HELD_IN_BACKWARD, FUSED_QKV_VIEWS, QUANTIZED_HEAD, LOSS_CHUNK_TOKENS,
    fine_tuning_options,
)
from gpuplan.cli.render import console, fmt, print_json, table
from gpuplan.cli.stack_options import (
    CHECKPOINT_EARLY_STOP, COMPILE, CUDA_GRAPH_SCOPE, DEEPSPEED_RELEASE, DETERMINISTIC, FRAMEWORK, MEMORY_SAVINGS,
    NO_GRAD_ACCUM_FUSION,
    PIPELINE_FLUSHES, PIPELINE_SCHEDULE,
)
from gpuplan.specs.choices import BaseDtype, FineTuneMethod, MasterWeights, Offload, Optimizer, OptimizerImpl


def _plan_label(plan) -> str:
    extra = f" cp{plan.cp}" if plan.cp > 1 else ""
    extra += f" ep{plan.ep}" if plan.ep > 1 else ""
    extra += f" etp{plan.expert_tp}" if plan.ep > 1 and plan.expert_tp != plan.tp else ""
    extra += f" vpp{plan.vpp}" if plan.vpp > 1 else ""
    extra += f" {plan.pipeline_schedule.value}" if plan.pipeline_schedule.value != "1f1b" else ""
    extra += f" x{plan.pipeline_flushes} runs" if plan.pipeline_flushes > 1 else ""
    extra += f" graphs[{','.join(sorted(s.value for s in plan.cuda_graph_scope))}]" if plan.cuda_graph_scope else ""
    ft = "" if plan.fine_tuning.ordinary else f" [{plan.fine_tuning.label()}]"
    return (f"tp{plan.tp} pp{plan.pp} dp{plan.dp}{extra} mb{plan.micro_batch} "
            f"{plan.recompute.value}{' +sp' if plan.sequence_parallel else ''}{' +tpo' if plan.tp_comm_overlap else ''} "
            f"{plan.sharding.value}{ft}{_compile_label(plan)}{' +det' if plan.deterministic else ''}"
            f"{' -gaf' if not plan.grad_accum_fusion else ''}")


def _compile_label(plan) -> str:
    """` compile=model+loss` for a plan with a torch.compile'd part, else nothing."""
    from gpuplan.interfaces.api.compile_option import compile_label

    label = compile_label(plan.compiled_model, plan.compiled_loss)
    return "" if label == "none" else f" compile={label}"


def register(app: typer.Typer) -> None:
    """Add `gpuplan train` to the root app."""

    @app.command("train")
    def train(
        model: Optional[str] = typer.Argument(
            None, help=f"Bundled model name or path to a config.json (default {api.DEFAULT_MODEL})."),
        system: str = typer.Option(api.DEFAULT_SYSTEM, "--system", help="Catalog system id (see `gpuplan systems list`)."),
        gpus: int = typer.Option(api.DEFAULT_GPUS, "--gpus", help="Total GPUs."),
        tokens: Optional[str] = typer.Option(None, "--tokens", help="Training tokens, e.g. 300B, 15T (default 300B)."),
        flops: Optional[str] = typer.Option(None, "--flops", help="Model-FLOP budget instead of tokens, e.g. 3.14e23."),
        seq_len: Optional[int] = typer.Option(
            None, "--seq-len", help="Tokens per sequence (default: min(the model's max positions, 4096))."),
        global_batch: Optional[int] = typer.Option(
            None, "--global-batch",
            help="Sequences per step (default: per plan, the multiple of dp x micro-batch nearest 2^22 ~ 4.2M tokens)."),
        precision: str = typer.Option("bf16", "--precision", help="bf16, fp16 or fp8 (GEMMs)."),
        framework: Optional[str] = FRAMEWORK,
        deepspeed_release: Optional[str] = DEEPSPEED_RELEASE,
        tp: Optional[int] = typer.Option(None, "--tp"), pp: Optional[int] = typer.Option(None, "--pp"),
        dp: Optional[int] = typer.Option(None, "--dp"), cp: Optional[int] = typer.Option(None, "--cp"),
        ep: Optional[int] = typer.Option(None, "--ep"), vpp: Optional[int] = typer.Option(None, "--vpp"),
        etp: Optional[int] = typer.Option(
            None, "--etp", help="Expert tensor parallel size (default tp where ep divides dp x cp, else 1)."
        ),
        micro_batch: Optional[int] = typer.Option(None, "--micro-batch"),
        recompute: Optional[str] = typer.Option(None, "--recompute", help="none, selective, full."),
        sharding: Optional[str] = typer.Option(None, "--sharding", help="none, zero1, zero2, zero3, fsdp."),
        sequence_parallel: Optional[bool] = typer.Option(None, "--sequence-parallel/--no-sequence-parallel"),
        tp_comm_overlap: bool = typer.Option(
            False, "--tp-comm-overlap", help="TransformerEngine TP comm overlap (userbuffers) where sequence parallelism is on."
        ),
        compile: Optional[str] = COMPILE,
        pipeline_schedule: Optional[str] = PIPELINE_SCHEDULE,
        pipeline_flushes: Optional[int] = PIPELINE_FLUSHES,
        memory_savings: Optional[str] = MEMORY_SAVINGS,
        deterministic: bool = DETERMINISTIC,
        no_grad_accum_fusion: bool = NO_GRAD_ACCUM_FUSION,
        checkpoint_early_stop: Optional[bool] = CHECKPOINT_EARLY_STOP,
        cuda_graph_scope: Optional[str] = CUDA_GRAPH_SCOPE,
        usd_per_gpu_hour: Optional[float] = typer.Option(None, "--usd-per-gpu-hour", help="Price (default: cheapest catalog cloud price)."),
        pue: Optional[float] = typer.Option(None, "--pue", help="Data-centre PUE, >= 1 (default 1.3; same as --set pue=)."),
        grid_kg_co2_per_kwh: Optional[float] = typer.Option(
            None, "--grid-kg-co2-per-kwh", help="Grid carbon intensity, kg CO2/kWh (default 0.39)."
        ),
        grid_kg_per_kwh: Optional[float] = typer.Option(None, "--grid-kg-per-kwh", hidden=True),
        electricity_usd_per_kwh: Optional[float] = typer.Option(
            None, "--electricity-usd-per-kwh", help="Electricity price, $/kWh (default 0.10)."
        ),
        set_: Optional[List[str]] = typer.Option(
            None, "--set", help="Override an assumption KEY=VALUE (repeatable; see `gpuplan dc assumptions`)."
        ),
        top: int = typer.Option(5, "--top", help="Plans to list."),
        grad_accum: Optional[int] = GRAD_ACCUM,
        finetune: FineTuneMethod = FINETUNE,
        lora_rank: Optional[int] = LORA_RANK,
        lora_targets: Optional[str] = LORA_TARGETS,
        lora_dropout: Optional[float] = LORA_DROPOUT,
        base_dtype: Optional[BaseDtype] = BASE_DTYPE,
        double_quant: bool = DOUBLE_QUANT,
        optimizer: Optimizer = OPTIMIZER,
        optimizer_impl: Optional[OptimizerImpl] = OPTIMIZER_IMPL,
        offload: Offload = OFFLOAD,
        master_weights: MasterWeights = MASTER_WEIGHTS,
        chunked_loss: bool = CHUNKED_LOSS,
        offload_activations: bool = OFFLOAD_ACTIVATIONS,
        base_matmul_keeps_input: bool = BASE_MATMUL_KEEPS_INPUT,
        optimizer_in_backward: bool = OPTIMIZER_IN_BACKWARD,
        logits_held_in_backward: bool = LOGITS_HELD_IN_BACKWARD,
        fused_qkv_views: bool = FUSED_QKV_VIEWS,
        quantized_head: bool = QUANTIZED_HEAD,
        loss_chunk_tokens: Optional[int] = LOSS_CHUNK_TOKENS,
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
        emit: Optional[str] = typer.Option(
            None, "--emit", help="Print only the best plan as a launch config: megatron, nemo, torchtitan, deepspeed or maxtext "
            "(the search runs that framework; docs/deploy.md)."),
        from_: Optional[str] = typer.Option(
            None, "--from", help="Predict a launch config: a Megatron-LM, `nemo llm pretrain` or MaxText command line, a torchtitan TOML or a "
            "DeepSpeed JSON (with MODEL and --gpus), as text or a file path."),
    ) -> None:
        """Best parallelism plan, step time, MFU, days, GPU-hours, energy, cost and CO2 of a training run."""
        if from_ is not None:
            _train_from(from_, model, system, gpus, seq_len, tokens, flops, usd_per_gpu_hour, pue, grid_kg_co2_per_kwh,
                        electricity_usd_per_kwh, set_, emit, as_json)
            return
        extra = api.train_options_for(emit, framework) if emit else {}
        framework = extra.pop("framework", framework)
        with progress_bar("plan search") as bar:
            result = api.train(
                model or api.DEFAULT_MODEL, system, gpus, tokens=tokens, flops=flops, seq_len=seq_len, global_batch=global_batch,
                precision=precision, framework=framework, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, vpp=vpp,
                micro_batch=micro_batch, recompute=recompute, sharding=sharding, sequence_parallel=sequence_parallel,
                tp_comm_overlap=tp_comm_overlap, usd_per_gpu_hour=usd_per_gpu_hour, pue=pue,
                grid_kg_co2_per_kwh=grid_kg_co2_per_kwh, grid_kg_per_kwh=grid_kg_per_kwh,
                electricity_usd_per_kwh=electricity_usd_per_kwh, overrides=set_, top=top, progress=bar, **extra,
                grad_accum=grad_accum, fine_tuning=fine_tuning_options(locals()), deepspeed_release=deepspeed_release,
                compile=compile, deterministic=deterministic, grad_accum_fusion=not no_grad_accum_fusion,
                pipeline_schedule=pipeline_schedule, pipeline_flushes=pipeline_flushes, memory_savings=memory_savings,
                checkpoint_early_stop=checkpoint_early_stop,
                cuda_graph_scope=cuda_graph_scope,
            )
        if emit:  # only the config on stdout, so it can be redirected to a file
            emit_text(api.emit_train(result, emit, system), emit)
            return
        if as_json:
            print_json(result.to_dict())
            return
        _render(result.estimate, result.run, result.assumptions, result.to_dict().get("band_80pct") or {},
                result.batch_note, result.goodput, result.evidence, result.plan_notes, result.defaults_assumed)


def emit_text(text: str, target: str) -> None:
    """`--emit`: the config alone on stdout; a config format without comments (JSON) gets the version
    it was written for on stderr."""
    typer.echo(text, nl=False)
    if not text.lstrip().startswith("#"):
        typer.echo(f"# written for {api.written_for(target)}", err=True)


def _train_from(source, model, system, gpus, seq_len, tokens, flops, usd_per_gpu_hour, pue, grid, electricity, set_,
                emit, as_json) -> None:
    """`train --from`: the prediction of a launch config (interfaces.api.deploy.train_from)."""
    from gpuplan.errors import InputError

    if emit is not None:
        raise InputError("--emit: give --emit or --from, not both", field="emit")
    given_gpus = gpus if gpus != api.DEFAULT_GPUS or model is not None else None
    result = api.train_from(source, system, model=model, gpus=given_gpus, seq_len=seq_len, tokens=tokens, flops=flops,
                            usd_per_gpu_hour=usd_per_gpu_hour, pue=pue, grid_kg_co2_per_kwh=grid,
                            electricity_usd_per_kwh=electricity, overrides=set_)
    if as_json:
        print_json(result.to_dict())
        return
    t = result.train
    console.print(f"read as {result.launch.target}: {_plan_label(t.estimate.plan)}")
    _render(t.estimate, t.run, t.assumptions, t.to_dict().get("band_80pct") or {}, t.batch_note, t.goodput,
            t.evidence, defaults=t.defaults_assumed)
    for option in result.launch.unmodelled:
        console.print(f"not modelled: {option}")


def _render(est, run, assumptions, band: dict, batch_note: str | None = None, goodput=None,
            evidence: dict | None = None, plan_notes: tuple[str, ...] = (), defaults: tuple[str, ...] | list[str] = ()) -> None:
    st = est.step
    console.print(f"{est.model} on {est.num_gpus} x {est.system}, {fmt(est.tokens)} tokens")
    if est.search is not None:
        s = est.search
        batch = ("global batch per plan: the multiple of dp x micro-batch nearest 2^22 tokens; ranked by time per token"
                 if s.default_batch else f"global batch {s.global_batch:,} sequences")
        console.print(
            f"searched {s.plans_evaluated:,} plans in {s.elapsed_s:.2f} s: {s.plans_valid:,} valid, "
            f"{s.plans_fitting:,} fit in memory ({batch})"
        )
        console.print(table("best plans", ["#", "plan", "batch seqs", "step s", "MFU %", "GiB/GPU"],
                            [[r.rank, _plan_label(r.plan), r.plan.global_batch, r.step.step_time_s, r.step.mfu_pct,
                              r.memory_gib] for r in s.best], name="plans"))
    rows = [["plan", _plan_label(est.plan)], ["global batch sequences", est.plan.global_batch],
            ["tokens per step", st.tokens_per_step], ["step time s", st.step_time_s]]
    rows += [[f"  {k.removesuffix('_s')} s", v] for k, v in st.breakdown_s.items() if v > 0]
    rows += [
        ["tokens/s", st.tokens_per_s], ["model TFLOP/s per GPU", st.tflops_per_gpu_model], ["MFU %", st.mfu_pct],
        ["memory per GPU GiB", est.memory_per_gpu_gib], ["days", est.days], ["GPU-hours", est.gpu_hours],
    ]
    if goodput is not None:  # facilities.goodput: interruptions, restarts and checkpoints
        g = goodput.to_dict()
        rows += [["expected days (goodput %)", f"{g['expected_days']:,.2f} ({g['goodput_pct']:.1f}%)"
                  if g["expected_days"] is not None else "never finishes (interrupted faster than it restarts)"],
                 ["checkpoint every (min)", g["checkpoint_interval_s"] / 60.0]]
    if run.energy is not None:
        rows += [["average facility kW", run.power.facility_power_w / 1e3], ["energy MWh", run.energy.energy_mwh],
                 ["CO2 tonnes", run.energy.co2_tonnes], ["electricity USD", run.energy.electricity_usd]]
    rows += [["cost USD (rented)", run.cost_usd]]
    console.print(table("training estimate", ["quantity", "value"], rows, name="estimate", main=True))
    if band.get("step_time_s"):
        (t0, t1), (d0, d1) = band["step_time_s"], band["days"]
        if band.get("novelty", "seen") != "seen":
            state = f" - {band['reason']} (band: errors of public rows predicted with that held out)"
        else:
            state = "" if band["validated"] else " - band borrowed from a broader regime (too few public rows of its own)"
        console.print(f"80% band (cross-validated errors of {band['rows']} public rows, {band['regime']}): "
                      f"step {fmt(t0)} - {fmt(t1)} s, {fmt(d0)} - {fmt(d1)} days{state}")
    if band.get("memory_per_gpu_gib") and not est.plan.fine_tuning.ordinary:
        m0, m1 = band["memory_per_gpu_gib"]
        console.print(f"80% band of the memory per GPU ({band['memory_regime']}): {fmt(m0)} - {fmt(m1)} GiB")
    if evidence:
        console.print(f"evidence: {evidence['note']}"
                      + (f"; nearest: {', '.join(r['id'] for r in evidence['rows'])}" if evidence["rows"] else ""))
    console.print(f"power: PUE {assumptions.pue:g}, grid {assumptions.grid_kg_co2_per_kwh:g} kg CO2/kWh, "
                  f"${assumptions.electricity_usd_per_kwh:g}/kWh (override with --set KEY=VALUE)")
    if run.note:
        console.print(f"note: {run.note}")
    if run.price is None:
        console.print(f"cost: {api.price_source(None)}")
    else:
        console.print(f"price: {fmt(run.price.value)} $/GPU-hour ({api.price_source(run.price)})")
    if est.search is not None:
        for note in est.search.notes:  # the search's notes include how the batch was chosen
            console.print(f"note: {note}")
    elif batch_note:
        console.print(f"note: {batch_note}")
    for note in plan_notes:
        console.print(f"note: {note}")
    console.print(f"{st.framework.value} defaults assumed:")
    for line in defaults:
        console.print(f"  {line}")
    if est.search is not None and est.search.why_others_lose:
        console.print("why other choices lose:")
        for line in est.search.why_others_lose:
            console.print(f"  {line}")
