"""Megatron's deterministic mode (`--deterministic-mode`): what it changes in a training step.

The mode (Megatron-LM docs/developer/determinism/status.md, megatron/training/determinism.py)
turns on `torch.use_deterministic_algorithms(True)`, makes TransformerEngine pick only attention
backends with a deterministic backward (NVTE_ALLOW_NONDETERMINISTIC_ALGO=0), pins the cuBLAS
workspace (CUBLAS_WORKSPACE_CONFIG=:4096:8) and admits only NCCL_ALGO values without NVLS (Ring
filled in when unset). Its operation catalog (docs/developer/determinism/op-catalog.md) lists
what then runs another code path. Costed where the source allows, by mechanism:

- Collectives: NCCL never runs NVLink SHARP, so the system is timed with `nvls` off
  (`collective_system`): an all-reduce over NVSwitch takes NCCL's ring.
- Attention backward: the kernel TransformerEngine is left with (`AttentionKernel`, chosen by the
  caller: flash-attn's FlashAttention-2 on Blackwell, where TE's cuDNN backend is excluded, and below
  sm90, where TE's determinism filter excludes it), and where that kernel is flash-attn's, its
  deterministic backward grid (`step.flash2_deterministic`: ceil(SMs / (b h)) CTAs per batch element and
  head, each looping over key blocks, and nsplits fp32 dQ slices), applied in `assembly._megatron_modes`.
- GEMMs under the pinned workspace: nothing. The catalog lists them "deterministic as-is";
  TransformerEngine's GEMMs use TE's own cuBLAS workspace, and PyTorch's default on Hopper and
  Blackwell is the same :4096:8 (aten/src/ATen/cuda/CublasHandlePool.cpp: "32MiB for Hopper and
  Blackwell", 4096 KiB x 8); only pre-Hopper parts (:4096:2:16:8, 8.1 MiB) get a larger one.
- Everything else (the sort-based embedding and MoE unpermute backward, the sorted router top-k,
  grouped-GEMM wgrad, attention backward beyond the kernel choice) has no published per-operator
  cost. The catalog's "Performance Notes" give one measured figure per model class: "approximately
  four percent on a large dense model to approximately 17% on a hybrid MoE model" (status.md: the
  mode "increases step time by roughly 15%, varying by model and precision"). A dense model's
  operators (forward, backward, recompute, output head) take DENSE_OPERATOR_OVERHEAD longer, a
  model with MoE layers' MOE_OPERATOR_OVERHEAD (`operator_time_factor`). Both are the documented
  measurements, not fitted; a hybrid (Mamba) model is refused by the step model before it gets here.
  On Blackwell the FlashAttention-2 fallback and the dense 4% overlap where attention backward is
  among the measured hotspots; the source does not split the 4%, so both stand.
"""

from __future__ import annotations

from gpuplan.specs import ModelSpec, System

#: Megatron-LM docs/developer/determinism/op-catalog.md, "Performance Notes": measured examples "range
#: from approximately four percent on a large dense model ..."
DENSE_OPERATOR_OVERHEAD = 0.04
#: ... "to approximately 17% on a hybrid MoE model" ("Models that rely heavily on Mixture of Experts
#: (MoE) pay more"; the measured MoE hotspots: deterministic scatter / unpermute, sorted router top-k,
#: grouped-GEMM wgrad).
MOE_OPERATOR_OVERHEAD = 0.17


def operator_time_factor(model: ModelSpec, deterministic: bool) -> float:
    """Factor on a step's operator time: 1 + MOE_OPERATOR_OVERHEAD for a model with MoE layers, 1 +
    DENSE_OPERATOR_OVERHEAD otherwise, in deterministic mode; 1 otherwise (module docstring)."""
    if not deterministic:
        return 1.0
    return 1.0 + (MOE_OPERATOR_OVERHEAD if model.moe is not None else DENSE_OPERATOR_OVERHEAD)


def collective_system(system: System, deterministic: bool) -> System:
    """The system as NCCL sees it: NVLink SHARP (NVLS) off in deterministic mode, whose NCCL_ALGO
    values (Ring, CollnetDirect, CollnetChain, ^NVLS; megatron/training/determinism.py) exclude it;
    `system` unchanged otherwise."""
    if deterministic and system.nvls:
        return system.model_copy(update={"nvls": False})
    return system


__all__ = ["DENSE_OPERATOR_OVERHEAD", "MOE_OPERATOR_OVERHEAD", "collective_system", "operator_time_factor"]
