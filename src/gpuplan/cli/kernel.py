"""CLI: `gpuplan kernel ...` -- occupancy, roofline, access, banks, divergence, amdahl, gustafson, little.

Parses, calls `gpuplan.api.kernel_*`, renders; computes nothing itself.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from gpuplan import api
from gpuplan.cli.render import console, fmt, print_json, table

kernel_app = typer.Typer(
    help="GPU kernel analysis without a GPU: occupancy, roofline, memory access, bank conflicts, divergence, "
    "speedup laws.",
    no_args_is_help=True,
)

JSON_OPT = typer.Option(False, "--json", help="Print JSON instead of a table.")


# -- occupancy --------------------------------------------------------------------------------------
@kernel_app.command("occupancy")
def occupancy_cmd(
    threads: int = typer.Option(..., "--threads", help="Threads per block (1..1024)."),
    regs: int = typer.Option(..., "--regs", help="Registers per thread (0..255), as ptxas -v reports."),
    smem: str = typer.Option("0", "--smem", help="Shared memory per block, static + dynamic (e.g. 48KiB); "
                             "the kernel is taken to have opted in above 48 KB."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Catalog GPU id (its compute capability is used)."),
    cc: Optional[str] = typer.Option(None, "--cc", help="Compute capability, e.g. 9.0."),
    carveout: Optional[int] = typer.Option(None, "--carveout", help="Preferred shared-memory carveout, percent "
                                           "(cudaFuncAttributePreferredSharedMemoryCarveout); default: the largest."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write occupancy vs threads, registers, smem to this PNG."),
    json_out: bool = JSON_OPT,
) -> None:
    """Resident blocks and warps per SM, occupancy and limiting factors, as cudaOccMaxActiveBlocksPerMultiprocessor."""
    res = api.kernel_occupancy(threads, regs, smem, gpu=gpu, cc=cc, carveout=carveout, plot=plot)
    if json_out:
        print_json(res.to_dict())
        return
    limits, gpu_spec, result, best, smem_bytes = res.limits, res.gpu, res.occupancy, res.best, res.smem_bytes
    title = f"Occupancy on CC {limits.compute_capability}" + (f" ({gpu_spec.id})" if gpu_spec else "")
    rows = [
        ("block", f"{threads} threads = {result.warps_per_block} warps, {regs} regs/thread, {smem_bytes:,} B smem"),
        ("active blocks per SM", result.active_blocks_per_sm),
        ("active warps per SM", f"{result.active_warps_per_sm} of {result.max_warps_per_sm}"),
        ("occupancy", f"{result.occupancy:.1%}"),
        ("limited by", ", ".join(lim.value for lim in result.limiters)),
    ]
    for name, value in result.blocks_per_sm_by_limit.items():
        rows.append((f"  blocks allowed by {name}", "unlimited" if value is None else value))
    rows += [
        ("registers allocated per block", result.allocated_registers_per_block),
        ("smem allocated per block (B)", result.allocated_smem_per_block_bytes),
        ("smem carveout (B)", result.smem_carveout_bytes),
    ]
    if best:
        rows.append(("best block size", f"{best.block_size} ({best.active_blocks_per_sm} blocks, {best.occupancy:.1%})"
                     + (f", min grid {best.min_grid_size}" if best.min_grid_size else "")))
    console.print(table(title, ["quantity", "value"], rows))
    for note in result.notes:
        console.print(f"note: {note}")
    if plot:
        console.print(f"plot written to {plot}")


# -- roofline ----------------------------------------------------------------------------------------


@kernel_app.command("roofline")
def roofline_cmd(
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU id."),
    dtype: str = typer.Option("bf16", "--dtype", help="Operand dtype or number format (fp8, mxfp8, nvfp4, ...): the dense peak of the "
                                                      "precision its GEMMs run at on the GPU is the roof."),
    sparse: bool = typer.Option(False, "--sparse", help="Use the 2:4 sparse peak instead of dense."),
    gemm: Optional[List[str]] = typer.Option(None, "--gemm", help="GEMM MxNxK[@achieved_tflops] (repeatable)."),
    elementwise: Optional[List[str]] = typer.Option(
        None, "--elementwise", help="Elementwise op over N elements, 2 inputs 1 output 1 FLOP each: N[@achieved]."),
    attention: Optional[List[str]] = typer.Option(
        None, "--attention", help="FlashAttention forward BxHxLqxLkxD[@achieved] (batch, heads, q len, kv len, head dim)."),
    step: Optional[List[str]] = typer.Option(
        None, "--step", help="A model step (e.g. decode) given as FLOPS:BYTES[@achieved], e.g. 16e9:16e9."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write the roofline to this PNG."),
    json_out: bool = JSON_OPT,
) -> None:
    """Attainable FLOP/s vs arithmetic intensity, ridge points, and where each workload sits."""
    result = api.kernel_roofline(gpu, dtype, sparse=sparse, gemm=gemm or (), elementwise=elementwise or (),
                                 attention=attention or (), step=step or (), plot=plot)
    if json_out:
        print_json(result.to_dict())
        return
    roof, points, dtype = result.roofline, result.points, result.dtype
    kind = "sparse" if sparse else "dense"
    runs_at = f" (GEMMs run at {roof.compute_dtype})" if roof.compute_dtype != dtype else ""
    console.print(f"{roof.gpu} {dtype}{runs_at}: {kind} peak {roof.peak_tflops:g} TFLOP/s")
    console.print(table("Ceilings", ["memory", "GB/s", "ridge FLOP/B"],
                        [(c.name, c.bandwidth_gbps, c.ridge_flop_per_byte) for c in roof.ceilings], name="ceilings"))
    for c in roof.ceilings:
        console.print(f"  {c.name}: {c.source}", soft_wrap=True)
    if points:
        rows = [(p.name, p.intensity_flop_per_byte, p.attainable_tflops, p.bound.value,
                 f"{p.bound_factor:.3g}x", p.min_time_s * 1e3, p.achieved_tflops) for p in points]
        console.print(table("Workloads (HBM roof)", ["workload", "FLOP/B", "attainable TFLOP/s", "bound",
                                                     "from ridge", "min time ms", "achieved TFLOP/s"], rows,
                            name="workloads", main=True))
    for p in points:
        for w in p.warnings:
            console.print(f"WARNING: {w}")
    if plot:
        console.print(f"plot written to {plot}")


# -- memory access ----------------------------------------------------------------------------------
@kernel_app.command("access")
def access_cmd(
    elem_bytes: int = typer.Option(4, "--elem-bytes", help="Bytes each lane loads (1, 2, 4, 8, 16)."),
    stride: int = typer.Option(1, "--stride", help="Elements between consecutive lanes."),
    offset: int = typer.Option(0, "--offset", help="Element offset of lane 0 (misalignment)."),
    index: Optional[str] = typer.Option(None, "--index", help="Element index as an expression in `lane`, e.g. "
                                        "\"(lane % 8) * 32 + lane / 8\" (overrides --stride/--offset)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Sectors and cache lines of one warp's global-memory request, and its coalescing efficiency."""
    result = api.kernel_access(elem_bytes, stride, offset, index)
    if json_out:
        print_json(result.to_dict())
        return
    r = result.analysis
    console.print(table("Global access of one warp", ["quantity", "value"], [
        ("bytes requested", r.requested_bytes),
        ("32-byte sectors per request", r.sectors_per_request),
        ("128-byte lines per request", r.lines_per_request),
        ("ideal sectors", r.ideal_sectors),
        ("coalescing efficiency", f"{r.efficiency:.1%}"),
    ]))


