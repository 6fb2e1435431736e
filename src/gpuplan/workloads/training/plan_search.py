"""Parallelism plan search: enumerate every valid plan, drop those that do not fit, rank by step time
(by time per token when each plan gets its own default global batch, `default_global_batch`).

The plan axes (tp, pp, cp, ep, vpp, micro_batch, recompute, sharding, sequence_parallel) are laid
out as the dimensions of one numpy grid; dp = num_gpus / (tp pp cp) follows. `step_time_arrays`
evaluates the whole grid at once (each term is computed on the sub-grid of the axes it depends on
and broadcast), so a search over ~10^5-10^6 plans takes a fraction of a second.

Validity: the rules of `workloads.training.plan_validity` (the same array expressions `check_plan`
evaluates on one plan; their sources there), evaluated on the grid with dp = num_gpus / (tp pp cp)
and m = global_batch / (micro_batch x dp). pp x vpp need not divide the layers (Megatron-core's
uneven split: Llama 3.1 405B's 126 layers on pp 16; the busiest stage sets the step time and the
exact memory check sees every stage). The search's own enumeration rules drop grid points that
are the same plan as another: sequence parallelism with tp = 1 (Megatron-LM arguments.py turns it
off there) and, for MoE models (expert tensor-parallel size tp or 1), etp = 1 with tp = 1.

Global batch: a given one is the same for every plan (plans ranked by step time). With none, each
plan gets `default_global_batch(seq_len, dp, micro_batch)` (the multiple of micro_batch x dp
nearest 2^22 tokens) and plans are ranked by time per token, step time / (global batch x seq_len).
The default suits dp, not the micro-batch: the micro-batch must divide a rank's share of dp's
default batch, share = default_global_batch(seq_len, dp, 1) / dp (then the plan's batch is that
same dp's batch, whatever its micro-batch). A run fixes its batch and picks a micro-batch that
divides it (Megatron: global = micro x dp x micro-batches); letting the micro-batch round the batch
instead would rank plans by how far they push it past 2^22 tokens (DeepSeek-V3 on 2048 GPUs: dp
1024 at micro-batch 8 would train 8 x 4M tokens a step and win on time per token for that alone).
A dp whose default batch exceeds MAX_DEFAULT_BATCH_TOKENS (twice the default) is not offered: set a
global batch for such runs.

Memory screen: `workloads.training.memory_grid.screen_bytes`, the memory model's own terms
(`memory_terms`, the functions `training_memory` calls) on the grid, for the first and the last
pipeline rank: a lower bound of `training_memory`'s peak over all ranks. A plan whose bound already
breaks `runs_within_memory` (`exceeds_memory`) cannot run and is dropped; the ranked survivors are
confirmed one by one with `training_memory` itself (every rank) until `top` plans fit. A confirmed
plan must leave the caching allocator its slack (`runs_within_memory`): PyTorch-reserved memory,
not the allocated peak, plus what lives outside the allocator, within the GPU's capacity.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields
from typing import Callable, Iterator, Sequence

import numpy as np

from gpuplan import knobs
from gpuplan.errors import Infeasible, InputError
from gpuplan.specs import Gpu, ModelSpec, Precision, Recompute, Sharding, System, TrainPlan
from gpuplan.workloads.memory_headroom import headroom_note, usable_memory_bytes
from gpuplan.workloads.training.memory_grid import screen_bytes
from gpuplan.specs.choices import OptimizerImpl
from gpuplan.specs.execution import AttentionKernel, DeepSpeedRelease, Framework
from gpuplan.workloads.training.finetune_search import FineTuning, drop_forbidden_layouts, fine_tuning_proto
from gpuplan.workloads.training.framework_defaults import MAXTEXT_SHARDINGS, default_framework, framework_axes  # noqa: F401
from gpuplan.workloads.training.plan_codes import RECOMPUTE_CODE, RECOMPUTE_OF_CODE, SHARDING_CODE, SHARDING_OF_CODE, ExpertTpCode
from gpuplan.workloads.training.plan_validity import MOE_TP_NEEDS_SP_REASON, PlanDegrees, violations
from gpuplan.workloads.training.step.assembly import StepArrays, StepTime, step_time_arrays, step_time_result
from gpuplan.workloads.training.step.expert import ep_regime
from gpuplan.workloads.training.step.inputs import StepContext

#: The screen drops a plan whose lower bound exceeds a limit by more than this factor: 1 + 1e-9
#: guards against float rounding (the grid sums a rank's layers by kind, `training_memory` one by one).
SCREEN_MARGIN = 1.0 + 1e-9
#: Default tokens per optimizer step when no global batch is given: 2^22 ~ 4M tokens (GPT-3 175B
#: used 3.2M, Llama 2/3 4M-16M); each plan rounds it to whole micro-batches per rank
#: (`default_global_batch`).
DEFAULT_BATCH_TOKENS = 2**22
#: Largest default batch a plan may have (tokens): 2 x DEFAULT_BATCH_TOKENS = 2^23 ~ 8.4M. The
#: default grows with dp once dp exceeds DEFAULT_BATCH_TOKENS / seq_len (one sequence per rank at
#: least); past twice the default it is no longer "about 4M tokens", and ranking by time per token
#: would then reward the larger batch itself (fewer DP reductions, optimizer steps and pipeline
#: fills per token), not the layout: DeepSeek-V3 on 15,360 GPUs at seq 8192 would pick dp 7,680 and
#: 63M tokens a step over the 4M asked for. Such a dp needs the user's own --global-batch (Llama 3
#: 405B doubled its batch 4M -> 8M -> 16M tokens in stages, Dubey et al. 2024, sec. 3.4.1). A policy
#: bound of the default, not a fitted value.
MAX_DEFAULT_BATCH_TOKENS = 2 * DEFAULT_BATCH_TOKENS
#: Cap of the default training sequence length (`default_seq_len`).
DEFAULT_SEQ_LEN_CAP = 4096


def runs_within_memory(memory, gpu: Gpu) -> bool:
    """A plan runs when (1) its modelled total fits the usable part of the GPU (`memory.fits`: the
    memory headroom, workloads.memory_headroom) and (2) PyTorch's reserved peak fits the GPU:
    `memory.reserved_bytes` (the allocated peak x `training.memory.reserved_over_allocated`, the
    caching allocator's rounding and split blocks) + the memory outside the allocator (CUDA context,
    NCCL buffers) <= capacity. The allocated peak alone reaches capacity only without fragmentation:
    the caching allocator raises out-of-memory when a request fits no reserved block and cudaMalloc of
    a new segment fails (PyTorch "CUDA semantics: memory management"), so a plan at the edge of the
    allocated peak is not a plan a tuned run uses."""
    outside = memory.per_gpu_bytes["total"] - memory.allocated_bytes
    return bool(memory.fits) and memory.reserved_bytes + outside <= gpu.memory_bytes


def exceeds_memory(total, outside, gpu: Gpu):
    """Where `runs_within_memory` must fail for a plan whose modelled total is at least `total` bytes
    (`outside` of them outside PyTorch's allocator): the total over the usable part, or the reserved
    peak ((total - outside) x `training.memory.reserved_over_allocated`) + outside over capacity.
    Both grow with the total, so a lower bound that exceeds either is enough (SCREEN_MARGIN aside)."""
    reserved = (total - outside) * knobs.value("training.memory.reserved_over_allocated")
    return ((total > SCREEN_MARGIN * usable_memory_bytes(gpu.memory_bytes))
            | (reserved + outside > SCREEN_MARGIN * gpu.memory_bytes))


def default_seq_len(model: ModelSpec) -> int:
    """The training sequence length when none is given: min(max_position_embeddings, 4096), 4096
    when the config has none. GPT-3 trained at its 2048 context (Brown et al. 2020, sec. 2.1) and
    Llama 2 at 4096 (Touvron et al. 2023); longer-context models pre-train at 4096-8192 before
    long-context extension (Llama 3: 8192, Dubey et al. 2024, sec. 3.4), so 4096 is the common
    short-context phase."""
    return min(model.max_position_embeddings or DEFAULT_SEQ_LEN_CAP, DEFAULT_SEQ_LEN_CAP)


def default_global_batch(seq_len: int, dp, micro_batch):
    """The global batch (sequences) of a plan when none is given: the multiple of micro_batch x dp
    nearest DEFAULT_BATCH_TOKENS / seq_len sequences, at least one micro-batch per data-parallel rank:

        unit = micro_batch x dp
        global_batch = unit x max(1, floor(DEFAULT_BATCH_TOKENS / (seq_len x unit) + 1/2))

    (ties go to the larger batch). Megatron-core requires global_batch % (micro_batch x dp) == 0
    (megatron/core/num_microbatches_calculator.py, ConstantNumMicroBatchesCalculator), and real runs
    state the batch per data-parallel rank, suited to the layout, not one figure for every layout
    (Llama 3 405B: 32 sequences per DP rank x dp 64 on 8,192 GPUs, 16 x dp 128 on 16,384, 16M tokens
    either way; Dubey et al. 2024, Table 4). E.g. seq 4096, dp 384, micro-batch 1: 2^22 / 4096 =
    1024 sequences, 1024 / 384 = 2.67 -> 3 x 384 = 1152.

    `dp` and `micro_batch` may be numpy arrays (broadcast together; the plan search scores a whole
    grid at once): the result is then an integer-valued float array. With plain ints it is an int."""
    unit = np.multiply(micro_batch, dp)
    per_step = np.maximum(1.0, np.floor(DEFAULT_BATCH_TOKENS / (seq_len * unit) + 0.5))
    batch = per_step * unit
    if np.ndim(batch) == 0 and isinstance(dp, (int, np.integer)) and isinstance(micro_batch, (int, np.integer)):
        return int(batch)
    return batch


def default_batch_note(global_batch: int, seq_len: int) -> str:
    """The one-line note that says a plan's global batch was chosen to suit its dp (M = 10^6 tokens)."""
    return (f"global batch {global_batch:,} sequences ({global_batch * seq_len / 1e6:.2f}M tokens): the multiple of "
            f"dp x micro-batch nearest 2^22 = {DEFAULT_BATCH_TOKENS / 1e6:.2f}M tokens (set --global-batch to fix it)")


RECOMPUTES = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)
SHARDINGS = (Sharding.NONE, Sharding.ZERO1, Sharding.ZERO2, Sharding.ZERO3)


