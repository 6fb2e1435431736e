"""The GPU (accelerator) spec: one chip's peak compute, memory and links, every figure sourced."""

from __future__ import annotations

from pydantic import Field, model_validator

from gpuplan.specs.dtypes import Weights, gemm_compute_dtype
from gpuplan.specs._base import SourcedSpec, Spec

#: dtypes with a peak figure. fp64/fp32 are the vector (CUDA-core) rates; fp64_tensor and the rest
#: are tensor-core / matrix-core rates. int8 is in TOP/s but kept under `peak_tflops` for uniformity.
DTYPES = ("fp64", "fp64_tensor", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp6", "fp4")

#: Architecture families, as the catalog's `architecture` strings name them (lowercase substrings):
#: NVIDIA Volta, Ampere, Ada (Lovelace), Hopper, Blackwell (compute capability 7.0, 8.x, 8.9, 9.0,
#: 10.x / 12.x); AMD Instinct CDNA2-4; Google TPU. Per-family tables (NCCL constants, GEMM and
#: attention ceilings) key on these names.
GPU_FAMILIES = ("volta", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "cdna4", "tpu")
#: SMs assumed for a part whose SM count no source gives (Gpu.sm_count None): the H100 SXM's 132
#: (catalog h100-sxm5-80gb, S_SCALEBOOK GPU spec table "132 SMs/chip"), the part the wave and
#: occupancy figures were calibrated on.
DEFAULT_SM_COUNT = 132


def architecture_family(architecture: str | None) -> str | None:
    """The GPU_FAMILIES entry an architecture string names ("Hopper GH100" -> "hopper"), None if none."""
    arch = (architecture or "").lower()
    for family in GPU_FAMILIES:
        if family in arch:
            return family
    return None


class PeakTflops(Spec):
    """Peak rate in TFLOP/s (1e12/s). `dense` is always dense; `sparse` (2:4 structured sparsity)
    is separate and null where the part has no sparsity support for that dtype."""

    dense: float = Field(gt=0)
    sparse: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _dense_le_sparse(self):
        if self.sparse is not None and self.sparse < self.dense:
            raise ValueError(f"sparse ({self.sparse}) is below dense ({self.dense}): a dense figure was entered as sparse")
        return self


class Gpu(SourcedSpec):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$")
    name: str
    vendor: str
    architecture: str
    compute_capability: str | None = None  # "9.0" for NVIDIA; AMD gfx target string allowed
    sm_count: int | None = Field(default=None, gt=0)  # SMs (NVIDIA), CUs (AMD), TensorCores (TPU)
    boost_clock_mhz: float | None = Field(default=None, gt=0)
    peak_tflops: dict[str, PeakTflops]
    memory_bytes: int = Field(gt=0)
    memory_type: str
    memory_bandwidth_gbps: float = Field(gt=0)  # GB/s, decimal
    l2_bytes: int | None = Field(default=None, gt=0)
    smem_per_sm_bytes: int | None = Field(default=None, gt=0)  # max programmable shared memory per SM
    registers_per_sm: int | None = Field(default=None, gt=0)  # 32-bit registers
    max_threads_per_sm: int | None = Field(default=None, gt=0)
    scaleup_link: str | None = None  # interconnect id (nvlink4, xgmi3, ici-v5p, ...)
    scaleup_bandwidth_gbps: float | None = Field(default=None, gt=0)  # per GPU, per direction, GB/s
    pcie_gen: int | None = Field(default=None, ge=3, le=6)
    #: The GPU is part of a system-on-chip that shares one memory with its CPU (Jetson): it is no
    #: PCIe card, so its id as a system is one module, never a PCIe box.
    integrated: bool = False
    #: GPU-to-GPU peer-to-peer over PCIe with the vendor's stock driver: False on GeForce cards
    #: (NCCL then stages every transfer through host memory), None where no source says.
    pcie_p2p: bool | None = None
    #: board/module power, W. None only where no source publishes one (Google TPUs).
    tdp_w: float | None = Field(default=None, gt=0)
    #: board power at which the part's peak figures (and the GEMM ceilings it borrows) are quoted, where
    #: it is a power-capped variant of another part running at `tdp_w` below it (Meta's 500 W H100 SXM
    #: 96GB: the 700 W H100 SXM's peaks). None: the peaks are the part's own, at `tdp_w`.
    peak_rated_power_w: float | None = Field(default=None, gt=0)
    launch_year: int | None = None
    price_usd: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _known_dtypes(self):
        unknown = set(self.peak_tflops) - set(DTYPES)
        if unknown:
            raise ValueError(f"peak_tflops has unknown dtype(s) {sorted(unknown)}; allowed: {', '.join(DTYPES)}")
        return self

    @property
    def memory_gib(self) -> float:
        """Memory capacity in GiB (= memory_bytes / 2**30)."""
        return self.memory_bytes / 2**30

    @property
    def family(self) -> str | None:
        """Architecture family (GPU_FAMILIES) of `architecture`, None when it names none of them."""
        return architecture_family(self.architecture)

    def measured_part(self, measured_keys) -> str | None:
        """Which of the measured parts `measured_keys` (ids or id prefixes of a measurement table such
        as catalog/data/ceilings.toml) this GPU is: its id, else the longest key its id starts with
        ("b200-sxm" -> "b200", "gh200-96gb" -> "gh200"); None if none."""
        keys = set(measured_keys)
        if self.id in keys:
            return self.id
        hits = [k for k in keys if self.id.startswith(k)]
        return max(hits, key=len) if hits else None

    @property
    def sm_count_or_default(self) -> int:
        """`sm_count`, or DEFAULT_SM_COUNT where no source gives it."""
        return self.sm_count or DEFAULT_SM_COUNT

    @property
    def sparse_dtypes(self) -> list[str]:
        """dtypes with a 2:4 structured-sparsity peak."""
        return [d for d, p in self.peak_tflops.items() if p.sparse is not None]

    def ridge_flops_per_byte(self, dtype: str = "bf16") -> float:
        """Roofline ridge point (critical arithmetic intensity) in FLOP per byte of HBM traffic.

        ridge = dense peak FLOP/s / memory bandwidth B/s = peak_tflops * 1e12 / (gbps * 1e9).
        Source: JAX scaling book, GPU chapter ("H100 990e12 / 3.35e12 = 295").
        """
        return self.peak(dtype) * 1e12 / (self.memory_bandwidth_gbps * 1e9)

    def peak(self, dtype: str, sparse: bool = False) -> float:
        """Peak TFLOP/s for `dtype` (dense unless `sparse`); raises InputError if the part has none."""
        from gpuplan.errors import InputError

        entry = self.peak_tflops.get(dtype)
        if entry is None:
            have = ", ".join(self.peak_tflops) or "none"
            raise InputError(f"dtype: {self.id} has no {dtype} peak; it has: {have}", field="dtype")
        if sparse:
            if entry.sparse is None:
                raise InputError(f"dtype: {self.id} has no sparse {dtype} peak", field="dtype")
            return entry.sparse
        return entry.dense

    def gemm_compute_dtype(self, weight_dtype: str, activation_dtype: str | None = None, *,
                           weights: Weights) -> str:
        """The tensor-core precision a GEMM of `weight_dtype` weights and `activation_dtype`
        activations (default: the same format) runs at on this part: specs.dtypes.gemm_compute_dtype
        (serving checkpoints and kernel inputs Weights.STORED, training recipes Weights.CAST)."""
        activation = weight_dtype if activation_dtype is None else activation_dtype
        return gemm_compute_dtype(weight_dtype, activation, self.peak_tflops, weights=weights)

    def matmul_peak_tflops(self, precision: str) -> float:
        """Dense tensor-core peak of a GEMM with both operands in `precision` (a catalog key or a
        number format such as mxfp8): the peak of `gemm_compute_dtype(precision)`; a caller that
        resolved the precision already passes a key the part has, which resolves to itself."""
        dtype = self.gemm_compute_dtype(precision, weights=Weights.STORED)
        if dtype in self.peak_tflops:
            return self.peak_tflops[dtype].dense
        return self.peak(dtype)
