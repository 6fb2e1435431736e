"""Megatron-LM training logs -> training rows: iteration_time_s, tflops_per_gpu_model, peak_mem_gib
(and peak_mem_reserved_gib).

Format (NVIDIA/Megatron-LM megatron/training/training.py, `training_log` and `report_memory`):

     [2024-05-01 10:00:00] iteration       20/     500 | consumed samples:        20480 | elapsed time per iteration (ms): 1523.4 | throughput per GPU (TFLOP/s/GPU): 402.1 | learning rate: ... | global batch size:  1024 | lm loss: ... |
    [Rank 0] (after 10 iterations) memory (MB) | allocated: 20480.5 | max allocated: 61234.7 | reserved: 65536.0 | max reserved: 65536.0

`elapsed time per iteration (ms)` -> iteration_time_s (/ 1000); `throughput per GPU (TFLOP/s/GPU)`
-> tflops_per_gpu_model (Megatron's `num_floating_point_operations`: model FLOPs, no recompute);
`max allocated` (MB = 2**20 bytes, torch.cuda.max_memory_allocated / 2**20) -> peak_mem_gib
(/ 1024), the maximum over the ranks that report; `max reserved` likewise -> peak_mem_reserved_gib.
Steady state: the first `skip_steps` logged iterations dropped, medians (training_log.py).
"""

from __future__ import annotations

import re
from typing import Mapping

from gpuplan.interfaces.calibration.importers.training_log import check, median_after_warmup, run_rows, skip_steps

EXPECTED = "Megatron-LM lines with 'elapsed time per iteration (ms):' or '[Rank N] ... memory (MB)'"
_ITER = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|")
_TIME = re.compile(r"elapsed time per iteration \(ms\):\s*(\d+(?:\.\d*)?)")
_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*(\d+(?:\.\d*)?)")
_MEM = re.compile(r"memory \(MB\)\s*\|\s*allocated:\s*(\d+(?:\.\d*)?)\s*\|\s*max allocated:\s*(\d+(?:\.\d*)?)"
                  r"(?:\s*\|\s*reserved:\s*(\d+(?:\.\d*)?)\s*\|\s*max reserved:\s*(\d+(?:\.\d*)?))?")


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check(config, "megatron")
    times: dict[int, float] = {}
    tflops: dict[int, float] = {}
    max_alloc: list[float] = []
    max_reserved: list[float] = []
    for line in text.splitlines():
        it = _ITER.search(line)
        t = _TIME.search(line)
        if it and t:
            times[int(it.group(1))] = float(t.group(1))
            f = _TFLOPS.search(line)
            if f:
                tflops[int(it.group(1))] = float(f.group(1))
        mem = _MEM.search(line)
        if mem:
            max_alloc.append(float(mem.group(2)))
            if mem.group(4):
                max_reserved.append(float(mem.group(4)))
    if not times and not max_alloc:
        return []
    skip = skip_steps(config)
    time_ms = median_after_warmup([times[i] for i in sorted(times)], skip)
    tf = median_after_warmup([tflops[i] for i in sorted(tflops)], skip)
    figures = {
        "iteration_time_s": None if time_ms is None else time_ms / 1000.0,
        "tflops_per_gpu_model": tf,
        "peak_mem_gib": max(max_alloc) / 1024.0 if max_alloc else None,
        "peak_mem_reserved_gib": max(max_reserved) / 1024.0 if max_reserved else None,
    }
    return run_rows(figures, config, "Megatron-LM log", "megatron", filename, prefix)
