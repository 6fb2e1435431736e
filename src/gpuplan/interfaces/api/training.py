"""`gpuplan.api` for training: `train` (best plan, step time, totals) and `fit_*` (memory per GPU
and its inverse questions). Defaults that used to live in the CLI live here:

- `--seq-len`, `--global-batch`: the model's published recipe (`training_defaults`, catalog.recipes), else
  `default_seq_len(model)` = min(max positions, 4096) and each plan's default batch.
- A given plan (any degree set): unset degrees are 1, dp fills the GPUs (gpus / (tp x pp x cp)),
  micro-batch 1, global batch = `plan_search.default_global_batch` (the multiple of micro_batch x dp
  nearest 2^22 tokens, the rule the plan search uses), sequence parallelism on where tp > 1
  (Megatron-LM's recipes).
- Fine-tuning (`fine_tuning`: LoRA / QLoRA, optimizer, offload, master weights; api.fine_tuning):
  `train` evaluates the given plan (unset degrees as above: tp = pp = 1, dp = all GPUs) rather than
  searching, since fine-tuning stacks (PEFT, torchtune, fsdp_qlora, DeepSpeed) shard by data
  parallelism; `--grad-accum` sets the global batch (micro-batch x grad-accum x dp).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.interfaces.planning.defaults import training_defaults
from gpuplan.interfaces.api._common import (
    DEFAULT_GPU, DEFAULT_MODEL, DEFAULT_SYSTEM, Result, count, default_seq_len, gpu_of, parse_enum, positive,
    resolve_gpu, resolve_model, resolve_system, system_and_gpu,
)
from gpuplan.interfaces.api.fit_record import memory_band, memory_record  # noqa: F401 (api names)
from gpuplan.interfaces.api.compile_option import compile_flags, compile_label
from gpuplan.interfaces.api.fine_tuning import (
    batch_with_grad_accum, fine_tuning_batch_note, fine_tuning_global_batch, fine_tuning_spec,
)
from gpuplan.specs import Gpu, ModelSpec, Precision, Recompute, Sharding, System, TrainPlan
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.interfaces.api.deepspeed_release import framework_json, with_deepspeed_release
from gpuplan.interfaces.api.memory_saving_options import memory_saving_options
from gpuplan.interfaces.api.pipeline_options import pipeline_options
from gpuplan.interfaces.api.megatron_modes import megatron_modes_json, stack_mode_fields

GIB = 2**30
from gpuplan.interfaces.api.defaults import DEFAULT_GPUS, DEFAULT_TOKENS  # noqa: E402,F401


def sequence_parallel_default(tp: int, given: bool | None) -> bool:
    """Sequence parallelism: as given, else on where tp > 1; never with tp = 1 (nothing to split)."""
    return bool(tp > 1 if given is None else given) and tp > 1


def _plan_error(exc: ValidationError) -> InputError:
    """The first error of a TrainPlan as an InputError naming its option (a plan-level rule names the
    option its message starts with: `offload ...`, `master_weights ...`, `global_batch ...`)."""
    err = exc.errors()[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    field = ".".join(str(p) for p in err["loc"])
    if not field:
        first = msg.split(" ", 1)[0].strip("(:,")
        field = first if first in ("offload", "master_weights", "global_batch") else "global_batch"
    return InputError(f"--{field.replace('_', '-')}: {msg}", field=field)


# ---- train ----------------------------------------------------------------------------------------
def plan_dict(plan: TrainPlan) -> dict:
    """The `best_plan` object of `train --json`."""
    return {
        "tp": plan.tp, "pp": plan.pp, "dp": plan.dp, "cp": plan.cp, "ep": plan.ep, "etp": plan.expert_tp, "vpp": plan.vpp,
        "micro_batch": plan.micro_batch, "global_batch": plan.global_batch, "seq_len": plan.seq_len,
        "recompute": plan.recompute.value, "sequence_parallel": plan.sequence_parallel,
        "tp_comm_overlap": plan.tp_comm_overlap, "sharding": plan.sharding.value, "precision": plan.precision.value,
        "compile": compile_label(plan.compiled_model, plan.compiled_loss),  # --compile (api.compile_option)
        "fine_tuning": plan.fine_tuning.model_dump(mode="json"),
        "pipeline_schedule": plan.pipeline_schedule.value, "pipeline_flushes": plan.pipeline_flushes,
        "memory_savings": [m.value for m in plan.memory_savings],
        **megatron_modes_json(plan.deterministic, plan.grad_accum_fusion),  # --deterministic, --no-grad-accum-fusion
        "checkpoint_early_stop": plan.checkpoint_stops_early,  # --checkpoint-early-stop (api.checkpoint_early_stop_option)
        "cuda_graph_scope": sorted(s.value for s in plan.cuda_graph_scope),  # --cuda-graph-scope; [] = no graphs
    }


@dataclass(frozen=True)
class TrainResult(Result):
    """`train`: `estimate` is the workload's TrainingEstimate (plan, step, totals, search); `run` its
    power, energy, CO2 and cost (facilities.run_cost) under `assumptions` (the one set used)."""

    estimate: Any  # gpuplan.workloads.training.totals.TrainingEstimate
    run: Any = None  # gpuplan.facilities.run_cost.RunCost
    assumptions: Any = None  # gpuplan.facilities.assumptions.Assumptions
    moe: bool = False  # whether the model routes experts (the regime of the error band)
    #: set when no global batch was given: how the plan's batch was chosen (`default_batch_note`)
    batch_note: str | None = None
    #: expected time with interruptions, restarts and checkpoints (facilities.goodput.Goodput)
    goodput: Any = None
    #: the MFU comparable published runs reached (interfaces.planning.evidence.mfu_evidence)
    evidence: dict | None = None
    #: the ModelSpec trained (what `gpuplan train --emit` writes into a launch config)
    model_spec: Any = None
    #: the prediction's regime (interfaces.validation.regimes.training_regime): widens the band
    #: where no public row shares its hardware generation, framework, architecture or precision
    regime: Any = None
    #: how a fine-tuning plan's unset options were chosen (its batch, activation checkpointing)
    plan_notes: tuple[str, ...] = ()
    #: whether `--compile` was given (else the framework's default decided it: `framework_defaults_assumed`)
    compile_given: bool = False

    @property
    def defaults_assumed(self) -> list[str]:
        """The framework's defaults the prediction assumed (`--json` key `framework_defaults_assumed`)."""
        from gpuplan.interfaces.api.framework_choice import framework_defaults_assumed

        plan = self.estimate.plan
        return framework_defaults_assumed(self.estimate.step.framework, plan.deepspeed_release, self.compile_given,
                                          plan.fine_tuning.optimizer_impl, plan.fine_tuning.optimizer, plan.cuda_graph_scope)

    def json_data(self) -> dict:
        from gpuplan.facilities.run_cost import run_cost_dict

        est = self.estimate
        st = est.step
        out = {
            "model": est.model, "system": est.system, "num_gpus": est.num_gpus, "tokens": est.tokens,
            "best_plan": plan_dict(est.plan),
            **framework_json(est.step.framework, est.plan),  # the stack timed, its DeepSpeed release
            "framework_defaults_assumed": self.defaults_assumed,  # its defaults: release, compile, optimizer step
            "step_time_s": st.step_time_s,
            "step_breakdown_s": st.breakdown_s,
            "num_micro_batches": st.num_micro_batches,
            "global_batch_sequences": est.plan.global_batch,
            "tokens_per_step": st.tokens_per_step,
            "global_batch_default": self.batch_note is not None,
            "global_batch_note": self.batch_note,
            "plan_notes": list(self.plan_notes),
            "tokens_per_s": st.tokens_per_s,
            "tokens_per_s_per_gpu": st.tokens_per_s_per_gpu,
            "tflops_per_gpu_model": st.tflops_per_gpu_model,
            "model_flops_per_token": st.model_flops_per_token,
            "model_flops_attention_convention": st.model_flops_convention,
            "mfu_pct": st.mfu_pct,
            "memory_per_gpu_gib": est.memory_per_gpu_gib,
            "steps": est.steps, "time_s": est.time_s, "days": est.days, "gpu_hours": est.gpu_hours,
        }
        if self.goodput is not None:  # `days` stays the ideal (failure-free) time: ideal_days == days
            out.update(self.goodput.to_dict())
        if self.evidence is not None:
            out["comparable_published_mfu_pct"] = self.evidence
        if self.run is not None:
            out.update({k: v for k, v in run_cost_dict(self.run).items() if k not in ("hours",)})
        from gpuplan.interfaces.validation.error_bands import training_band

        out["band_80pct"] = training_band(est, self.moe, self.run, self.regime)
        a = self.assumptions
        if a is not None:
            out.update({"pue": a.pue, "grid_kg_co2_per_kwh": a.grid_kg_co2_per_kwh,
                        "grid_kg_per_kwh": a.grid_kg_co2_per_kwh,  # old key, kept for scripts
                        "electricity_usd_per_kwh": a.electricity_usd_per_kwh})
        if est.search is not None:
            s = est.search
            out["search"] = {
                "plans_evaluated": s.plans_evaluated, "plans_valid": s.plans_valid, "plans_fitting": s.plans_fitting,
                "elapsed_s": s.elapsed_s, "rejected": s.rejected, "why_others_lose": list(s.why_others_lose),
                "notes": list(s.notes),
                "top_plans": [
                    {"rank": r.rank, "plan": plan_dict(r.plan), "step_time_s": r.step.step_time_s,
                     "mfu_pct": r.step.mfu_pct, "memory_per_gpu_gib": r.memory_gib}
                    for r in s.best
                ],
            }
        return out