@dataclass(frozen=True)
class SearchSpace:
    """Allowed values per axis; None = every value that makes sense for the model and GPU count."""

    #: sequences per step; None: each plan gets its own (`default_global_batch`) and plans are ranked
    #: by time per token
    global_batch: int | None = None
    seq_len: int = 2048
    precision: Precision = Precision.BF16
    tp: Sequence[int] | None = None
    pp: Sequence[int] | None = None
    cp: Sequence[int] | None = None
    ep: Sequence[int] | None = None
    vpp: Sequence[int] | None = None
    micro_batch: Sequence[int] | None = None
    recompute: Sequence[Recompute] | None = None
    sharding: Sequence[Sharding] | None = None
    sequence_parallel: Sequence[bool] | None = None
    #: TransformerEngine TP comm overlap on the plans that use sequence parallelism
    tp_comm_overlap: bool = False
    #: the DeepSpeed engine of a deepspeed search (specs.execution.DeepSpeedRelease; TrainPlan.deepspeed_release)
    deepspeed_release: DeepSpeedRelease = DeepSpeedRelease.CURRENT
    #: torch.compile'd blocks / loss on every plan (TrainPlan.compiled_model / compiled_loss)
    compiled_model: bool = False
    compiled_loss: bool = False
    #: AdamW implementation of every plan (specs.choices.OptimizerImpl; None: the fused pass)
    optimizer_impl: OptimizerImpl | None = None
    fine_tuning: FineTuning | None = None  # every plan's; the screen applies fit's rules (finetune_search)


