"""`--memory-savings` of `gpuplan train` and `gpuplan fit` (and the API's `train` / `fit_*`): the memory
savings of an evaluated plan (TrainPlan.memory_savings; specs.memory_savings.MemorySaving: norm_recompute,
up_projection_recompute, expert_activation_recompute, bf16_optimizer_states, '+'-joined)."""

from __future__ import annotations

from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.specs import TrainPlan
from gpuplan.specs.memory_savings import memory_savings_of


def memory_saving_options(plan: TrainPlan | None, memory_savings) -> TrainPlan | None:
    """`plan` with its memory savings set to `memory_savings` (a '+'-joined string or a list of names);
    unchanged when None. They describe one plan: with a search (plan None) they are an error naming the
    option. An unknown name, or BF16 moments with another optimizer than AdamW, is an InputError."""
    if memory_savings is None:
        return plan
    try:
        savings = memory_savings_of(memory_savings)
    except ValueError as exc:
        raise InputError(f"--memory-savings: {exc}", field="memory_savings") from None
    if plan is None:
        if not savings:
            return None
        raise InputError("--memory-savings applies to one plan: give every parallel degree (--tp --pp --dp --ep --vpp "
                         "--micro-batch --recompute --sharding ...)", field="memory_savings")
    try:
        return TrainPlan.model_validate({**plan.model_dump(), "memory_savings": savings})
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InputError(f"--memory-savings: {msg}", field="memory_savings") from None


__all__ = ["memory_saving_options"]
