"""`gpuplan.api` for kernel analysis without a GPU (gpuplan.kernel): `kernel_occupancy`,
`kernel_roofline`, `kernel_access`, `kernel_banks`, `kernel_divergence`, `kernel_amdahl`,
`kernel_gustafson`, `kernel_little`. Workloads of the roofline are given as text, as on the
command line: GEMM "MxNxK[@achieved_tflops]", elementwise "N[@...]", attention "BxHxLqxLkxD[@...]",
step "FLOPS:BYTES[@...]"."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from gpuplan.errors import InputError
from gpuplan.interfaces.api._common import Result, catalog, to_jsonable
from gpuplan.specs import Gpu
from gpuplan.output_files import PLOT_SUFFIXES, check_output_path
from gpuplan.validation_rules import ASCII_INTEGER, is_ascii_number, parse_number


def kernel_gpu(gpu: str | Gpu) -> Gpu:
    """A GPU from a GPU id, a system id (its GPU) or a Gpu."""
    if isinstance(gpu, Gpu):
        return gpu
    cat = catalog()
    if gpu.lower() in cat.gpus:
        return cat.gpu(gpu)
    if gpu.lower() in cat.systems:
        return cat.system_gpu(gpu)
    return cat.gpu(gpu)  # raises the standard unknown-id error


def kernel_limits(gpu: str | Gpu | None, cc: str | None):
    """(SM limits, GPU or None) from exactly one of a GPU and a compute capability."""
    from gpuplan.kernel import SUPPORTED_CCS, limits_for

    if (gpu is None) == (cc is None):
        raise InputError("gpu/cc: give exactly one of --gpu ID or --cc X.Y", field="cc")
    if cc is not None:
        return limits_for(cc), None
    spec = kernel_gpu(gpu)
    if not spec.compute_capability:
        raise InputError(
            f"gpu: {spec.id} has no CUDA compute capability in the catalog; use --cc (supported: {', '.join(SUPPORTED_CCS)})",
            field="gpu",
        )
    try:
        return limits_for(spec.compute_capability), spec
    except InputError:
        raise InputError(
            f"gpu: {spec.id} has compute capability {spec.compute_capability}, which is not supported; "
            f"supported: {', '.join(SUPPORTED_CCS)}",
            field="gpu",
        ) from None


# ---- occupancy ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OccupancyResult(Result):
    """`kernel_occupancy`: `occupancy` as cudaOccMaxActiveBlocksPerMultiprocessor; `best` the best block size."""

    limits: Any
    gpu: Gpu | None
    threads: int
    regs: int
    smem_bytes: int
    occupancy: Any
    best: Any
    plot: str | None

    def json_data(self) -> dict:
        data = {"gpu": self.gpu.id if self.gpu else None, **to_jsonable(self.occupancy), "best_block_size": to_jsonable(self.best)}
        if self.plot:
            data["plot"] = self.plot
        return data


def kernel_occupancy(threads: int, regs: int, smem: str | int = "0", *, gpu: str | Gpu | None = None,
                     cc: str | None = None, carveout: int | None = None, plot: str | None = None) -> OccupancyResult:
    """Resident blocks and warps per SM, occupancy and limiting factors (`plot`: write a PNG there)."""
    from gpuplan.kernel import max_potential_block_size, occupancy
    from gpuplan.units import parse_bytes

    if plot:
        check_output_path(plot, "plot", PLOT_SUFFIXES)  # before any work
    limits, gpu_spec = kernel_limits(gpu, cc)
    smem_bytes = parse_bytes(smem, field="smem")
    result = occupancy(limits, threads, regs, smem_bytes, carveout_percent=carveout)
    try:
        best = max_potential_block_size(limits, regs, smem_bytes, sm_count=gpu_spec.sm_count if gpu_spec else None,
                                        carveout_percent=carveout)
    except InputError:
        best = None
    if plot:
        from gpuplan.kernel.plots import plot_occupancy

        plot_occupancy(plot, limits, threads, regs, smem_bytes)
    return OccupancyResult(limits, gpu_spec, threads, regs, smem_bytes, result, best, plot)


# ---- roofline -------------------------------------------------------------------------------------
def _split_achieved(text: str, field: str) -> tuple[str, float | None]:
    body, _, achieved = text.partition("@")
    if achieved:
        if not is_ascii_number(achieved):
            raise InputError(f"{field}: cannot read achieved TFLOP/s '{achieved[:40]}' (ASCII digits 0-9)", field=field)
        return body, parse_number(achieved, field, gt=0)
    return body, None


#: largest GEMM / tensor dimension read from text: cuBLAS takes m, n, k as 32-bit `int`
MAX_DIM = 2**31 - 1


def _dims(text: str, n: int, field: str, example: str) -> list[int]:
    parts = re.split(r"[x,]", text.strip().lower())
    if len(parts) != n or not all(ASCII_INTEGER.fullmatch(p.strip()) for p in parts):
        raise InputError(f"{field}: cannot read '{text[:60]}'; expected {example} (positive integers, ASCII digits "
                         "0-9)", field=field, allowed=example)
    return [int(parse_number(p, field, integer=True, gt=0, le=MAX_DIM)) for p in parts]


@dataclass(frozen=True)
class RooflineResult(Result):
    """`kernel_roofline`: the roofline of one GPU and dtype, and where each workload sits."""

    roofline: Any
    points: tuple
    dtype: str
    sparse: bool
    plot: str | None

    def json_data(self) -> dict:
        data = to_jsonable(self.roofline)
        data["workloads"] = [to_jsonable(p) for p in self.points]
        if self.plot:
            data["plot"] = self.plot
        return data


def kernel_roofline(gpu: str | Gpu, dtype: str = "bf16", *, sparse: bool = False, gemm: Sequence[str] = (),
                    elementwise: Sequence[str] = (), attention: Sequence[str] = (), step: Sequence[str] = (),
                    plot: str | None = None) -> RooflineResult:
    """Attainable FLOP/s vs arithmetic intensity, ridge points, and where each workload sits."""
    from gpuplan.kernel import attention_work, dtype_bytes, elementwise_work, gemm_work, place, roofline, step_work
    from gpuplan.units import parse_count
    from gpuplan.validation_rules import check_number

    dtype = dtype.lower()
    dtype_bytes(dtype)  # validates the name
    if plot:
        check_output_path(plot, "plot", PLOT_SUFFIXES)  # before any work
    roof = roofline(kernel_gpu(gpu), dtype, sparse=sparse)
    work = []
    for text in gemm or ():
        body, ach = _split_achieved(text, "gemm")
        m, n, k = _dims(body, 3, "gemm", "MxNxK, e.g. 4096x4096x4096")
        work.append((gemm_work(m, n, k, dtype), ach))
    for text in elementwise or ():
        body, ach = _split_achieved(text, "elementwise")
        # an element count within MAX_DIM^2 (~4.6e18): bytes and FLOPs stay finite (3e307 divided by inf bytes)
        n = check_number(parse_count(body, field="elementwise"), "elementwise", gt=0, le=float(MAX_DIM) ** 2)
        work.append((elementwise_work(n, dtype), ach))
    for text in attention or ():
        body, ach = _split_achieved(text, "attention")
        b, h, lq, lk, d = _dims(body, 5, "attention", "BxHxLqxLkxD, e.g. 1x32x4096x4096x128")
        work.append((attention_work(b, h, lq, lk, d, dtype), ach))
    for text in step or ():
        body, ach = _split_achieved(text, "step")
        flops, sep, nbytes = body.partition(":")
        if not sep:
            raise InputError(f"step: cannot read '{text}'; expected FLOPS:BYTES, e.g. 16e9:16e9", field="step")
        work.append((step_work(parse_count(flops, field="step"), parse_count(nbytes, field="step")), ach))
    points = tuple(place(roof, w, ach) for w, ach in work)
    if plot:
        from gpuplan.kernel.plots import plot_roofline

        plot_roofline(plot, roof, list(points))
    return RooflineResult(roof, points, dtype, sparse, plot)


# ---- memory access, banks, divergence ------------------------------------------------------------
@dataclass(frozen=True)
class AnalysisResult(Result):
    """A kernel analysis whose JSON is the analysis itself, plus `extra` keys."""

    analysis: Any
    extra: dict | None = None

    def json_data(self) -> Any:
        if self.extra is None:
            return self.analysis
        return {**self.extra, **to_jsonable(self.analysis)}


def kernel_access(elem_bytes: int = 4, stride: int = 1, offset: int = 0, index: str | None = None) -> AnalysisResult:
    """Sectors and cache lines of one warp's global-memory request, and its coalescing efficiency."""
    from gpuplan.kernel import analyze_global_access

    return AnalysisResult(analyze_global_access(elem_bytes, stride, offset, index_expression=index))


