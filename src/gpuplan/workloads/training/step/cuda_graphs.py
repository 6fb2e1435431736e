"""What Megatron's training CUDA graphs remove from the step time (`plan.cuda_graph_scope`,
`specs.execution.CudaGraphScope`).

A replayed CUDA graph launches its captured kernels with one host call: it removes the host's
per-kernel launch time inside the captured region, and nothing else. It cannot capture a
device-to-host copy the host waits on (a graph replays fixed shapes and addresses), so a sync
outside the region stays. Read from NVIDIA/Megatron-LM@d98e8a6 (megatron/core):

- `attn` captures `TransformerLayer._forward_attention()`; `mlp` a dense layer's MLP; `moe` a MoE
  layer's MLP, only for drop-and-pad MoE (`moe_expert_capacity_factor` with
  `moe_pad_expert_input_to_capacity`; transformer_config.py `'moe cuda graph is only supported with
  drop-padding MoE.'`).
- `moe_router` captures `_forward_mlp()` up to `MoELayer.router()` (with the shared experts where
  they are not overlapped); `moe_preprocess` adds `MoELayer.preprocess()` (the dispatcher's
  `dispatch_preprocess`: routing map, counts, splits) and needs `moe_router`. The MoE layer returns
  early at the graph boundary (`MoECudaGraphPartialCaptureSignal`, moe_layer.py); dispatch, the
  expert GEMMs and combine run eagerly after it.
- The tokens_per_expert sync is OUTSIDE those scopes: the all-to-all dispatcher still copies the
  counts to the host, on a side stream, only moved from "before_permutation_1" to
  "before_ep_alltoall" when moe_preprocess is captured (token_dispatcher.py
  `MoEAlltoAllTokenDispatcher.cuda_dtoh_point`), and Megatron refuses moe_preprocess where the
  preprocess itself syncs (alltoall with a capacity factor or router padding: 'moe_preprocess cuda
  graph is not supported when there are DtoH copies and synchronizations in the preprocess step.').
  The flex dispatcher's HybridEP sizes its output on the host (`tokens_per_expert.sum()`, "CPU sync in
  dispatch") unless a static receive budget is set (`moe_expert_rank_capacity_factor`, or
  drop-and-pad); DeepEP's normal dispatch returns the per-expert counts as a host list.
- `full_iteration` (`cuda_graph_impl="full_iteration"`) captures the whole forward-backward path, the
  optimizer step excepted: every launch in it, and it can only be captured sync-free; the
  Megatron-Bridge recipes that use it with MoE set the static HybridEP budget
  (perf_recipes/qwen/common.py `_enable_hybridep_full_iteration_mxfp8`:
  `moe_expert_rank_capacity_factor = 1.5`, `moe_paged_stash = True`).

What the step model charges that a graph can remove (formula, per MoE layer and micro-batch):

    fixed MoE time  = (o + o_e x E / ep) x (1 - captured)        `step.expert.fixed_seconds_per_layer`
    captured        = 1 if full_iteration in the scope, else 0   (`moe_fixed_time_captured`)

o (`training.moe_layer_overhead_s`) is fitted as the router / counting kernels' launches AND the
tokens_per_expert sync; o_e (`training.moe_expert_launch_s`) the per-expert GEMM / quantize launches.
The per-layer scopes remove the router and preprocess launches but not the sync, and the step model
has no separate launch term for them (o is one fitted figure; the sources give no split), so they
remove nothing here: a stated limit, not a measured zero. `attn` / `mlp` remove the host launch of
those layers' kernels; a Megatron step charges no per-kernel host time (only the eager
`Framework.TRANSFORMERS` stack does: `step.eager_host`), so they remove nothing either. Graphs do not
shorten any kernel, collective or pipeline bubble.
"""

from __future__ import annotations

from gpuplan.specs.execution import CudaGraphScope


def moe_fixed_time_captured(scope) -> bool:
    """Whether the scope removes a MoE layer's fixed time (router / counting launches, the
    tokens_per_expert sync, the per-expert launches): only a full-iteration graph (module docstring)."""
    return CudaGraphScope.FULL_ITERATION in frozenset(scope or ())


def scope_label(scope) -> str:
    """The scope in words, sorted: "none" or e.g. "attn, moe_preprocess, moe_router"."""
    names = sorted(CudaGraphScope(s).value for s in (scope or ()))
    return ", ".join(names) if names else "none"


__all__ = ["moe_fixed_time_captured", "scope_label"]
