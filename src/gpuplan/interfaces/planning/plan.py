"""`gpuplan plan` and `gpuplan dc`: one call from "this model, this system" to a costed cluster.

`size_cluster` turns a system and a node count into fabric, racks, power and TCO (the `dc`
commands). `plan` answers "I want to train (or serve) this model: what do I build or rent, how
long, how much?": it asks the training workload for the run (`estimate_training`) or the serving
workload for the deployment, sizes the cluster around it with `size_cluster`, and prices the
workload on-prem vs cloud. With no arguments it is the seed question "design a DGX-based
infrastructure for training a 175B parameter model": GPT-3 175B on DGX H100, 300B tokens.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping

from gpuplan.catalog import load_catalog
from gpuplan.errors import Infeasible, InputError
from gpuplan.facilities.assumptions import Assumptions, DEFAULT_ASSUMPTIONS, memory_scope
from gpuplan.facilities.fabric import FabricDesign, design_fabric
from gpuplan.facilities.power import PowerEstimate, estimate_power, has_power_figures
from gpuplan.facilities.pricing import cloud_price, gpu_hour_price, system_price
from gpuplan.facilities.racks import RackLayout, rack_layout
from gpuplan.facilities.tco import TcoEstimate, estimate_tco, workload_cost_usd
from gpuplan.facilities.run_cost import RunCost, run_cost_dict, serving_day_cost, training_run_cost
from gpuplan.interfaces.validation.error_bands import training_band
from gpuplan.models import load_model
from gpuplan.specs import ModelSpec


class Goal(str, Enum):
    TRAIN = "train"
    SERVE = "serve"
    FINETUNE = "finetune"  # methods x hardware for a fine-tuning job (gpuplan.api.fine_tuning_plan)


DEFAULT_MODEL = "gpt3-175b"
DEFAULT_SYSTEM = "dgx-h100"
DEFAULT_TOKENS = 300e9  # GPT-3 was trained on 300B tokens (Brown et al. 2020, Table 2.1)
DEFAULT_TARGET_DAYS = 30.0


@dataclass(frozen=True)
class ClusterReport:
    system_id: str
    gpu_id: str
    fabric: FabricDesign
    racks: RackLayout | None  # None with `power`: racks are sized by node power
    power: PowerEstimate | None  # None where the GPU has no published power (`power_reason`)
    tco: TcoEstimate | None
    assumptions: list[dict]
    prices: list[dict]
    cost_reason: str | None = None  # why `tco` is None when a TCO was asked for (a price or power no one knows)
    power_reason: str | None = None  # why `power` and `racks` are None


def size_cluster(
    system_id: str,
    nodes: int | None = None,
    *,
    scalable_units: float | None = None,
    oversubscription: float = 1.0,
    management_ports: int = 0,
    include_fabric: bool = True,
    include_storage: bool = True,
    years: float = 4.0,
    utilization: float | None = None,
    cloud_usd_per_gpu_hour: float | None = None,
    system_price_usd: float | None = None,
    with_tco: bool = True,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
    price_required: bool = True,
) -> ClusterReport:
    """Fabric, racks, power (and TCO) of `nodes` nodes of a catalog system; `utilization` (default the
    assumption energy_utilization_fraction) sets both the average power draw and the TCO's GPU-hours.
    With `price_required=False` (the main job, `plan`), what no one publishes never blocks the rest of
    the answer: without a node or cloud price (and none given) `tco` is None with the reason in
    `cost_reason`; without the GPU's power (TPU v5e / v5p / v6e) `power`, `racks` and `tco` are None
    with the reason in `power_reason`."""
    if utilization is None:
        utilization = assumptions.energy_utilization_fraction
    cat = load_catalog()
    system = cat.system(system_id)
    gpu = cat.gpu(system.gpu)
    fabric = design_fabric(
        system, gpu, nodes, scalable_units=scalable_units, oversubscription=oversubscription,
        management_ports=management_ports, assumptions=assumptions,
    )
    if not price_required and not has_power_figures(system, gpu):  # power (and so racks, TCO) unknown
        reason = (f"no tdp_w in the catalog for '{gpu.id}' (its vendor publishes no power figure): power, racks"
                  f" and TCO not sized; give tdp_w in a --catalog file entry")
        return ClusterReport(system.id, gpu.id, fabric, None, None, None, assumptions.rows(), [],
                             cost_reason=reason, power_reason=reason)
    racks = rack_layout(system, gpu, fabric.nodes, fabric.switches, assumptions)
    power = estimate_power(
        system, gpu, fabric.nodes, fabric.switches,
        include_fabric=include_fabric, include_storage=include_storage, utilization=utilization,
        assumptions=assumptions,
    )
    tco = None
    prices: list[dict] = []
    if with_tco:
        try:
            sys_price = system_price(system, gpu, system_price_usd)
            cloud, _ = cloud_price(gpu, cat.cloud_prices(gpu.id), cloud_usd_per_gpu_hour)
        except InputError as exc:
            if price_required or exc.field not in ("system_price_usd", "cloud_usd_per_gpu_hour"):
                raise
            return ClusterReport(system.id, gpu.id, fabric, racks, power, None, assumptions.rows(), prices,
                                 cost_reason=str(exc).split(": ", 1)[-1])
        tco = estimate_tco(
            fabric=fabric, racks=racks, power=power, system_price=sys_price, cloud_price=cloud,
            years=years, utilization=utilization, assumptions=assumptions,
        )
        tco = with_cloud_comparison(tco, cat.cloud_prices(gpu.id, None), given=cloud_usd_per_gpu_hour is not None)
        prices = [sys_price.as_row(), cloud.as_row()] + [
            {"key": p.id, "value": p.usd_per_gpu_hour, "description": f"{p.provider} {p.instance} {getattr(p, 'pricing_model', '')}",
             "source": "catalog clouds.toml", "date": p.date}
            for p in cat.cloud_prices(gpu.id)
        ]
    return ClusterReport(system.id, gpu.id, fabric, racks, power, tco, assumptions.rows(), prices)


def with_cloud_comparison(tco, prices, *, given: bool):
    """`tco` with its like-for-like cloud rows (facilities.cloud_comparison) and the reserved price
    beside the headline: the headline provider's own reservation, else another's, labelled."""
    from dataclasses import replace

    from gpuplan.facilities.cloud_comparison import compare_clouds, option_label, reserved_beside

    options = compare_clouds(tco, prices)
    on_demand = [o for o in options if o.pricing_model == "on-demand"]
    provider = None if given or not on_demand else min(on_demand, key=lambda o: o.usd_per_gpu_hour).provider
    reserved, same = reserved_beside(options, provider)
    if reserved is None:
        return replace(tco, cloud_comparison=options)
    return replace(tco, cloud_comparison=options, cloud_reserved_usd_per_gpu_hour=reserved.usd_per_gpu_hour,
                   cloud_reserved_total_usd=reserved.cloud_total_usd, cloud_reserved_label=option_label(reserved),
                   cloud_reserved_same_provider=same)


# ---- the main job -------------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkloadSummary:
    goal: Goal
    model: str
    estimator: str  # which workload model produced the figures
    gpus: int
    days: float | None
    gpu_hours: float | None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanReport:
    goal: Goal
    model: str
    system_id: str
    workload: WorkloadSummary
    cluster: ClusterReport
    workload_cost: dict[str, float]
    answer: str
    notes: tuple[str, ...]
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS  # the one set every figure of the report used
    training_run: RunCost | None = None  # energy, CO2 and cost of the training run (goal train)
    serving_day: RunCost | None = None  # energy, CO2 and cost of one day of serving (goal serve)
    band_80pct: dict | None = None  # the training run's 80% band (interfaces.validation.error_bands.training_band)
    estimate: Any = None  # workloads.training.totals.TrainingEstimate of the chosen run (goal train): plan, step

    def to_dict(self) -> dict:
        """The `plan --json` document: ONE `assumptions` object (pue, grid_kg_co2_per_kwh,
        electricity_usd_per_kwh, ...) from which `power` (the cluster) and `training_run` were computed."""
        c, w, t = self.cluster, self.workload, self.cluster.tco
        shared = ("pue", "grid_kg_co2_per_kwh", "electricity_usd_per_kwh")  # in `assumptions`, not repeated
        return {
            "goal": self.goal, "model": self.model, "system": self.system_id, "answer": self.answer, "notes": self.notes,
            "estimator": w.estimator, "gpus": c.fabric.gpus, "nodes": c.fabric.nodes, "days": w.days,
            "gpu_hours": w.gpu_hours, "workload_details": w.details,
            # training: `days` is the ideal (failure-free) time; facilities.goodput adds the expectation
            **{k: w.details.get(k) for k in ("ideal_days", "expected_days", "goodput_pct", "checkpoint_interval_s",
                                             "comparable_published_mfu_pct") if self.goal is Goal.TRAIN},
            "fabric": {k: getattr(c.fabric, k) for k in ("leaf_switches", "spine_switches", "core_switches", "cables",
                                                       "transceivers", "bisection_tbps", "tiers_count", "switches")},
            "racks": c.racks,
            "power": {k: v for k, v in vars(c.power).items() if k not in shared} if c.power is not None else None,
            "power_reason": c.power_reason,
            "training_run": run_cost_dict(self.training_run) if self.training_run is not None else None,
            "serving_day": run_cost_dict(self.serving_day) if self.serving_day is not None else None,
            "band_80pct": self.band_80pct,
            "tco": {k: getattr(t, k) for k in ("capex_usd", "opex_usd_per_year", "on_prem_usd_per_gpu_hour",
                                             "cloud_usd_per_gpu_hour", "breakeven_months", "breakeven_utilization",
                                             "capex_breakdown_usd", "opex_breakdown_usd_per_year", "savings_usd",
                                             "cloud_price_source", "cloud_reserved_usd_per_gpu_hour",
                                             "cloud_reserved_label", "cloud_reserved_same_provider",
                                             "cloud_comparison")} if t else None,
            "workload_cost_usd": self.workload_cost if t else None, "cost_reason": c.cost_reason, "prices": c.prices,
            "assumptions": self.assumptions.values(),
            "assumption_sources": c.assumptions,
        }


def _training_summary(model, system, gpu, gpus: int, tokens: float, seq_len: int | None = None,
                      global_batch: int | None = None, framework=None, search_fields: Mapping[str, Any] | None = None):
    """The training run from the step-time model and plan search (`estimate_training`): (summary, estimate).
    `seq_len` defaults to min(max positions, 4096); `global_batch` (sequences) to each plan's
    `default_global_batch` (the multiple of dp x micro-batch nearest 2^22 tokens), plans then ranked
    by time per token. `framework` (None: the system's) and `search_fields` (SearchSpace fields:
    compiled parts, optimizer implementation, DeepSpeed release) are `train`'s for the same options
    (interfaces.api.framework_choice)."""
    from gpuplan.workloads.training.step.expert import ep_regime
    from gpuplan.workloads.training.plan_search import SearchSpace, default_seq_len
    from gpuplan.workloads.training.totals import estimate_training

    seq = seq_len or default_seq_len(model)
    # top=1: the report reads the best plan only (an exact memory check per plan kept; 7 searches on defaults)
    est = estimate_training(model, system, gpus, tokens, gpu=gpu, seq_len=seq, global_batch=global_batch,
                            space=SearchSpace(seq_len=seq, global_batch=global_batch, **(search_fields or {})),
                            framework=framework, top=1)
    details = {
        "step_time_s": est.step.step_time_s,
        "tokens_per_s": est.step.tokens_per_s,
        "mfu_pct": est.step.mfu_pct,
        "memory_per_gpu_gib": est.memory_per_gpu_gib,
        "activity_fraction": est.activity_fraction,
        "plan": _plan_text(est.plan),
        "global_batch_sequences": est.plan.global_batch,
        "tokens_per_step": est.step.tokens_per_step,
        "global_batch_default": global_batch is None,
    }
    if model.moe is not None:  # where the chosen plan's expert all-to-all runs (NVLink domain or network)
        details["ep_regime"] = ep_regime(est.plan.ep, est.plan.expert_tp, system.scaleup_domain_gpus)
    return WorkloadSummary(Goal.TRAIN, model.name, "gpuplan.workloads.training.estimate_training", gpus, est.days,
                           est.gpu_hours, details), est


def _plan_text(plan) -> str:
    return (f"tp={plan.tp} pp={plan.pp} dp={plan.dp} cp={plan.cp} ep={plan.ep} vpp={plan.vpp} "
            f"mb={plan.micro_batch} recompute={plan.recompute.value} sharding={plan.sharding.value}")


def _serving_summary(model, system, gpu, rate_per_s: float, *, ttft_ms: float, tpot_ms: float,
                     input_len: int, output_len: int) -> WorkloadSummary:
    """The fewest GPUs of the system's type serving `rate_per_s` within the p90 TTFT/TPOT objectives
    (`plan_capacity`, simulated); GPU-hours are per day of serving."""
    from gpuplan.workloads.inference.plan.capacity import plan_capacity

    known = gpu_hour_price(gpu, required=False)
    price = known.value if known is not None else None
    cap = plan_capacity(model, [(gpu, system, price)], rate=rate_per_s, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                        input_len=input_len, output_len=output_len)
    best = cap.best
    details = {
        "tp": best.tp, "replicas": best.replicas, "concurrency_per_replica": best.concurrency,
        "ttft_p90_ms": best.ttft_p90_ms, "tpot_p90_ms": best.tpot_p90_ms,
        "replica_output_tokens_per_s": best.replica_output_tokens_per_s,
        "usd_per_million_output_tokens": best.usd_per_million_output_tokens,
        "usd_per_million_input_tokens": best.usd_per_million_input_tokens,
        "usd_per_million_output_tokens_decode": best.usd_per_million_output_tokens_decode,
        "usd_per_request": best.usd_per_request, "prefill_time_fraction": best.prefill_time_fraction,
        "gpu_hours_are": "per day of serving",
    }
    return WorkloadSummary(Goal.SERVE, model.name, "gpuplan.workloads.inference.plan_capacity", best.gpus, None,
                           best.gpus * 24.0, details)


#: GPU counts of the first pass: whole nodes x 2^k, 8 ... 8,192 nodes (64 ... 65,536 GPUs of 8-GPU nodes)
LADDER_NODE_EXPONENTS = range(3, 14)
#: searches that narrow the bracket between the last count of the ladder that misses the target and
#: the first that meets it: each halves it, so 6 steps land within 1/64 of the doubling (~1.6%)
REFINE_STEPS = 6


def roundest_between(lo: int, hi: int) -> int | None:
    """The integer strictly between `lo` and `hi` with the most factors of two (None if there is none).

    There is exactly one: take the largest power of two p with a multiple in (lo, hi); two
    multiples would be consecutive and one of them a multiple of 2p. Node counts found this way are
    the ones a layout divides best (384 = 3 x 128 nodes between 256 and 512), found by arithmetic."""
    if hi - lo < 2:
        return None
    p = 1 << (hi - lo).bit_length()
    while p > 1 and (lo // p + 1) * p >= hi:
        p //= 2
    return (lo // p + 1) * p


def _smallest_cluster(model, system, gpu, tokens: float, target_days: float, seq_len, global_batch, progress=None,
                      framework=None, search_fields: Mapping[str, Any] | None = None):
    """The fewest GPUs in whole nodes that train within `target_days`: (summary, estimate, counts tried).

    First the ladder nodes x 2^k (`LADDER_NODE_EXPONENTS`) up to the first count that meets the
    target; then a bisection over every whole-node count between that count and the ladder's
    previous one (`roundest_between` picks the next node count by arithmetic), `REFINE_STEPS`
    searches at most. Training days fall with GPUs but not strictly (a count whose factors suit no
    layout is slower), so the answer is the smallest count *tried* that meets the target: within
    ~2% of the smallest such count, and never a count the search did not evaluate. `framework` and
    `search_fields`: `_training_summary`'s."""
    gpn = system.gpus_per_node
    total_steps = len(LADDER_NODE_EXPONENTS) + REFINE_STEPS
    tried: list[int] = []

    def attempt(nodes: int):
        if progress:
            progress(f"{nodes * gpn:,} GPUs", len(tried) / total_steps)
        tried.append(nodes * gpn)
        try:
            return _training_summary(model, system, gpu, nodes * gpn, tokens, seq_len, global_batch, framework,
                                     search_fields)
        except Infeasible:
            return None

    def meets(result) -> bool:
        return result is not None and result[0].days is not None and result[0].days <= target_days

    lo_nodes, best, best_nodes, last = 0, None, None, None
    for k in LADDER_NODE_EXPONENTS:
        result = attempt(2**k)
        if result is not None:
            last = result
        if meets(result):
            best, best_nodes = result, 2**k
            break
        lo_nodes = 2**k
    if best is None:
        if last is None:
            raise Infeasible(f"model: no cluster up to {2 ** LADDER_NODE_EXPONENTS[-1] * gpn:,} GPUs can train {model.name}")
        return (*last, tried)
    for _ in range(REFINE_STEPS):
        nodes = roundest_between(lo_nodes, best_nodes)
        if nodes is None:
            break
        result = attempt(nodes)
        if meets(result):
            best, best_nodes = result, nodes
        else:
            lo_nodes = nodes
    return (*best, tried)