@dataclass(frozen=True)
class RankedPlan:
    rank: int
    plan: TrainPlan
    step: StepTime
    memory_gib: float  # per GPU, exact (training_memory)


@dataclass(frozen=True)
class SearchResult:
    plans_evaluated: int  # grid points scored (valid or not)
    plans_valid: int  # degrees divide, batch divides
    plans_fitting: int  # pass the memory screen
    best: tuple[RankedPlan, ...]
    rejected: dict[str, int]  # reason -> count
    why_others_lose: tuple[str, ...]
    elapsed_s: float
    global_batch: int  # sequences per step of the best plan (given, or its `default_global_batch`)
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: True when no global batch was given: each plan had its own default batch, ranked by time per token
    default_batch: bool = False


def _powers_of_two_dividing(n: int, cap: int) -> list[int]:
    out, v = [], 1
    while v <= cap:
        if n % v == 0:
            out.append(v)
        v *= 2
    return out


def _divisors(n: int) -> list[int]:
    """Every divisor of n >= 1, ascending, from its prime factorisation (trial division up to
    sqrt(n)): O(sqrt(n)) work, not a loop to n (n is a user's GPU count)."""
    factors: dict[int, int] = {}
    rest, p = n, 2
    while p * p <= rest:
        while rest % p == 0:
            factors[p] = factors.get(p, 0) + 1
            rest //= p
        p += 1 if p == 2 else 2
    if rest > 1:
        factors[rest] = factors.get(rest, 0) + 1
    divs = [1]
    for prime, power in factors.items():
        divs = [d * prime**k for d in divs for k in range(power + 1)]
    return sorted(divs)