@kernel_app.command("banks")
def banks_cmd(
    elem_bytes: int = typer.Option(4, "--elem-bytes", help="Bytes each lane accesses (1, 2, 4, 8, 16)."),
    stride: int = typer.Option(1, "--stride", help="Elements between consecutive lanes (row pitch for a column walk)."),
    offset: int = typer.Option(0, "--offset", help="Element offset of lane 0."),
    pad: int = typer.Option(0, "--pad", help="Padding elements added to the row pitch."),
    index: Optional[str] = typer.Option(None, "--index", help="Element index as an expression in `lane`."),
    json_out: bool = JSON_OPT,
) -> None:
    """Shared-memory bank conflicts of one warp access (32 banks x 4 bytes), with and without padding."""
    result = api.kernel_banks(elem_bytes, stride, offset, pad, index)
    if json_out:
        print_json(result.to_dict())
        return
    r, unpadded = result.analysis, result.without_padding
    rows = [("effective stride (elements)", r.stride), ("phases", r.phases), ("conflict (n-way)", r.conflict_ways),
            ("wavefronts", f"{r.wavefronts} (ideal {r.ideal_wavefronts})"), ("efficiency", f"{r.efficiency:.1%}")]
    if unpadded:
        rows.append(("without padding", f"{unpadded.conflict_ways}-way, {unpadded.wavefronts} wavefronts"))
    console.print(table("Shared-memory banks", ["quantity", "value"], rows))