def _round_up_nodes(gpus: int, gpus_per_node: int) -> int:
    return max(1, math.ceil(gpus / gpus_per_node))


def plan(
    goal: Goal = Goal.TRAIN,
    model_id: str | ModelSpec = DEFAULT_MODEL,
    system_id: str = DEFAULT_SYSTEM,
    *,
    tokens: float = DEFAULT_TOKENS,
    gpus: int | None = None,
    target_days: float = DEFAULT_TARGET_DAYS,
    rate_per_s: float = 10.0,
    ttft_ms: float = 2000.0,
    tpot_ms: float = 50.0,
    input_len: int = 2048,
    output_len: int = 256,
    years: float = 4.0,
    utilization: float = 0.7,
    cloud_usd_per_gpu_hour: float | None = None,
    system_price_usd: float | None = None,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
    seq_len: int | None = None,
    global_batch: int | None = None,
    progress=None,
    framework=None,
    search_fields: Mapping[str, Any] | None = None,
) -> PlanReport:
    """Size and cost a cluster for one workload. Training: with `gpus` given, that many; otherwise the
    smallest whole-node GPU count found that finishes in `target_days` (`_smallest_cluster`).
    `progress(stage, fraction)` is called as GPU counts are tried. Training: `framework` (None: the
    system's) and `search_fields` (plan_search.SearchSpace fields) shape every search as `train`'s
    options do (interfaces.api.framework_choice). See module docstring."""
    if tokens <= 0:
        raise InputError("tokens: must be > 0", field="tokens")
    if target_days <= 0:
        raise InputError("days: must be > 0", field="days")
    cat = load_catalog()
    system = cat.system(system_id)
    gpu = cat.gpu(system.gpu)
    model = model_id if isinstance(model_id, ModelSpec) else load_model(model_id)
    model_id = model.name if isinstance(model_id, ModelSpec) else model_id
    notes: list[str] = []
    est = None
    with memory_scope(assumptions):  # `--set usable_memory_fraction=` (workloads.memory_headroom)
        if goal is Goal.TRAIN:
            from gpuplan.interfaces.planning.defaults import training_defaults

            seq_len, global_batch, recipe_note = training_defaults(model, seq_len, global_batch)
            if recipe_note:
                notes.append(recipe_note)
            if gpus is not None:
                if gpus < 1:
                    raise InputError("gpus: must be >= 1", field="gpus")
                work, est = _training_summary(model, system, gpu, gpus, tokens, seq_len, global_batch, framework,
                                              search_fields)
            else:
                work, est, tried = _smallest_cluster(model, system, gpu, tokens, target_days, seq_len, global_batch,
                                                     progress, framework, search_fields)
                work.details["gpu_counts_tried"] = ", ".join(f"{n:,}" for n in tried)
                if work.days is not None and work.days > target_days:
                    notes.append(f"even {work.gpus} GPUs need {work.days:.1f} days (> target {target_days:g})")
                    # a given batch caps dp (the default one grows with dp: at least a sequence per rank)
                    if est is not None and est.search is not None and global_batch is not None:
                        gb, seq = est.search.global_batch, est.plan.seq_len
                        notes.append(f"the global batch of {gb:,} sequences x {seq:,} tokens caps data parallelism; "
                                     "a larger --global-batch lets more GPUs work on one step (Llama 3 405B: 16M "
                                     "tokens after 2.87T, Dubey et al. 2024, sec. 3.4.1)")
            if global_batch is None and est is not None:  # how the chosen plan's batch was set
                from gpuplan.workloads.training.plan_search import default_batch_note

                notes.append(default_batch_note(est.plan.global_batch, est.plan.seq_len))
        else:
            work = _serving_summary(model, system, gpu, rate_per_s, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                                    input_len=input_len, output_len=output_len)
    nodes = _round_up_nodes(work.gpus, system.gpus_per_node)
    cluster = size_cluster(
        system.id, nodes, years=years, utilization=utilization, cloud_usd_per_gpu_hour=cloud_usd_per_gpu_hour,
        system_price_usd=system_price_usd, assumptions=assumptions, price_required=False,
    )
    cost = workload_cost_usd(work.gpu_hours or 0.0, cluster.tco) if cluster.tco else {}
    if cluster.power_reason:
        notes.append(f"power: {cluster.power_reason} (power, racks and cost fields null)")
    elif cluster.cost_reason:
        notes.append(f"cost: {cluster.cost_reason} (cost fields null)")
    run = band = None
    if est is not None:  # the run on this cluster: same power model, PUE, grid and switches as `cluster.power`
        run = training_run_cost(est, system, gpu, assumptions=assumptions, switches=cluster.fabric.switches,
                                usd_per_gpu_hour=cloud_usd_per_gpu_hour)
        if run.energy is not None:
            work.details["energy_mwh"] = run.energy.energy_mwh
        from gpuplan.facilities.goodput import training_goodput
        from gpuplan.layers.params import parameter_counts

        goodput = training_goodput(est.time_s, est.num_gpus, parameter_counts(model).total_with_mtp, assumptions)
        work.details.update(goodput.to_dict())
        from gpuplan.interfaces.planning.evidence import beside_band, mfu_evidence
        from gpuplan.interfaces.validation.regimes import training_regime

        evidence = mfu_evidence(gpu.architecture, model.moe is not None, 12.0 * model.layers * model.hidden**2,
                                est.num_gpus, est.step.mfu_pct)
        band = training_band(est, model.moe is not None, run,
                             training_regime(gpu, est.step.framework.value, model.moe is not None,
                                             est.plan.execution.precision))
        evidence = beside_band(evidence, est.step.mfu_pct, band.get("mfu_pct"))
        work.details["comparable_published_mfu_pct"] = evidence
        notes.append(f"evidence: {evidence['note']}")
        if band.get("days"):
            lo, hi = band["days"]
            work.details["days_80pct_band"] = f"{lo:.1f} - {hi:.1f}"
            if band.get("novelty", "seen") != "seen":
                notes.append(f"{band['reason']}: the band is the error of public rows predicted with that held out")
            elif not band["validated"]:
                notes.append(f"regime {band['regime']} borrowed for this model: no validation rows of its own "
                             "(an extrapolation)")
    day = None
    if goal is Goal.SERVE:  # a day of serving on this cluster's GPUs, same model and assumptions
        day = serving_day_cost(system, gpu, work.gpus, switches=cluster.fabric.switches, assumptions=assumptions,
                               usd_per_gpu_hour=cloud_usd_per_gpu_hour)
    t = cluster.tco
    answer = (
        f"{'Train' if goal is Goal.TRAIN else 'Serve'} {model_id} on {nodes} x {system.id} ({cluster.fabric.gpus} GPUs"
        + (f", {work.days:.1f} days" if work.days is not None else "")
        + (f" ideal, {work.details['expected_days']:.1f} expected at {work.details['goodput_pct']:.0f}% goodput"
           if work.details.get("expected_days") is not None else "")
        + f"): {cluster.fabric.leaf_switches} leaf / {cluster.fabric.spine_switches} spine / {cluster.fabric.core_switches} core switches"
        + (f", {cluster.racks.racks} racks ({cluster.racks.cooling.value}), {cluster.power.facility_power_kw:,.0f} kW facility power"
           if cluster.power is not None else " (power not sized: no published power figure)")
        + (f" ({run.energy.energy_mwh:,.0f} MWh and {run.energy.co2_tonnes:,.0f} t CO2 for the run at PUE {assumptions.pue:g})"
           if run is not None and run.energy is not None else "")
        + (
            f"; the run costs ${cost['on_prem_usd']:,.0f} on-prem (at {t.on_prem_usd_per_gpu_hour:.2f} $/GPU-h) vs "
            f"${cost['cloud_usd']:,.0f} in the cloud (at {t.cloud_usd_per_gpu_hour:.2f} $/GPU-h); buying the cluster "
            + (f"breaks even after {t.breakeven_months:.1f} months at {t.utilization:.0%} utilisation" if t.breakeven_months else "never breaks even")
            if t and work.gpu_hours
            else ""
        )
    )
    return PlanReport(goal, model_id, system.id, work, cluster, cost, answer, tuple(notes), assumptions, run, day,
                      band if est is not None else None, est)


