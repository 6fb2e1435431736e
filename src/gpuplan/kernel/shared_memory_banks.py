"""Shared-memory bank conflicts of one warp-wide access, and what padding does.

Source: CUDA C++ Programming Guide, "Compute Capability 5.x / Shared Memory" (the model holds
through CC 12.x): shared memory has 32 banks, successive 32-bit words go to successive banks,
each bank serves one 32-bit word per clock, and "a shared memory request for a warp does not
generate a bank conflict between two threads that access any address within the same 32-bit
word" (reads of one word are broadcast). Accesses wider than 4 bytes are split by the hardware
into phases of 128 bytes: 8-byte elements in 2 half-warps, 16-byte elements in 4 quarter-warps,
and bank conflicts only arise between lanes of the same phase.

    word(l, j)       = floor((base + index(l) * elem_bytes) / 4) + j,   j < ceil(elem_bytes / 4)
    bank             = word mod 32
    wavefronts(p)    = max over banks of |distinct words of phase p in that bank|   (>= 1)
    conflict_ways    = max_p wavefronts(p)            (1 = conflict-free, 32 = fully serialised)
    total_wavefronts = sum_p wavefronts(p);   ideal = number of phases;   efficiency = ideal / total

Padding a 2-D tile's row by `pad` elements turns a column walk with row pitch `stride` into
stride `stride + pad`; stride 32 (4-byte elements) is 32-way, stride 33 is conflict-free.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.kernel.memory_access import check_elem_bytes, lane_indices

BANKS = 32
BANK_WIDTH_BYTES = 4
WARP_SIZE = 32


@dataclass(frozen=True)
class BankConflictResult:
    elem_bytes: int
    stride: int | None  # effective stride in elements (after padding); None for an index expression
    phases: int  # hardware splits of the warp (1 for <= 4-byte elements, 2 for 8, 4 for 16)
    conflict_ways: int  # worst phase: distinct words in one bank
    wavefronts: int  # shared-memory cycles the request takes
    ideal_wavefronts: int
    efficiency: float  # ideal / actual, 0..1
    banks_by_lane: list[int]  # first bank each lane touches


def lanes_per_phase(elem_bytes: int) -> int:
    """Lanes served together: 32 x elem_bytes <= 128 bytes per phase."""
    return WARP_SIZE // max(1, elem_bytes // BANK_WIDTH_BYTES)


def analyze_bank_conflicts(
    elem_bytes: int = 4,
    stride: int = 1,
    offset_elems: int = 0,
    *,
    pad: int = 0,
    index_expression: str | None = None,
) -> BankConflictResult:
    """Bank conflicts of one warp's shared-memory access (formula in module doc)."""
    check_elem_bytes(elem_bytes)
    if pad < 0:
        raise InputError(f"pad: must be >= 0 elements, got {pad}", field="pad")
    if index_expression is not None and pad:
        raise InputError("pad: applies to --stride (the row pitch); write the padded pitch into --index instead",
                         field="pad")
    effective_stride = stride + pad
    idx = lane_indices(effective_stride, offset_elems, index_expression)
    byte_address = idx * elem_bytes
    if np.any(byte_address < 0):
        raise InputError("index: a lane addresses a negative offset; use offsets >= 0", field="index")
    words_per_lane = -(-elem_bytes // BANK_WIDTH_BYTES)
    words = (byte_address // BANK_WIDTH_BYTES)[:, None] + np.arange(words_per_lane)[None, :]  # (32, w)
    per_phase = lanes_per_phase(elem_bytes)
    phase = np.repeat(np.arange(WARP_SIZE) // per_phase, words_per_lane)
    words = words.ravel()
    # distinct (phase, word) pairs; then count distinct words per (phase, bank)
    pairs = np.unique(np.stack([phase, words], axis=1), axis=0)
    phase_bank = pairs[:, 0] * BANKS + pairs[:, 1] % BANKS
    keys, counts = np.unique(phase_bank, return_counts=True)
    n_phases = WARP_SIZE // per_phase
    per_phase_wavefronts = np.ones(n_phases, dtype=np.int64)
    np.maximum.at(per_phase_wavefronts, keys // BANKS, counts)
    total = int(per_phase_wavefronts.sum())
    return BankConflictResult(
        elem_bytes=elem_bytes,
        stride=None if index_expression is not None else effective_stride,
        phases=n_phases,
        conflict_ways=int(per_phase_wavefronts.max()),
        wavefronts=total,
        ideal_wavefronts=n_phases,
        efficiency=n_phases / total,
        banks_by_lane=((byte_address // BANK_WIDTH_BYTES) % BANKS).tolist(),
    )
