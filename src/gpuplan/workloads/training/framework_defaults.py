"""The training stack a plan assumes when the user names none, and what each stack lets the plan
search vary (`default_framework`, `framework_axes`)."""

from __future__ import annotations

import numpy as np

from gpuplan.specs import Sharding, System
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.plan_codes import SHARDING_CODE

def default_framework(system: System | None, fine_tuning=None, sharding: Sharding | None = None) -> Framework:
    """The training stack assumed when none is given: MaxText on a TPU pod (an ICI torus: Megatron-LM,
    DeepSpeed and PyTorch FSDP are CUDA / ROCm stacks; MaxText is Google's reference JAX trainer,
    AI-Hypercomputer/maxtext, and the stack of Google's tpu-recipes). Adapter fine-tuning (LoRA /
    QLoRA, `fine_tuning.method` not full) runs on PyTorch: Hugging Face PEFT + bitsandbytes under
    Accelerate / TRL, torchtune, LitGPT (Megatron-core has no bitsandbytes 4-bit path and no PEFT
    adapters of its own; NeMo's Megatron LoRA is opt-in with framework megatron), so DeepSpeed where
    `sharding` is a ZeRO stage (Accelerate's DeepSpeed plugin) and PyTorch FSDP / DDP otherwise.
    Megatron-core elsewhere."""
    if system is not None and system.ici_torus_axes is not None:
        return Framework.MAXTEXT
    if fine_tuning is not None and fine_tuning.adapters:
        zero = (Sharding.ZERO1, Sharding.ZERO2, Sharding.ZERO3)
        return Framework.DEEPSPEED if sharding in zero else Framework.FSDP
    return Framework.MEGATRON


#: Virtual pipeline stages per rank torchtitan makes for a multi-stage schedule (`PipelineScheduleMulti`:
#: Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble) when nothing sets them:
#: `generate_split_points`' `num_stages_per_rank = 2` (torchtitan/parallelisms/pipelining_utils.py at
#: 2024-12-19, ba2469780; kept after PR #1072 of 2025-04-07, torchtitan/distributed/pipeline.py, unless
#: `pipeline_parallel_layers_per_stage` is given). Single-stage schedules (1F1B, GPipe) have 1.
TORCHTITAN_MULTI_STAGE_STAGES_PER_RANK = 2

#: MaxText's shardings in Megatron's terms (AI-Hypercomputer/maxtext docs 'Sharding', base.yml defaults):
#: ici_fsdp (the recommended axis: parameters, gradients and optimizer states sharded = ZeRO-3 / FSDP),
#: ici_data (replicated = sharding none), ici_tensor (= tp), ici_sequence (= cp); its pipeline runs only
#: across slices (dcn_pipeline_parallelism) and is opt-in, so the search offers pp = 1 (and vpp = 1).
MAXTEXT_SHARDINGS = (Sharding.FSDP, Sharding.NONE)


def framework_axes(axes: dict[str, np.ndarray], framework: Framework, space) -> dict[str, np.ndarray]:
    """`axes` (of a plan_search.SearchSpace `space`) kept to what `framework` can run where the user did not choose the values (MaxText:
    `MAXTEXT_SHARDINGS`, pp = vpp = 1); other frameworks: unchanged."""
    if framework is not Framework.MAXTEXT:
        return axes
    out = dict(axes)
    if space.pp is None:
        out["pp"] = np.array([1])
    if space.vpp is None:
        out["vpp"] = np.array([1])
    if space.sharding is None:
        out["sh"] = np.array(sorted({SHARDING_CODE[s] for s in MAXTEXT_SHARDINGS}))
    return out


__all__ = ["MAXTEXT_SHARDINGS", "default_framework", "framework_axes"]