#: the axes the plan search chooses; giving all of them names one plan, a subset constrains the search
SEARCHED_AXES = ("tp", "pp", "cp", "vpp", "micro_batch", "recompute", "sharding", "sequence_parallel")


def _every_axis_given(degrees: dict[str, Any], moe: bool) -> bool:
    """True when the options name one plan: every searched axis (dp may stand for cp), and ep for MoE."""
    given = {k for k, v in degrees.items() if v is not None}
    if "dp" in given:
        given.add("cp")
    if degrees.get("pp") == 1:  # interleaving needs pp > 1 (Megatron-LM arguments.py): vpp is 1
        given.add("vpp")
    if degrees.get("tp") == 1:  # sequence parallelism needs tp > 1: it is off
        given.add("sequence_parallel")
    needed = set(SEARCHED_AXES) | ({"ep"} if moe else set())
    return needed <= given


def _constrained_space(space, gpus: int, degrees: dict[str, Any]):
    """`space` with each given axis fixed (the others searched). dp fixes cp = gpus / (tp pp dp) and so
    needs --tp and --pp; etp is not an axis of the search."""
    d = {k: v for k, v in degrees.items() if v is not None}
    for name in ("tp", "pp", "dp", "cp", "ep", "vpp", "micro_batch"):
        positive(d.get(name), name)
    if "etp" in d:
        raise InputError("etp: give it with every other axis (one plan), or leave it to the search", field="etp")
    if "dp" in d:
        if "tp" not in d or "pp" not in d:
            raise InputError("dp: give --tp and --pp with --dp (cp = gpus / (tp x pp x dp)), or leave dp to the search",
                             field="dp")
        tpp = d["tp"] * d["pp"] * d["dp"]
        if gpus % tpp or ("cp" in d and d["cp"] * tpp != gpus):
            raise InputError(f"dp: tp x pp x dp = {tpp} must divide --gpus {gpus} (times cp)", field="dp")
        d["cp"] = gpus // tpp
    fixed: dict[str, Any] = {k: [d[k]] for k in ("tp", "pp", "cp", "ep", "vpp", "micro_batch") if k in d}
    if "recompute" in d:
        fixed["recompute"] = [parse_enum(Recompute, d["recompute"], "recompute")]
    if "sharding" in d:
        fixed["sharding"] = [parse_enum(Sharding, d["sharding"], "sharding")]
    if "sequence_parallel" in d:
        fixed["sequence_parallel"] = [bool(d["sequence_parallel"])]
    return dataclasses.replace(space, **fixed)


