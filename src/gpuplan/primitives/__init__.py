"""Primitives: the time of one operator on one GPU (`op_cost`, with achievable efficiency from
`efficiency`) and of one collective on a fabric (`collectives`)."""

from gpuplan.primitives.collectives import (
    Algorithm,
    Collective,
    CollectiveResult,
    collective_time,
    collective_time_array,
)
from gpuplan.primitives.op_cost import (
    OpCost,
    attention_time,
    gemm_time,
    gemm_time_array,
    memory_bound_time,
)

__all__ = [
    "Algorithm", "Collective", "CollectiveResult", "collective_time", "collective_time_array",
    "OpCost", "attention_time", "gemm_time", "gemm_time_array", "memory_bound_time",
]
