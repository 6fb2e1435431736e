"""Whether a training.csv row's full activation checkpointing stops its recompute early
(`TrainPlan.checkpoint_early_stop`; the model: workloads.training.step.checkpoint_early_stop), read from
its `notes` and `source` cells, the same rule for every torchtitan row:

- torchtitan's full AC has always wrapped each block in `ptd_checkpoint_wrapper` (non-reentrant, PyTorch's
  early stop on: torchtitan/parallelisms/parallelize_llama.py in 2024, torchtitan/distributed/
  activation_checkpoint.py in 2025) until its PR #1580 (commit 25413d2, 2025-08-29) passed
  `early_stop=ac_config.early_stop`, default False.
- The run predates the PR when its notes state PyTorch 2.8 or earlier (the PR passes the `early_stop`
  argument of `torch.utils.checkpoint` that pytorch PR #160781 added, merged 2025-08-26 after 2.8.0 of
  2025-08-06, first released in 2.9), or, stating none, its source's document is dated before 2025-08
  (`source_dates.source_name_month`; an August 2025 document may postdate the merge). Other rows, and
  undated ones, keep their framework's default (`Framework.checkpoint_stops_early`).
- NeMo AutoModel rows (framework other) are left alone: its MoE parallelizer wraps blocks in
  `ptd_checkpoint_wrapper` with early stop (nemo_automodel/components/moe/parallelizer.py at 89e3a9f), but its
  benchmark configs run TransformerEngine linears (autograd Functions that save after their GEMM) and MoE
  layers, where early stop skips no GEMM.
"""

from __future__ import annotations

from gpuplan.interfaces.validation.source_dates import source_name_month, stated_torch_version
from gpuplan.specs.execution import Framework

#: torchtitan PR #1580 (commit 25413d2, 2025-08-29) passes `early_stop=False` to its AC wrappers; a run
#: whose document is dated before this month ran the earlier AC, whose recompute stops early (an August
#: 2025 document may postdate the merge and keeps the default)
TORCHTITAN_EARLY_STOP_OFF_SINCE = (2025, 8)
#: the `early_stop` argument of `torch.utils.checkpoint` that PR #1580 passes came with pytorch PR #160781
#: (merged 2025-08-26, after PyTorch 2.8.0 of 2025-08-06): a run on PyTorch 2.8 or earlier predates it
TORCH_CHECKPOINT_EARLY_STOP_ARG = (2, 9)


def checkpoint_early_stop_from_row(row: dict[str, str], framework: Framework) -> bool:
    """A torchtitan row whose run predates torchtitan PR #1580 checkpoints with early stop (module
    docstring): its notes state PyTorch below TORCH_CHECKPOINT_EARLY_STOP_ARG, or, stating none, its
    source's document is dated before TORCHTITAN_EARLY_STOP_OFF_SINCE. Other rows keep their framework's
    default (`Framework.checkpoint_stops_early`)."""
    if framework is not Framework.TORCHTITAN:
        return False
    torch = stated_torch_version(row.get("notes") or "")
    if torch:
        return torch < TORCH_CHECKPOINT_EARLY_STOP_ARG
    month = source_name_month(row.get("source") or "")
    return month is not None and month < TORCHTITAN_EARLY_STOP_OFF_SINCE


__all__ = ["TORCHTITAN_EARLY_STOP_OFF_SINCE", "TORCH_CHECKPOINT_EARLY_STOP_ARG", "checkpoint_early_stop_from_row"]
