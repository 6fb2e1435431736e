"""How the C allocator keeps freed memory, for a process that runs gpuplan's vectorised searches.

The plan search and the serving simulator allocate and free numpy arrays of a few hundred KiB to a
few MiB thousands of times a second. glibc's malloc serves a block above its mmap threshold with a
fresh `mmap` and returns it with `munmap` on free, and trims the top of the heap back to the kernel
once more than M_TRIM_THRESHOLD is free (mallopt(3): defaults 128 KiB each, the mmap threshold then
rising dynamically up to DEFAULT_MMAP_THRESHOLD_MAX, 32 MiB on 64-bit). Each fresh page then costs a
minor page fault when first written: a GPT-3 175B plan search took ~500 of them (about 1 ms of its
~8 ms, `benchmarks/plan_search.py` page_faults_per_search, 2026-11-28). Raising both thresholds
keeps freed blocks in the heap for the next array: 4-14 faults a search, GPT-3 4.6 -> 5.5 million
plans per CPU-second and DeepSeek-V3 11.5 -> 18.7 million on the 2-core machine, peak RSS 70 -> 74
MiB. Results are unchanged (only where memory comes from changes).

`keep_freed_memory()` is called by the CLI for its own process (cli.main) and by the benchmarks that
time what the CLI runs; a program importing gpuplan as a library keeps its own allocator settings.
"""

from __future__ import annotations

import sys

#: mallopt(3) parameter numbers (glibc malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: blocks up to 32 MiB (glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit, the largest it accepts) come
#: from the heap, and up to 256 MiB of free heap stays with the process
MMAP_THRESHOLD_BYTES = 32 * 2**20
TRIM_THRESHOLD_BYTES = 256 * 2**20


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds (module docstring); True where they were set, False
    elsewhere (not Linux, another C library, or a refusal), which changes nothing but speed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl or no libc.so.6: its allocator's own defaults
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


__all__ = ["MMAP_THRESHOLD_BYTES", "M_MMAP_THRESHOLD", "M_TRIM_THRESHOLD", "TRIM_THRESHOLD_BYTES", "keep_freed_memory"]