@dataclass(frozen=True)
class BanksResult(Result):
    """`kernel_banks`: bank conflicts with the padding, and without it when a pad is given."""

    analysis: Any
    pad: int
    without_padding: Any

    def json_data(self) -> dict:
        data = to_jsonable(self.analysis)
        data["pad"] = self.pad
        data["without_padding"] = to_jsonable(self.without_padding) if self.without_padding else None
        return data


def kernel_banks(elem_bytes: int = 4, stride: int = 1, offset: int = 0, pad: int = 0,
                 index: str | None = None) -> BanksResult:
    """Shared-memory bank conflicts of one warp access (32 banks x 4 bytes), with and without padding."""
    from gpuplan.kernel import analyze_bank_conflicts

    r = analyze_bank_conflicts(elem_bytes, stride, offset, pad=pad, index_expression=index)
    unpadded = analyze_bank_conflicts(elem_bytes, stride, offset, index_expression=index) if pad else None
    return BanksResult(r, pad, unpadded)


def kernel_divergence(predicate: str, threads: int = 32, then_cost: float = 1.0, else_cost: float = 1.0) -> AnalysisResult:
    """Branch divergence of if (predicate) {...} else {...}: SIMT and branch efficiency."""
    from gpuplan.kernel import analyze_divergence

    return AnalysisResult(analyze_divergence(predicate, threads, then_cost, else_cost))


