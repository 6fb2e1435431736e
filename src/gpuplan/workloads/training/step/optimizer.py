"""The optimizer step's time.

- Optimizer: Adam reads fp32 master weight, m, v and gradient and writes master, m, v and the
  bf16 weight: ADAM_BYTES_PER_PARAM bytes per local (sharded) parameter, memory-bound.
- PyTorch-native fp16 AMP: GradScaler's unscale of every local gradient (`native_amp`).
- An eager AdamW (`fine_tuning.optimizer_impl` loop or foreach: Hugging Face adamw_hf, torch.optim
  foreach=False / foreach=True): `optimizer_impl.adamw_step_seconds` on the same elements, over the
  parameter tensors of the GPU's pipeline stage (the model's tensors / pp; adapters: two per adapted
  projection). Unset or fused: the one-pass formula above.
- Adafactor or bitsandbytes 8-bit Adam as a per-tensor loop (`optimizer_impl` loop, what the Hugging
  Face Trainer runs): `optimizer_impl.loop_step_seconds`, each optimizer's kernels per tensor.
- An HF Trainer on PyTorch before 2.0 also clips the gradient norm and zeroes every gradient tensor by
  tensor (`trainer_grad_loops`).
"""

from __future__ import annotations

import numpy as np

from gpuplan.specs.choices import OptimizerImpl
from gpuplan.specs.plan import expert_data_parallel_size
from gpuplan.workloads.training import finetune_time
from gpuplan.workloads.training.plan_codes import ShardingCode
from gpuplan.workloads.training.step import native_amp, optimizer_impl, trainer_grad_loops
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

#: Adam: read master, m, v, grad (4 x 4 B), write master, m, v (3 x 4 B) and the bf16 weight (2 B).
ADAM_BYTES_PER_PARAM = 30.0


def optimizer_seconds(ctx: StepContext, g: PlanAxes, local_dense, local_experts, sc=None):
    """Adam step, memory-bound: ADAM_BYTES_PER_PARAM (read master, m, v, gradient; write master, m,
    v and the bf16 weight) per parameter this GPU updates (its ZeRO shard under ZeRO-1 and above).
    Fine-tuning (another optimizer, adapters only, pure low precision, offload to the CPU):
    `finetune_time.optimizer_seconds` on the trainable elements of the shard (`sc`: the stage)."""
    dp_group = g.dp * g.cp
    expert_dp = expert_data_parallel_size(g.tp, g.cp, g.dp, g.ep, g.etp)
    impl = ctx.fine_tuning.optimizer_impl
    if not ctx.fine_tuning.ordinary and sc is not None:
        elements = finetune_time.trainable_elements(ctx, g, sc, local_dense, local_experts)
        shard = np.where(g.shard >= ShardingCode.ZERO1, dp_group, 1.0)
        if impl is OptimizerImpl.LOOP and ctx.fine_tuning.optimizer in optimizer_impl.LOOP_OPTIMIZERS:
            step = optimizer_impl.loop_step_seconds(ctx.fine_tuning.optimizer, elements / shard, _stage_tensors(ctx, g, sc),
                                                    _stage_matrices(ctx, g, sc), ctx.hbm_bytes_s)
        elif optimizer_impl.eager(impl):
            step = optimizer_impl.adamw_step_seconds(impl, elements / shard, _stage_tensors(ctx, g, sc), ctx.hbm_bytes_s)
        else:
            step = finetune_time.optimizer_seconds(ctx, g, elements / shard, sc.stage_bwd + sc.recompute_mb)
        step = step + native_amp.grad_scaler_seconds(ctx, elements)
        if trainer_grad_loops.applies(ctx):  # (the tensor count is only needed there)
            step = step + trainer_grad_loops.seconds(ctx, _stage_tensors(ctx, g, sc), elements / shard, ctx.hbm_bytes_s)
        return step
    params = np.where(g.shard >= ShardingCode.ZERO1, local_dense / dp_group + local_experts / expert_dp,
                      local_dense + local_experts)
    if optimizer_impl.eager(impl):
        step = optimizer_impl.adamw_step_seconds(impl, params, _stage_tensors(ctx, g, sc), ctx.hbm_bytes_s)
    else:
        step = params * ADAM_BYTES_PER_PARAM / ctx.hbm_bytes_s
    return step + native_amp.grad_scaler_seconds(ctx, local_dense + local_experts)


def _stage_tensors(ctx: StepContext, g: PlanAxes, sc=None):
    """Trainable parameter tensors on one GPU of the busiest stage: the model's
    (`optimizer_impl.parameter_tensor_count`) over pp, or the adapters' of the stage's layers.
    Tensor and ZeRO sharding split each tensor but keep the count."""
    ft = ctx.fine_tuning
    if ft.adapters:
        layers = sc.layers_per_stage if sc is not None else ctx.layers / g.pp
        return optimizer_impl.adapter_tensor_count(ctx.model, ft.targets, layers)
    return np.ceil(optimizer_impl.parameter_tensor_count(ctx.model) / g.pp)


def _stage_matrices(ctx: StepContext, g: PlanAxes, sc=None):
    """The 2-D tensors among `_stage_tensors`: every adapter tensor, or the model's
    (`optimizer_impl.parameter_matrix_count`) over pp."""
    if ctx.fine_tuning.adapters:
        return _stage_tensors(ctx, g, sc)
    return np.ceil(optimizer_impl.parameter_matrix_count(ctx.model) / g.pp)
