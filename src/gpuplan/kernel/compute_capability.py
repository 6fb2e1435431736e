"""Per-compute-capability SM limits used by the occupancy calculation, as data with their source.

Every figure is the value `cudaGetDeviceProperties` reports and `cuda_occupancy.h` uses:

- S_OCC: `cuda_occupancy.h` (CUDA 12.6 / 12.9, `__CUDA_OCC_MAJOR__ 12`): blocks per SM
  (`cudaOccMaxBlocksPerMultiprocessor`), register allocation unit 256 per warp, 4 sub-partitions,
  smem allocation granularity (256 B for CC 7.x, 128 B from CC 8.0), carveout sizes
  (`cudaOccAlignUpShmemSizeVoltaPlus`), block-barrier multiplier.
- S_CCCL: NVIDIA/cccl `libcudacxx/include/cuda/__device/arch_traits.h` @571f2fc3: threads per SM,
  shared memory per SM and per block (opt-in), reserved shared memory per block
  (`(cc >= 80) ? 1024 : 0`), registers per SM / block.

Both are transcribed in ../shared/reference/hardware.md section 2.1.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError

KIB = 1024


@dataclass(frozen=True)
class ComputeCapabilityLimits:
    """What one SM of a compute capability offers, as the occupancy calculator sees it."""

    compute_capability: str
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    registers_per_sm: int
    max_registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int  # registers, allocated per warp
    sub_partitions: int  # register file split in this many equal parts (one per warp scheduler)
    smem_allocation_unit_bytes: int
    smem_per_sm_bytes: int  # largest carveout
    smem_per_block_default_bytes: int  # without opt-in (cudaFuncAttributeMaxDynamicSharedMemorySize)
    smem_per_block_optin_bytes: int
    reserved_smem_per_block_bytes: int  # taken by the driver from every block (CC >= 8.0)
    smem_carveouts_bytes: tuple[int, ...]  # shared-memory sizes the L1/smem split can take, ascending
    barrier_multiplier: int  # block barriers available per SM = multiplier x max_blocks_per_sm (CC >= 9)
    warp_size: int = 32
    source: str = (
        "cuda_occupancy.h (CUDA 12.9) and NVIDIA/cccl arch_traits.h @571f2fc3, "
        "via ../shared/reference/hardware.md section 2.1"
    )

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def major(self) -> int:
        return int(self.compute_capability.split(".")[0])


def _kib(*sizes: int) -> tuple[int, ...]:
    return tuple(s * KIB for s in sizes)


_VOLTA_CARVEOUTS = _kib(0, 8, 16, 32, 64, 96)
_TURING_CARVEOUTS = _kib(32, 64)
_GA100_CARVEOUTS = _kib(0, 8, 16, 32, 64, 100, 132, 164)
_GA10X_CARVEOUTS = _kib(0, 8, 16, 32, 64, 100)
_HOPPER_CARVEOUTS = _kib(0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


def _cc(cc: str, threads: int, blocks: int, smem_sm_kib: int, carveouts: tuple[int, ...], barrier_multiplier: int):
    major = int(cc.split(".")[0])
    reserved = KIB if major >= 8 else 0
    return ComputeCapabilityLimits(
        compute_capability=cc,
        max_threads_per_sm=threads,
        max_blocks_per_sm=blocks,
        max_threads_per_block=1024,
        registers_per_sm=65536,
        max_registers_per_block=65536,
        max_registers_per_thread=255,
        register_allocation_unit=256,
        sub_partitions=4,
        smem_allocation_unit_bytes=256 if major < 8 else 128,
        smem_per_sm_bytes=smem_sm_kib * KIB,
        smem_per_block_default_bytes=48 * KIB,
        # opt-in per-block maximum = per-SM maximum minus the 1 KB reserved per block (CCCL)
        smem_per_block_optin_bytes=smem_sm_kib * KIB - reserved,
        reserved_smem_per_block_bytes=reserved,
        smem_carveouts_bytes=carveouts,
        barrier_multiplier=barrier_multiplier,
    )


#: The supported compute capabilities (hardware.md section 2.1 table).
CC_LIMITS: dict[str, ComputeCapabilityLimits] = {
    lim.compute_capability: lim
    for lim in (
        _cc("7.0", 2048, 32, 96, _VOLTA_CARVEOUTS, 2),  # V100
        _cc("7.5", 1024, 16, 64, _TURING_CARVEOUTS, 2),  # T4, RTX 20xx
        _cc("8.0", 2048, 32, 164, _GA100_CARVEOUTS, 2),  # A100
        _cc("8.6", 1536, 16, 100, _GA10X_CARVEOUTS, 1),  # A10, RTX 30xx
        _cc("8.7", 1536, 16, 164, _GA100_CARVEOUTS, 1),  # Jetson Orin
        _cc("8.9", 1536, 24, 100, _GA10X_CARVEOUTS, 1),  # L4, L40S, RTX 40xx
        _cc("9.0", 2048, 32, 228, _HOPPER_CARVEOUTS, 2),  # H100, H200
        _cc("10.0", 2048, 32, 228, _HOPPER_CARVEOUTS, 2),  # B200, GB200
        _cc("12.0", 1536, 24, 100, _GA10X_CARVEOUTS, 1),  # RTX 50xx, RTX PRO Blackwell
    )
}

SUPPORTED_CCS: tuple[str, ...] = tuple(CC_LIMITS)


def limits_for(compute_capability: str) -> ComputeCapabilityLimits:
    """Limits of one compute capability ("9.0", "90", "sm_90" and "9" are all accepted)."""
    text = str(compute_capability).strip().lower().removeprefix("sm_").removeprefix("compute_")
    if "." not in text and text.isdigit():
        text = f"{text[:-1]}.{text[-1]}" if len(text) >= 2 else f"{text}.0"
    if text in CC_LIMITS:
        return CC_LIMITS[text]
    raise InputError(
        f"cc: unsupported compute capability '{compute_capability}'; supported: {', '.join(SUPPORTED_CCS)}",
        field="cc",
    )
