"""On-prem against each cloud price like for like: one row per (provider, instance, term).

A cloud price is an offer of one provider on one term (on-demand, an N-year reservation, a capacity
block, spot); two offers compare only when they share a provider (the same instance on two terms)
or when the comparison says it is provider against provider. So the TCO compares the on-prem
cluster with every catalog price of its GPU, one row each, each row labelled with its provider and
term, and each row's figures come from the same cash flow as the headline (facilities.tco):

    cloud_total_usd  = $/GPU-hour x GPU-hours used (GPUs x 8760 h x years x utilisation)
    savings_usd      = cloud_total_usd - on-prem total (capex - residual + years x opex)
    breakeven_months = tco.cash_flow_breakeven_months(capex, opex / 12, $/GPU-hour x GPUs x 730 h x u,
                                                       residual, 12 x years)

so for every row savings >= 0 exactly when breakeven_months <= the period. Rows are grouped by
provider (providers in order of their cheapest offer), on-demand first within a provider, so a
provider's reserved price sits under its own on-demand price, never under another provider's.
A reservation's term comes from the catalog (`reserved_term`); where the source does not state it,
the row says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpuplan.facilities.tco import HOURS_PER_MONTH, TcoEstimate, cash_flow_breakeven_months
from gpuplan.specs import CloudPrice

#: order of the terms within one provider
TERM_ORDER = ("on-demand", "reserved", "capacity-block", "spot")


@dataclass(frozen=True)
class CloudOption:
    """One provider's offer on one term against the on-prem cluster (module docstring)."""

    provider: str
    instance: str
    term: str  # "on-demand", "1-year reserved", "reserved (term not stated)", "capacity-block", "spot"
    pricing_model: str
    usd_per_gpu_hour: float
    cloud_total_usd: float
    savings_usd: float  # cloud - on-prem over the period (positive: on-prem is cheaper)
    breakeven_months: float | None
    source: str
    date: str

    def to_dict(self) -> dict:
        return asdict(self)


def _offers(price: CloudPrice) -> list[tuple[str, str, float]]:
    """(term label, pricing model, $/GPU-hour) of one catalog entry: its own price, and the
    reservation it lists beside an on-demand price."""
    term = price.pricing_model
    if term == "reserved":
        term = f"{price.reserved_term} reserved" if price.reserved_term else "reserved (term not stated)"
    out = [(term, price.pricing_model, price.usd_per_gpu_hour)]
    if price.reserved_usd_per_gpu_hour:
        label = f"{price.reserved_term} reserved" if price.reserved_term else "reserved (term not stated)"
        out.append((label, "reserved", price.reserved_usd_per_gpu_hour))
    return out


def compare_clouds(tco: TcoEstimate, prices: list[CloudPrice]) -> tuple[CloudOption, ...]:
    """Every offer in `prices` (catalog entries of the cluster's GPU, any pricing model) against the
    on-prem cluster of `tco` (module docstring)."""
    rows = []
    for p in prices:
        src = p.sources.get("usd_per_gpu_hour", p.sources.get("default", ""))
        for term, model, rate in _offers(p):
            cloud_total = rate * tco.gpu_hours
            cloud_month = rate * tco.gpus * HOURS_PER_MONTH * tco.utilization
            rows.append(CloudOption(
                provider=p.provider, instance=p.instance, term=term, pricing_model=model, usd_per_gpu_hour=rate,
                cloud_total_usd=cloud_total, savings_usd=cloud_total - tco.on_prem_total_usd,
                breakeven_months=cash_flow_breakeven_months(tco.capex_usd, tco.opex_usd_per_year / 12, cloud_month,
                                                            tco.residual_value_usd, 12.0 * tco.years),
                source=src, date=p.date))
    cheapest = {}
    for r in rows:
        cheapest[r.provider] = min(cheapest.get(r.provider, r.usd_per_gpu_hour), r.usd_per_gpu_hour)
    rows.sort(key=lambda r: (cheapest[r.provider], r.provider, TERM_ORDER.index(r.pricing_model), r.usd_per_gpu_hour))
    return tuple(rows)


def reserved_beside(options: tuple[CloudOption, ...], provider: str | None) -> tuple[CloudOption | None, bool]:
    """The reservation to show beside the headline on-demand price of `provider`: that provider's
    cheapest reservation (like for like: True), else the cheapest reservation of any provider
    (provider against provider: False, and the label says whose it is); (None, False) when none."""
    reserved = [o for o in options if o.pricing_model == "reserved"]
    same = [o for o in reserved if o.provider == provider]
    if same:
        return min(same, key=lambda o: o.usd_per_gpu_hour), True
    if reserved:
        return min(reserved, key=lambda o: o.usd_per_gpu_hour), False
    return None, False


def option_label(o: CloudOption) -> str:
    """'gcp a3-highgpu-8g, 1-year reserved'."""
    return f"{o.provider} {o.instance}, {o.term}"


__all__ = ["CloudOption", "compare_clouds", "option_label", "reserved_beside"]
