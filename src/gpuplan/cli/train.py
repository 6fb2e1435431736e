"""CLI: `gpuplan train` - best parallelism plan, step time and the totals of a training run.

With no arguments it answers the README's question: GPT-3 175B on 1024 GPUs of DGX H100 for
300B tokens. Giving any of --tp/--pp/--dp/--cp/--ep/--etp/--vpp/--micro-batch/--recompute/--sharding
evaluates that one plan instead of searching (unset degrees default to 1, dp fills the GPUs).
"""

from __future__ import annotations

from typing import Optional

import typer

from gpuplan.cli.render import console, fmt, print_json, table

DEFAULT_MODEL = "gpt3-175b"
DEFAULT_SYSTEM = "dgx-h100"
DEFAULT_GPUS = 1024
DEFAULT_TOKENS = "300B"


def _plan_dict(plan) -> dict:
    return {
        "tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep, "etp": plan.expert_tp, "vpp": plan.vpp,
        "micro_batch": plan.micro_batch, "global_batch": plan.global_batch, "seq_len": plan.seq_len,
        "recompute": plan.recompute.value, "sequence_parallel": plan.sequence_parallel,
        "tp_comm_overlap": plan.tp_comm_overlap, "sharding": plan.sharding.value, "precision": plan.precision.value,
    }


def _plan_label(plan) -> str:
    extra = f" cp{plan.cp}" if plan.cp > 1 else ""
    extra += f" ep{plan.ep}" if plan.ep > 1 else ""
    extra += f" etp{plan.expert_tp}" if plan.ep > 1 and plan.expert_tp != plan.tp else ""
    extra += f" vpp{plan.vpp}" if plan.vpp > 1 else ""
    return (f"tp{plan.tp} pp{plan.pp} dp{plan.dp}{extra} mb{plan.micro_batch} "
            f"{plan.recompute.value}{' +sp' if plan.sequence_parallel else ''}{' +tpo' if plan.tp_comm_overlap else ''} "
            f"{plan.sharding.value}")


def estimate_to_json(est) -> dict:
    """Stable JSON of a TrainingEstimate (units in the keys)."""
    st = est.step
    out = {
        "model": est.model, "system": est.system, "num_gpus": est.num_gpus, "tokens": est.tokens,
        "best_plan": _plan_dict(est.plan),
        "step_time_s": st.step_time_s,
        "step_breakdown_s": st.breakdown_s,
        "num_micro_batches": st.num_micro_batches,
        "tokens_per_step": st.tokens_per_step,
        "tokens_per_s": st.tokens_per_s,
        "tokens_per_s_per_gpu": st.tokens_per_s_per_gpu,
        "tflops_per_gpu_model": st.tflops_per_gpu_model,
        "mfu_pct": st.mfu_pct,
        "memory_per_gpu_gib": est.memory_per_gpu_gib,
        "steps": est.steps, "time_s": est.time_s, "days": est.days, "gpu_hours": est.gpu_hours,
        "gpu_power_w": est.power.gpu_w, "facility_power_w": est.power.facility_w, "pue": est.pue,
        "energy_mwh": est.energy_mwh,
        "usd_per_gpu_hour": est.usd_per_gpu_hour, "price_source": est.price_source, "cost_usd": est.cost_usd,
        "grid_kg_per_kwh": est.grid_kg_per_kwh, "co2_tonnes": est.co2_tonnes,
    }
    if est.search is not None:
        s = est.search
        out["search"] = {
            "plans_evaluated": s.plans_evaluated, "plans_valid": s.plans_valid, "plans_fitting": s.plans_fitting,
            "elapsed_s": s.elapsed_s, "rejected": s.rejected, "why_others_lose": list(s.why_others_lose),
            "top_plans": [
                {"rank": r.rank, "plan": _plan_dict(r.plan), "step_time_s": r.step.step_time_s,
                 "mfu_pct": r.step.mfu_pct, "memory_per_gpu_gib": r.memory_gib}
                for r in s.best
            ],
        }
    return out


