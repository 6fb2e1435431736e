"""The fine-tuning options of `gpuplan train` and `gpuplan fit ...` as one record.

`fine_tuning_spec(value)` turns what a caller gives (a `FineTuning`, a dict of its fields with the
CLI's names, or None) into a validated `specs.finetune.FineTuning`; a bad value or combination is an
InputError naming the option (`--lora-rank`, `--offload`, ...), exit code 2.

`batch_with_grad_accum` is the one rule for `--grad-accum`: global batch = micro-batch x grad-accum x
dp (Megatron-core num_microbatches_calculator: global % (micro x dp) == 0); giving both it and
`--global-batch` is allowed only when they agree.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.specs.finetune import FineTuning

#: option names accepted in a dict, mapped to the FineTuning field (the CLI's `--finetune` is `method`)
_ALIASES = {"finetune": "method"}
#: the option a FineTuning field is given by (for error messages)
_OPTION = {"method": "finetune"}


def _option(field: str) -> str:
    return "--" + _OPTION.get(field, field).replace("_", "-")


def _field_of(message: str) -> str:
    """The FineTuning field a model-level error names first (its messages start with the field)."""
    for word in message.replace(",", " ").split():
        if word in FineTuning.model_fields:
            return word
        if word in ("finetune", "qlora", "lora"):
            return "method"
        if word.startswith("paged_adamw"):
            return "optimizer"
    return "method"


def fine_tuning_spec(value: FineTuning | dict[str, Any] | None) -> FineTuning:
    """A validated FineTuning from a spec, a dict of options (None values dropped) or None (ordinary)."""
    if value is None:
        return FineTuning()
    if isinstance(value, FineTuning):
        return value
    if not isinstance(value, dict):
        raise InputError(f"fine_tuning: expected a FineTuning or a dict, got {type(value).__name__}", field="fine_tuning")
    kw = {_ALIASES.get(k, k): v for k, v in value.items() if v is not None}
    unknown = sorted(set(kw) - set(FineTuning.model_fields))
    if unknown:
        allowed = ", ".join(["finetune", *[k for k in FineTuning.model_fields if k != "method"]])
        raise InputError(f"fine_tuning: unknown option {unknown[0]} (allowed: {allowed})", field=unknown[0])
    try:
        return FineTuning(**kw)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = str(err["msg"]).removeprefix("Value error, ")
        field = str(err["loc"][0]) if err["loc"] else _field_of(msg)
        raise InputError(f"{_option(field)}: {msg}", field=_OPTION.get(field, field)) from None


#: sequences per optimizer step of a fine-tuning plan given no --global-batch / --grad-accum:
#: artidoro/qlora qlora.py TrainingArguments, per_device_train_batch_size 1 x gradient_accumulation_steps
#: 16 (the QLoRA paper's scripts); rounded up to a multiple of micro-batch x dp
FINETUNE_GLOBAL_BATCH = 16


def fine_tuning_global_batch(micro_batch: int, dp: int) -> int:
    """FINETUNE_GLOBAL_BATCH rounded up to a multiple of micro-batch x dp (Megatron-core's rule:
    global % (micro x dp) == 0), at least one micro-batch per GPU."""
    unit = micro_batch * dp
    return unit * max(1, -(-FINETUNE_GLOBAL_BATCH // unit))


def fine_tuning_batch_note(global_batch: int, micro_batch: int, dp: int) -> str:
    return (f"global batch {global_batch:,} sequences: qlora.py's {FINETUNE_GLOBAL_BATCH} per step (1 per GPU x 16 "
            f"accumulated) as a multiple of micro-batch {micro_batch} x dp {dp} (set --global-batch or --grad-accum)")


def batch_with_grad_accum(micro_batch: int, dp: int, global_batch: int | None, grad_accum: int | None) -> int | None:
    """The global batch (sequences per step) from `--grad-accum` and / or `--global-batch`."""
    if grad_accum is None:
        return global_batch
    if grad_accum <= 0:
        raise InputError(f"--grad-accum: must be a whole number > 0, got {grad_accum}", field="grad_accum")
    implied = micro_batch * grad_accum * dp
    if global_batch is not None and global_batch != implied:
        raise InputError(f"--grad-accum {grad_accum} x --micro-batch {micro_batch} x dp {dp} = {implied} sequences, "
                         f"but --global-batch is {global_batch}: give one, or values that agree", field="grad_accum")
    return implied


__all__ = ["FINETUNE_GLOBAL_BATCH", "batch_with_grad_accum", "fine_tuning_batch_note", "fine_tuning_global_batch",
           "fine_tuning_spec"]
