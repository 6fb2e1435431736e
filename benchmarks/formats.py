"""Throughput of MX quantisation on this machine, beside its memcpy bandwidth (the physical limit).

GB/s = bytes of float32 input processed per second (decimal GB), for dequantization the bytes of
float32 output. memcpy_gbps = bytes copied per second by np.copyto of an array of the same size, in
the same process (reads and writes it once, like quantisation). The kernels (formats.kernels for MX,
formats.nvfp4_kernels for NVFP4) split the blocks over one thread per core; the number used is
printed (`threads:`). Targets (issue 35): MXFP4 and MXFP8 quantize >= 75 %, MXFP4 dequantize >= 50 %
of memcpy. `*_dequantize_gbps` returns a fresh array, whose page faults (the kernel zeroing 64 MiB)
cost about twice the kernel; `mxfp4_dequantize_into_gbps` writes into a preallocated array
(`dequantize(out=...)`), as memcpy does. Each figure is the best of several runs (the least disturbed by other processes); the
runs are interleaved (one of each operation per round) so that memcpy and the kernels meet the
same load on a shared machine. The machine's load average is printed first, and, per operation,
`*_gbps_per_cpu_s`: bytes per CPU-second of this process (its threads together) in the best
round, which other processes' load disturbs far less than wall time. Last lines: `name: value unit`.

Run: python benchmarks/formats.py [--mib 64]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from gpuplan import formats as F


def best_rounds(ops: dict, nbytes: int, repeats: int) -> tuple[dict, dict]:
    """{name: best GB/s (wall)}, {name: GB per CPU-second in that best round}; one call of each op per round."""
    best = {name: (float("inf"), 0.0) for name in ops}
    for _ in range(repeats):
        for name, fn in ops.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if wall < best[name][0]:
                best[name] = (wall, cpu)
    return ({n: nbytes / w / 1e9 for n, (w, _) in best.items()},
            {n: nbytes / max(c, 1e-9) / 1e9 for n, (_, c) in best.items()})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64, help="input size in MiB of float32")
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    n = args.mib * (1 << 20) // 4
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32).reshape(-1, 4096)
    out = np.empty_like(x)
    deq_out = np.empty_like(x)
    nbytes = x.nbytes

    from gpuplan.formats.kernels import threads_for

    F.quantize_packed(x[:1], "mxfp4")  # compile the kernels outside the timing
    F.quantize(x[:16], "mxfp8_e4m3")
    q4 = F.quantize_packed(x, "mxfp4")
    q8 = F.quantize(x, "mxfp8_e4m3")
    qn = F.quantize(x, "nvfp4")
    q4.dequantize(), q8.dequantize(), qn.dequantize()

    ops = {
        "memcpy_gbps": lambda: np.copyto(out, x),
        "mxfp4_quantize_pack_gbps": lambda: F.quantize_packed(x, "mxfp4"),
        "mxfp8_e4m3_quantize_gbps": lambda: F.quantize(x, "mxfp8_e4m3"),
        "nvfp4_quantize_gbps": lambda: F.quantize(x, "nvfp4"),
        "mxfp4_dequantize_gbps": q4.dequantize,
        "mxfp4_dequantize_into_gbps": lambda: q4.dequantize(out=deq_out),
        "mxfp8_e4m3_dequantize_gbps": q8.dequantize,
        "nvfp4_dequantize_gbps": qn.dequantize,
    }
    results, per_cpu = best_rounds(ops, nbytes, args.repeats)
    memcpy = results["memcpy_gbps"]
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    print(f"input: {nbytes / 2**20:.0f} MiB float32, shape {list(x.shape)}, blocks along the last axis")
    print(f"threads: {threads_for(x.size // 32)}")
    for name, value in per_cpu.items():
        print(f"{name.removesuffix('_gbps')}_gbps_per_cpu_s: {value:.2f} GB/CPU-s")
    for name, value in results.items():
        print(f"{name}: {value:.2f} GB/s")
    for name in ("mxfp4_quantize_pack", "mxfp8_e4m3_quantize", "nvfp4_quantize", "mxfp4_dequantize",
                 "mxfp4_dequantize_into", "mxfp8_e4m3_dequantize", "nvfp4_dequantize"):
        print(f"{name}_pct_of_memcpy: {100 * results[name + '_gbps'] / memcpy:.0f} %")


if __name__ == "__main__":
    main()