def register(app: typer.Typer) -> None:
    """Add `gpuplan train` to the root app."""

    @app.command("train")
    def train(
        model: str = typer.Argument(DEFAULT_MODEL, help="Bundled model name or path to a config.json."),
        system: str = typer.Option(DEFAULT_SYSTEM, "--system", help="Catalog system id (see `gpuplan systems list`)."),
        gpus: int = typer.Option(DEFAULT_GPUS, "--gpus", help="Total GPUs."),
        tokens: Optional[str] = typer.Option(None, "--tokens", help="Training tokens, e.g. 300B, 15T (default 300B)."),
        flops: Optional[str] = typer.Option(None, "--flops", help="Model-FLOP budget instead of tokens, e.g. 3.14e23."),
        seq_len: int = typer.Option(2048, "--seq-len", help="Sequence length."),
        global_batch: Optional[int] = typer.Option(None, "--global-batch", help="Sequences per step (default ~4M tokens)."),
        precision: str = typer.Option("bf16", "--precision", help="bf16, fp16 or fp8 (GEMMs)."),
        framework: str = typer.Option("megatron", "--framework", help="megatron, deepspeed, fsdp, torchtitan."),
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
        usd_per_gpu_hour: Optional[float] = typer.Option(None, "--usd-per-gpu-hour", help="Price (default: cheapest catalog cloud price)."),
        pue: float = typer.Option(1.2, "--pue", help="Data-centre PUE (>= 1)."),
        grid_kg_per_kwh: float = typer.Option(0.46, "--grid-kg-per-kwh", help="Grid CO2 intensity, kg/kWh."),
        top: int = typer.Option(5, "--top", help="Plans to list."),
        as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    ) -> None:
        """Best parallelism plan, step time, MFU, days, GPU-hours, energy, cost and CO2 of a training run."""
        est = run_train(
            model=model, system=system, gpus=gpus, tokens=tokens, flops=flops, seq_len=seq_len,
            global_batch=global_batch, precision=precision, framework=framework, tp_comm_overlap=tp_comm_overlap,
            degrees=dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, vpp=vpp, micro_batch=micro_batch, recompute=recompute,
                         sharding=sharding, sequence_parallel=sequence_parallel),
            usd_per_gpu_hour=usd_per_gpu_hour, pue=pue, grid_kg_per_kwh=grid_kg_per_kwh, top=top,
            progress=not as_json,
        )
        if as_json:
            print_json(estimate_to_json(est))
            return
        _render(est)


def _enum(cls, raw: str, name: str):
    from gpuplan.errors import InputError

    try:
        return cls(raw.lower())
    except ValueError:
        allowed = ", ".join(v.value for v in cls)
        raise InputError(f"--{name}: '{raw}' is not one of {allowed}", field=name) from None


