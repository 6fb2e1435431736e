"""torchtitan training logs -> training rows: tokens_per_s_per_gpu (`tps`), tflops_per_gpu_model
(`tflops`), mfu_pct (`mfu`), peak_mem_reserved_gib (`memory`: max reserved GiB).

Format (pytorch/torchtitan torchtitan/components/metrics.py, `MetricsProcessor.log`; ANSI colour
codes and the `[rank0]:[titan] ... - root - INFO -` prefix are ignored; older versions print `wps`
for `tps`):

    step: 10  loss:  7.8912  memory: 12.34GiB(12.98%)  tps: 1,234  tflops: 123.45  mfu: 39.52%

`tps` is tokens per second per device and `tflops` model TFLOP/s per device (torchtitan
`get_num_flop_per_token`: 6 N + attention, no recompute), as SCHEMA.md defines the two metrics.
Steady state: the first `skip_steps` logged steps dropped (training_log.py); rates are medians,
memory the maximum. The run's shape and layout come from the config (framework = torchtitan).
"""

from __future__ import annotations

import re
from typing import Mapping

from gpuplan.interfaces.calibration.importers.training_log import check, median_after_warmup, run_rows, skip_steps, steady

EXPECTED = "torchtitan lines such as 'step: 10  loss: 7.89  memory: 12.34GiB(12.98%)  tps: 1,234  tflops: 123.4  mfu: 39.5%'"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUM = r"(\d[\d,]*(?:\.\d+)?)"  # 1,234 or 123.45 (torchtitan prints thousands separators)
_STEP = re.compile(r"\bstep:\s*(\d+)\b.*?\bmemory:\s*" + _NUM + r"\s*GiB.*?\b(?:tps|wps):\s*" + _NUM
                   + r"(?:.*?\btflops:\s*" + _NUM + r")?(?:.*?\bmfu:\s*" + _NUM + r"\s*%)?")


def _f(text: str | None) -> float | None:
    return None if text is None else float(text.replace(",", ""))


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check(config, "torchtitan")
    steps: dict[int, tuple] = {}
    for line in text.splitlines():
        m = _STEP.search(_ANSI.sub("", line))
        if m:
            steps[int(m.group(1))] = (_f(m.group(2)), _f(m.group(3)), _f(m.group(4)), _f(m.group(5)))
    if not steps:
        return []
    skip = skip_steps(config)
    series = [steps[s] for s in sorted(steps)]

    def col(i):
        return [v[i] for v in series if v[i] is not None]

    memory = steady(col(0), skip)
    figures = {
        "tokens_per_s_per_gpu": median_after_warmup(col(1), skip),
        "tflops_per_gpu_model": median_after_warmup(col(2), skip),
        "mfu_pct": median_after_warmup(col(3), skip),
        "peak_mem_reserved_gib": max(memory) if memory else None,
    }
    return run_rows(figures, config, "torchtitan log", "torchtitan", filename, prefix)
