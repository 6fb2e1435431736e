"""Global-memory coalescing of one warp-wide load or store.

The memory system serves a warp's request in 32-byte sectors of 128-byte cache lines (CUDA C++
Best Practices Guide, "Coalesced Access to Global Memory"; CUDA C++ Programming Guide, "Device
Memory Accesses" and "Compute Capability 5.x+ / Global Memory"). For lane `l` reading
`elem_bytes` bytes at byte address

    address(l) = base_offset_bytes + index(l) * elem_bytes,   index(l) = stride * l  (or an expression)

    sectors_per_request = |{ floor(b / 32) : b a byte touched by an active lane }|
    lines_per_request   = |{ floor(b / 128) : ... }|
    useful_bytes        = distinct bytes the active lanes touch
    efficiency          = useful_bytes / (32 * sectors_per_request)     (Nsight's load/store efficiency)
    ideal_sectors       = ceil(useful_bytes / 32)  (the same bytes, contiguous and 32-byte aligned)

Addresses are relative to a 128-byte aligned array start (cudaMalloc returns 256-byte aligned
memory), so `base_offset_bytes` is the misalignment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.kernel.lane_expression import evaluate_over_lanes

SECTOR_BYTES = 32
LINE_BYTES = 128
WARP_SIZE = 32


@dataclass(frozen=True)
class GlobalAccessResult:
    elem_bytes: int
    active_lanes: int
    requested_bytes: int  # active lanes x element size
    useful_bytes: int  # distinct bytes
    sectors_per_request: int
    lines_per_request: int
    ideal_sectors: int
    efficiency: float  # useful / transferred bytes, 0..1
    excess_sectors_factor: float  # sectors / ideal sectors (1 = perfectly coalesced)
    element_indices: list[int]


def check_elem_bytes(elem_bytes: int) -> None:
    if elem_bytes not in (1, 2, 4, 8, 16):
        raise InputError(f"elem_bytes: must be 1, 2, 4, 8 or 16 (bytes one lane loads), got {elem_bytes}",
                         field="elem_bytes")


def lane_indices(stride: int = 1, offset: int = 0, index_expression: str | None = None,
                 warp_size: int = WARP_SIZE) -> np.ndarray:
    """Element index each lane accesses: `offset + stride * lane`, or the expression in `lane`."""
    if index_expression is not None:
        return evaluate_over_lanes(index_expression, warp_size, field="index")
    return offset + stride * np.arange(warp_size, dtype=np.int64)


def analyze_global_access(
    elem_bytes: int,
    stride: int = 1,
    offset_elems: int = 0,
    *,
    index_expression: str | None = None,
    base_offset_bytes: int = 0,
    active_mask: np.ndarray | None = None,
) -> GlobalAccessResult:
    """Sectors, lines and efficiency of one warp request (formula in module doc)."""
    check_elem_bytes(elem_bytes)
    idx = lane_indices(stride, offset_elems, index_expression)
    active = np.ones(WARP_SIZE, dtype=bool) if active_mask is None else np.asarray(active_mask, dtype=bool)
    if not active.any():
        raise InputError("predicate: no lane is active, so there is no request", field="predicate")
    start = base_offset_bytes + idx[active] * elem_bytes
    if np.any(start < 0):
        raise InputError("index: a lane addresses a negative offset; use offsets >= 0", field="index")
    touched = np.unique((start[:, None] + np.arange(elem_bytes)[None, :]).ravel())
    sectors = np.unique(touched // SECTOR_BYTES).size
    lines = np.unique(touched // LINE_BYTES).size
    useful = touched.size
    ideal = -(-useful // SECTOR_BYTES)
    return GlobalAccessResult(
        elem_bytes=elem_bytes,
        active_lanes=int(active.sum()),
        requested_bytes=int(active.sum()) * elem_bytes,
        useful_bytes=int(useful),
        sectors_per_request=int(sectors),
        lines_per_request=int(lines),
        ideal_sectors=int(ideal),
        efficiency=useful / (SECTOR_BYTES * sectors),
        excess_sectors_factor=sectors / ideal,
        element_indices=idx.tolist(),
    )
