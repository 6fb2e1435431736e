"""Memory savings a training run switches on beyond its recompute mode (`TrainPlan.memory_savings`).

Each is a general mechanism, stated by the DeepSeek-V3 technical report (DeepSeek-AI 2024, arXiv
2412.19437) as one of the ways its 671B model trains on 80 GB GPUs; the memory model applies them in
`workloads.training.memory_savings`:

- NORM_RECOMPUTE (sec. 3.2.3, "Recomputation of RMSNorm and MLA Up-Projection"): every normalisation
  is re-run in backward, so its output, the input of the linear(s) it feeds, is not kept; the norm's
  own input is kept anyway.
- UP_PROJECTION_RECOMPUTE (same section): MLA's up-projections are re-run in backward from the low-rank
  latents, so the attention core's per-head Q, K and V are not kept; the decoupled RoPE key (shared by
  the heads, produced by the down-projection) still is.
- EXPERT_ACTIVATION_RECOMPUTE (sec. 3.3.2, "Low-Precision Storage and Communication", item (2) "Inputs
  of the SwiGLU operator in MoE"): routed experts cache the SwiGLU input in the linear-input format
  (FP8 under FP8 training) and recompute its output, the down-projection's input, in backward.
- BF16_OPTIMIZER_STATES (sec. 3.3.2, "Low-Precision Optimizer States"): AdamW's first and second
  moments in BF16; the fp32 master weights and fp32 gradients stay.
"""

from __future__ import annotations

from enum import Enum


class MemorySaving(str, Enum):
    NORM_RECOMPUTE = "norm_recompute"
    UP_PROJECTION_RECOMPUTE = "up_projection_recompute"
    EXPERT_ACTIVATION_RECOMPUTE = "expert_activation_recompute"
    BF16_OPTIMIZER_STATES = "bf16_optimizer_states"


def memory_savings_of(value) -> tuple[MemorySaving, ...]:
    """The savings named by `value` in the enum's order, each once: an iterable of names / members, or
    one '+'- or ','-joined string ("norm_recompute+bf16_optimizer_states"); "none" or "" is none.
    Raises ValueError naming the unknown entry and the allowed ones."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [] if value.strip().lower() in ("", "none") else value.replace(",", "+").split("+")
    names = set()
    for item in value:
        name = (item.value if isinstance(item, MemorySaving) else str(item)).strip().lower().replace("-", "_")
        if name not in MemorySaving._value2member_map_:
            allowed = ", ".join(m.value for m in MemorySaving)
            raise ValueError(f"unknown memory saving {item!r}; allowed: {allowed} ('+'-joined), or none")
        names.add(name)
    return tuple(m for m in MemorySaving if m.value in names)


__all__ = ["MemorySaving", "memory_savings_of"]