# ---- HTML report ----------------------------------------------------------------------------------

def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def html_report(report: PlanReport) -> str:
    """A self-contained HTML page: the answer, capex / opex bars, cumulative cost vs cloud, assumptions."""
    import html

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = report.cluster
    imgs = []
    if c.tco:
        t = c.tco
        fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
        ax[0].bar(list(t.capex_breakdown_usd), [v / 1e6 for v in t.capex_breakdown_usd.values()])
        ax[0].set_title("capex (M$)")
        ax[1].bar(list(t.opex_breakdown_usd_per_year), [v / 1e6 for v in t.opex_breakdown_usd_per_year.values()])
        ax[1].set_title("opex per year (M$)")
        imgs.append(_png(fig))
        plt.close(fig)
        months = list(range(0, int(12 * t.years) + 1))
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(months, [(t.capex_usd + t.opex_usd_per_year / 12 * m) / 1e6 for m in months], label="on-prem (cumulative)")
        ax.plot(months, [t.cloud_usd_per_gpu_hour * t.gpus * 730 * t.utilization * m / 1e6 for m in months], label="cloud (cumulative)")
        ax.set_xlabel("months")
        ax.set_ylabel("M$")
        ax.legend()
        imgs.append(_png(fig))
        plt.close(fig)
    rows = "".join(
        f"<tr><td>{html.escape(str(r['key']))}</td><td>{r['value']:,.4g}</td><td>{html.escape(r['description'])}</td>"
        f"<td>{html.escape(r['source'])}</td><td>{html.escape(str(r['date']))}</td></tr>"
        for r in c.assumptions + c.prices
    )
    images = "".join(f'<img src="data:image/png;base64,{b}"/>' for b in imgs)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>gpuplan plan</title></head><body>"
        f"<h1>gpuplan plan: {html.escape(report.model)} on {html.escape(report.system_id)}</h1>"
        f"<p>{html.escape(report.answer)}</p>{images}"
        "<h2>Assumptions</h2><table border=1><tr><th>key</th><th>value</th><th>what</th><th>source</th><th>date</th></tr>"
        f"{rows}</table></body></html>"
    )