def run_train(*, model, system, gpus, tokens, flops, seq_len, global_batch, precision, framework, degrees,
              usd_per_gpu_hour, pue, grid_kg_per_kwh, top, progress, tp_comm_overlap=False):
    """Parse the command's strings into specs and call `estimate_training` (no computing here)."""
    from gpuplan.catalog import load_catalog
    from gpuplan.errors import InputError
    from gpuplan.models import load_model
    from gpuplan.specs import Precision, Recompute, Sharding, TrainPlan
    from gpuplan.units import parse_count
    from gpuplan.workloads.training.plan_search import DEFAULT_BATCH_TOKENS, SearchSpace
    from gpuplan.workloads.training.step_time import Framework
    from gpuplan.workloads.training.totals import estimate_training

    if gpus < 1:
        raise InputError("--gpus must be >= 1", field="gpus")
    if seq_len < 1:
        raise InputError("--seq-len must be >= 1", field="seq_len")
    if top < 1:
        raise InputError("--top must be >= 1", field="top")
    if tokens is not None and flops is not None:
        raise InputError("give --tokens or --flops, not both", field="tokens")
    spec = load_model(model)
    catalog = load_catalog()
    sys_spec = catalog.system(system)
    gpu = catalog.gpu(sys_spec.gpu)
    prec = _enum(Precision, precision, "precision")
    fw = _enum(Framework, framework, "framework")
    n_tokens = None if flops is not None else parse_count(tokens or DEFAULT_TOKENS, field="tokens")
    budget = parse_count(flops, field="flops") if flops is not None else None
    plan = None
    if any(v is not None for v in degrees.values()):
        d = {k: v for k, v in degrees.items() if v is not None}
        tp_, pp_, cp_ = d.get("tp", 1), d.get("pp", 1), d.get("cp", 1)
        if gpus % (tp_ * pp_ * cp_):
            raise InputError(f"--gpus {gpus} is not a multiple of tp x pp x cp = {tp_ * pp_ * cp_}", field="gpus")
        dp_ = d.get("dp", gpus // (tp_ * pp_ * cp_))
        mb = d.get("micro_batch", 1)
        gb = global_batch or max(1, round(DEFAULT_BATCH_TOKENS / seq_len / (mb * dp_))) * mb * dp_
        try:
            plan = TrainPlan(
                tp=tp_, pp=pp_, dp=dp_, cp=cp_, ep=d.get("ep", 1), etp=d.get("etp"), vpp=d.get("vpp", 1), micro_batch=mb,
                global_batch=gb, seq_len=seq_len, precision=prec,
                recompute=_enum(Recompute, d.get("recompute", "none"), "recompute"),
                sharding=_enum(Sharding, d.get("sharding", "none"), "sharding"),
                sequence_parallel=bool(d.get("sequence_parallel", tp_ > 1)) and tp_ > 1,
                tp_comm_overlap=tp_comm_overlap,
            )
        except ValueError as exc:
            raise InputError(f"plan: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}", field="plan") from None
        from gpuplan.workloads.training.step_time import check_plan

        check_plan(spec, sys_spec, plan, gpus)
    bar = None
    if progress and plan is None:
        bar = _progress_bar()
    try:
        return estimate_training(
            spec, sys_spec, gpus, n_tokens, gpu=gpu, flop_budget=budget, seq_len=seq_len, global_batch=global_batch,
            precision=prec, plan=plan, space=SearchSpace(
                global_batch=global_batch, seq_len=seq_len, precision=prec, tp_comm_overlap=tp_comm_overlap
            ),
            usd_per_gpu_hour=usd_per_gpu_hour, pue=pue, grid_kg_per_kwh=grid_kg_per_kwh, framework=fw,
            progress=bar,
        )
    finally:
        if bar is not None:
            bar.close()


class _progress_bar:
    """A rich progress bar shown only if the search is still running after one second."""

    def __init__(self):
        import time

        self._t0 = time.perf_counter()
        self._bar = None
        self._task = None

    def __call__(self, stage: str, fraction: float) -> None:
        import time

        if self._bar is None and time.perf_counter() - self._t0 > 1.0:
            from rich.progress import Progress

            self._bar = Progress(transient=True, console=console)
            self._bar.start()
            self._task = self._bar.add_task("plan search", total=1.0)
        if self._bar is not None:
            self._bar.update(self._task, completed=fraction, description=f"plan search: {stage}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _render(est) -> None:
    st = est.step
    console.print(f"{est.model} on {est.num_gpus} x {est.system}, {fmt(est.tokens)} tokens")
    if est.search is not None:
        s = est.search
        console.print(
            f"searched {s.plans_evaluated:,} plans in {s.elapsed_s:.2f} s: {s.plans_valid:,} valid, "
            f"{s.plans_fitting:,} fit in memory (global batch {s.global_batch} sequences)"
        )
        console.print(table("best plans", ["#", "plan", "step s", "MFU %", "GiB/GPU"],
                            [[r.rank, _plan_label(r.plan), r.step.step_time_s, r.step.mfu_pct, r.memory_gib] for r in s.best]))
    rows = [["plan", _plan_label(est.plan)], ["step time s", st.step_time_s]]
    rows += [[f"  {k.removesuffix('_s')} s", v] for k, v in st.breakdown_s.items() if v > 0]
    rows += [
        ["tokens/s", st.tokens_per_s], ["model TFLOP/s per GPU", st.tflops_per_gpu_model], ["MFU %", st.mfu_pct],
        ["memory per GPU GiB", est.memory_per_gpu_gib], ["days", est.days], ["GPU-hours", est.gpu_hours],
        ["energy MWh", est.energy_mwh], ["cost USD", est.cost_usd], ["CO2 tonnes", est.co2_tonnes],
    ]
    console.print(table("training estimate", ["quantity", "value"], rows))
    if est.cost_usd is None:
        console.print(f"cost: {est.price_source}")
    else:
        console.print(f"price: {fmt(est.usd_per_gpu_hour)} $/GPU-hour ({est.price_source})")
    if est.search is not None and est.search.why_others_lose:
        console.print("why other choices lose:")
        for line in est.search.why_others_lose:
            console.print(f"  {line}")
