"""NeMo 2 training logs -> training rows: iteration_time_s (`train_step_timing in s`).

Format (NVIDIA/NeMo v2.4.0 nemo/lightning/pytorch/callbacks/progress_printer.py `ProgressPrinter`:
the prefix `Training epoch E, iteration N/M` then ` | metric: value` per logged metric; the step time is
the TimingCallback's `train_step_timing` logged `name + ' in s'`, nemo/utils/exp_manager.py):

    Training epoch 0, iteration 19/99 | lr: 0.0003 | global_batch_size: 512 | global_step: 19 | reduced_train_loss: 7.9 | train_step_timing in s: 12.41 | consumed_samples: 10240

The printer averages each metric over its log interval. Steady state: the first `skip_steps` logged
iterations dropped, the median of the rest (training_log.py). The run's shape and layout come from the
config (framework = megatron: NeMo 2 trains with Megatron-core).
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

EXPECTED = "NeMo lines such as 'Training epoch 0, iteration 19/99 | ... | train_step_timing in s: 12.41 | ...'"
_LINE = re.compile(r"\biteration\s+(\d+)\s*/\s*\d+\s*\|.*?\btrain_step_timing in s:\s*(\d+(?:\.\d*)?(?:e[-+]?\d+)?)")


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check(config, "nemo")
    steps = {int(m.group(1)): float(m.group(2)) for m in map(_LINE.search, text.splitlines()) if m}
    if not steps:
        return []
    series = [steps[s] for s in sorted(steps)]
    return run_rows({"iteration_time_s": median_after_warmup(series, skip_steps(config))}, config, "NeMo log", "megatron",
                    filename, prefix)
