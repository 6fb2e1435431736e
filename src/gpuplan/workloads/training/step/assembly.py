"""Training step time: per-operator rooflines, communication with the overlap frameworks achieve,
and the pipeline bubble, for one plan or a million plans at once (numpy broadcasting).

One optimizer step on the slowest pipeline stage (the last one, which also holds the output
head) is

    step = m x (compute_mb + recompute_mb + tp_mb + cp_mb + ep_mb + pp_mb)     # steady state
         + bubble                                                               # fill + drain, per schedule run
         + dp_exposed + optimizer

with m = global_batch / (micro_batch x dp) micro-batches. When pp x vpp does not divide the layers
(e.g. DeepSeek-V3's 61 layers on pp 16), layers are split as evenly as possible (Megatron's uneven
split, the same split `memory` uses) and the stage modelled is the busiest: ceil(L / (pp vpp)) x vpp
layers, with that share of the body's parameters. Every term is a field of `StepTime`;
the fields sum to `step_time_s` (tests check it).

The terms, one module each under `workloads.training.step`: `compute` (layers, attention core,
elementwise traffic, recompute, output head and loss), `tensor` (TP collectives, TE userbuffers),
`context` (CP K/V exchange), `expert` (MoE all-to-all), `pipeline` (sends and bubble), `data`
(DP reduction and ZeRO / FSDP gathers), `optimizer` (Adam); `inputs` holds what they read.

Model FLOPs (for TFLOP/s and MFU) follow Megatron's definition: `models.flops.flops_per_token`
with causal=False (= 72 B s l h^2 (1 + s/6h + V/12lh) for GPT, Narayanan et al. 2021 eq. 3 without
the recompute pass; PaLM App. B's 6N + 12 L h s), recompute excluded. MFU is against the GPU's
dense bf16 (fp16) peak, also for FP8 runs (the convention of the Megatron/NeMo tables).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from gpuplan.specs import Gpu, ModelSpec, System, TrainPlan
from gpuplan.specs.execution import AttentionKernel, Framework, PipelineSchedule
from gpuplan.workloads.training.plan_codes import RECOMPUTE_CODE, SHARDING_CODE, RecomputeCode
from gpuplan.workloads.training.plan_validity import check_plan
from gpuplan.workloads.training.step import context, expert, tensor
from gpuplan.workloads.training.step.compute import gemm_seconds, layer_compute, stage_compute
from gpuplan.workloads.training import finetune_time
from gpuplan.workloads.training.step.data import dp_comm_seconds, local_params
from gpuplan.workloads.training.step import flash2_deterministic
from gpuplan.workloads.training.step.deterministic import operator_time_factor
from gpuplan.workloads.training.step.grad_accumulation import unfused_accumulation_seconds
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext
from gpuplan.workloads.training.step.optimizer import optimizer_seconds
from gpuplan.workloads.training.step.pipeline import bubble_seconds, pp_comm_seconds


@dataclass(frozen=True)
class StepArrays:
    """Step time split into parts (seconds per optimizer step, one array element per plan)."""

    compute_s: np.ndarray  # forward + backward operators (no recompute), all micro-batches
    recompute_s: np.ndarray
    tp_comm_s: np.ndarray  # exposed
    cp_comm_s: np.ndarray  # exposed
    ep_comm_s: np.ndarray  # exposed
    pp_comm_s: np.ndarray  # exposed
    bubble_s: np.ndarray
    dp_comm_s: np.ndarray  # exposed
    optimizer_s: np.ndarray
    offload_s: np.ndarray  # exposed host <-> GPU copies of offloaded parameters (finetune_time)
    step_s: np.ndarray

    def parts(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "step_s"}


def step_time_arrays(
    ctx: StepContext,
    tp, pp, dp, cp, ep, vpp, micro_batch, num_micro_batches, recompute, sequence_parallel, sharding,
    etp=None, pipeline_flushes=1, dualpipe=False,
) -> StepArrays:
    """Step time of every plan given as broadcastable arrays: the named terms of the `step` modules, composed as

        step = m x (compute + recompute + tp + cp + ep + pp) + bubble + dp + optimizer

    `recompute` holds RecomputeCode values, `sharding` ShardingCode values, `sequence_parallel`
    booleans; `etp` the expert tensor parallel degree (None: tp where ep divides dp x cp, else 1,
    as `TrainPlan.expert_tp`); `pipeline_flushes` schedule runs per step and `dualpipe` (the schedule,
    `TrainPlan.pipeline_schedule`) as the plan's. Arrays may carry only the axes they depend on; intermediate terms stay
    small and only the final sums are full size.
    """
    g = PlanAxes.build(ctx, tp, pp, dp, cp, ep, vpp, micro_batch, num_micro_batches, recompute, sequence_parallel,
                       sharding, etp, pipeline_flushes, dualpipe)
    lc = layer_compute(ctx, g)
    sc = _megatron_modes(ctx, g, stage_compute(ctx, g, lc), lc)
    tp_mb = tensor.tp_comm_seconds(ctx, g, lc, sc)
    cp_mb = context.cp_comm_seconds(ctx, g, lc, sc)
    # expert all-to-all (a full-recompute plan dispatches and combines once more in its recompute forward)
    ep_mb = expert.ep_comm_seconds(ctx, g, lc, sc, gemm_seconds, full_recompute=g.rc == RecomputeCode.FULL)
    pp_mb = pp_comm_seconds(ctx, g, sc)
    mb_time = sc.compute_mb + sc.recompute_mb + tp_mb + cp_mb + ep_mb + pp_mb
    local_dense, local_experts = local_params(ctx, g, sc)
    dp_terms = {}
    if ctx.fine_tuning.adapters:  # only the adapters' gradients are reduced; the base is gathered as stored
        share = local_experts / np.maximum(local_dense + local_experts, 1.0)
        trainable = finetune_time.trainable_elements(ctx, g, sc, local_dense, local_experts)
        stored = finetune_time.stage_storage_bytes(ctx, g, sc, local_dense, local_experts)
        dp_terms = dict(reduced=(trainable * (1.0 - share), trainable * share),
                        gathered_bytes=(stored * (1.0 - share), stored * share))
    m = g.m
    parts = dict(
        compute_s=m * sc.compute_mb, recompute_s=m * sc.recompute_mb, tp_comm_s=m * tp_mb, cp_comm_s=m * cp_mb,
        ep_comm_s=m * ep_mb, pp_comm_s=m * pp_mb,  # (m x ep_mb already has m's axes; ep_mb >= 0: no -0.0 to clear)
        bubble_s=bubble_seconds(g, mb_time, sc.head, sc, lambda: sc.layers_per_stage * lc.gemm_fwd),
        dp_comm_s=dp_comm_seconds(ctx, g, sc, local_dense, local_experts, **dp_terms),
        optimizer_s=optimizer_seconds(ctx, g, local_dense, local_experts, sc),
        offload_s=finetune_time.offload_seconds(ctx, g, sc, local_dense, local_experts),
    )
    parts = {k: np.asarray(v, dtype=np.float64) for k, v in parts.items()}
    shape = np.broadcast_shapes(*(v.shape for v in parts.values()))
    if shape:
        # a dense model's ep part is m x 0 and an unoffloaded plan's offload part a scalar 0: both add nothing
        zeros = {"ep_comm_s"} if _is_zero(ep_mb) else set()
        total = _sum_in_order([v for k, v in parts.items() if k not in zeros], shape)
    else:
        total = sum(parts.values())
    return StepArrays(step_s=total, **{k: np.broadcast_to(v, shape) for k, v in parts.items()})


def _is_zero(x) -> bool:
    """Whether `x` is a scalar 0 (known without looking at array elements)."""
    return np.ndim(x) == 0 and x == 0.0


def _sum_in_order(values: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """sum(values) over the broadcast `shape`, in sum()'s order (0 + the first value, then each in
    turn), so every point gets the float sum()'s full-size arrays give it: each partial sum is held on
    the broadcast shape of the values added so far (a part that does not vary along an axis is added
    before the total is spread over that axis; GPT-3's and DeepSeek-V3's compute, communication and
    bubble parts do not vary with the sharding), in place once it has its shape. A scalar 0 value
    is skipped: x + 0 is x for every x but -0.0, and 0 + the first value is never -0.0, nor is any
    sum of it with another value."""
    total = np.add(0, values[0])
    for value in values[1:]:
        if _is_zero(value):
            continue
        if np.broadcast_shapes(total.shape, value.shape) == total.shape:
            np.add(total, value, out=total)
        else:
            total = np.add(total, value)
    return total if total.shape == shape else np.broadcast_to(total, shape).copy()


def _megatron_modes(ctx: StepContext, g: PlanAxes, sc, lc):
    """The stage's compute under Megatron's execution modes: deterministic mode's operators x
    `deterministic.operator_time_factor`, its attention backward on flash-attn's deterministic grid
    (`flash2_deterministic.extra_backward_seconds` per layer, where `flash2_deterministic.applies`), and
    without gradient-accumulation fusion each micro-batch's backward +
    `grad_accumulation.unfused_accumulation_seconds`. `sc` itself where none applies."""
    f = operator_time_factor(ctx.model, ctx.deterministic)
    extra = unfused_accumulation_seconds(ctx, g, sc.stage_share)
    if flash2_deterministic.applies(ctx.gpu, ctx.attention_kernel, ctx.deterministic):
        extra = extra + sc.layers_per_stage * flash2_deterministic.extra_backward_seconds(
            lc.attn_bwd, g.mb, ctx.heads / g.tp, ctx.seq_len / g.cp, ctx.head_dim, ctx.gpu.sm_count_or_default,
            ctx.hbm_bytes_s, smem_per_sm_bytes=ctx.gpu.smem_per_sm_bytes)
    if f == 1.0 and _is_zero(extra):  # (an array of zeros would give sc's values too: x 1.0 + 0 is exact)
        return sc
    bwd = sc.stage_bwd * f + extra
    head = sc.head * f
    return replace(sc, head=head, stage_fwd=sc.stage_fwd * f, stage_bwd=bwd, compute_mb=sc.stage_fwd * f + bwd + head,
                   recompute_mb=sc.recompute_mb * f)


@dataclass(frozen=True)
class StepTime:
    """Step time of one plan, its breakdown (seconds, summing to `step_time_s`) and throughput."""

    plan: TrainPlan
    framework: Framework
    attention_kernel: AttentionKernel
    step_time_s: float
    breakdown_s: dict[str, float]
    num_micro_batches: int
    tokens_per_step: int
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    model_flops_per_token: float
    tflops_per_gpu_model: float  # Megatron model FLOPs (recompute excluded) per GPU per second
    mfu_pct: float  # vs dense bf16/fp16 peak
    #: attention convention of `model_flops_per_token` (layers.flops.FlopsPerToken.attention_convention)
    model_flops_convention: str = "megatron_full_scores"


def mfu_peak_tflops(gpu: Gpu) -> float:
    """The peak MFU is measured against: dense bf16 (fp16 where the part has no bf16)."""
    return gpu.matmul_peak_tflops("bf16")


def estimate_step_time(
    model: ModelSpec,
    system: System,
    plan: TrainPlan,
    gpu: Gpu,
    framework: Framework | None = None,
    attention_kernel: AttentionKernel | None = None,
) -> StepTime:
    """Step time of one plan (formulas in the module docstring). `gpu` is the system's GPU spec.

    The execution choices come from the plan (`plan.framework`, `plan.attention_kernel`, the same
    fields the memory model reads); `framework` / `attention_kernel` given here override them."""
    check_plan(model, plan)
    framework = plan.framework if framework is None else Framework(framework)
    attention_kernel = plan.attention_kernel if attention_kernel is None else AttentionKernel(attention_kernel)
    if (framework, attention_kernel) != (plan.framework, plan.attention_kernel):
        plan = plan.model_copy(update={"framework": framework, "attention_kernel": attention_kernel})
    ctx = StepContext.build(
        model, system, gpu, plan.seq_len, plan.precision, framework, attention_kernel, plan.tp_comm_overlap,
        fine_tuning=plan.fine_tuning, grad_precision=plan.grad_precision, compiled_loss=plan.compiled_loss,
        compiled_model=plan.compiled_model, deepspeed_release=plan.deepspeed_release,
        deterministic=plan.deterministic, grad_accum_fusion=plan.grad_accum_fusion,
        checkpoint_early_stop=plan.checkpoint_early_stop,
        cuda_graph_scope=plan.cuda_graph_scope,
    )
    arrays = step_time_arrays(
        ctx, plan.tp, plan.pp, plan.dp, plan.cp, plan.ep, plan.vpp, plan.micro_batch, plan.grad_accum_steps,
        RECOMPUTE_CODE[plan.recompute], plan.sequence_parallel, SHARDING_CODE[plan.sharding], etp=plan.expert_tp,
        pipeline_flushes=plan.pipeline_flushes, dualpipe=plan.pipeline_schedule is PipelineSchedule.DUALPIPE,
    )
    return step_time_result(ctx, plan, {k: float(v) for k, v in arrays.parts().items()})


def step_time_result(ctx: StepContext, plan: TrainPlan, breakdown: dict[str, float]) -> StepTime:
    """StepTime of `plan` from its breakdown (seconds): throughput, model TFLOP/s and MFU derived."""
    m = plan.grad_accum_steps
    step = float(sum(breakdown.values()))
    tokens = plan.micro_batch * m * plan.dp * plan.seq_len
    tps = tokens / step
    gpus = plan.num_gpus
    tflops = ctx.model_flops_per_token * tps / gpus / 1e12
    return StepTime(
        plan=plan, framework=ctx.framework, attention_kernel=ctx.attention_kernel,
        step_time_s=step, breakdown_s=dict(breakdown), num_micro_batches=m, tokens_per_step=tokens,
        tokens_per_s=tps, tokens_per_s_per_gpu=tps / gpus, model_flops_per_token=ctx.model_flops_per_token,
        tflops_per_gpu_model=tflops, mfu_pct=100.0 * tflops / mfu_peak_tflops(ctx.gpu),
    )


__all__ = [
    "StepArrays", "StepContext", "StepTime", "estimate_step_time", "mfu_peak_tflops",
    "step_time_arrays", "step_time_result",
]
