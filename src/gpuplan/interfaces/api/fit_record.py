"""The JSON record of `gpuplan fit train` (`memory_record`, stable keys with units in their names) and
its 80% band (`memory_band`); `interfaces.api.training` builds the plans and results that carry them."""

from __future__ import annotations

from gpuplan.interfaces.api.compile_option import compile_label
from gpuplan.specs import Gpu, ModelSpec, TrainPlan

GIB = 2**30


def memory_record(model: ModelSpec, gpu: Gpu, plan: TrainPlan, mem) -> dict:
    """The JSON object of `fit train` (stable keys, units in names)."""
    from gpuplan.layers import parameter_counts

    states = mem.bytes_per_param
    return {
        "model": model.name,
        "gpu": gpu.id,
        "plan": plan.model_dump(mode="json"),
        "compile": compile_label(plan.compiled_model, plan.compiled_loss),  # --compile (api.compile_option)
        "num_gpus": plan.num_gpus,
        "per_gpu_bytes": mem.per_gpu_bytes,
        "per_gpu_gib": {k: v / GIB for k, v in mem.per_gpu_bytes.items()},
        "activations_bytes": mem.activations_bytes_detail,
        "other_bytes": mem.other_bytes_detail,
        "allocated_bytes": mem.allocated_bytes,
        "capacity_bytes": mem.capacity_bytes,
        "capacity_gib": mem.capacity_bytes / GIB,
        "fits": mem.fits,
        "headroom_bytes": mem.headroom_bytes,
        "headroom_gib": mem.headroom_bytes / GIB,
        # the part of the GPU a plan may use (workloads.memory_headroom: usable fraction x capacity); headroom is it less the total
        "usable_bytes": mem.per_gpu_bytes["total"] + mem.headroom_bytes,
        "usable_gib": (mem.per_gpu_bytes["total"] + mem.headroom_bytes) / GIB,
        "params_per_gpu": mem.params_per_gpu,
        "total_params": parameter_counts(model).total,
        "peak_pipeline_rank": mem.peak_pipeline_rank,
        "bytes_per_param": {**states, "model_states": sum(states.values())},
        "activation_bytes_per_param": mem.per_gpu_bytes["activations"] / max(1, mem.params_per_gpu),
        "notes": list(mem.notes),
        "band_80pct": memory_band(model, mem, finetune=not plan.fine_tuning.ordinary),
        # fine-tuning (workloads.training.finetune_memory): not part of per_gpu_bytes / fits
        "fine_tuning": plan.fine_tuning.label(),
        "trainable_params_per_gpu": mem.trainable_params if mem.trainable_params is not None else mem.params_per_gpu,
        "paged_optimizer_bytes": mem.paged_optimizer_bytes,
        "paged_optimizer_gib": mem.paged_optimizer_bytes / GIB,
        "host_offload_bytes": mem.host_bytes,
        "host_offload_gib": mem.host_bytes / GIB,
    }


def memory_band(model: ModelSpec, mem, finetune: bool = False) -> dict:
    """The 80% band of the predicted memory per GPU (interfaces.validation.error_bands: cross-validated residuals
    of the public memory rows of the regime), and whether the plan still fits at the band's top."""
    from gpuplan.interfaces.validation.error_bands import training_memory_band

    band = training_memory_band(model.moe is not None, finetune)
    if band is None:
        return {}
    lo, hi = band.interval(mem.per_gpu_bytes["total"] / GIB)
    return {"per_gpu_gib": [lo, hi], "fits_at_band_high": hi * GIB <= mem.capacity_bytes,
            "regime": band.regime, "validated": band.validated, "rows": band.rows}


__all__ = ["memory_band", "memory_record"]
