"""Theoretical occupancy of a kernel on one SM, exactly as `cudaOccMaxActiveBlocksPerMultiprocessor`.

Source: `cuda_occupancy.h` (CUDA 12.6 / 12.9), written out step by step in
../shared/reference/hardware.md section 2.2. With the limits `L` of the compute capability
(`compute_capability.py`), a block of `T` threads using `R` registers per thread and `S` bytes of
shared memory (static + dynamic; the kernel has opted in above 48 KB where it asks for more):

    warps_per_block   W = ceil(T / 32)                                   (T <= 1024 else 0 blocks)
    warp limit          = floor(max_warps_per_sm / W)
    regs_per_warp       = roundup(R * 32, 256)
    register limit      = floor(4 * floor((regs_per_sm / 4) / regs_per_warp) / W)
                          (0 if R > 255, or regs_per_warp * roundup(W, 4) > regs_per_block;
                           unlimited if R == 0)
    block limit         = max_blocks_per_sm
    smem_per_block      = roundup(S + reserved_1KB_from_CC_8.0, granularity)
    smem limit          = floor(carveout / smem_per_block), carveout = the preferred split (default
                          the largest) or, if one block would not fit in it, the smallest supported
                          carveout >= smem_per_block; 0 if smem_per_block > opt-in max + reserved
    barrier limit       = barrier_multiplier * max_blocks_per_sm / barriers_per_block (CC >= 9)
    active blocks       = min of the limits; limiters = every limit equal to the minimum
    occupancy           = active_blocks * W / max_warps_per_sm

The core works on numpy arrays (broadcast over threads, registers, shared memory) so that sweeps
and plots are one call; `occupancy()` is the scalar front end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from gpuplan.errors import InputError
from gpuplan.kernel.compute_capability import ComputeCapabilityLimits

#: Stands for "no limit" (cuda_occupancy.h uses INT_MAX).
UNLIMITED = 2**31 - 1


class Limiter(str, Enum):
    """What bounds the number of resident blocks (cuda_occupancy.h OCC_LIMIT_*)."""

    WARPS = "warps"
    REGISTERS = "registers"
    SHARED_MEMORY = "shared_memory"
    BLOCKS = "blocks"
    BARRIERS = "barriers"


def _round_up(x, unit):
    return -(-x // unit) * unit


@dataclass(frozen=True)
class BlockLimits:
    """Per-limit detail: blocks per SM each resource allows, plus the allocations behind them."""

    warps_per_block: np.ndarray
    by_warps: np.ndarray
    by_registers: np.ndarray
    by_shared_memory: np.ndarray
    by_blocks: np.ndarray
    by_barriers: np.ndarray
    registers_per_warp: np.ndarray  # allocated, after rounding to the allocation unit
    registers_per_block: np.ndarray  # allocated
    smem_per_block_bytes: np.ndarray  # allocated, reserved part and granularity included
    smem_carveout_bytes: np.ndarray  # shared-memory size of the L1/smem split the SM runs with

    @property
    def active_blocks(self) -> np.ndarray:
        return np.minimum.reduce(
            [self.by_warps, self.by_registers, self.by_shared_memory, self.by_blocks, self.by_barriers]
        )


def _align_up_to_carveout(size_bytes: np.ndarray, limits: ComputeCapabilityLimits) -> np.ndarray:
    """Smallest supported carveout >= size (cudaOccAlignUpShmemSizeVoltaPlus); sizes beyond the
    largest carveout map to the largest (they are rejected by the per-block limit first)."""
    carveouts = np.asarray(limits.smem_carveouts_bytes, dtype=np.int64)
    idx = np.searchsorted(carveouts, size_bytes, side="left")
    return carveouts[np.minimum(idx, len(carveouts) - 1)]


def block_limits(
    limits: ComputeCapabilityLimits,
    threads_per_block,
    registers_per_thread,
    smem_per_block_bytes=0,
    *,
    carveout_percent: int | None = None,
    barriers_per_block: int = 1,
) -> BlockLimits:
    """Blocks per SM allowed by each resource; arguments broadcast as numpy arrays (see module doc)."""
    threads = np.asarray(threads_per_block, dtype=np.int64)
    regs = np.asarray(registers_per_thread, dtype=np.int64)
    smem = np.asarray(smem_per_block_bytes, dtype=np.int64)
    threads, regs, smem = np.broadcast_arrays(threads, regs, smem)
    ws = limits.warp_size

    # -- warps (cudaOccMaxBlocksPerSMWarpsLimit) -------------------------------------------------
    warps = -(-threads // ws)
    too_big = threads > limits.max_threads_per_block
    by_warps = np.where(too_big, 0, limits.max_warps_per_sm // np.maximum(warps, 1))

    # -- registers (cudaOccMaxBlocksPerSMRegsLimit) ----------------------------------------------
    regs_per_warp = _round_up(regs * ws, limits.register_allocation_unit)
    regs_per_block = regs_per_warp * warps
    # the hardware check assumes the block's warps spread over all sub-partitions
    regs_assumed = regs_per_warp * _round_up(warps, limits.sub_partitions)
    regs_per_sub_partition = limits.registers_per_sm // limits.sub_partitions
    warps_per_sm_by_regs = (regs_per_sub_partition // np.maximum(regs_per_warp, 1)) * limits.sub_partitions
    by_registers = np.where(regs_per_warp > 0, warps_per_sm_by_regs // np.maximum(warps, 1), UNLIMITED)
    does_not_fit = (
        (regs_assumed > limits.max_registers_per_block)
        | (regs_per_block > limits.max_registers_per_block)
        | (regs > limits.max_registers_per_thread)
    )
    by_registers = np.where(does_not_fit, 0, by_registers)

    # -- blocks and barriers ---------------------------------------------------------------------
    by_blocks = np.full(threads.shape, limits.max_blocks_per_sm, dtype=np.int64)
    if limits.major >= 9 and barriers_per_block > 0:
        by_barriers = np.full(threads.shape, limits.barrier_multiplier * limits.max_blocks_per_sm // barriers_per_block)
    else:
        by_barriers = np.full(threads.shape, UNLIMITED, dtype=np.int64)

    # -- shared memory (cudaOccMaxBlocksPerSMSmemLimit, opt-in function attributes) --------------
    smem_alloc = _round_up(smem + limits.reserved_smem_per_block_bytes, limits.smem_allocation_unit_bytes)
    max_usage = smem + limits.reserved_smem_per_block_bytes  # static + opted-in dynamic maximum
    per_block_cap = np.where(
        max_usage > limits.smem_per_block_default_bytes,
        limits.smem_per_block_optin_bytes,
        limits.smem_per_block_default_bytes,
    ) + limits.reserved_smem_per_block_bytes
    if carveout_percent is None:
        preferred = limits.smem_per_sm_bytes
    else:
        preferred = int(carveout_percent * limits.smem_per_sm_bytes // 100)
    preferred = int(_align_up_to_carveout(np.asarray(preferred), limits))
    carveout = np.where(preferred >= smem_alloc, preferred, _align_up_to_carveout(smem_alloc, limits))
    by_smem = np.where(smem_alloc > 0, carveout // np.maximum(smem_alloc, 1), UNLIMITED)
    by_smem = np.where(smem_alloc > per_block_cap, 0, by_smem)

    return BlockLimits(
        warps_per_block=warps,
        by_warps=by_warps,
        by_registers=by_registers,
        by_shared_memory=by_smem,
        by_blocks=by_blocks,
        by_barriers=by_barriers,
        registers_per_warp=regs_per_warp,
        registers_per_block=regs_per_block,
        smem_per_block_bytes=smem_alloc,
        smem_carveout_bytes=carveout,
    )


@dataclass(frozen=True)
class OccupancyResult:
    """Resident blocks and warps of one kernel configuration on one SM."""

    compute_capability: str
    threads_per_block: int
    registers_per_thread: int
    smem_per_block_bytes: int  # as asked (static + dynamic)
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float  # active warps / max warps, 0..1
    limiters: list[Limiter]
    blocks_per_sm_by_limit: dict[str, int | None]  # None = unlimited
    warps_per_block: int
    allocated_registers_per_warp: int
    allocated_registers_per_block: int
    allocated_smem_per_block_bytes: int
    smem_carveout_bytes: int
    notes: list[str] = field(default_factory=list)


def _check_inputs(limits: ComputeCapabilityLimits, threads: int, regs: int, smem: int) -> None:
    if not isinstance(threads, (int, np.integer)) or threads < 1:
        raise InputError(f"threads: must be a whole number >= 1, got {threads}", field="threads")
    if threads > limits.max_threads_per_block:
        raise InputError(
            f"threads: {threads} exceeds the {limits.max_threads_per_block} threads a block may have "
            f"on CC {limits.compute_capability}",
            field="threads",
        )
    if not isinstance(regs, (int, np.integer)) or regs < 0 or regs > limits.max_registers_per_thread:
        raise InputError(
            f"regs: must be a whole number from 0 to {limits.max_registers_per_thread}, got {regs}", field="regs"
        )
    if smem < 0:
        raise InputError(f"smem: must be >= 0 bytes, got {smem}", field="smem")


def occupancy(
    limits: ComputeCapabilityLimits,
    threads_per_block: int,
    registers_per_thread: int,
    smem_per_block_bytes: int = 0,
    *,
    carveout_percent: int | None = None,
    barriers_per_block: int = 1,
) -> OccupancyResult:
    """Occupancy of one configuration (cudaOccMaxActiveBlocksPerMultiprocessor; formula in module doc).

    Raises InputError for a block that is not launchable at all (too many threads or registers per
    thread); a block whose registers or shared memory exceed the per-block limits gets 0 blocks
    with that resource as limiter, as the CUDA calculator reports it.
    """
    _check_inputs(limits, threads_per_block, registers_per_thread, smem_per_block_bytes)
    if carveout_percent is not None and not 0 <= carveout_percent <= 100:
        raise InputError(f"carveout: must be 0..100 percent, got {carveout_percent}", field="carveout")
    bl = block_limits(
        limits, threads_per_block, registers_per_thread, smem_per_block_bytes,
        carveout_percent=carveout_percent, barriers_per_block=barriers_per_block,
    )
    per_limit = {
        Limiter.WARPS: int(bl.by_warps),
        Limiter.REGISTERS: int(bl.by_registers),
        Limiter.SHARED_MEMORY: int(bl.by_shared_memory),
        Limiter.BLOCKS: int(bl.by_blocks),
        Limiter.BARRIERS: int(bl.by_barriers),
    }
    active = min(per_limit.values())
    limiters = [lim for lim, value in per_limit.items() if value == active]
    warps = int(bl.warps_per_block)
    notes = []
    if active == 0:
        notes.append("the block cannot launch: " + ", ".join(lim.value for lim in limiters) + " exceed the per-block limit")
    return OccupancyResult(
        compute_capability=limits.compute_capability,
        threads_per_block=int(threads_per_block),
        registers_per_thread=int(registers_per_thread),
        smem_per_block_bytes=int(smem_per_block_bytes),
        active_blocks_per_sm=active,
        active_warps_per_sm=active * warps,
        max_warps_per_sm=limits.max_warps_per_sm,
        occupancy=active * warps / limits.max_warps_per_sm,
        limiters=limiters,
        blocks_per_sm_by_limit={lim.value: (None if v >= UNLIMITED else v) for lim, v in per_limit.items()},
        warps_per_block=warps,
        allocated_registers_per_warp=int(bl.registers_per_warp),
        allocated_registers_per_block=int(bl.registers_per_block),
        allocated_smem_per_block_bytes=int(bl.smem_per_block_bytes),
        smem_carveout_bytes=int(bl.smem_carveout_bytes),
        notes=notes,
    )


@dataclass(frozen=True)
class BestBlockSize:
    """The block size that maximises resident threads (cudaOccMaxPotentialOccupancyBlockSize)."""

    compute_capability: str
    block_size: int
    active_blocks_per_sm: int
    occupancy: float
    min_grid_size: int | None  # blocks for a full-machine launch (needs the SM count)


def max_potential_block_size(
    limits: ComputeCapabilityLimits,
    registers_per_thread: int,
    smem_per_block_bytes: int = 0,
    *,
    block_size_limit: int | None = None,
    sm_count: int | None = None,
    carveout_percent: int | None = None,
) -> BestBlockSize:
    """Block size with the most resident threads per SM, as cudaOccMaxPotentialOccupancyBlockSize:
    try block sizes from the limit down in steps of one warp, keep the first (largest) size that
    strictly improves active_blocks * block_size; min grid size = blocks per SM * SM count.
    Shared memory is per block (constant over block sizes)."""
    cap = limits.max_threads_per_block if block_size_limit is None else min(block_size_limit, limits.max_threads_per_block)
    if cap < 1:
        raise InputError(f"block_size_limit: must be >= 1, got {block_size_limit}", field="block_size_limit")
    _check_inputs(limits, 1, registers_per_thread, smem_per_block_bytes)
    ws = limits.warp_size
    aligned = np.arange(_round_up(cap, ws), 0, -ws, dtype=np.int64)  # descending, as the header tries them
    sizes = np.minimum(aligned, cap)
    active = block_limits(
        limits, sizes, registers_per_thread, smem_per_block_bytes, carveout_percent=carveout_percent
    ).active_blocks
    threads = active * sizes
    best = int(np.argmax(threads))  # first maximum = largest block size among ties
    if threads[best] == 0:
        raise InputError(
            "regs/smem: no block size can launch with these registers and shared memory per block",
            field="smem",
        )
    block = int(sizes[best])
    blocks = int(active[best])
    return BestBlockSize(
        compute_capability=limits.compute_capability,
        block_size=block,
        active_blocks_per_sm=blocks,
        occupancy=blocks * (-(-block // ws)) / limits.max_warps_per_sm,
        min_grid_size=blocks * sm_count if sm_count else None,
    )
