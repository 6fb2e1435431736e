"""Roofline model (Williams, Waterman, Patterson, CACM 2009): attainable FLOP/s of a kernel of
arithmetic intensity I (FLOP/byte) on a memory level of bandwidth BW under a compute peak P:

    attainable(I) = min(P, I x BW)          ridge = P / BW  (FLOP/byte)
    bound         = compute if I >= ridge else memory
    bound_factor  = I / ridge (compute-bound) or ridge / I (memory-bound): how far from the ridge
    min_time_s    = max(flops / P, bytes / BW)

P is the DENSE peak (sparse only on request) of the tensor-core precision a GEMM with both operands
in `dtype` runs at on the part (specs.dtypes.gemm_compute_dtype, operands stored in that format:
`compute_dtype`, e.g. mxfp8 on H100 runs at bf16 (no block-scaled tensor cores), on B200 at fp8).
Ceilings:
- HBM/DRAM: the catalog's memory bandwidth (sourced there).
- shared memory (NVIDIA): 32 banks x 4 bytes per clock per SM (CUDA C++ Programming Guide,
  "Shared Memory": each bank serves one 32-bit word per clock) x SMs x boost clock (catalog).
- L2: only where a figure with a source is in `L2_BANDWIDTH_GBPS` below.

A measured point above its roof is physically impossible: it flags a units mistake (TFLOP/s vs
FLOP/s, GB vs GiB) or a sparse peak quoted against a dense kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from gpuplan.errors import InputError
from gpuplan.kernel.workload_intensity import KernelWork
from gpuplan.specs import Gpu
from gpuplan.specs.dtypes import Weights

#: Shared-memory bytes per clock per SM: 32 banks x 4 bytes (CUDA C++ Programming Guide, Shared Memory).
SMEM_BYTES_PER_CLOCK_PER_SM = 32 * 4

#: L2 bandwidth figures with a source, GB/s, by catalog GPU id.
L2_BANDWIDTH_GBPS: dict[str, tuple[float, str]] = {
    "h100-sxm5-80gb": (
        5500.0,
        "measured ~5.5 TB/s (chipsandcheese, quoted in jax-ml scaling book gpus.md; "
        "../shared/reference/hardware.md section 1.1): a measurement, not a peak",
    ),
}


class Bound(str, Enum):
    COMPUTE = "compute"
    MEMORY = "memory"


@dataclass(frozen=True)
class Ceiling:
    name: str  # "hbm", "l2", "shared_memory"
    bandwidth_gbps: float
    ridge_flop_per_byte: float
    source: str


@dataclass(frozen=True)
class Roofline:
    gpu: str
    dtype: str
    sparse: bool
    peak_tflops: float
    peak_source: str
    ceilings: list[Ceiling]
    compute_dtype: str = ""  # the tensor-core precision whose peak is the roof (= dtype where the part has it)

    @property
    def hbm(self) -> Ceiling:
        return self.ceilings[0]

    def attainable_tflops(self, intensity_flop_per_byte: float, ceiling: str = "hbm") -> float:
        """min(P, I x BW) in TFLOP/s for one ceiling."""
        c = next((c for c in self.ceilings if c.name == ceiling), None)
        if c is None:
            raise InputError(f"ceiling: '{ceiling}' not available; have {', '.join(x.name for x in self.ceilings)}",
                             field="ceiling")
        return min(self.peak_tflops, intensity_flop_per_byte * c.bandwidth_gbps * 1e9 / 1e12)


def _source(gpu: Gpu, key: str) -> str:
    return gpu.sources.get(key) or gpu.sources.get("default", "catalog")


def roofline(gpu: Gpu, dtype: str = "bf16", sparse: bool = False) -> Roofline:
    """The roof of `gpu` for `dtype`: the dense peak (sparse on request) of the precision its GEMMs
    run at (module docstring) and its memory ceilings."""
    compute = gpu.gemm_compute_dtype(dtype, weights=Weights.STORED)
    peak = gpu.peak(compute, sparse=sparse)
    peak_flops = peak * 1e12

    def ceiling(name: str, gbps: float, source: str) -> Ceiling:
        return Ceiling(name, gbps, peak_flops / (gbps * 1e9), source)

    ceilings = [ceiling("hbm", gpu.memory_bandwidth_gbps, _source(gpu, "memory_bandwidth_gbps"))]
    if gpu.id in L2_BANDWIDTH_GBPS:
        gbps, src = L2_BANDWIDTH_GBPS[gpu.id]
        ceilings.append(ceiling("l2", gbps, src))
    if gpu.vendor.lower() == "nvidia" and gpu.sm_count and gpu.boost_clock_mhz:
        gbps = SMEM_BYTES_PER_CLOCK_PER_SM * gpu.sm_count * gpu.boost_clock_mhz * 1e6 / 1e9
        ceilings.append(ceiling(
            "shared_memory", gbps,
            f"DERIVED: 128 B/clock/SM (CUDA C++ Programming Guide, Shared Memory: 32 banks x 4 B) x "
            f"{gpu.sm_count} SMs x {gpu.boost_clock_mhz:g} MHz boost (catalog)",
        ))
    return Roofline(gpu.id, dtype, sparse, peak, _source(gpu, "peak_tflops"), ceilings, compute)


@dataclass(frozen=True)
class RooflinePoint:
    name: str
    flops: float
    bytes: float
    intensity_flop_per_byte: float
    attainable_tflops: float
    bound: Bound
    bound_factor: float  # distance from the HBM ridge (>= 1)
    min_time_s: float
    achieved_tflops: float | None = None
    fraction_of_roof: float | None = None  # achieved / attainable
    above_roof: bool = False
    warnings: list[str] = field(default_factory=list)


def place(roof: Roofline, work: KernelWork, achieved_tflops: float | None = None) -> RooflinePoint:
    """Place `work` on the HBM roof: intensity, attainable TFLOP/s, bound and by how much (module doc)."""
    hbm = roof.hbm
    intensity = work.intensity_flop_per_byte
    attainable = roof.attainable_tflops(intensity)
    compute = intensity >= hbm.ridge_flop_per_byte
    factor = intensity / hbm.ridge_flop_per_byte if compute else hbm.ridge_flop_per_byte / intensity
    min_time = max(work.flops / (roof.peak_tflops * 1e12), work.bytes / (hbm.bandwidth_gbps * 1e9))
    warnings, above, fraction = [], False, None
    if achieved_tflops is not None:
        if achieved_tflops <= 0:
            raise InputError(f"achieved: must be > 0 TFLOP/s, got {achieved_tflops}", field="achieved")
        fraction = achieved_tflops / attainable
        above = achieved_tflops > attainable * (1 + 1e-9)
        if above:
            peak_kind = "sparse" if roof.sparse else "dense"
            warnings.append(
                f"{work.name}: achieved {achieved_tflops:g} TFLOP/s is above its roof of {attainable:.4g} TFLOP/s "
                f"({peak_kind} {roof.dtype} peak {roof.peak_tflops:g}, HBM {hbm.bandwidth_gbps:g} GB/s): check units "
                f"(TFLOP/s vs FLOP/s, GB vs GiB, FLOPs = 2 x MACs) or a sparse peak quoted for a dense kernel"
            )
    return RooflinePoint(
        name=work.name,
        flops=work.flops,
        bytes=work.bytes,
        intensity_flop_per_byte=intensity,
        attainable_tflops=attainable,
        bound=Bound.COMPUTE if compute else Bound.MEMORY,
        bound_factor=factor,
        min_time_s=min_time,
        achieved_tflops=achieved_tflops,
        fraction_of_roof=fraction,
        above_roof=above,
        warnings=warnings,
    )
