"""Inverse questions of the training memory model: the largest micro-batch, the longest sequence,
the fewest GPUs that fit (`gpuplan fit max-batch / max-seq / min-gpus`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuplan.layers.params import parameter_counts
from gpuplan.specs.execution import Framework
from gpuplan.specs.gpu import Gpu
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.plan import Sharding, TrainPlan
from gpuplan.workloads.memory_headroom import usable_memory_bytes
from gpuplan.workloads.training.finetune_memory import fine_tuning_rules
from gpuplan.workloads.training.memory import TrainingMemory, activation_bytes, state_bytes_per_param, training_memory
from gpuplan.workloads.training.memory_terms import model_state_bytes
from gpuplan.workloads.training.plan_codes import SHARDING_CODE
from gpuplan.workloads.training.plan_validity import (
    PlanDegrees, check_plan, moe_tp_needs_sequence_parallel, violations,
)


def _fits(model: ModelSpec, plan: TrainPlan, gpu: Gpu) -> bool:
    return training_memory(model, plan).per_gpu_bytes["total"] <= usable_memory_bytes(gpu.memory_bytes)


def _largest_fitting(lo: int, hi: int, fits) -> int:
    """Largest n in [lo, hi] with fits(n) true (fits monotone decreasing); lo - 1 if none."""
    if not fits(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def max_micro_batch(model: ModelSpec, plan: TrainPlan, gpu: Gpu, limit: int = 1 << 16) -> int:
    """Largest micro-batch that fits (0 if none), keeping the number of micro-batches per step fixed."""
    check_plan(model, plan)
    steps = plan.grad_accum_steps if plan.global_batch is not None else None

    def with_batch(b: int) -> TrainPlan:
        gb = None if steps is None else steps * b * plan.dp
        return plan.model_copy(update={"micro_batch": b, "global_batch": gb})

    return _largest_fitting(1, limit, lambda b: _fits(model, with_batch(b), gpu))


def max_seq_len(model: ModelSpec, plan: TrainPlan, gpu: Gpu, step: int = 128, limit: int = 1 << 24) -> int:
    """Longest sequence (a multiple of `step` and of 2 x cp) that fits; 0 if none."""
    check_plan(model, plan.model_copy(update={"seq_len": 2 * plan.cp * step}))
    unit = step * 2 * plan.cp // math.gcd(step, 2 * plan.cp)
    n = _largest_fitting(1, limit // unit, lambda k: _fits(model, plan.model_copy(update={"seq_len": k * unit}), gpu))
    return n * unit


@dataclass(frozen=True)
class GpuCountAnswer:
    num_gpus: int
    plan: TrainPlan
    memory: TrainingMemory
    layouts_tried: int


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidate_gpu_counts(limit: int) -> list[int]:
    """1..8, then multiples of 8 (whole 8-GPU nodes) up to `limit`."""
    return sorted({*range(1, min(8, limit) + 1), *range(8, limit + 1, 8)})


def min_gpus(
    model: ModelSpec, plan: TrainPlan, gpu: Gpu, max_gpus: int = 16384, max_tp: int = 8, progress=None
) -> GpuCountAnswer | None:
    """Fewest GPUs with a (tp, pp, dp) layout that fits; among layouts at that count the least memory.

    tp ranges over divisors of the head count up to `max_tp` (one NVLink domain), pp over
    divisors of the layer count, dp = N / (tp x pp); cp, ep, vpp, micro-batch, sequence,
    recompute, sharding and precision come from `plan` (sequence parallelism also where the layout
    needs it: a Megatron MoE model with tp > 1). Layouts that break a `plan_validity` rule are
    skipped. None when nothing up to `max_gpus` fits.
    """
    tps = [t for t in _divisors(model.heads) if t <= max_tp]
    pps = _divisors(model.layers)
    tried = 0
    counts = parameter_counts(model)
    expert_params = float(counts.components.get("moe_routed_experts", 0))
    dense_params = float(counts.total) - expert_params

    def states_lower_bound(candidate: TrainPlan) -> float:
        """Model states per GPU (`memory_terms.model_state_bytes`) of the parameters averaged over the
        ranks (dense over tp x pp, experts over ep x etp x pp): the most loaded rank holds at least this
        (0 under fine-tuning rules, `finetune_memory.fine_tuning_rules`: not these bytes per parameter)."""
        if fine_tuning_rules(candidate):
            return 0.0
        zero3 = candidate.sharding in (Sharding.ZERO3, Sharding.FSDP)
        fsdp2_pp = zero3 and candidate.pp > 1 and candidate.framework is Framework.TORCHTITAN
        states = model_state_bytes(
            dense_params / (candidate.tp * candidate.pp), expert_params / (candidate.ep * candidate.expert_tp * candidate.pp),
            state_bytes_per_param(candidate), SHARDING_CODE[candidate.sharding], candidate.dp * candidate.cp,
            candidate.expert_dp, fsdp2_pp, activation_bytes(candidate.precision))
        return float(sum(states))
    for n in candidate_gpu_counts(max_gpus):
        if progress:  # progress(GPUs reached, max_gpus)
            progress(n, max_gpus)
        if n % plan.cp:
            continue
        best: tuple[float, TrainPlan, TrainingMemory] | None = None
        for tp in tps:
            for pp in pps:
                if (n // plan.cp) % (tp * pp):
                    continue
                dp = n // (plan.cp * tp * pp)
                needs_sp = bool(moe_tp_needs_sequence_parallel(model.moe is not None, plan.framework, tp))
                candidate = plan.model_copy(update={"tp": tp, "pp": pp, "dp": dp, "global_batch": None,
                                                    "sequence_parallel": (plan.sequence_parallel or needs_sp) and tp > 1})
                if states_lower_bound(candidate) > usable_memory_bytes(gpu.memory_bytes):
                    continue  # cannot fit: skip the exact (per-layer) evaluation
                if any(np.any(broken) for broken in violations(model, PlanDegrees.of_plan(candidate, n)).values()):
                    continue
                tried += 1
                mem = training_memory(model, candidate, gpu)
                if mem.fits and (best is None or mem.per_gpu_bytes["total"] < best[0]):
                    best = (mem.per_gpu_bytes["total"], candidate, mem)
        if best is not None:
            return GpuCountAnswer(num_gpus=n, plan=best[1], memory=best[2], layouts_tried=tried)
    return None
