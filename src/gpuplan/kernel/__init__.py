"""Kernel analysis without a GPU: occupancy, roofline, memory access, divergence, speedup laws.

One concept per module:
- compute_capability: per-CC SM limits (data, sourced)
- occupancy: cudaOccMaxActiveBlocksPerMultiprocessor / MaxPotentialBlockSize
- workload_intensity: FLOPs and bytes of GEMM, elementwise, attention, a model step
- roofline: attainable FLOP/s, ridge points, placement of workloads
- memory_access: global-memory coalescing of one warp
- shared_memory_banks: bank conflicts and padding
- divergence: branch divergence of a lane predicate
- lane_expression: the safe expression parser used by the three above
- speedup_laws: Amdahl, Gustafson, Little
- plots: occupancy and roofline figures
"""

from gpuplan.kernel.compute_capability import CC_LIMITS, SUPPORTED_CCS, ComputeCapabilityLimits, limits_for
from gpuplan.kernel.divergence import DivergenceResult, analyze_divergence
from gpuplan.kernel.memory_access import GlobalAccessResult, analyze_global_access
from gpuplan.kernel.occupancy import (
    BestBlockSize, Limiter, OccupancyResult, block_limits, max_potential_block_size, occupancy,
)
from gpuplan.kernel.roofline import Bound, Ceiling, Roofline, RooflinePoint, place, roofline
from gpuplan.kernel.shared_memory_banks import BankConflictResult, analyze_bank_conflicts
from gpuplan.kernel.speedup_laws import LatencyHidingResult, SpeedupResult, amdahl, gustafson, littles_law
from gpuplan.kernel.workload_intensity import (
    KernelWork, attention_work, dtype_bytes, elementwise_work, gemm_work, step_work,
)

__all__ = [
    "CC_LIMITS", "SUPPORTED_CCS", "ComputeCapabilityLimits", "limits_for",
    "DivergenceResult", "analyze_divergence", "GlobalAccessResult", "analyze_global_access",
    "BestBlockSize", "Limiter", "OccupancyResult", "block_limits", "max_potential_block_size", "occupancy",
    "Bound", "Ceiling", "Roofline", "RooflinePoint", "place", "roofline",
    "BankConflictResult", "analyze_bank_conflicts",
    "LatencyHidingResult", "SpeedupResult", "amdahl", "gustafson", "littles_law",
    "KernelWork", "attention_work", "dtype_bytes", "elementwise_work", "gemm_work", "step_work",
]