# ---- speedup laws, Little's law -------------------------------------------------------------------
def kernel_amdahl(parallel_fraction: float, workers: float) -> AnalysisResult:
    """Amdahl's law: speedup of a fixed problem = 1 / ((1-p) + p/n)."""
    from gpuplan.kernel import amdahl

    return AnalysisResult(amdahl(parallel_fraction, workers))


def kernel_gustafson(parallel_fraction: float, workers: float) -> AnalysisResult:
    """Gustafson's law: scaled speedup = (1-p) + p n."""
    from gpuplan.kernel import gustafson

    return AnalysisResult(gustafson(parallel_fraction, workers))


def kernel_little(latency_ns: float, *, gpu: str | Gpu | None = None, bandwidth_gbps: float | None = None,
                  sms: int | None = None, bytes_per_load: int = 4, loads_in_flight: int = 1) -> AnalysisResult:
    """Little's law: bytes and warps in flight needed to cover memory latency at a bandwidth
    (bandwidth, SM count and max warps from `gpu` where not given)."""
    from gpuplan.kernel import limits_for, littles_law

    spec = kernel_gpu(gpu) if gpu else None
    bw = bandwidth_gbps if bandwidth_gbps is not None else (spec.memory_bandwidth_gbps if spec else None)
    if bw is None:
        raise InputError("bandwidth: give --bandwidth-gbps or --gpu", field="bandwidth")
    sm_count = sms if sms is not None else (spec.sm_count if spec and spec.sm_count else 1)
    max_warps = None
    if spec and spec.compute_capability:
        try:
            max_warps = limits_for(spec.compute_capability).max_warps_per_sm
        except InputError:
            max_warps = None
    r = littles_law(bw, latency_ns, sm_count=sm_count, bytes_per_load=bytes_per_load,
                    loads_in_flight_per_thread=loads_in_flight, max_warps_per_sm=max_warps)
    return AnalysisResult(r, {"gpu": spec.id if spec else None})
