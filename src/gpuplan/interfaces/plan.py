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
import importlib
import io
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from gpuplan.catalog import load_catalog
from gpuplan.errors import GpuplanError, Infeasible, InputError
from gpuplan.facilities.assumptions import Assumptions, DEFAULT_ASSUMPTIONS
from gpuplan.facilities.fabric import FabricDesign, design_fabric
from gpuplan.facilities.power import PowerEstimate, estimate_power
from gpuplan.facilities.pricing import cloud_price, system_price
from gpuplan.facilities.racks import RackLayout, node_power_w, rack_layout
from gpuplan.facilities.tco import TcoEstimate, estimate_tco, workload_cost_usd


class Goal(str, Enum):
    TRAIN = "train"
    SERVE = "serve"


DEFAULT_MODEL = "gpt3-175b"
DEFAULT_SYSTEM = "dgx-h100"
DEFAULT_TOKENS = 300e9  # GPT-3 was trained on 300B tokens (Brown et al. 2020, Table 2.1)
DEFAULT_TARGET_DAYS = 30.0


@dataclass(frozen=True)
class ClusterReport:
    system_id: str
    gpu_id: str
    fabric: FabricDesign
    racks: RackLayout
    power: PowerEstimate
    tco: TcoEstimate | None
    assumptions: list[dict]
    prices: list[dict]


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
    utilization: float = 0.7,
    cloud_usd_per_gpu_hour: float | None = None,
    system_price_usd: float | None = None,
    with_tco: bool = True,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> ClusterReport:
    """Fabric, racks, power (and TCO) of `nodes` nodes of a catalog system."""
    cat = load_catalog()
    system = cat.system(system_id)
    gpu = cat.gpu(system.gpu)
    fabric = design_fabric(
        system, gpu, nodes, scalable_units=scalable_units, oversubscription=oversubscription,
        management_ports=management_ports, assumptions=assumptions,
    )
    racks = rack_layout(system, gpu, fabric.nodes, fabric.switches, assumptions)
    power = estimate_power(
        fabric.nodes, node_power_w(system, gpu) / 1e3, fabric.switches,
        include_fabric=include_fabric, include_storage=include_storage, assumptions=assumptions,
    )
    tco = None
    prices: list[dict] = []
    if with_tco:
        sys_price = system_price(system, gpu, system_price_usd)
        cloud, reserved = cloud_price(gpu, cat.cloud_prices(gpu.id), cloud_usd_per_gpu_hour)
        tco = estimate_tco(
            fabric=fabric, racks=racks, it_power_kw=power.it_power_kw, system_price=sys_price, cloud_price=cloud,
            years=years, utilization=utilization, cloud_reserved_usd_per_gpu_hour=reserved, assumptions=assumptions,
        )
        prices = [sys_price.as_row(), cloud.as_row()] + [
            {"key": p.id, "value": p.usd_per_gpu_hour, "description": f"{p.provider} {p.instance} {getattr(p, 'pricing_model', '')}",
             "source": "catalog clouds.toml", "date": p.date}
            for p in cat.cloud_prices(gpu.id)
        ]
    return ClusterReport(system.id, gpu.id, fabric, racks, power, tco, assumptions.rows(), prices)


# ---- the main job -------------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkloadSummary:
    goal: Goal
    model: str
    estimator: str  # which model produced the figures ("gpuplan.workloads.training" or the fallback)
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


