"""MaxText training logs -> training rows: iteration_time_s (`seconds`), tflops_per_gpu_model
(`TFLOP/s/device`), tokens_per_s_per_gpu (`Tokens/s/device`).

Format (AI-Hypercomputer/maxtext at e591f30c, src/maxtext/common/metric_logger.py: the parts
`completed step: N`, `seconds: S` (perf/step_time_seconds), `TFLOP/s/device: F`
(perf/per_device_tflops_per_sec), `Tokens/s/device: T` joined by ', ', after absl's prefix):

    I1128 10:00:00.000000 140110937163584 metric_logger.py:214] completed step: 12, seconds: 3.741, TFLOP/s/device: 512.300, Tokens/s/device: 2190.100, total_weights: 2097152, loss: 7.912

MaxText's TFLOP/s counts the model's FLOPs per device without recomputation (maxtext_utils
calculate_tflops_training_per_device), as SCHEMA.md's tflops_per_gpu_model does. Steady state: the first
`skip_steps` logged steps dropped, medians (training_log.py); the run's layout from the config
(framework = maxtext, SCHEMA.md's value; validation reads it as Framework.OTHER, as --emit maxtext runs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpuplan.interfaces.calibration.importers.training_log import (
    check,
    median_after_warmup,
    run_rows,
    skip_steps,
)

EXPECTED = "MaxText lines such as 'completed step: 12, seconds: 3.741, TFLOP/s/device: 512.3, Tokens/s/device: 2190.1'"
_NUM = r"(\d+(?:\.\d*)?)"
_LINE = re.compile(r"\bcompleted step:\s*(\d+),\s*seconds:\s*" + _NUM + r"(?:.*?TFLOP/s/device:\s*" + _NUM
                   + r")?(?:.*?Tokens/s/device:\s*" + _NUM + r")?")


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check(config, "maxtext")
    steps = {}
    for m in map(_LINE.search, text.splitlines()):
        if m:
            steps[int(m.group(1))] = tuple(None if g is None else float(g) for g in m.groups()[1:])
    if not steps:
        return []
    skip = skip_steps(config)
    series = [steps[s] for s in sorted(steps)]

    def col(i):
        return [v[i] for v in series if v[i] is not None]

    figures = {"iteration_time_s": median_after_warmup(col(0), skip),
               "tflops_per_gpu_model": median_after_warmup(col(1), skip),
               "tokens_per_s_per_gpu": median_after_warmup(col(2), skip)}
    return run_rows(figures, config, "MaxText log", "maxtext", filename, prefix)