def _given_plan(gpus: int, seq_len: int, global_batch: int | None, precision: Precision, tp_comm_overlap: bool,
                degrees: dict[str, Any], fine_tuning: FineTuning = FineTuning(), grad_accum: int | None = None,
                framework: Framework = Framework.MEGATRON, compiled: tuple[bool, bool] = (False, False)) -> TrainPlan:
    """The one plan `train` evaluates when any degree is given (module docstring defaults), run by
    `framework` (the plan carries it: the memory model reads the plan's framework), `compiled` the
    plan's (compiled_model, compiled_loss) (api.compile_option)."""
    from gpuplan.workloads.training.plan_search import default_global_batch

    d = {k: v for k, v in degrees.items() if v is not None}
    tp, pp, cp = d.get("tp", 1), d.get("pp", 1), d.get("cp", 1)
    for name in ("tp", "pp", "cp", "dp", "ep", "etp", "vpp", "micro_batch"):
        positive(d.get(name), name)
    if gpus % (tp * pp * cp):
        raise InputError(f"--gpus {gpus} is not a multiple of tp x pp x cp = {tp * pp * cp}", field="gpus")
    dp = d.get("dp", gpus // (tp * pp * cp))
    mb = d.get("micro_batch", 1)
    gb = batch_with_grad_accum(mb, dp, global_batch, grad_accum) or (
        default_global_batch(seq_len, dp, mb) if fine_tuning.ordinary else fine_tuning_global_batch(mb, dp))
    try:
        return TrainPlan(
            tp=tp, pp=pp, dp=dp, cp=cp, ep=d.get("ep", 1), etp=d.get("etp"), vpp=d.get("vpp", 1), micro_batch=mb,
            global_batch=gb, seq_len=seq_len, precision=precision,
            recompute=parse_enum(Recompute, d.get("recompute", "none"), "recompute"),
            sharding=parse_enum(Sharding, d.get("sharding", "none"), "sharding"),
            sequence_parallel=sequence_parallel_default(tp, d.get("sequence_parallel")),
            tp_comm_overlap=tp_comm_overlap, fine_tuning=fine_tuning, framework=framework,
            compiled_model=compiled[0], compiled_loss=compiled[1],
        )
    except ValidationError as exc:
        raise _plan_error(exc) from None


def train(
    model: str | ModelSpec = DEFAULT_MODEL,
    system: str | System = DEFAULT_SYSTEM,
    gpus: int = DEFAULT_GPUS,
    *,
    tokens: str | float | None = None,
    flops: str | float | None = None,
    seq_len: int | None = None,
    global_batch: int | None = None,
    precision: str | Precision = Precision.BF16,
    framework: str | Framework | None = None,
    plan: TrainPlan | None = None,
    tp: int | None = None, pp: int | None = None, dp: int | None = None, cp: int | None = None,
    ep: int | None = None, etp: int | None = None, vpp: int | None = None, micro_batch: int | None = None,
    recompute: str | Recompute | None = None, sharding: str | Sharding | None = None,
    sequence_parallel: bool | None = None,
    tp_comm_overlap: bool = False,
    usd_per_gpu_hour: float | None = None,
    pue: float | None = None,
    grid_kg_co2_per_kwh: float | None = None,
    electricity_usd_per_kwh: float | None = None,
    overrides=None,
    grid_kg_per_kwh: float | None = None,
    top: int = 5,
    progress: Callable[[str, float], None] | None = None,
    gpu: str | Gpu | None = None,
    search_limits: dict[str, list] | None = None,
    fine_tuning: FineTuning | dict | None = None,
    grad_accum: int | None = None, deepspeed_release: str | None = None,
    compile: str | None = None,
    deterministic: bool = False, grad_accum_fusion: bool = True,
    pipeline_schedule: str | None = None, pipeline_flushes: int | None = None, memory_savings: str | None = None,
    checkpoint_early_stop: bool | None = None, cuda_graph_scope: str | None = None,
) -> TrainResult:
    """Train `model` on `gpus` GPUs of `system` for `tokens` (default 300B) or a `flops` budget:
    the best parallel plan (searched, or `plan` / the given degrees evaluated), step time, MFU,
    days, GPU-hours, energy, cost and CO2. Power and cost use ONE assumptions set
    (facilities.assumptions: defaults, `overrides` {KEY: VALUE} or ["KEY=VALUE"], then the named
    values; `grid_kg_per_kwh` is the old spelling of `grid_kg_co2_per_kwh`). `gpu`: the system's GPU
    (default: its catalog GPU); a Gpu spec such as a hypothetical variant (`gpuplan sweep`) is used as given.
    `search_limits` {axis: allowed values}: the searched axes keep only those values (the plans a
    launch-config target can state, interfaces.deploy); an axis the options fixed must be one of them.
    `fine_tuning`: LoRA / QLoRA, optimizer, offload, master weights (api.fine_tuning; a FineTuning or a
    dict of its options); such a plan is evaluated, not searched (module docstring). `grad_accum`:
    micro-batches per step (global batch = micro-batch x grad-accum x dp). `deepspeed_release`: interfaces.api.deepspeed_release.
    `compile`: none, model, loss or model+loss under torch.compile (torchtitan only; None: the framework's
    default, off; api.compile_option). `deterministic` / `grad_accum_fusion`: Megatron's deterministic mode and
    gradient-accumulation fusion on the plan(s) (api.megatron_modes). `pipeline_schedule` (1f1b or dualpipe)
    and `pipeline_flushes` (schedule runs per step: stacks that run the pipeline once per local batch) set
    those fields of an evaluated plan (`pipeline_options`); the search runs 1F1B once per step. `memory_savings`
    ('+'-joined or a list): TrainPlan.memory_savings of an evaluated plan (`memory_saving_options`).
    `checkpoint_early_stop`: full AC stops its recompute early (None: the framework's default;
    api.checkpoint_early_stop_option). `cuda_graph_scope`: Megatron CUDA graphs, comma-separated scopes or
    none (api.megatron_modes.cuda_graph_fields; what they remove: workloads.training.step.cuda_graphs)."""
    from gpuplan.facilities.assumptions import assumptions_from_options, memory_scope, merge_alias
    from gpuplan.facilities.run_cost import training_run_cost
    from gpuplan.workloads.training.framework_defaults import default_framework
    from gpuplan.workloads.training.plan_search import SearchSpace, default_batch_note
    from gpuplan.workloads.training.plan_validity import check_plan
    from gpuplan.workloads.training.totals import estimate_training

    positive(gpus, "gpus")
    positive(seq_len, "seq_len")
    positive(top, "top")
    positive(global_batch, "global_batch")
    if tokens is not None and flops is not None:
        raise InputError("give --tokens or --flops, not both", field="tokens")
    pairs = [f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, dict) else overrides
    assumptions = assumptions_from_options(
        pairs, pue=pue, electricity_usd_per_kwh=electricity_usd_per_kwh,
        grid_kg_co2_per_kwh=merge_alias(grid_kg_co2_per_kwh, grid_kg_per_kwh, "--grid-kg-co2-per-kwh", "--grid-kg-per-kwh"))
    spec = resolve_model(model)
    sys_spec = resolve_system(system)
    gpu = gpu_of(sys_spec) if gpu is None else resolve_gpu(gpu)
    prec = parse_enum(Precision, precision, "precision")
    n_tokens = None if flops is not None else count(tokens if tokens is not None else DEFAULT_TOKENS, "tokens")
    budget = count(flops, "flops")
    degrees = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, vpp=vpp, micro_batch=micro_batch, recompute=recompute,
                   sharding=sharding, sequence_parallel=sequence_parallel)
    recipe_note = None
    defaults_notes: list[str] = []  # how a fine-tuning plan's unset options were chosen
    ft = fine_tuning_spec(fine_tuning)
    # None: the system's and the method's stack (framework_defaults.default_framework)
    fw = parse_enum(Framework, framework, "framework") if framework is not None else default_framework(
        sys_spec, ft, parse_enum(Sharding, sharding, "sharding") if sharding is not None else None)
    if framework is None and ft.adapters and fw is not default_framework(sys_spec):
        defaults_notes.append(f"framework {fw.value} assumed: {ft.method.value} runs on PyTorch (PEFT / bitsandbytes); "
                              "Megatron-core has no 4-bit base or PEFT adapters (--framework to change)")
    if plan is not None:
        seq_len = plan.seq_len
    elif not ft.ordinary or grad_accum is not None:
        # fine-tuning (or a batch given by --grad-accum): a pretraining recipe's batch does not apply
        seq_len = default_seq_len(spec) if seq_len is None else seq_len
    else:  # the model's published recipe where one exists (catalog.recipes), else the search's defaults
        seq_len, global_batch, recipe_note = training_defaults(spec, seq_len, global_batch)
    given_degrees = plan is None and any(v is not None for v in degrees.values())
    compiled = compile_flags(compile, fw, ft)
    if plan is not None and compile is not None:
        plan = plan.model_copy(update={"compiled_model": compiled[0], "compiled_loss": compiled[1]})
    space = SearchSpace(global_batch=global_batch, seq_len=seq_len, precision=prec, tp_comm_overlap=tp_comm_overlap,
                        compiled_model=compiled[0], compiled_loss=compiled[1],
                        optimizer_impl=ft.optimizer_impl)
    if plan is None and (not ft.ordinary or grad_accum is not None):
        # fine-tuning (or a batch given by --grad-accum): the one plan of the given degrees (module docstring)
        given_degrees = True
        plan = _given_plan(gpus, seq_len, global_batch, prec, tp_comm_overlap, degrees, ft, grad_accum, fw, compiled)
        if not ft.ordinary and global_batch is None and grad_accum is None:
            defaults_notes.append(fine_tuning_batch_note(plan.global_batch, plan.micro_batch, plan.dp))
        if not ft.ordinary and recompute is None:
            with memory_scope(assumptions):
                plan = _checkpointed_if_needed(spec, plan, gpu, defaults_notes)
        global_batch = plan.global_batch if (grad_accum is not None or not ft.ordinary) else global_batch
    elif given_degrees and _every_axis_given(degrees, spec.moe is not None):
        plan = _given_plan(gpus, seq_len, global_batch, prec, tp_comm_overlap, degrees, ft, framework=fw, compiled=compiled)
    elif given_degrees:  # a subset of the axes: those are fixed, the rest searched
        space = _constrained_space(space, gpus, degrees)
    if search_limits:
        space = _limited_space(space, search_limits)
    space, plan = with_deepspeed_release(space, plan, deepspeed_release, fw)
    modes = stack_mode_fields(deterministic, grad_accum_fusion, cuda_graph_scope, checkpoint_early_stop, fw)
    if modes:
        space = dataclasses.replace(space, **modes)
        plan = plan.model_copy(update=modes) if plan is not None else None
    plan = memory_saving_options(pipeline_options(plan, pipeline_schedule, pipeline_flushes), memory_savings)
    if plan is not None:
        check_plan(spec, plan, gpus)
    with memory_scope(assumptions):  # `--set usable_memory_fraction=` (workloads.memory_headroom)
        est = estimate_training(
            spec, sys_spec, gpus, n_tokens, gpu=gpu, flop_budget=budget, seq_len=seq_len, global_batch=global_batch,
            precision=prec, plan=plan, space=space,
            framework=fw, progress=progress if plan is None else None, top=top,
        )
    run = training_run_cost(est, sys_spec, gpu, assumptions=assumptions, usd_per_gpu_hour=usd_per_gpu_hour)
    batch_note = recipe_note
    if global_batch is None and (plan is None or given_degrees):  # the batch was chosen here, not given
        batch_note = "; ".join(n for n in (recipe_note, default_batch_note(est.plan.global_batch, est.plan.seq_len)) if n)
    from gpuplan.facilities.goodput import training_goodput
    from gpuplan.layers.params import parameter_counts

    goodput = training_goodput(est.time_s, est.num_gpus, parameter_counts(spec).total_with_mtp, assumptions)
    from gpuplan.interfaces.planning.evidence import mfu_evidence
    from gpuplan.interfaces.validation.regimes import training_regime

    evidence = mfu_evidence(gpu.architecture, spec.moe is not None, 12.0 * spec.layers * spec.hidden**2, est.num_gpus,
                            est.step.mfu_pct)
    regime = training_regime(gpu, est.step.framework.value, spec.moe is not None, est.plan.execution.precision)
    from gpuplan.interfaces.planning.evidence import beside_band
    from gpuplan.interfaces.validation.error_bands import training_band

    evidence = beside_band(evidence, est.step.mfu_pct, training_band(est, spec.moe is not None, run, regime).get("mfu_pct"))
    return TrainResult(est, run, assumptions, spec.moe is not None, batch_note, goodput, evidence, spec, regime=regime,
                       plan_notes=tuple(defaults_notes),
                       compile_given=compile is not None or est.plan.compiled_model or est.plan.compiled_loss)