@kernel_app.command("divergence")
def divergence_cmd(
    predicate: str = typer.Option(..., "--predicate", help="Branch condition in lane, tid, warp, e.g. \"lane % 2 == 0\"."),
    threads: int = typer.Option(32, "--threads", help="Threads per block."),
    then_cost: float = typer.Option(1.0, "--then-cost", help="Instructions in the taken side."),
    else_cost: float = typer.Option(1.0, "--else-cost", help="Instructions in the other side (0 for no else)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Branch divergence of if (predicate) {...} else {...}: SIMT and branch efficiency."""
    result = api.kernel_divergence(predicate, threads, then_cost, else_cost)
    if json_out:
        print_json(result.to_dict())
        return
    r = result.analysis
    console.print(table(f"if ({predicate})", ["quantity", "value"], [
        ("warps", r.warps), ("divergent warps", r.divergent_warps),
        ("branch efficiency", f"{r.branch_efficiency:.1%}"), ("SIMT efficiency", f"{r.simt_efficiency:.1%}"),
    ]))


# -- speedup laws -----------------------------------------------------------------------------------
def _print_speedup(result, json_out: bool) -> None:
    if json_out:
        print_json(result.to_dict())
        return
    r = result.analysis
    console.print(table(f"{r.law.capitalize()}", ["quantity", "value"], [
        ("parallel fraction", r.parallel_fraction), ("workers", r.workers), ("speedup", r.speedup),
        ("efficiency", f"{r.efficiency:.1%}"), ("limit as workers -> inf", r.limit_speedup if r.limit_speedup else "unbounded"),
    ]))


@kernel_app.command("amdahl")
def amdahl_cmd(
    parallel_fraction: float = typer.Option(..., "--parallel-fraction", "-p", help="Parallel fraction of the serial time, 0..1."),
    workers: float = typer.Option(..., "--workers", "-n", help="Number of workers (SMs, GPUs)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Amdahl's law: speedup of a fixed problem = 1 / ((1-p) + p/n)."""
    _print_speedup(api.kernel_amdahl(parallel_fraction, workers), json_out)


@kernel_app.command("gustafson")
def gustafson_cmd(
    parallel_fraction: float = typer.Option(..., "--parallel-fraction", "-p", help="Parallel fraction of the parallel run, 0..1."),
    workers: float = typer.Option(..., "--workers", "-n", help="Number of workers."),
    json_out: bool = JSON_OPT,
) -> None:
    """Gustafson's law: scaled speedup = (1-p) + p n."""
    _print_speedup(api.kernel_gustafson(parallel_fraction, workers), json_out)


@kernel_app.command("little")
def little_cmd(
    latency_ns: float = typer.Option(..., "--latency-ns", help="Memory latency to hide, ns."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Catalog GPU id (bandwidth, SMs, max warps)."),
    bandwidth_gbps: Optional[float] = typer.Option(None, "--bandwidth-gbps", help="Bandwidth to sustain, GB/s "
                                                   "(default: the GPU's memory bandwidth)."),
    sms: Optional[int] = typer.Option(None, "--sms", help="SM count (default: the GPU's, else 1)."),
    bytes_per_load: int = typer.Option(4, "--bytes-per-load", help="Bytes each thread loads per instruction."),
    loads_in_flight: int = typer.Option(1, "--loads-in-flight", help="Independent loads each thread has outstanding (ILP)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Little's law: bytes and warps in flight needed to cover memory latency at a bandwidth."""
    result = api.kernel_little(latency_ns, gpu=gpu, bandwidth_gbps=bandwidth_gbps, sms=sms, bytes_per_load=bytes_per_load,
                               loads_in_flight=loads_in_flight)
    if json_out:
        print_json(result.to_dict())
        return
    r = result.analysis
    bw = r.bandwidth_gbps
    rows = [("bytes in flight (device)", r.bytes_in_flight), ("bytes in flight per SM", r.bytes_in_flight_per_sm),
            ("bytes in flight per warp", r.bytes_in_flight_per_warp), ("warps needed per SM", r.warps_needed_per_sm)]
    if r.occupancy_needed is not None:
        rows.append(("occupancy needed", f"{r.occupancy_needed:.1%} of {r.max_warps_per_sm} warps"))
    console.print(table(f"Little's law at {fmt(bw)} GB/s, {fmt(latency_ns)} ns", ["quantity", "value"], rows))


def register(app: typer.Typer) -> None:
    """Add `gpuplan kernel ...` to the root app."""
    app.add_typer(kernel_app, name="kernel")
