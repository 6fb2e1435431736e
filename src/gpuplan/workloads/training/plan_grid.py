"""The plan search's grid: its axes, the blocks it is streamed in, and the scoring of one block
(validity, vectorised step time, memory screen, ranking key). `plan_search` enumerates the axis
values and ranks what the blocks leave (`plan_ranking`); its module docstring gives the rules.

Compute order: a block is scored with its axes laid out in COMPUTE_ORDER, not in AXES (the flat
order the search ranks and breaks ties in). Most terms depend on a few axes only (the model states
on tp, pp, vpp and the sharding; activations and compute on tp, pp, vpp, the micro-batch,
recompute and sequence parallelism) and are broadcast to the whole block a few dozen times; numpy
runs such a broadcast as an inner loop over the trailing axes that every operand shares. In AXES
order those are the sequence-parallel flag and the etp code (2 points), and the per-call overhead
of such short loops cost more than the arithmetic (about 5x, GPT-3 175B); with the sharding and
the etp code leading and the micro-batch last, the inner loops run over hundreds to thousands of
points. The scored block is handed on as views in AXES order (`Block`: np.transpose, no copy), so
the values, the flat order and every tie-break are the same as scoring in AXES order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from gpuplan import knobs
from gpuplan.specs import Gpu, ModelSpec, TrainPlan
from gpuplan.specs.execution import Framework
from gpuplan.workloads.memory_headroom import usable_memory_bytes
from gpuplan.workloads.training.default_batch import MAX_DEFAULT_BATCH_TOKENS, default_global_batch
from gpuplan.workloads.training.finetune_search import drop_forbidden_layouts
from gpuplan.workloads.training.memory_grid import screen_bytes
from gpuplan.workloads.training.plan_codes import ExpertTpCode
from gpuplan.workloads.training.plan_validity import PlanDegrees, violations
from gpuplan.workloads.training.step.assembly import step_time_arrays
from gpuplan.workloads.training.step.inputs import StepContext

#: The screen drops a plan whose lower bound exceeds a limit by more than this factor: 1 + 1e-9
#: guards against float rounding (the grid sums a rank's layers by kind, `training_memory` one by one).
SCREEN_MARGIN = 1.0 + 1e-9


def exceeds_memory(total, outside, gpu: Gpu):
    """Where `runs_within_memory` must fail for a plan whose modelled total is at least `total` bytes
    (`outside` of them outside PyTorch's allocator): the total over the usable part, or the reserved
    peak ((total - outside) x `training.memory.reserved_over_allocated`) + outside over capacity.
    Both grow with the total, so a lower bound that exceeds either is enough (SCREEN_MARGIN aside)."""
    reserved = (total - outside) * knobs.value("training.memory.reserved_over_allocated")
    return ((total > SCREEN_MARGIN * usable_memory_bytes(gpu.memory_bytes))
            | (reserved + outside > SCREEN_MARGIN * gpu.memory_bytes))


AXES = ("tp", "pp", "cp", "ep", "vpp", "mb", "rc", "sh", "sp", "et")


def _expert_tp(tp, et):
    """The expert tensor-parallel degree of an "et" axis code (ExpertTpCode)."""
    return np.where(et == ExpertTpCode.ONE, 1, tp)


#: The order of the axes while a block is scored (module docstring): the axes few terms depend on
#: first, the micro-batch (activations, compute, micro-batches per step) last.
COMPUTE_ORDER = ("sh", "et", "tp", "pp", "cp", "ep", "vpp", "rc", "sp", "mb")


def _grid(axes: dict[str, np.ndarray], order: tuple[str, ...] = AXES) -> dict[str, np.ndarray]:
    """Each axis reshaped to its own dimension of a len(AXES)-dimensional grid (for broadcasting),
    the dimensions in `order`."""
    out = {}
    for i, name in enumerate(order):
        shape = [1] * len(order)
        shape[i] = len(axes[name])
        out[name] = axes[name].reshape(shape)
    return out


def _in_axes_order(x, order: tuple[str, ...]):
    """An array of the grid scored with its axes in `order` as a view in AXES order (a scalar as it is)."""
    return np.transpose(x, tuple(order.index(name) for name in AXES)) if np.ndim(x) else x


#: Grid points scored at once. The search streams its grid in C-order blocks of about this many
#: points (each point holds ~215 bytes of arrays while its block is scored: ~55 MiB a block), so a
#: search's memory is bounded at any grid size, while a block is still large enough for numpy's
#: per-call overhead not to matter (benchmarks/plan_search.py).
CHUNK_POINTS = 1 << 18


def grid_blocks(sizes: tuple[int, ...], target: int) -> Iterator[tuple[int, tuple[slice, ...]]]:
    """Consecutive C-order blocks of a grid with axis lengths `sizes`, each of about `target` points:
    (flat index of the block's first point, one slice per axis). The leading axes are fixed to one
    index, one axis is cut into a range, the trailing axes are whole: each block is a sub-grid, and
    the blocks in order are exactly the grid in flat order (so "first in flat order" is preserved)."""
    n = len(sizes)
    cut, tail = n - 1, 1  # the axis cut into ranges; points per index of it (product of the axes after it)
    while cut > 0 and tail * sizes[cut] <= target:
        tail *= sizes[cut]
        cut -= 1
    step = max(1, target // tail)
    for lead in np.ndindex(*sizes[:cut]):
        for start in range(0, sizes[cut], step):
            offset = int(np.ravel_multi_index(lead + (start,) + (0,) * (n - cut - 1), sizes))
            yield offset, tuple(slice(i, i + 1) for i in lead) + (slice(start, start + step),) + (slice(None),) * (n - cut - 1)


@dataclass
class _Block:
    """One scored block of the grid: its axes (as a broadcastable sub-grid), dp, m, global batch,
    step-time parts, the ranking key of each fitting plan (inf elsewhere) and its rejection counts."""

    g: dict[str, np.ndarray]
    shape: tuple[int, ...]
    dp: np.ndarray
    m: np.ndarray
    gb: np.ndarray  # global batch (sequences), broadcastable to `shape`
    parts: dict[str, np.ndarray]
    #: shape `shape`; inf where the plan is invalid or does not fit. The step time (s) when every plan
    #: has the same batch, else the step time per sequence of the global batch (s): time per token x seq_len
    key: np.ndarray
    rejected: dict[str, int]
    valid: int
    fitting: int
    #: the axis (index in AXES) of each dimension of the arrays' memory, outermost first (the order the
    #: block was scored in: COMPUTE_ORDER's)
    memory_axes: tuple[int, ...] = tuple(AXES.index(name) for name in COMPUTE_ORDER)


#: rejection reason of a plan whose micro-batch does not divide a rank's share of dp's default batch
DEFAULT_BATCH_REASON = "micro-batch does not divide a rank's share of the default global batch"
#: rejection reason of a plan whose dp needs a default batch over MAX_DEFAULT_BATCH_TOKENS
OVERSIZED_BATCH_REASON = (f"dp needs a default global batch over 2^{MAX_DEFAULT_BATCH_TOKENS.bit_length() - 1} tokens "
                          "(one sequence per rank)")


#: rejection reasons of the grid points that are the same plan as another point (module docstring)
SP_WITHOUT_TP_REASON = "sequence parallelism needs tp > 1"
ETP_ONE_WITHOUT_TP_REASON = "etp = 1 is the same plan as etp = tp when tp = 1"


def grid_validity(model: ModelSpec, framework: Framework, seq_len: int, g: dict[str, np.ndarray], num_gpus: int,
                  given_batch: int | None):
    """(dp, m, global batch, reasons) of grid points `g` (the AXES arrays, broadcast together): dp =
    num_gpus / (tp pp cp), m = global_batch / (micro_batch x dp), and reason -> where the point is
    rejected: first the `plan_validity` rules (in their order), then the default-batch policy (no
    `given_batch`: the batch suits dp and the micro-batch divides a rank's share, module docstring)
    and the duplicate points."""
    tp, pp, cp, ep, vpp, mb, rc, sh, sp, et = (g[a] for a in AXES)
    dp = np.maximum(1, np.floor(num_gpus / (tp * pp * cp)))
    gb = given_batch if given_batch is not None else default_global_batch(seq_len, dp, mb)
    m = np.maximum(1, np.floor(gb / (mb * dp)))
    degrees = PlanDegrees(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=_expert_tp(tp, et), vpp=vpp, micro_batch=mb,
                          sequence_parallel=sp, seq_len=seq_len, framework=framework, global_batch=gb, m=m,
                          num_gpus=num_gpus)
    reasons = violations(model, degrees)
    if given_batch is None:
        dp_batch = default_global_batch(seq_len, dp, 1)
        reasons[OVERSIZED_BATCH_REASON] = dp_batch * seq_len > MAX_DEFAULT_BATCH_TOKENS
        reasons[DEFAULT_BATCH_REASON] = (dp_batch / dp) % mb != 0
    reasons[SP_WITHOUT_TP_REASON] = sp & (tp == 1)
    reasons[ETP_ONE_WITHOUT_TP_REASON] = (et == ExpertTpCode.ONE) & (tp == 1)
    return dp, m, gb, reasons


def _score_block(model: ModelSpec, gpu: Gpu, ctx: StepContext, proto: TrainPlan, values: dict[str, np.ndarray],
                 num_gpus: int, given_batch: int | None, order: tuple[str, ...] = COMPUTE_ORDER,
                 memo: dict | None = None) -> _Block:
    """Validity (`grid_validity`), vectorised step time and memory screen of the block of the grid
    whose axes take `values` (name -> 1-D array), scored with its axes in `order` (COMPUTE_ORDER; any
    permutation of AXES gives the same block) and returned in AXES order.
    `given_batch` None: each plan gets `default_global_batch` and the key is step time per sequence.
    `memo`: the search's dict for `screen_bytes` (the same `model` and `proto` in every block)."""
    g = _grid(values, order)
    tp, pp, cp, ep, vpp, mb, rc, sh, sp, et = (g[a] for a in AXES)
    etp = _expert_tp(tp, et)
    dp, m, gb, reasons = grid_validity(model, ctx.framework, proto.seq_len, g, num_gpus, given_batch)
    shape = np.broadcast_shapes(*(np.shape(x) for x in (tp, pp, cp, ep, vpp, mb, rc, sh, sp, et, dp, m)))
    # `invalid` stays on the axes of the rules' masks seen so far; a count there stands for the points it broadcasts to
    points, invalid, rejected = int(np.prod(shape)), np.zeros((1,) * len(shape), dtype=bool), {}
    for reason, mask in reasons.items():
        fresh = mask & ~invalid
        rejected[reason] = int(np.count_nonzero(fresh)) * (points // fresh.size) if fresh.size else 0
        invalid = invalid | mask
    arrays = step_time_arrays(ctx, tp, pp, dp, cp, ep, vpp, mb, m, rc, sp, sh, etp=etp)
    total, outside = screen_bytes(model, proto, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, vpp=vpp, micro_batch=mb,
                                  m=m, recompute=rc, sequence_parallel=sp, sharding=sh, num_gpus=num_gpus, memo=memo)
    invalid = drop_forbidden_layouts(proto, sh, shape, invalid, rejected)  # fine-tuning rules (finetune_search)
    too_big = np.broadcast_to(exceeds_memory(total, outside, gpu), shape) & ~invalid
    rejected["does not fit in GPU memory"] = int(np.count_nonzero(too_big))
    invalid = invalid | too_big
    # ranking key, inf where invalid: step time for one batch (x / 1.0 is x), or time per sequence of each plan's batch
    key = np.divide(arrays.step_s, gb if given_batch is None else 1.0, out=np.empty(shape))  # (ranks as time per token)
    np.copyto(key, np.inf, where=invalid)
    fitting = points - int(np.count_nonzero(invalid))
    return _Block(_grid(values), tuple(shape[order.index(name)] for name in AXES), _in_axes_order(dp, order),
                  _in_axes_order(m, order), _in_axes_order(np.asarray(gb, dtype=float), order),
                  {k: _in_axes_order(v, order) for k, v in arrays.parts().items()}, _in_axes_order(key, order), rejected,
                  fitting + rejected["does not fit in GPU memory"], fitting, tuple(AXES.index(name) for name in order))


__all__ = ["AXES", "CHUNK_POINTS", "COMPUTE_ORDER", "DEFAULT_BATCH_REASON", "ETP_ONE_WITHOUT_TP_REASON",
           "OVERSIZED_BATCH_REASON", "SCREEN_MARGIN", "SP_WITHOUT_TP_REASON", "exceeds_memory", "grid_blocks",
           "grid_validity"]