def _checkpointed_if_needed(model: ModelSpec, plan: TrainPlan, gpu, notes: list[str]) -> TrainPlan:
    """A fine-tuning plan given no --recompute: as it is when it fits, else with activation
    checkpointing (`recompute full`: PEFT's prepare_model_for_kbit_training and Answer.AI's
    fsdp_qlora turn it on by default, `use_gradient_checkpointing=True`), said in `notes`."""
    from gpuplan.workloads.training.memory import training_memory

    mem = training_memory(model, plan, gpu)
    if mem.fits is not False or plan.recompute is Recompute.FULL:
        return plan
    notes.append(f"activation checkpointing on (--recompute full): without it the plan needs "
                 f"{mem.per_gpu_bytes['total'] / GIB:,.1f} GiB per GPU (PEFT's prepare_model_for_kbit_training and "
                 f"fsdp_qlora checkpoint by default; give --recompute none to see that plan refused)")
    return plan.model_copy(update={"recompute": Recompute.FULL})


def _limited_space(space, limits: dict[str, list]):
    """`space` with each axis in `limits` restricted to the allowed values (InputError naming the axis
    when an axis the options fixed is not one of them)."""
    changes = {}
    for axis, allowed in limits.items():
        current = getattr(space, axis)
        kept = list(allowed) if current is None else [v for v in current if v in allowed]
        if not kept:
            names = ", ".join(str(getattr(v, "value", v)) for v in allowed)
            raise InputError(f"{axis}: the launch config target states only {names}", field=axis, allowed=names)
        changes[axis] = kept
    return dataclasses.replace(space, **changes)


