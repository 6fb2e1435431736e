"""What the fine-tuning targets (torchtune, peft) share: the plans they state (data parallelism only,
LoRA / QLoRA) and the one spelling of a FineTuning read back.

`canonical` writes a read-back FineTuning the way gpuplan's options leave it: a value equal to the
default is None (lora_rank 8 = DEFAULT_LORA_RANK, targets q_proj + v_proj = the `qv` preset, the base
stored in the activation dtype for LoRA and nf4 for QLoRA), so a config gpuplan wrote reads back to
the same plan whether the user gave the default or left it out.
"""

from __future__ import annotations

import re

from gpuplan.errors import InputError
from gpuplan.specs import TrainPlan
from gpuplan.specs.finetune import DEFAULT_LORA_RANK, LORA_TARGET_PRESETS, FineTuning


def check_data_parallel(plan: TrainPlan, program: str) -> None:
    """InputError unless the plan is data parallel only (what both programs' scripts state)."""
    if (plan.tp, plan.pp, plan.cp, plan.ep) != (1, 1, 1, 1):
        raise InputError(f"plan: {program} states data parallelism only; this plan has tp {plan.tp} pp {plan.pp} "
                         f"cp {plan.cp} ep {plan.ep}", field="plan")
    if not plan.fine_tuning.adapters:
        raise InputError(f"finetune: --emit {program} writes LoRA / QLoRA runs; give --finetune lora or qlora",
                         field="finetune", allowed="lora, qlora")


def canonical(ft: FineTuning, activation_dtype: str = "bf16") -> FineTuning:
    """`ft` with every value equal to its default written as None (module docstring)."""
    update: dict = {}
    if ft.lora_rank == DEFAULT_LORA_RANK:
        update["lora_rank"] = None
    if ft.lora_targets is not None and tuple(ft.lora_targets) == LORA_TARGET_PRESETS["qv"]:
        update["lora_targets"] = None
    if ft.base_dtype is not None and ft.base_dtype == FineTuning(method=ft.method).base_storage(activation_dtype):
        update["base_dtype"] = None
    return ft.model_copy(update=update) if update else ft


def process_count(text: str, pattern: str) -> int | None:
    """The GPU count a launch comment states (`pattern` with one integer group), None if absent."""
    m = re.search(pattern, text)
    return int(m.group(1)) if m else None