def default_axes(model: ModelSpec, system: System, num_gpus: int, space: SearchSpace) -> dict[str, np.ndarray]:
    """Candidate values per axis (before validity): documented, model-aware defaults."""
    # tensor parallelism inside the scale-up domain (Narayanan et al. 2021, takeaway #1: "tensor model
    # parallelism should generally be used up to degree g when using g-GPU servers"); --tp goes beyond
    tp = space.tp or [v for v in _powers_of_two_dividing(num_gpus, min(num_gpus, system.scaleup_domain_gpus)) if model.heads % v == 0]
    # pp need not divide the layers (uneven split: the busiest stage sets the pace, see step_time)
    pp = space.pp or [d for d in _divisors(num_gpus) if d <= min(model.layers, 128)]
    cp = space.cp or [v for v in _powers_of_two_dividing(num_gpus, 16) if space.seq_len % v == 0 and (v == 1 or space.seq_len >= 8192)]
    if model.moe is not None:
        ep = space.ep or [v for v in _powers_of_two_dividing(model.moe.num_experts, 256) if num_gpus % v == 0]
    else:
        ep = space.ep or [1]
    vpp = space.vpp or [1, 2, 3, 4, 6, 8]
    mb = space.micro_batch or [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    rc = space.recompute or list(RECOMPUTES)
    sh = space.sharding or list(SHARDINGS)
    sp = space.sequence_parallel or [False, True]
    # expert tensor parallelism: etp = tp (Megatron's default) or etp = 1 (which lets ep fold over the
    # tp ranks too); one value for dense models
    et = [ExpertTpCode.TP, ExpertTpCode.ONE] if model.moe is not None else [ExpertTpCode.TP]
    return {
        "tp": np.array(tp), "pp": np.array(pp), "cp": np.array(cp), "ep": np.array(ep), "vpp": np.array(vpp),
        "mb": np.array(mb), "rc": np.array([RECOMPUTE_CODE[Recompute(r)] for r in rc]),
        "sh": np.array(sorted({SHARDING_CODE[Sharding(s)] for s in sh})), "sp": np.array(sp, dtype=bool),
        "et": np.array(et),
    }


AXES = ("tp", "pp", "cp", "ep", "vpp", "mb", "rc", "sh", "sp", "et")


def _expert_tp(tp, et):
    """The expert tensor-parallel degree of an "et" axis code (ExpertTpCode)."""
    return np.where(et == ExpertTpCode.ONE, 1, tp)


def _grid(axes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each axis reshaped to its own dimension of a len(AXES)-dimensional grid (for broadcasting)."""
    out = {}
    for i, name in enumerate(AXES):
        shape = [1] * len(AXES)
        shape[i] = len(axes[name])
        out[name] = axes[name].reshape(shape)
    return out


#: Grid points scored at once. The search streams its grid in C-order blocks of about this many
#: points (each point holds ~215 bytes of arrays while its block is scored: ~55 MiB a block), so a
#: search's memory is bounded at any grid size, while a block is still large enough for numpy's
#: per-call overhead not to matter (benchmarks/plan_search.py).
CHUNK_POINTS = 1 << 18
#: screened plans kept for the exact memory check: top x 50, at least 250: the best plan is the same for any top <= 5
MIN_LEADERS = 250
#: the axes `why_others_lose` explains, with the labels it prints
EXPLAINED = (("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("rc", "recompute"), ("sh", "sharding"))


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


def _score_block(model: ModelSpec, gpu: Gpu, ctx: StepContext, proto: TrainPlan, g: dict[str, np.ndarray],
                 num_gpus: int, given_batch: int | None) -> _Block:
    """Validity (`grid_validity`), vectorised step time and memory screen of one block of the grid.
    `given_batch` None: each plan gets `default_global_batch` and the key is step time per sequence."""
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
                                  m=m, recompute=rc, sequence_parallel=sp, sharding=sh, num_gpus=num_gpus)
    invalid = drop_forbidden_layouts(proto, sh, shape, invalid, rejected)  # fine-tuning rules (finetune_search)
    too_big = np.broadcast_to(exceeds_memory(total, outside, gpu), shape) & ~invalid
    rejected["does not fit in GPU memory"] = int(np.count_nonzero(too_big))
    invalid = invalid | too_big
    # ranking key, inf where invalid: step time for one batch (x / 1.0 is x), or time per sequence of each plan's batch
    key = np.divide(arrays.step_s, gb if given_batch is None else 1.0, out=np.empty(shape))  # (ranks as time per token)
    np.copyto(key, np.inf, where=invalid)
    fitting = points - int(np.count_nonzero(invalid))
    return _Block(g, shape, dp, m, np.asarray(gb, dtype=float), arrays.parts(), key, rejected,
                  fitting + rejected["does not fit in GPU memory"], fitting)


class _Leaders:
    """The `k` fastest fitting plans seen so far, in (ranking key, flat index) order: exactly the first
    `k` of a stable argsort of the whole grid's keys (`_Block.key`), kept as small arrays (axis
    values, dp, m, global batch and step-time parts of each) while the grid streams past."""

    def __init__(self, k: int):
        self.k = k
        self.cols: dict[str, np.ndarray] | None = None

    def add(self, block: _Block, offset: int) -> None:
        flat = block.key.ravel()
        n_ok = int(np.count_nonzero(np.isfinite(flat)))
        if n_ok == 0:
            return
        if n_ok <= self.k:
            pos = np.flatnonzero(np.isfinite(flat))
        else:  # every plan at or below the k-th smallest key (ties included: the index breaks them)
            pos = np.flatnonzero(flat <= np.partition(flat, self.k - 1)[self.k - 1])
        where = np.unravel_index(pos, block.shape)
        cols = {"key": flat[pos], "index": pos + offset}
        for name, arr in (*((a, block.g[a]) for a in AXES), ("dp", block.dp), ("m", block.m), ("gb", block.gb),
                          *block.parts.items()):
            cols[name] = np.broadcast_to(arr, block.shape)[where]
        if self.cols is not None:
            cols = {name: np.concatenate([self.cols[name], col]) for name, col in cols.items()}
        keep = np.lexsort((cols["index"], cols["key"]))[: self.k]
        self.cols = {name: col[keep] for name, col in cols.items()}

    def rows(self) -> Iterator[dict[str, float]]:
        """The leaders in order, one dict per plan."""
        if self.cols is None:
            return
        for i in range(len(self.cols["key"])):
            yield {name: col[i] for name, col in self.cols.items()}


class _FastestPerValue:
    """For each explained axis (EXPLAINED) and each of its values: the fastest fitting plan's ranking
    key, step-time parts and global batch (the first in flat order among equals), kept as the grid
    streams past."""

    def __init__(self):
        self.best: dict[tuple[str, int], tuple[float, dict[str, float], float]] = {}

    def add(self, block: _Block) -> None:
        for name, _ in EXPLAINED:
            axis = AXES.index(name)
            values = block.g[name].ravel()
            # one row per value of the axis; the rest of each row stays in flat order
            rows = np.moveaxis(block.key, axis, 0).reshape(len(values), -1)
            first = np.argmin(rows, axis=1)
            rest_shape = block.shape[:axis] + block.shape[axis + 1:]
            for k, j in enumerate(first):
                step = float(rows[k, j])
                key = (name, int(values[k]))
                if not np.isfinite(step) or (key in self.best and self.best[key][0] <= step):
                    continue
                rest = np.unravel_index(int(j), rest_shape)
                where = rest[:axis] + (k,) + rest[axis:]
                self.best[key] = (step, {p: _value_at(v, where) for p, v in block.parts.items()},
                                  _value_at(block.gb, where))


def _value_at(array, where: tuple[int, ...]) -> float:
    """np.broadcast_to(array, shape)[where] as a float, without the broadcast view: the array's axes
    align with the last of `where`'s, and an axis of length 1 is read at 0."""
    shape = np.shape(array)
    if not shape:
        return float(array)
    return float(array[tuple(i if n > 1 else 0 for i, n in zip(where[len(where) - len(shape):], shape))])


def _explain(best: RankedPlan, fastest: _FastestPerValue, per_token: bool) -> list[str]:
    """For each other value of tp, pp, cp, recompute and sharding: how much slower its best plan is and
    which part of the step grows most (or that its faster plans do not fit in memory). `per_token`
    (plans with different global batches): slower in time per token, parts compared per token."""
    lines = []
    p = best.plan
    base = best.step.step_time_s / p.global_batch if per_token else best.step.step_time_s
    measure = "time per token" if per_token else "step time"
    index_of = {"tp": p.tp, "pp": p.pp, "cp": p.cp, "rc": RECOMPUTE_CODE[p.recompute], "sh": SHARDING_CODE[p.sharding]}
    shown = {"rc": {code: r.value for code, r in RECOMPUTE_OF_CODE.items()},
             "sh": {code: s.value for code, s in SHARDING_OF_CODE.items()}}
    for name, label in EXPLAINED:
        for v in sorted(value for axis, value in fastest.best if axis == name):
            if v == index_of[name]:
                continue
            step, parts, batch = fastest.best[(name, v)]
            value = shown.get(name, {}).get(v, v)
            slower = step / base - 1
            if slower < 0:
                lines.append(f"{label}={value}: its faster plans exceed GPU memory (exact check)")
                continue
            # parts scaled to the best plan's batch (a factor of exactly 1 when the batches are equal)
            scale = p.global_batch / batch
            worst = max(parts, key=lambda k: parts[k] * scale - best.step.breakdown_s.get(k, 0.0))
            lines.append(f"{label}={value}: best such plan {100 * slower:+.1f}% {measure}, mostly more {worst.removesuffix('_s')}")
    return lines


def plan_at(model: ModelSpec, space: SearchSpace, ctx: StepContext, point) -> TrainPlan:
    """The TrainPlan of one grid point (a mapping of AXES values, dp and the global batch "gb")."""
    return TrainPlan(
        tp=int(point["tp"]), pp=int(point["pp"]), dp=int(point["dp"]), cp=int(point["cp"]),
        ep=int(point["ep"]), vpp=int(point["vpp"]), micro_batch=int(point["mb"]), global_batch=int(point["gb"]),
        seq_len=space.seq_len, recompute=RECOMPUTE_OF_CODE[int(point["rc"])], sequence_parallel=bool(point["sp"]),
        precision=space.precision, sharding=SHARDING_OF_CODE[int(point["sh"])],
        tp_comm_overlap=space.tp_comm_overlap and bool(point["sp"]),
        etp=int(_expert_tp(point["tp"], point["et"])) if model.moe is not None else None,
        framework=ctx.framework, attention_kernel=ctx.attention_kernel, deepspeed_release=ctx.deepspeed_release,
        compiled_model=space.compiled_model, compiled_loss=space.compiled_loss,
        fine_tuning=space.fine_tuning or FineTuning(optimizer_impl=space.optimizer_impl),
    )


def search_plans(
    model: ModelSpec,
    system: System,
    gpu: Gpu,
    num_gpus: int,
    space: SearchSpace = SearchSpace(),
    top: int = 5,
    framework: Framework | None = None,
    progress: Callable[[str, float], None] | None = None,
    chunk_points: int = CHUNK_POINTS,
) -> SearchResult:
    """Every valid plan on `num_gpus` GPUs of `system`, screened for memory and ranked by step time;
    with no `space.global_batch`, each plan gets its own `default_global_batch` and plans are ranked
    by time per token (step time / tokens per step) instead. `framework` None: `default_framework`.

    The grid is scored in blocks of about `chunk_points` points (`grid_blocks`); only the leading
    plans, the fastest plan per explained axis value and the counts survive a block, so memory is
    bounded and the result is the same for any block size."""
    t0 = time.perf_counter()
    if num_gpus < 1:
        raise InputError("num_gpus must be >= 1", field="gpus")
    if num_gpus > system.gpus_per_node and not system.nics_per_node:
        raise InputError(f"{system.id} has no scale-out NICs: at most {system.gpus_per_node} GPUs", field="gpus")
    given_batch = space.global_batch
    if given_batch is not None and given_batch < 1:
        raise InputError("global_batch must be >= 1 sequence", field="global_batch")
    framework = framework or default_framework(system)
    axes = framework_axes(default_axes(model, system, num_gpus, space), framework, space)
    sizes = tuple(len(axes[a]) for a in AXES)
    ctx = StepContext.build(
        model, system, gpu, space.seq_len, space.precision, framework, AttentionKernel.FLASH, space.tp_comm_overlap,
        deepspeed_release=space.deepspeed_release,
        compiled_loss=space.compiled_loss, compiled_model=space.compiled_model,
        fine_tuning=FineTuning(optimizer_impl=space.optimizer_impl),
    )
    # what every plan of the grid shares: the memory screen reads its precision and execution choices
    proto = fine_tuning_proto(TrainPlan(seq_len=space.seq_len, precision=space.precision, framework=ctx.framework,
                      attention_kernel=ctx.attention_kernel, deepspeed_release=ctx.deepspeed_release,
                      compiled_model=space.compiled_model, compiled_loss=space.compiled_loss), space.fine_tuning)
    leaders, fastest = _Leaders(max(top * 50, MIN_LEADERS)), _FastestPerValue()
    rejected: dict[str, int] = {}
    valid = fitting = 0
    total = int(np.prod(sizes))
    for offset, slices in grid_blocks(sizes, chunk_points):
        if progress:
            progress("step time", 0.1 + 0.8 * offset / max(1, total))
        block = _score_block(model, gpu, ctx, proto, _grid({a: axes[a][s] for a, s in zip(AXES, slices)}), num_gpus,
                             given_batch)
        for reason, n in block.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + n
        valid, fitting = valid + block.valid, fitting + block.fitting
        leaders.add(block, offset)
        fastest.add(block)
        del block
    rejected.setdefault("does not fit in GPU memory", 0)
    if progress:
        progress("confirm", 0.9)
    from gpuplan.workloads.training.memory import training_memory

    part_names = [f.name for f in fields(StepArrays) if f.name != "step_s"]  # as StepArrays.parts()
    best: list[RankedPlan] = []
    exact_rejects = 0
    for row in leaders.rows():
        if not np.isfinite(row["key"]) or len(best) >= top:
            break
        plan = plan_at(model, space, ctx, row)
        memory = training_memory(model, plan, gpu)
        if not runs_within_memory(memory, gpu):
            exact_rejects += 1
            continue
        st = step_time_result(ctx, plan, {k: float(row[k]) for k in part_names})
        best.append(RankedPlan(len(best) + 1, plan, st, memory.per_gpu_bytes["total"] / 2**30))
    if not best:
        over_memory = rejected["does not fit in GPU memory"] + exact_rejects
        if over_memory:
            raise Infeasible(
                f"no plan of {model.name} fits on {num_gpus} x {gpu.id} "
                f"({over_memory} plans exceed {headroom_note(gpu.memory_bytes)}); add GPUs or a larger-memory GPU"
            )
        # nothing was too big: every layout broke a divisibility rule; name the commonest ones
        common = sorted(((n, r) for r, n in rejected.items() if n), reverse=True)[:2]
        why = "; ".join(f"{r} ({n} layouts)" for n, r in common) or "no layout to try"
        raise Infeasible(
            f"no valid layout of {model.name} on {num_gpus} GPUs: {why}; "
            f"choose a GPU count with more small factors (e.g. a multiple of {system.gpus_per_node}) or set --global-batch"
        )
    why = _explain(best[0], fastest, per_token=given_batch is None)
    notes = []
    if given_batch is None:
        notes.append(default_batch_note(best[0].plan.global_batch, space.seq_len))
    if exact_rejects:
        notes.append(f"{exact_rejects} screened plans failed the exact memory check")
    if model.moe is not None:  # where the best plan's expert all-to-all runs (NVLink domain or network)
        notes.append("best plan: " + ep_regime(best[0].plan.ep, best[0].plan.expert_tp, system.scaleup_domain_gpus))
    if progress:
        progress("done", 1.0)
    return SearchResult(
        plans_evaluated=total, plans_valid=valid, plans_fitting=fitting,
        best=tuple(best), rejected=rejected, why_others_lose=tuple(why), elapsed_s=time.perf_counter() - t0,
        global_batch=best[0].plan.global_batch, notes=tuple(notes), default_batch=given_batch is None,
    )


__all__ = ["CHUNK_POINTS", "DEFAULT_BATCH_TOKENS", "DEFAULT_SEQ_LEN_CAP", "MAX_DEFAULT_BATCH_TOKENS", "MOE_TP_NEEDS_SP_REASON",
           "RankedPlan", "SearchResult", "SearchSpace", "default_batch_note", "default_global_batch", "default_seq_len",
           "exceeds_memory", "grid_blocks", "grid_validity", "plan_at", "runs_within_memory", "search_plans"]
