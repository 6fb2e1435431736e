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
from typing import Callable, Sequence

import numpy as np

from gpuplan.errors import Infeasible, InputError
from gpuplan.specs import Gpu, ModelSpec, Precision, Recompute, Sharding, System, TrainPlan
from gpuplan.workloads.memory_headroom import headroom_note
from gpuplan.specs.choices import OptimizerImpl
from gpuplan.specs.execution import AttentionKernel, DeepSpeedRelease, Framework
from gpuplan.workloads.training.default_batch import (  # noqa: F401  (re-exported: the search's default batch)
    DEFAULT_BATCH_TOKENS, MAX_DEFAULT_BATCH_TOKENS, default_batch_note, default_global_batch,
)
from gpuplan.workloads.training.finetune_search import FineTuning, fine_tuning_proto
from gpuplan.workloads.training.framework_defaults import MAXTEXT_SHARDINGS, default_framework, framework_axes  # noqa: F401
from gpuplan.workloads.training.plan_codes import RECOMPUTE_CODE, RECOMPUTE_OF_CODE, SHARDING_CODE, SHARDING_OF_CODE, ExpertTpCode
from gpuplan.workloads.training.plan_grid import (  # noqa: F401  (re-exported: the grid's names, as before the split)
    AXES, CHUNK_POINTS, DEFAULT_BATCH_REASON, ETP_ONE_WITHOUT_TP_REASON, OVERSIZED_BATCH_REASON, SCREEN_MARGIN,
    SP_WITHOUT_TP_REASON, _expert_tp, _grid, _score_block, exceeds_memory, grid_blocks, grid_validity,
)
from gpuplan.workloads.training.plan_ranking import (  # noqa: F401  (_value_at: re-exported)
    MIN_LEADERS, RankedPlan, _explain, _FastestPerValue, _Fitting, _Leaders, _value_at,
)
from gpuplan.workloads.training.plan_validity import MOE_TP_NEEDS_SP_REASON
from gpuplan.workloads.training.step.assembly import StepArrays, step_time_result
from gpuplan.workloads.training.step.expert import ep_regime
from gpuplan.workloads.training.step.inputs import StepContext

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


def default_seq_len(model: ModelSpec) -> int:
    """The training sequence length when none is given: min(max_position_embeddings, 4096), 4096
    when the config has none. GPT-3 trained at its 2048 context (Brown et al. 2020, sec. 2.1) and
    Llama 2 at 4096 (Touvron et al. 2023); longer-context models pre-train at 4096-8192 before
    long-context extension (Llama 3: 8192, Dubey et al. 2024, sec. 3.4), so 4096 is the common
    short-context phase."""
    return min(model.max_position_embeddings or DEFAULT_SEQ_LEN_CAP, DEFAULT_SEQ_LEN_CAP)



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
    #: Megatron's deterministic mode / gradient-accumulation fusion on every plan (TrainPlan.deterministic,
    #: TrainPlan.grad_accum_fusion)
    deterministic: bool = False
    grad_accum_fusion: bool = True
    #: Megatron training CUDA graphs on every plan (TrainPlan.cuda_graph_scope; step.cuda_graphs)
    cuda_graph_scope: frozenset = frozenset()
    #: torch.compile'd blocks / loss on every plan (TrainPlan.compiled_model / compiled_loss)
    compiled_model: bool = False
    compiled_loss: bool = False
    #: full AC stops its recompute early on every plan (TrainPlan.checkpoint_early_stop; None: the framework's)
    checkpoint_early_stop: bool | None = None
    #: AdamW implementation of every plan (specs.choices.OptimizerImpl; None: the fused pass)
    optimizer_impl: OptimizerImpl | None = None
    fine_tuning: FineTuning | None = None  # every plan's; the screen applies fit's rules (finetune_search)


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
        deterministic=space.deterministic, grad_accum_fusion=space.grad_accum_fusion,
        checkpoint_early_stop=space.checkpoint_early_stop,
        cuda_graph_scope=space.cuda_graph_scope,
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
    if space.checkpoint_early_stop and not Framework(framework).checkpoint_early_stop_allowed:
        raise InputError(f"checkpoint_early_stop needs a stack with non-reentrant checkpointing (fsdp, torchtitan, "
                         f"transformers, other), not {Framework(framework).value}", field="checkpoint_early_stop")
    axes = framework_axes(default_axes(model, system, num_gpus, space), framework, space)
    sizes = tuple(len(axes[a]) for a in AXES)
    ctx = StepContext.build(
        model, system, gpu, space.seq_len, space.precision, framework, AttentionKernel.FLASH, space.tp_comm_overlap,
        deepspeed_release=space.deepspeed_release,
        compiled_loss=space.compiled_loss, compiled_model=space.compiled_model,
        fine_tuning=FineTuning(optimizer_impl=space.optimizer_impl),
        deterministic=space.deterministic, grad_accum_fusion=space.grad_accum_fusion,
        checkpoint_early_stop=space.checkpoint_early_stop,
        cuda_graph_scope=space.cuda_graph_scope,
    )
    # what every plan of the grid shares: the memory screen reads its precision and execution choices
    proto = fine_tuning_proto(TrainPlan(seq_len=space.seq_len, precision=space.precision, framework=ctx.framework,
                      attention_kernel=ctx.attention_kernel, deepspeed_release=ctx.deepspeed_release,
                      compiled_model=space.compiled_model, compiled_loss=space.compiled_loss), space.fine_tuning)
    leaders, fastest = _Leaders(max(top * 50, MIN_LEADERS)), _FastestPerValue()
    rejected: dict[str, int] = {}
    valid = fitting = 0
    total = int(np.prod(sizes))
    screen_memo: dict = {}  # what the memory screen computes once per search (screen_bytes)
    for offset, slices in grid_blocks(sizes, chunk_points):
        if progress:
            progress("step time", 0.1 + 0.8 * offset / max(1, total))
        block = _score_block(model, gpu, ctx, proto, {a: axes[a][s] for a, s in zip(AXES, slices)}, num_gpus,
                             given_batch, memo=screen_memo)
        for reason, n in block.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + n
        valid, fitting = valid + block.valid, fitting + block.fitting
        fit = _Fitting(block, offset)
        leaders.add(block, fit)
        fastest.add(block, fit)
        del block, fit
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
