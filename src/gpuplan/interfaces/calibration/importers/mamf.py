"""mamf-finder.py logs (stas00/ml-engineering compute/accelerator/benchmarks/mamf-finder.py: the
Maximum Achievable Matmul FLOPS finder) -> matmul rows, one per MxNxK shape, metric `matmul_tflops`
(the shape's mean TFLOP/s; TFLOPS = 10**12 FLOP/s as its legend says).

Format (the script's printed lines; `\\r`-updated progress rows become lines in its log file):

    ** Dtype: torch.bfloat16
         1 |  756.1(mean)  758.2(median)  762.3(max) @ 256x4096x4096        | best: ...
    Tried 80 shapes => the best outcomes were:
    mean:   756.1 TFLOPS @ 8192x4096x4096 (MxNxK)

Per-shape lines are used when present; a log holding only the summary gives its `mean:` shape.
The GPU (a catalog GPU id) comes from the config: `system = "h100-sxm5-80gb"`; the dtype from
`** Dtype:` (else the config, else bf16).
"""

from __future__ import annotations

import re
from typing import Mapping

from gpuplan.interfaces.calibration.importers import MATMUL, base_row, check_config, number_text

EXPECTED = "mamf-finder lines such as '1 | 756.1(mean) 758.2(median) 762.3(max) @ 256x4096x4096'"
_SHAPE = re.compile(r"\|\s*(\d+(?:\.\d*)?)\(mean\)\s+(\d+(?:\.\d*)?)\(median\)\s+(\d+(?:\.\d*)?)\(max\)\s*@\s*(\d+)x(\d+)x(\d+)")
_SUMMARY = re.compile(r"^\s*mean:\s*(\d+(?:\.\d*)?)\s*TFLOPS\s*@\s*(\d+)x(\d+)x(\d+)", re.MULTILINE)
_DTYPE = re.compile(r"\*\*\s*Dtype:\s*(?:torch\.)?(\w+)")
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
           "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "tf32": "tf32"}


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check_config(config, MATMUL, ["system"], "mamf")
    found: dict[tuple[int, int, int], float] = {}
    for m in _SHAPE.finditer(text):
        found[(int(m.group(4)), int(m.group(5)), int(m.group(6)))] = float(m.group(1))  # last report of a shape wins
    if not found:
        for m in _SUMMARY.finditer(text):
            found[(int(m.group(2)), int(m.group(3)), int(m.group(4)))] = float(m.group(1))
    dt = _DTYPE.search(text)
    dtype = config.get("dtype") or (_DTYPES.get(dt.group(1).lower(), dt.group(1).lower()) if dt else "bf16")
    out = []
    for i, ((mm, nn, kk), tflops) in enumerate(found.items(), start=1):
        if mm < 1 or nn < 1 or kk < 1 or tflops <= 0:
            continue
        row = base_row(f"{prefix}-{i}", "mamf-finder", filename, config, MATMUL)
        row.update({"m": str(mm), "n": str(nn), "k": str(kk), "dtype": dtype, "metric": "matmul_tflops",
                    "value": number_text(tflops)})
        out.append(row)
    return out