# ---- fit ------------------------------------------------------------------------------------------
def fit_plan(
    model: ModelSpec, gpus: int | None, *, plan: TrainPlan | None = None, tp: int = 1, pp: int = 1, dp: int | None = None,
    cp: int = 1, ep: int = 1, vpp: int = 1, micro_batch: int = 1, global_batch: int | None = None,
    seq_len: int | None = None, recompute: str | Recompute = Recompute.NONE, sharding: str | Sharding = Sharding.NONE,
    precision: str | Precision = Precision.BF16, grad_precision: str | Precision = Precision.FP32,
    sequence_parallel: bool | None = None, flash_attention: bool = True,
    fine_tuning: FineTuning | dict | None = None, grad_accum: int | None = None, framework: str | Framework | None = None,
    system: System | None = None, compile: str | None = None, pipeline_schedule: str | None = None,
    memory_savings: str | None = None) -> TrainPlan:
    """The TrainPlan of a `fit` question; `gpus` must equal tp x pp x dp x cp (dp derived when not given).
    `fine_tuning`: api.fine_tuning.fine_tuning_spec; `grad_accum`: global batch = micro-batch x grad-accum x dp.
    `framework` None: framework_defaults.default_framework of `system` (None: a GPU alone), the method and sharding.
    `compile`: api.compile_option (the loss's memory depends on it). `pipeline_schedule`, `memory_savings`:
    api.pipeline_options, api.memory_saving_options."""
    from gpuplan.workloads.training.framework_defaults import default_framework
    if plan is not None:
        if gpus is not None and plan.num_gpus != gpus:
            raise InputError(f"--gpus ({gpus}) must equal tp x pp x dp x cp of the plan ({plan.num_gpus})", field="gpus")
        return plan
    for name, v in (("tp", tp), ("pp", pp), ("dp", dp), ("cp", cp), ("ep", ep), ("vpp", vpp),
                    ("micro_batch", micro_batch), ("global_batch", global_batch), ("seq_len", seq_len), ("gpus", gpus)):
        positive(v, name)
    if dp is None:
        if gpus is None:
            dp = 1
        else:
            if gpus % (tp * pp * cp):
                raise InputError(f"--gpus ({gpus}) must be a multiple of tp x pp x cp ({tp} x {pp} x {cp})", field="gpus")
            dp = gpus // (tp * pp * cp)
    if gpus is not None and tp * pp * dp * cp != gpus:
        raise InputError(f"--gpus ({gpus}) must equal tp x pp x dp x cp ({tp} x {pp} x {dp} x {cp} = {tp * pp * dp * cp})",
                         field="gpus")
    ft = fine_tuning_spec(fine_tuning)
    global_batch = batch_with_grad_accum(micro_batch, dp, global_batch, grad_accum)
    shard = parse_enum(Sharding, sharding, "sharding")
    fw = parse_enum(Framework, framework, "framework") if framework is not None else default_framework(system, ft, shard)
    compiled_model, compiled_loss = compile_flags(compile, fw, ft)
    try:
        built = TrainPlan(
            tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, micro_batch=micro_batch, global_batch=global_batch,
            seq_len=seq_len if seq_len is not None else default_seq_len(model),
            recompute=parse_enum(Recompute, recompute, "recompute"), sharding=shard, framework=fw,
            precision=parse_enum(Precision, precision, "precision"),
            grad_precision=parse_enum(Precision, grad_precision, "grad_precision"),
            sequence_parallel=sequence_parallel_default(tp, sequence_parallel),
            attention_kernel=AttentionKernel.FLASH if flash_attention else AttentionKernel.UNFUSED,
            fine_tuning=ft, compiled_model=compiled_model, compiled_loss=compiled_loss,
        )
    except ValidationError as exc:
        raise _plan_error(exc) from None
    return memory_saving_options(pipeline_options(built, pipeline_schedule, None), memory_savings)