def _optional(module: str, name: str):
    """A colleague's function if it has landed, else None (plan degrades, and says so)."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _load_model(model_id: str):
    load_model = _optional("gpuplan.models", "load_model")
    if load_model is None:
        return None
    try:
        return load_model(model_id)
    except GpuplanError:
        raise
    except Exception:  # noqa: BLE001 - a colleague's loader failing must not take plan down
        return None


#: parameter counts used only when the models package cannot load the model (Brown et al. 2020 Table 2.1)
_FALLBACK_PARAMS = {"gpt3-175b": 175e9}
#: model FLOPs utilisation assumed by the fallback estimate: ~0.4 is what Megatron-LM reports for
#: GPT-3 175B-class runs on A100/H100 (Narayanan et al. 2021: 52% of A100 peak at 1T; NVIDIA H100 ~40-50%)
_FALLBACK_MFU = 0.4


def _fallback_training(model_id: str, model, gpu, gpus: int, tokens: float) -> WorkloadSummary:
    """Only when gpuplan.workloads.training is missing: time = 6 N D / (GPUs x bf16 dense peak x MFU)."""
    params = None
    count = _optional("gpuplan.models", "parameter_count") or _optional("gpuplan.models", "count_params")
    if model is not None and count is not None:
        try:
            result = count(model)
            params = float(getattr(result, "total", result))
        except Exception:  # noqa: BLE001
            params = None
    if params is None:
        if model is not None:
            m = model
            params = 12 * m.layers * m.hidden**2 + m.vocab * m.hidden  # Kaplan et al. 2020: N ~ 12 L d^2
        elif model_id in _FALLBACK_PARAMS:
            params = _FALLBACK_PARAMS[model_id]
        else:
            raise InputError(f"model: cannot load '{model_id}' (models package unavailable)", field="model")
    flops = 6 * params * tokens
    seconds = flops / (gpus * gpu.matmul_peak_tflops("bf16") * 1e12 * _FALLBACK_MFU)
    return WorkloadSummary(
        Goal.TRAIN, model_id, f"fallback: 6*N*D at {_FALLBACK_MFU:.0%} MFU of bf16 dense peak", gpus,
        seconds / 86400, gpus * seconds / 3600, {"params": params, "train_flops": flops, "mfu": _FALLBACK_MFU},
    )


def _training_summary(model_id: str, system, gpu, gpus: int, tokens: float) -> WorkloadSummary:
    model = _load_model(model_id)
    estimate = _optional("gpuplan.workloads.training.totals", "estimate_training")
    if estimate is None or model is None:
        return _fallback_training(model_id, model, gpu, gpus, tokens)
    est = estimate(model, system, gpus, tokens)
    days = getattr(est, "days", None)
    gpu_hours = getattr(est, "gpu_hours", None)
    details = {}
    for key in ("step_time_s", "mfu", "energy_kwh", "cost_usd", "plan", "tokens_per_s"):
        if hasattr(est, key):
            value = getattr(est, key)
            details[key] = value if isinstance(value, (int, float, str, type(None))) else str(value)
    return WorkloadSummary(Goal.TRAIN, model_id, "gpuplan.workloads.training.estimate_training", gpus, days, gpu_hours, details)


def _serving_summary(model_id: str, system, gpu, rate_per_s: float) -> WorkloadSummary:
    model = _load_model(model_id)
    for module, name in (("gpuplan.workloads.inference", "plan_capacity"), ("gpuplan.workloads.inference.capacity", "plan_capacity")):
        fn = _optional(module, name)
        if fn is not None and model is not None:
            res = fn(model, system, rate_per_s)
            gpus = int(getattr(res, "gpus", getattr(res, "num_gpus", system.gpus_per_node)))
            details = {k: getattr(res, k) for k in ("usd_per_million_tokens", "tokens_per_s", "ttft_ms", "tpot_ms") if hasattr(res, k)}
            return WorkloadSummary(Goal.SERVE, model_id, f"{module}.{name}", gpus, None, gpus * 24.0, details)
    raise Infeasible(
        "goal: serving capacity planning (gpuplan.workloads.inference) is not available in this build; use --goal train"
    )


def _round_up_nodes(gpus: int, gpus_per_node: int) -> int:
    return max(1, math.ceil(gpus / gpus_per_node))


def plan(
    goal: Goal = Goal.TRAIN,
    model_id: str = DEFAULT_MODEL,
    system_id: str = DEFAULT_SYSTEM,
    *,
    tokens: float = DEFAULT_TOKENS,
    gpus: int | None = None,
    target_days: float = DEFAULT_TARGET_DAYS,
    rate_per_s: float = 10.0,
    years: float = 4.0,
    utilization: float = 0.7,
    cloud_usd_per_gpu_hour: float | None = None,
    system_price_usd: float | None = None,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> PlanReport:
    """Size and cost a cluster for one workload. Training: with `gpus` given, that many; otherwise the
    smallest power-of-two number of scalable-unit quarters (64, 128, 256, ... GPUs) that finishes in
    `target_days`. See module docstring."""
    if tokens <= 0:
        raise InputError("tokens: must be > 0", field="tokens")
    if target_days <= 0:
        raise InputError("days: must be > 0", field="days")
    cat = load_catalog()
    system = cat.system(system_id)
    gpu = cat.gpu(system.gpu)
    notes: list[str] = []
    if goal is Goal.TRAIN:
        if gpus is not None:
            if gpus < 1:
                raise InputError("gpus: must be >= 1", field="gpus")
            work = _training_summary(model_id, system, gpu, gpus, tokens)
        else:
            candidates = [system.gpus_per_node * 2**k for k in range(3, 14)]  # 64 ... 65,536 GPUs for 8-GPU nodes
            work = None
            for n in candidates:
                try:
                    work = _training_summary(model_id, system, gpu, n, tokens)
                except Infeasible:
                    continue
                if work.days is not None and work.days <= target_days:
                    break
            if work is None:
                raise Infeasible(f"model: no cluster up to {candidates[-1]} GPUs can train {model_id}")
            if work.days is not None and work.days > target_days:
                notes.append(f"even {work.gpus} GPUs need {work.days:.1f} days (> target {target_days:g})")
    else:
        work = _serving_summary(model_id, system, gpu, rate_per_s)
    nodes = _round_up_nodes(work.gpus, system.gpus_per_node)
    cluster = size_cluster(
        system.id, nodes, years=years, utilization=utilization, cloud_usd_per_gpu_hour=cloud_usd_per_gpu_hour,
        system_price_usd=system_price_usd, assumptions=assumptions,
    )
    cost = workload_cost_usd(work.gpu_hours or 0.0, cluster.tco) if cluster.tco else {}
    if work.estimator.startswith("fallback"):
        notes.append("training estimate is the 6ND fallback: gpuplan.workloads.training.estimate_training was not available")
    t = cluster.tco
    answer = (
        f"{'Train' if goal is Goal.TRAIN else 'Serve'} {model_id} on {nodes} x {system.id} ({cluster.fabric.gpus} GPUs"
        + (f", {work.days:.1f} days" if work.days is not None else "")
        + f"): {cluster.fabric.leaf_switches} leaf / {cluster.fabric.spine_switches} spine / {cluster.fabric.core_switches} core switches, "
        f"{cluster.racks.racks} racks ({cluster.racks.cooling.value}), {cluster.power.facility_power_kw:,.0f} kW facility power"
        + (
            f"; the run costs ${cost['on_prem_usd']:,.0f} on-prem (at {t.on_prem_usd_per_gpu_hour:.2f} $/GPU-h) vs "
            f"${cost['cloud_usd']:,.0f} in the cloud (at {t.cloud_usd_per_gpu_hour:.2f} $/GPU-h); buying the cluster "
            + (f"breaks even after {t.breakeven_months:.1f} months at {t.utilization:.0%} utilisation" if t.breakeven_months else "never breaks even")
            if t and work.gpu_hours
            else ""
        )
    )
    return PlanReport(goal, model_id, system.id, work, cluster, cost, answer, tuple(notes))


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
