"""Which price applies: the catalog's figure when it has one, else the named assumption.

The one place every command (`train`, `plan`, `dc tco`, `serve plan`) looks up a price:
- `gpu_hour_price`: $/GPU-hour to rent a GPU: a given price, else the cheapest on-demand catalog
  entry (catalog clouds.toml), else the named assumption (`CLOUD_USD_PER_GPU_HOUR`).
- `system_price`: $ for one node (on-prem), same order.
- `gpu_hours_cost_usd`: cost = GPU-hours x $/GPU-hour (the on-prem $/GPU-hour comes from `tco`).
Each returns an `Assumption` (value + source + date) so the report shows where the price came from.
"""

from __future__ import annotations

import math

from gpuplan.errors import InputError
from gpuplan.facilities.assumptions import CLOUD_USD_PER_GPU_HOUR, SYSTEM_PRICES_USD, Assumption
from gpuplan.specs import CloudPrice, Gpu, System

#: an 8-GPU server costs about this multiple of its GPUs' price (DGX H100 ~$270k vs 8 x ~$27.5k H100)
NODE_PRICE_OVER_GPUS = 270000 / (8 * 27500)


def system_price(system: System, gpu: Gpu, override_usd: float | None = None) -> Assumption:
    """Price of one node: override, catalog `price_usd`, named assumption, or GPUs x GPU price x 1.23."""
    if override_usd is not None:
        if not (math.isfinite(override_usd) and override_usd > 0):
            raise InputError(f"system-price-usd: must be a finite number > 0, got {override_usd}", field="system_price_usd")
        return Assumption(system.id, override_usd, f"{system.name} price", "user override", "(given)")
    if system.price_usd:
        return Assumption(system.id, system.price_usd, f"{system.name} price",
                          f"catalog: {system.sources.get('price_usd', system.sources.get('default', ''))}", "catalog")
    if system.id in SYSTEM_PRICES_USD:
        return SYSTEM_PRICES_USD[system.id]
    if gpu.price_usd:
        value = system.gpus_per_node * gpu.price_usd * (NODE_PRICE_OVER_GPUS if system.gpus_per_node > 1 else 1.0)
        return Assumption(system.id, value, f"{system.name} price",
                          f"gpuplan estimate: {system.gpus_per_node} x catalog GPU price x {NODE_PRICE_OVER_GPUS:.2f} node overhead", "catalog")
    raise InputError(
        f"system-price-usd: no price known for '{system.id}'; give --system-price-usd", field="system_price_usd"
    )


def cloud_price(
    gpu: Gpu, prices: list[CloudPrice] | None = None, override_usd: float | None = None
) -> tuple[Assumption, float | None]:
    """(on-demand $/GPU-hour, reserved or None): override, cheapest catalog on-demand entry, or assumption.
    `prices` defaults to the catalog's on-demand prices for the GPU."""
    if override_usd is not None:
        if not (math.isfinite(override_usd) and override_usd > 0):
            raise InputError(f"cloud-usd-per-gpu-hour: must be a finite number > 0, got {override_usd}",
                             field="cloud_usd_per_gpu_hour")
        return Assumption(gpu.id, override_usd, f"{gpu.name} cloud on-demand", "user override", "(given)"), None
    if prices is None:
        from gpuplan.catalog import load_catalog

        prices = load_catalog().cloud_prices(gpu.id)
    on_demand = [p for p in prices if getattr(p, "pricing_model", "on-demand") == "on-demand"]
    if on_demand:
        best = min(on_demand, key=lambda p: p.usd_per_gpu_hour)
        src = best.sources.get("usd_per_gpu_hour", best.sources.get("default", ""))
        reserved = [p.reserved_usd_per_gpu_hour for p in prices if p.reserved_usd_per_gpu_hour]
        reserved += [p.usd_per_gpu_hour for p in prices if getattr(p, "pricing_model", "") == "reserved"]
        return (
            Assumption(gpu.id, best.usd_per_gpu_hour, f"{best.provider} {best.instance} on-demand", f"catalog: {src}", best.date),
            min(reserved) if reserved else None,
        )
    if gpu.id in CLOUD_USD_PER_GPU_HOUR:
        return CLOUD_USD_PER_GPU_HOUR[gpu.id], None
    raise InputError(
        f"cloud-usd-per-gpu-hour: no cloud price known for GPU '{gpu.id}'; give --cloud-usd-per-gpu-hour",
        field="cloud_usd_per_gpu_hour",
    )


def gpu_hour_price(gpu: Gpu, override_usd: float | None = None, *, required: bool = True) -> Assumption | None:
    """$/GPU-hour to rent `gpu` (see `cloud_price`); with `required=False`, None where no price is known."""
    try:
        return cloud_price(gpu, None, override_usd)[0]
    except InputError:
        if required or override_usd is not None:
            raise
        return None


def gpu_hours_cost_usd(gpu_hours: float, usd_per_gpu_hour: float) -> float:
    """cost_usd = GPU-hours x $/GPU-hour."""
    return gpu_hours * usd_per_gpu_hour