@dataclass(frozen=True)
class FitResult(Result):
    """`fit_train`: itemised memory per GPU of one plan (`memory` is the workload's TrainingMemory)."""

    model: ModelSpec
    gpu: Gpu
    plan: TrainPlan
    memory: Any

    def json_data(self) -> dict:
        return memory_record(self.model, self.gpu, self.plan, self.memory)


@dataclass(frozen=True)
class FitMaxResult(Result):
    """`fit_max_batch` / `fit_max_seq`: the largest value that fits (0 = nothing fits) and the memory there."""

    model: ModelSpec
    gpu: Gpu
    plan: TrainPlan
    quantity: str  # "max_micro_batch" or "max_seq_len"
    best: int
    fitted: FitResult | None

    def json_data(self) -> dict:
        rec: dict[str, Any] = {"model": self.model.name, "gpu": self.gpu.id, "num_gpus": self.plan.num_gpus}
        if self.quantity == "max_micro_batch":
            rec["seq_len"] = self.plan.seq_len
        else:
            rec["micro_batch"] = self.plan.micro_batch
        rec[self.quantity] = self.best
        if self.fitted is not None:
            rec["memory"] = self.fitted.json_data()
        return rec


@dataclass(frozen=True)
class MinGpusResult(Result):
    """`fit_min_gpus`: the fewest GPUs and their layout (`answer` None when nothing up to max_gpus fits)."""

    model: ModelSpec
    gpu: Gpu
    max_gpus: int
    answer: Any  # gpuplan.workloads.training.memory MinGpus or None

    @property
    def fitted(self) -> FitResult | None:
        a = self.answer
        return None if a is None else FitResult(self.model, self.gpu, a.plan, a.memory)

    def json_data(self) -> dict:
        a = self.answer
        if a is None:
            return {"model": self.model.name, "gpu": self.gpu.id, "min_gpus": None, "max_gpus_searched": self.max_gpus}
        return {"model": self.model.name, "gpu": self.gpu.id, "min_gpus": a.num_gpus, "layouts_tried": a.layouts_tried,
                "plan": a.plan.model_dump(mode="json"), "memory": self.fitted.json_data()}


