"""Megatron's weight-gradient accumulation into the fp32 `main_grad` buffer, fused or not.

Megatron-core keeps each parameter's gradient in an fp32 `main_grad` buffer (plan.grad_precision
fp32). With gradient-accumulation fusion (the default, `--gradient-accumulation-fusion`), each
linear layer's weight-gradient GEMM accumulates into `main_grad` in its epilogue (TransformerEngine
`fuse_wgrad_accumulation`; Megatron's `fused_weight_gradient_mlp_cuda` for the output layer): C =
main_grad is read (4 B) and written (4 B) per weight element. With `--no-gradient-accumulation-fusion`
the GEMM writes a separate gradient in the compute dtype (2 B), and the DDP backward hook adds it
(`param.main_grad.add_(param.grad.data)`, megatron/core/distributed/distributed_data_parallel.py
`_make_backward_post_hook`): read it (2 B), read and write `main_grad` (4 + 4 B). The difference
per weight element and micro-batch is the write and read of the separate gradient:

    unfused_accumulation_seconds = 2 x act_bytes x linear weights on the GPU / achievable HBM B/s

on the critical path of every micro-batch's backward. Linear weights: the stage's transformer
layers (dense and local experts, over tp / ep x etp) and the output layer (its GEMM's wgrad goes to
the head, or to the shared table when embeddings are tied); the input embedding's gradient comes
from autograd and is added by the hook in either mode. Only Megatron plans with fp32 gradients
accumulate this way; other stacks are unchanged.
"""

from __future__ import annotations

from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

#: bytes per element of bf16 / fp16, the dtype the unfused weight-gradient GEMM writes
_ACT_BYTES = {"bf16": 2.0, "fp16": 2.0}


def unfused_accumulation_seconds(ctx: StepContext, g: PlanAxes, stage_share):
    """Seconds per micro-batch the separate weight-gradient pass adds without gradient-accumulation
    fusion (module docstring); 0 with fusion, for other frameworks, or with gradients not in fp32.
    `stage_share`: the busiest stage's share of the layers (`StageCompute.stage_share`)."""
    if ctx.grad_accum_fusion or ctx.framework is not Framework.MEGATRON or not ctx.grad_fp32:
        return 0.0
    head = ctx.output_head_params or ctx.input_embedding_params  # tied: the head's wgrad lands in the table
    # the busiest stage is costed with the output head (`StageCompute.head`), as in data.local_params
    dense = ((ctx.body_params - ctx.expert_params) * stage_share + head) / g.tp
    experts = ctx.expert_params * stage_share / (g.ep * g.etp)
    return 2.0 * _ACT_BYTES[ctx.act_dtype] * (dense + experts) / ctx.hbm_bytes_s


__all__ = ["unfused_accumulation_seconds"]
