"""Total cost of ownership: on-prem cluster vs renting the same GPU-hours in the cloud.

Capex (bought once):
    systems    = nodes * system price
    network    = switches * switch price + transceivers * transceiver price + cables * cable price
    storage    = nodes * storage share
    facility   = IT kW (busy) * facility build-out $/kW
Opex per year (at utilisation u, the fraction of hours the GPUs are busy):
    power       = PUE * 8760 h * (IT kW idle + (IT kW loaded - IT kW idle) * u) * $/kWh
                  = the cluster's average draw over the year (`facilities.power`: loaded = nodes at
                  loaded_power_fraction_of_nameplate x nameplate, the measured draw of training; idle at
                  activity 0; the facility build-out is sized at nameplate IT kW)
    maintenance = maintenance fraction * (systems + network + storage)
    space       = racks * 12 * $/rack-month;  staff (optional)
Residual value at the end of `years`:
    residual = residual fraction * (systems + network + storage) + facility * max(0, 1 - years / facility life)
On-prem cost of the period = capex - residual + years * opex; GPU-hours used = GPUs * 8760 * years * u.
    on_prem_usd_per_gpu_hour = on-prem cost / GPU-hours used
    cloud cost of the same GPU-hours = cloud $/GPU-hour * GPU-hours used
Breakeven months: from the one cash flow the savings use (capex at month 0, opex monthly, the residual
received at the end of the period; `cash_flow_breakeven_months`):
    capex + m * opex_month = m * cloud_month  ->  m = capex / (cloud_month - opex_month),
    cloud_month = $/GPU-hour * GPUs * 730 h * u; if m passes the period but the resale at its end
    makes the period's savings >= 0, breakeven is the period's end; never when cloud_month <= opex_month.
Breakeven utilisation over the period (cost is linear in u: fixed + variable * u = cloud * u):
    u* = fixed / (cloud $/GPU-hour * GPUs * 8760 * years - variable); none when u* > 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumption, Assumptions
from gpuplan.facilities.fabric import FabricDesign
from gpuplan.facilities.power import HOURS_PER_YEAR, PowerEstimate, energy
from gpuplan.facilities.pricing import gpu_hours_cost_usd
from gpuplan.facilities.racks import RackLayout

HOURS_PER_MONTH = HOURS_PER_YEAR / 12  # 730


@dataclass(frozen=True)
class TcoEstimate:
    nodes: int
    gpus: int
    years: float
    utilization: float
    system_price_usd: float
    capex_breakdown_usd: dict[str, float]
    capex_usd: float
    opex_breakdown_usd_per_year: dict[str, float]
    opex_usd_per_year: float
    residual_value_usd: float
    on_prem_total_usd: float
    gpu_hours: float
    on_prem_usd_per_gpu_hour: float
    cloud_usd_per_gpu_hour: float
    cloud_price_source: str
    cloud_total_usd: float
    cloud_reserved_usd_per_gpu_hour: float | None
    cloud_reserved_total_usd: float | None
    savings_usd: float  # cloud - on-prem over the period (positive: on-prem is cheaper)
    breakeven_months: float | None
    breakeven_utilization: float | None
    notes: tuple[str, ...]
    #: who offers the reserved price above and on what term ("gcp a3-highgpu-8g, 1-year reserved"),
    #: and whether it is the headline on-demand price's own provider (like for like)
    cloud_reserved_label: str | None = None
    cloud_reserved_same_provider: bool | None = None
    #: the cluster against every catalog offer of its GPU, one row per provider and term
    #: (facilities.cloud_comparison.CloudOption)
    cloud_comparison: tuple = ()


def estimate_tco(
    *,
    fabric: FabricDesign,
    racks: RackLayout,
    power: PowerEstimate,
    system_price: Assumption,
    cloud_price: Assumption,
    years: float = 4.0,
    utilization: float = 0.7,
    cloud_reserved_usd_per_gpu_hour: float | None = None,
    assumptions: Assumptions = DEFAULT_ASSUMPTIONS,
) -> TcoEstimate:
    """See module docstring for every formula."""
    if years <= 0:
        raise InputError(f"years: must be > 0, got {years}", field="years")
    if not 0 < utilization <= 1:
        raise InputError(f"utilization: must be in (0, 1], got {utilization}", field="utilization")
    a = assumptions
    nodes, gpus = fabric.nodes, fabric.gpus
    systems = nodes * system_price.value
    network = (
        fabric.switches * a.switch_price_usd + fabric.transceivers * a.transceiver_price_usd + fabric.cables * a.cable_price_usd
    )
    storage = nodes * a.storage_capex_usd_per_node
    facility = power.it_power_kw * a.facility_capex_usd_per_kw
    capex = {"systems": systems, "network": network, "storage": storage, "facility": facility}
    hardware = systems + network + storage

    # electricity of a year idle, and the extra of a year busy (facilities.power: one model, one PUE and $/kWh)
    power_fixed = energy(power.idle_it_power_kw * 1e3 * a.pue, HOURS_PER_YEAR, a).electricity_usd
    power_variable = energy((power.loaded_it_power_kw - power.idle_it_power_kw) * 1e3 * a.pue, HOURS_PER_YEAR,
                            a).electricity_usd
    opex = {
        "power": power_fixed + power_variable * utilization,
        "maintenance": a.maintenance_fraction_per_year * hardware,
        "space": racks.racks * 12 * a.space_usd_per_rack_month,
        "staff": a.staff_usd_per_year,
    }
    capex_total = sum(capex.values())
    opex_total = sum(opex.values())
    residual = a.residual_value_fraction * hardware + facility * max(0.0, 1 - years / a.facility_life_years)
    on_prem_total = capex_total - residual + years * opex_total
    gpu_hours = gpus * HOURS_PER_YEAR * years * utilization
    cloud_rate = cloud_price.value
    cloud_total = cloud_rate * gpu_hours

    notes = []
    cloud_month = cloud_rate * gpus * HOURS_PER_MONTH * utilization
    opex_month = opex_total / 12
    breakeven_months = cash_flow_breakeven_months(capex_total, opex_month, cloud_month, residual, 12.0 * years)
    if breakeven_months is None:
        notes.append("cloud costs less per month than on-prem opex alone: on-prem never breaks even")

    fixed = capex_total - residual + years * (opex_total - power_variable * utilization)
    cloud_per_u = cloud_rate * gpus * HOURS_PER_YEAR * years - years * power_variable
    u_star = fixed / cloud_per_u if cloud_per_u > 0 else None
    breakeven_u = u_star if u_star is not None and u_star <= 1 else None
    if breakeven_u is None:
        notes.append(f"on-prem costs more than the cloud even at 100% utilisation over {years:g} years")

    reserved_total = cloud_reserved_usd_per_gpu_hour * gpu_hours if cloud_reserved_usd_per_gpu_hour else None
    return TcoEstimate(
        nodes=nodes, gpus=gpus, years=years, utilization=utilization, system_price_usd=system_price.value,
        capex_breakdown_usd=capex, capex_usd=capex_total, opex_breakdown_usd_per_year=opex, opex_usd_per_year=opex_total,
        residual_value_usd=residual, on_prem_total_usd=on_prem_total, gpu_hours=gpu_hours,
        on_prem_usd_per_gpu_hour=on_prem_total / gpu_hours, cloud_usd_per_gpu_hour=cloud_rate,
        cloud_price_source=f"{cloud_price.description}: {cloud_price.source} ({cloud_price.date})",
        cloud_total_usd=cloud_total, cloud_reserved_usd_per_gpu_hour=cloud_reserved_usd_per_gpu_hour,
        cloud_reserved_total_usd=reserved_total, savings_usd=cloud_total - on_prem_total,
        breakeven_months=breakeven_months, breakeven_utilization=breakeven_u, notes=tuple(notes),
    )


def cash_flow_breakeven_months(capex: float, opex_month: float, cloud_month: float, residual: float,
                               period_months: float) -> float | None:
    """The month the cumulative cloud bill first reaches the cumulative on-prem cash flow, the one
    cash flow the period's savings come from: capex at month 0, opex every month, the residual
    value received when the hardware is sold at the end of the period (month `period_months`).

        m_cash = capex / (cloud_month - opex_month)          (cloud_month > opex_month)
        m_cash <= period                              -> m_cash
        period x (cloud - opex) - capex + residual >= 0 -> period   (the resale closes the gap)
        else                                          -> m_cash when cloud_month > opex_month (keep
                                                         the cluster longer, no resale), else None

    So savings over the period (cloud - on-prem, residual counted) are >= 0 exactly when the
    breakeven month is <= the period."""
    m_cash = capex / (cloud_month - opex_month) if cloud_month > opex_month else None
    if m_cash is not None and m_cash <= period_months:
        return m_cash
    if period_months * (cloud_month - opex_month) - capex + residual >= 0:
        return period_months
    return m_cash


def workload_cost_usd(gpu_hours: float, tco: TcoEstimate) -> dict[str, float]:
    """Cost of a workload of `gpu_hours` at the effective on-prem rate and at the cloud rate."""
    return {
        "gpu_hours": gpu_hours,
        "on_prem_usd": gpu_hours_cost_usd(gpu_hours, tco.on_prem_usd_per_gpu_hour),
        "cloud_usd": gpu_hours_cost_usd(gpu_hours, tco.cloud_usd_per_gpu_hour),
    }
