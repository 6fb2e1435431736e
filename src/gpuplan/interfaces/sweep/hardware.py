"""The hardware axis of a sweep: catalog nodes and hypothetical variants of them, as spec objects.

A variant is a copy of a catalog System and its Gpu with some figures scaled or set
(`model_copy(update=...)`); the catalog itself is never written. Ids stay the base's, so every
catalog look-up by id (prices, interconnect latencies) still finds the base's entry; the variant
is told apart by its name (the `hardware` column). What each field changes:

    memory_scale            Gpu.memory_bytes x s
    hbm_bandwidth_scale     Gpu.memory_bandwidth_gbps x s
    dense_flops_scale       Gpu.peak_tflops[dtype].dense (and .sparse) x s, every dtype or per dtype
    nvlink_domain_gpus      System.scaleup_domain_gpus = gpus_per_node = n; NICs, power and price per
                            node x n / base gpus_per_node (per GPU unchanged)
    nvlink_bandwidth_scale  System.scaleup_bandwidth_gbps and Gpu.scaleup_bandwidth_gbps x s
    nics_per_node           System.nics_per_node = n
    nic_gbit_s              System.nic_gbit_s = v
    power_scale             Gpu.tdp_w and System.system_power_w x s
    price_scale             $/GPU-hour = the base GPU's (facilities.pricing.gpu_hour_price) x s
    usd_per_gpu_hour        $/GPU-hour = v
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.specs import Gpu, System


@dataclass(frozen=True)
class Hardware:
    """One value of the hardware axis: its label, node, GPU and $/GPU-hour (None: the catalog's)."""

    name: str
    system: System
    gpu: Gpu
    usd_per_gpu_hour: float | None = None


def catalog_hardware(hw_id: str) -> Hardware:
    """A catalog system id, or a GPU id (its widest catalog system, as `gpuplan serve plan` picks)."""
    from gpuplan.catalog import load_catalog
    from gpuplan.interfaces.api._common import widest_system

    cat = load_catalog()
    if hw_id in cat.systems:
        system = cat.system(hw_id)
        return Hardware(hw_id, system, cat.gpu(system.gpu))
    if hw_id in cat.gpus:
        gpu = cat.gpu(hw_id)
        return Hardware(hw_id, widest_system(gpu), gpu)
    cat.system(hw_id)  # raises UnknownIdError with the closest ids
    raise InputError(f"axes.hardware: unknown id '{hw_id}'", field="axes.hardware")  # pragma: no cover


def _scaled(value, scale):
    return value if value is None or scale is None else value * scale


def build_variant(variant) -> Hardware:
    """The Hardware of a `[[variants]]` entry (spec.Variant), per the module docstring's table."""
    try:
        base = catalog_hardware(variant.base)
    except InputError as exc:
        raise InputError(f"variants.base: {exc}", field="variants.base") from None
    gpu, system = base.gpu, base.system
    v = variant
    flops = v.dense_flops_scale
    peaks = {}
    for dtype, peak in gpu.peak_tflops.items():
        s = flops.get(dtype) if isinstance(flops, dict) else flops
        peaks[dtype] = peak if s is None else peak.model_copy(update={"dense": peak.dense * s, "sparse": _scaled(peak.sparse, s)})
    gpu_update = {
        "memory_bytes": int(round(gpu.memory_bytes * (v.memory_scale or 1.0))),
        "memory_bandwidth_gbps": gpu.memory_bandwidth_gbps * (v.hbm_bandwidth_scale or 1.0),
        "peak_tflops": peaks,
        "scaleup_bandwidth_gbps": _scaled(gpu.scaleup_bandwidth_gbps, v.nvlink_bandwidth_scale),
        "tdp_w": _scaled(gpu.tdp_w, v.power_scale),
    }
    sys_update = {
        "scaleup_bandwidth_gbps": _scaled(system.scaleup_bandwidth_gbps, v.nvlink_bandwidth_scale),
        "system_power_w": _scaled(system.system_power_w, v.power_scale),
    }
    if v.nvlink_domain_gpus is not None:
        # the step-time model places groups per node: the domain becomes the node, and the per-node
        # figures (NICs, power, price) scale with it so that per GPU they stay the base's
        ratio = v.nvlink_domain_gpus / system.gpus_per_node
        sys_update.update(scaleup_domain_gpus=v.nvlink_domain_gpus, gpus_per_node=v.nvlink_domain_gpus,
                          nics_per_node=int(round(system.nics_per_node * ratio)),
                          system_power_w=_scaled(sys_update["system_power_w"], ratio),
                          price_usd=_scaled(system.price_usd, ratio))
    if v.nics_per_node is not None:
        sys_update["nics_per_node"] = v.nics_per_node
    if v.nic_gbit_s is not None:
        sys_update["nic_gbit_s"] = v.nic_gbit_s
    # model_copy does not validate: validate the copies, so a variant obeys the specs' own rules
    new_gpu = Gpu.model_validate(gpu.model_copy(update=gpu_update).model_dump())
    new_system = System.model_validate(system.model_copy(update=sys_update).model_dump())
    price = v.usd_per_gpu_hour
    if v.price_scale is not None:
        from gpuplan.facilities.pricing import gpu_hour_price

        base_price = gpu_hour_price(gpu, required=False)
        if base_price is None:
            raise InputError(f"variants.price_scale: no catalog price for '{gpu.id}' to scale; give usd_per_gpu_hour",
                             field="variants.price_scale")
        price = base_price.value * v.price_scale
    return Hardware(v.name, new_system, new_gpu, price)


def hardware_axis(spec) -> list[Hardware]:
    """Every value of a SweepSpec's hardware axis (catalog ids, then variants), resolved once."""
    out = []
    for hw_id in spec.axes.hardware:
        try:
            out.append(catalog_hardware(hw_id))
        except InputError as exc:
            raise InputError(f"axes.hardware: {exc}", field="axes.hardware") from None
    out.extend(build_variant(v) for v in spec.variants)
    return out
