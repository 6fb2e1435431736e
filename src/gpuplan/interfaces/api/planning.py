"""`gpuplan.api` for the main job and the data centre: `plan` (what to build or rent for a model,
how long, how much) and `dc_fabric`, `dc_power`, `dc_tco`, `dc_assumptions` (gpuplan.interfaces.planning.plan)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import DEFAULT_MODEL, DEFAULT_SYSTEM, Result, count, parse_enum
from gpuplan.interfaces.api.fine_tuning_plan import FineTunePlanResult, plan_fine_tuning
from gpuplan.interfaces.api.defaults import (
    DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN, DEFAULT_RATE, DEFAULT_TPOT_MS, DEFAULT_TTFT_MS,
)
from gpuplan.specs import ModelSpec, System

Overrides = Mapping[str, float] | Sequence[str] | None


def assumptions_with(overrides: Overrides = None, **named: float | None):
    """DEFAULT_ASSUMPTIONS with overrides from {KEY: VALUE} or ["KEY=VALUE", ...] and named values (None = keep)."""
    from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, parse_overrides

    table = dict(overrides) if isinstance(overrides, Mapping) else parse_overrides(overrides)
    table.update({k: v for k, v in named.items() if v is not None})
    return DEFAULT_ASSUMPTIONS.with_overrides(table)


def _system_id(system: str | System) -> str:
    return system.id if isinstance(system, System) else system


# ---- plan -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlanResult(Result):
    """`plan`: `report` is interfaces.planning.plan.PlanReport; `html()` the self-contained HTML report;
    `stack` the training stack searched (goal train: api.framework_choice.FrameworkChoice)."""

    report: Any  # gpuplan.interfaces.planning.plan.PlanReport
    stack: Any = None  # gpuplan.interfaces.api.framework_choice.FrameworkChoice (goal train)

    def html(self) -> str:
        from gpuplan.interfaces.planning.plan import html_report

        return html_report(self.report)

    def json_data(self) -> dict:
        """PlanReport.to_dict(); goal train adds `best_plan` (the chosen GPU count's plan, `train --json`'s
        object) and the stack searched: `framework`, `framework_given`, `compile`, `optimizer_impl`,
        `deepspeed_release`, `framework_defaults_assumed` (FrameworkChoice.json)."""
        out = self.report.to_dict()
        est = self.report.estimate
        if self.stack is not None and est is not None:
            from gpuplan.interfaces.api.training import plan_dict

            out["best_plan"] = plan_dict(est.plan)
            out.update(self.stack.json())
        return out


def plan(
    model: str | ModelSpec = DEFAULT_MODEL,
    system: str | System | None = None,
    *,
    goal: str = "train",
    tokens: str | float = "300B",
    gpus: int | None = None,
    days: float = 30.0,
    rate: float = DEFAULT_RATE,
    ttft_ms: float = DEFAULT_TTFT_MS,
    tpot_ms: float = DEFAULT_TPOT_MS,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    years: float = 4.0,
    utilization: float = 0.7,
    cloud_usd_per_gpu_hour: float | None = None,
    system_price_usd: float | None = None,
    overrides: Overrides = None,
    pue: float | None = None,
    grid_kg_co2_per_kwh: float | None = None,
    electricity_usd_per_kwh: float | None = None,
    grid_kg_per_kwh: float | None = None,
    seq_len: int | None = None,
    global_batch: int | None = None,
    progress=None,
    lora_rank: int | None = None,
    lora_targets: str | None = None,
    framework: str | None = None,
    compile: str | None = None,
    optimizer_impl: str | None = None,
    deepspeed_release: str | None = None,
    deterministic: bool = False,
    grad_accum_fusion: bool = True,
) -> PlanResult | FineTunePlanResult:
    """Train (or serve) a model: parallel plan, cluster, fabric, racks, power, cooling, on-prem vs
    cloud cost. Defaults: the seed question, GPT-3 175B for 300B tokens on DGX H100 (`system` None)
    within 30 days. `progress(stage, fraction)`: called as GPU counts are tried.

    `goal="finetune"`: full fine-tuning, LoRA and QLoRA (`lora_rank`, `lora_targets`) compared on
    hardware from a 24 GB card to a DGX for `tokens` (api.fine_tuning_plan; `system` and `gpus`
    replace the hardware ladder, `cloud_usd_per_gpu_hour` the catalog prices).

    Goal train: `framework` (None: the system's), `compile`, `optimizer_impl`, `deepspeed_release`,
    `deterministic` and `grad_accum_fusion` shape every plan search as `train`'s options of the same names
    do (api.framework_choice)."""
    from gpuplan.facilities.assumptions import merge_alias
    from gpuplan.interfaces.planning.plan import Goal, plan as plan_cluster

    goal_enum = parse_enum(Goal, goal, "goal")
    stack_options = {"framework": framework, "compile": compile, "optimizer_impl": optimizer_impl,
                     "deepspeed_release": deepspeed_release, "deterministic": deterministic or None,
                     "no_grad_accum_fusion": (not grad_accum_fusion) or None}
    if goal_enum is not Goal.TRAIN:
        for name, value in stack_options.items():
            if value is not None:
                raise InputError(f"--{name.replace('_', '-')}: only with --goal train (the goal is {goal_enum.value})",
                                 field=name, allowed="goal train")
    if goal_enum is Goal.FINETUNE:
        return plan_fine_tuning(model, tokens, system=None if system is None else _system_id(system), gpus=gpus,
                                seq_len=seq_len, global_batch=global_batch, lora_rank=lora_rank, lora_targets=lora_targets,
                                usd_per_gpu_hour=cloud_usd_per_gpu_hour, progress=progress)
    for name, value in (("lora_rank", lora_rank), ("lora_targets", lora_targets)):
        if value is not None:
            raise InputError(f"--{name.replace('_', '-')}: only with --goal finetune (the goal is {goal_enum.value})",
                             field=name,
                             allowed="goal finetune")
    system = DEFAULT_SYSTEM if system is None else system
    stack = None
    if goal_enum is Goal.TRAIN:
        from gpuplan.interfaces.api._common import resolve_system
        from gpuplan.interfaces.api.framework_choice import framework_choice

        stack = framework_choice(framework, resolve_system(system), compile=compile, optimizer_impl=optimizer_impl,
                                 deepspeed_release=deepspeed_release, deterministic=deterministic,
                                 grad_accum_fusion=grad_accum_fusion)
    rep = plan_cluster(goal_enum, model, _system_id(system), tokens=count(tokens, "tokens"), gpus=gpus,
                       target_days=days, rate_per_s=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, input_len=input_len,
                       output_len=output_len, years=years, utilization=utilization,
                       cloud_usd_per_gpu_hour=cloud_usd_per_gpu_hour, system_price_usd=system_price_usd,
                       assumptions=assumptions_with(
                           overrides, pue=pue, electricity_usd_per_kwh=electricity_usd_per_kwh,
                           grid_kg_co2_per_kwh=merge_alias(grid_kg_co2_per_kwh, grid_kg_per_kwh,
                                                           "--grid-kg-co2-per-kwh", "--grid-kg-per-kwh")),
                       seq_len=seq_len, global_batch=global_batch, progress=progress,
                       framework=stack.framework if stack is not None else None,
                       search_fields=stack.search_fields() if stack is not None else None)
    return PlanResult(rep, stack)


# ---- dc -------------------------------------------------------------------------------------------
def _nodes_or_su(nodes: int | None, scalable_units: float | None) -> tuple[int | None, float | None]:
    """--nodes wins; neither given: one scalable unit."""
    return (nodes, None) if nodes is not None else (None, scalable_units if scalable_units is not None else 1.0)


_FABRIC_KEYS = (
    "system_id", "nodes", "gpus", "rails", "scalable_units", "nodes_per_scalable_unit", "switch_radix_ports",
    "oversubscription", "tiers_count", "leaf_switches", "spine_switches", "core_switches", "switches",
    "node_leaf_cables", "leaf_spine_cables", "spine_core_cables", "cables", "transceivers", "nic_gbit_s",
    "bisection_tbit_s", "bisection_tbps", "scaleout_gbps_per_gpu", "cluster_peak_pflops",
)


@dataclass(frozen=True)
class ClusterResult(Result):
    """`dc_fabric` / `dc_power` / `dc_tco`: `cluster` is interfaces.planning.plan.ClusterReport; `view` picks the JSON."""

    cluster: Any  # gpuplan.interfaces.planning.plan.ClusterReport
    view: str  # "fabric", "power" or "tco"

    def json_data(self) -> dict:
        c = self.cluster
        if self.view == "fabric":
            out = {k: getattr(c.fabric, k) for k in _FABRIC_KEYS}
            out["racks"] = c.racks
        elif self.view == "power":
            out = dict(vars(c.power))
            out.update({"racks": c.racks.racks, "compute_rack_kw": c.racks.compute_rack_kw, "cooling": c.racks.cooling})
        else:
            out = dict(vars(c.tco))
            out["it_power_kw"] = c.power.it_power_kw
            out["prices"] = c.prices
            out["assumptions"] = c.assumptions
        return out


def dc_fabric(system: str | System = DEFAULT_SYSTEM, nodes: int | None = None, *, scalable_units: float | None = None,
              oversubscription: float = 1.0, management_ports: int = 0, radix: int | None = None,
              overrides: Overrides = None) -> ClusterResult:
    """Rail-optimised fat tree: leaf/spine/core switches, cables, transceivers, bisection bandwidth, racks."""
    from gpuplan.interfaces.planning.plan import size_cluster

    n, su = _nodes_or_su(nodes, scalable_units)
    rep = size_cluster(_system_id(system), n, scalable_units=su, oversubscription=oversubscription,
                       management_ports=management_ports, with_tco=False,
                       assumptions=assumptions_with(overrides, switch_radix_ports=radix))
    return ClusterResult(rep, "fabric")


def dc_power(system: str | System = DEFAULT_SYSTEM, nodes: int | None = None, *, scalable_units: float | None = None,
             electricity_usd_per_kwh: float | None = None, pue: float | None = None,
             grid_kg_co2_per_kwh: float | None = None, fabric: bool = True, storage: bool = True,
             overrides: Overrides = None, price_kwh: float | None = None,
             grid_kg_per_kwh: float | None = None, utilization: float | None = None) -> ClusterResult:
    """IT and facility power, annual energy, electricity cost and CO2, at nameplate all year and at
    the average draw of `utilization` (default the assumption energy_utilization_fraction;
    facilities.power). `price_kwh` and `grid_kg_per_kwh` are the old spellings of
    `electricity_usd_per_kwh` and `grid_kg_co2_per_kwh`."""
    from gpuplan.facilities.assumptions import merge_alias
    from gpuplan.interfaces.planning.plan import size_cluster

    n, su = _nodes_or_su(nodes, scalable_units)
    a = assumptions_with(
        overrides, pue=pue,
        electricity_usd_per_kwh=merge_alias(electricity_usd_per_kwh, price_kwh, "--electricity-usd-per-kwh", "--price-kwh"),
        grid_kg_co2_per_kwh=merge_alias(grid_kg_co2_per_kwh, grid_kg_per_kwh, "--grid-kg-co2-per-kwh", "--grid-kg-per-kwh"))
    rep = size_cluster(_system_id(system), n, scalable_units=su, include_fabric=fabric, include_storage=storage,
                       with_tco=False, utilization=utilization, assumptions=a)
    return ClusterResult(rep, "power")


def dc_tco(system: str | System = DEFAULT_SYSTEM, nodes: int | None = None, *, scalable_units: float | None = None,
           years: float = 4.0, utilization: float = 0.7, cloud_usd_per_gpu_hour: float | None = None,
           system_price_usd: float | None = None, electricity_usd_per_kwh: float | None = None,
           pue: float | None = None, overrides: Overrides = None, price_kwh: float | None = None) -> ClusterResult:
    """Cloud vs on-prem: capex, opex, effective $/GPU-hour, breakeven months and utilisation."""
    from gpuplan.facilities.assumptions import merge_alias
    from gpuplan.interfaces.planning.plan import size_cluster

    n, su = _nodes_or_su(nodes, scalable_units)
    a = assumptions_with(overrides, pue=pue, electricity_usd_per_kwh=merge_alias(
        electricity_usd_per_kwh, price_kwh, "--electricity-usd-per-kwh", "--price-kwh"))
    rep = size_cluster(_system_id(system), n, scalable_units=su, years=years, utilization=utilization,
                       cloud_usd_per_gpu_hour=cloud_usd_per_gpu_hour, system_price_usd=system_price_usd, assumptions=a)
    return ClusterResult(rep, "tco")


@dataclass(frozen=True)
class AssumptionsResult(Result):
    """`dc_assumptions`: one row per assumption (key, value, description, source, date)."""

    rows: list

    def json_data(self) -> list:
        return self.rows


def dc_assumptions(overrides: Overrides = None) -> AssumptionsResult:
    """Every facilities / cost assumption with its value, source and date."""
    return AssumptionsResult(assumptions_with(overrides).rows())