def _fit_inputs(model, gpu, system, gpus, plan_kw) -> tuple[ModelSpec, Gpu, TrainPlan]:
    """The model, the GPU whose memory is the budget (`--gpu`, or `--system`'s GPU; default
    h100-sxm5-80gb) and the plan."""
    spec = resolve_model(model)
    node, g = (None, resolve_gpu(gpu if gpu is not None else DEFAULT_GPU)) if system is None else system_and_gpu(system, gpu)
    return spec, g, fit_plan(spec, gpus, system=node, **plan_kw)


def fit_train(model: str | ModelSpec, gpu: str | Gpu | None = None, gpus: int | None = None, *,
              system: str | System | None = None, **plan_kw: Any) -> FitResult:
    """Itemised training memory per GPU (weights, gradients, optimizer, activations, other), fits or
    not, headroom. `plan_kw`: `plan=TrainPlan(...)` or the fields of `fit_plan` (tp, pp, dp, ...)."""
    from gpuplan.workloads.training.memory import training_memory

    spec, g, plan = _fit_inputs(model, gpu, system, gpus, plan_kw)
    return FitResult(spec, g, plan, training_memory(spec, plan, g))


def fit_max_batch(model: str | ModelSpec, gpu: str | Gpu | None = None, gpus: int | None = None, *,
                  system: str | System | None = None, **plan_kw: Any) -> FitMaxResult:
    """Largest micro-batch that fits on the given GPUs and layout (global batch keeps its micro-batches in flight)."""
    from gpuplan.workloads.training.fit import max_micro_batch
    from gpuplan.workloads.training.memory import training_memory

    spec, g, plan = _fit_inputs(model, gpu, system, gpus, plan_kw)
    best = max_micro_batch(spec, plan, g)
    fitted = None
    if best:
        steps = plan.grad_accum_steps if plan.global_batch is not None else None
        p = plan.model_copy(update={"micro_batch": best, "global_batch": None if steps is None else steps * best * plan.dp})
        fitted = FitResult(spec, g, p, training_memory(spec, p, g))
    return FitMaxResult(spec, g, plan, "max_micro_batch", best, fitted)


