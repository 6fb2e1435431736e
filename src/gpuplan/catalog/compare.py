"""Side-by-side comparison of catalog GPUs: the metrics, their units, and ratios to a baseline.

ratio(metric, gpu) = value(gpu) / value(baseline); None where either value is missing, or where
the metric's unit differs between vendors (SM count vs CU count).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gpuplan.catalog.ceilings import own_measurement
from gpuplan.specs import Gpu


def _peak(dtype: str) -> Callable[[Gpu], float | None]:
    def get(gpu: Gpu) -> float | None:
        entry = gpu.peak_tflops.get(dtype)
        return entry.dense if entry else None

    return get


def _measured_gemm(gpu: Gpu):
    return own_measurement(gpu, "gemm", "bf16")


def _measured_hbm(gpu: Gpu):
    return own_measurement(gpu, "hbm")


def _ridge(gpu: Gpu) -> float | None:
    return gpu.ridge_flops_per_byte("bf16") if "bf16" in gpu.peak_tflops else None


@dataclass(frozen=True)
class Metric:
    """One comparable quantity: JSON key (with its unit), table label, unit text, getter."""

    key: str
    label: str
    unit: str
    get: Callable[[Gpu], float | None] = field(repr=False, compare=False)
    #: False where the unit differs by vendor (an SM is not a CU is not a TPU TensorCore): no ratio across vendors
    comparable_across_vendors: bool = True
    #: the Gpu field whose source backs the value (a key of `Gpu.sources`, else its `default`)
    source_field: str = ""
    #: where the value is not a catalog field: the value's source for a GPU (None: no value)
    source_of: Callable[[Gpu], str | None] | None = field(default=None, repr=False, compare=False)


METRICS: tuple[Metric, ...] = (
    Metric("memory_gib", "memory", "GiB", lambda g: g.memory_gib, source_field="memory_bytes"),
    Metric("memory_bandwidth_gbps", "memory bandwidth", "GB/s", lambda g: g.memory_bandwidth_gbps,
           source_field="memory_bandwidth_gbps"),
    Metric("fp64_dense_tflops", "FP64 (vector) dense", "TFLOP/s", _peak("fp64"), source_field="peak_tflops"),
    Metric("fp32_dense_tflops", "FP32 dense", "TFLOP/s", _peak("fp32"), source_field="peak_tflops"),
    Metric("tf32_dense_tflops", "TF32 tensor dense", "TFLOP/s", _peak("tf32"), source_field="peak_tflops"),
    Metric("bf16_dense_tflops", "BF16 tensor dense", "TFLOP/s", _peak("bf16"), source_field="peak_tflops"),
    Metric("fp8_dense_tflops", "FP8 tensor dense", "TFLOP/s", _peak("fp8"), source_field="peak_tflops"),
    Metric("int8_dense_tops", "INT8 tensor dense", "TOP/s", _peak("int8"), source_field="peak_tflops"),
    Metric("fp4_dense_tflops", "FP4 tensor dense", "TFLOP/s", _peak("fp4"), source_field="peak_tflops"),
    Metric("measured_bf16_gemm_tflops", "BF16 GEMM, best measured", "TFLOP/s",
           lambda g: m.achieved if (m := _measured_gemm(g)) else None,
           source_of=lambda g: m.source if (m := _measured_gemm(g)) else None),
    Metric("measured_hbm_copy_gbps", "HBM copy, best measured", "GB/s",
           lambda g: m.achieved if (m := _measured_hbm(g)) else None,
           source_of=lambda g: m.source if (m := _measured_hbm(g)) else None),
    Metric("bf16_ridge_flops_per_byte", "BF16 ridge point", "FLOP/B", _ridge),
    Metric("scaleup_bandwidth_gbps", "scale-up link (per direction)", "GB/s", lambda g: g.scaleup_bandwidth_gbps,
           source_field="scaleup_bandwidth_gbps"),
    Metric("l2_mib", "L2 cache", "MiB", lambda g: g.l2_bytes / 2**20 if g.l2_bytes else None, source_field="l2_bytes"),
    Metric("sm_count", "SMs / CUs / TPU cores", "", lambda g: g.sm_count, comparable_across_vendors=False,
           source_field="sm_count"),
    Metric("tdp_w", "TDP", "W", lambda g: g.tdp_w, source_field="tdp_w"),
)


@dataclass(frozen=True)
class MetricRow:
    key: str
    label: str
    unit: str
    values: dict[str, float | None]
    ratio_to_baseline: dict[str, float | None]
    #: per GPU, the source of its value (None where it has no value; the ridge point is derived from
    #: the BF16 peak and the bandwidth, whose sources the other rows give)
    sources: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuComparison:
    baseline: str
    gpus: list[str]
    names: dict[str, str]
    metrics: list[MetricRow]


def compare_gpus(gpus: list[Gpu]) -> GpuComparison:
    """Every METRICS value for each GPU and its ratio to the first GPU (the baseline)."""
    base = gpus[0]
    rows = []
    for m in METRICS:
        values = {g.id: m.get(g) for g in gpus}
        b = values[base.id]
        ratios = {
            g.id: (values[g.id] / b
                   if values[g.id] is not None and b and (m.comparable_across_vendors or g.vendor == base.vendor)
                   else None)
            for g in gpus
        }
        sources = {g.id: (None if values[g.id] is None else m.source_of(g) if m.source_of
                          else g.sources.get(m.source_field, g.sources.get("default")) if m.source_field
                          else None) for g in gpus}
        rows.append(MetricRow(m.key, m.label, m.unit, values, ratios, sources))
    return GpuComparison(
        baseline=base.id, gpus=[g.id for g in gpus], names={g.id: g.name for g in gpus}, metrics=rows
    )