def fit_max_seq(model: str | ModelSpec, gpu: str | Gpu | None = None, gpus: int | None = None, *,
                system: str | System | None = None, **plan_kw: Any) -> FitMaxResult:
    """Longest sequence (multiple of 128) that fits on the given GPUs and layout."""
    from gpuplan.workloads.training.fit import max_seq_len
    from gpuplan.workloads.training.memory import training_memory

    spec, g, plan = _fit_inputs(model, gpu, system, gpus, plan_kw)
    best = max_seq_len(spec, plan, g)
    fitted = None
    if best:
        p = plan.model_copy(update={"seq_len": best})
        fitted = FitResult(spec, g, p, training_memory(spec, p, g))
    return FitMaxResult(spec, g, plan, "max_seq_len", best, fitted)


def fit_min_gpus(model: str | ModelSpec, gpu: str | Gpu | None = None, max_gpus: int = 16384, *,
                 system: str | System | None = None, progress=None, **plan_kw: Any) -> MinGpusResult:
    """Fewest GPUs, with a tp/pp/dp layout, that fit (cp, ep, recompute, sharding, batch from `plan_kw`);
    `progress(GPUs reached, max_gpus)` as counts are tried."""
    from gpuplan.workloads.training.fit import min_gpus

    positive(max_gpus, "max_gpus")
    spec, g, plan = _fit_inputs(model, gpu, system, None, plan_kw)
    return MinGpusResult(spec, g, max_gpus, min_gpus(spec, plan, g, max_gpus=max_gpus, progress=progress))
