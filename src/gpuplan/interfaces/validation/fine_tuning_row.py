"""The fine-tuning columns of a training.csv row as a `FineTuning` (../shared/validation/SCHEMA.md).

Columns and their empty-cell defaults (the same for every row, SCHEMA.md):
- `finetune`: full; `lora_rank`: PEFT's default r = 8 when an adapter method is given;
  `lora_targets`: q and v (PEFT's default for Llama); `base_dtype`: nf4 for qlora, the activation
  dtype for lora; `optimizer`: adamw; `offload`: none; `master_weights`: fp32.
- Not in the columns, so the library defaults hold: 4-bit block scales double-quantised
  (bitsandbytes `Linear4bit(compress_statistics=True)`, torchao NF4), LoRA dropout 0 (PEFT's
  LoraConfig default).
- Stated in `notes` (SCHEMA.md: notes say what the columns cannot hold), the same rule for every
  row: a chunked cross-entropy (notes naming torchtune's `CEWithChunkedOutputLoss` or a "chunked
  cross-entropy") is `chunked_loss`; "activation offloading on" (torchtune `OffloadActivations`) is
  `offload_activations`; a LoRA description with its dropout ("LoRA r=8, alpha 16, dropout 0.05") is
  `lora_dropout` (adapter rows only); the AdamW implementation the notes name, as Hugging Face
  Trainer's `optim` values or torch.optim's flags (`optimizer_impl`, AdamW rows only): `adamw_hf`
  (transformers.optimization.AdamW, a per-tensor loop) or `foreach=False` is loop; `adamw_torch`
  (torch.optim.AdamW at its CUDA default) or `foreach=True` is foreach; `adamw_torch_fused`,
  `adamw_apex_fused` or `fused=True` is fused. Unnamed: the model's default (the fused pass).
A value the schema does not allow is a SkipRow naming the column and the allowed values; a
combination the plan refuses (specs.finetune, specs.plan) likewise.
"""

from __future__ import annotations

import re
from enum import Enum

from pydantic import ValidationError

from gpuplan.interfaces.row_types import SkipRow
from gpuplan.specs.finetune import (
    BaseDtype, FineTuneMethod, FineTuning, MasterWeights, Offload, Optimizer, OptimizerImpl,
)

#: column -> (FineTuning field, enum of allowed values)
_ENUM_COLUMNS: dict[str, tuple[str, type[Enum]]] = {
    "finetune": ("method", FineTuneMethod),
    "base_dtype": ("base_dtype", BaseDtype),
    "optimizer": ("optimizer", Optimizer),
    "offload": ("offload", Offload),
    "master_weights": ("master_weights", MasterWeights),
}


#: notes that state a chunked cross-entropy / activation offloading (module docstring)
_CHUNKED_LOSS = re.compile(r"CEWithChunkedOutputLoss|chunked cross.entropy", re.IGNORECASE)
_OFFLOADED_ACTIVATIONS = re.compile(r"\bactivation offloading on\b", re.IGNORECASE)
_LORA_DROPOUT = re.compile(r"\bLoRA\b[^.;]*?\bdropout\s+(\d*\.?\d+)", re.IGNORECASE)
#: notes that name an AdamW implementation (module docstring), checked in this order
_OPTIMIZER_IMPLS: tuple[tuple[re.Pattern[str], OptimizerImpl], ...] = (
    (re.compile(r"\badamw_(?:torch|apex)_fused\b|\bfused\s*=\s*True\b", re.IGNORECASE), OptimizerImpl.FUSED),
    (re.compile(r"\badamw_hf\b|\bforeach\s*=\s*False\b", re.IGNORECASE), OptimizerImpl.LOOP),
    (re.compile(r"\badamw_torch\b|\bforeach\s*=\s*True\b", re.IGNORECASE), OptimizerImpl.FOREACH),
)


def stated_optimizer_impl(notes: str) -> OptimizerImpl | None:
    """The AdamW implementation a row's notes name (module docstring), else None."""
    for pattern, impl in _OPTIMIZER_IMPLS:
        if pattern.search(notes):
            return impl
    return None


def _cell(row: dict[str, str], key: str) -> str:
    return (row.get(key) or "").strip()


def fine_tuning_from_row(row: dict[str, str]) -> tuple[FineTuning, list[str]]:
    """The row's FineTuning and notes on the defaults taken (module docstring)."""
    kw: dict[str, object] = {}
    notes: list[str] = []
    for column, (name, enum) in _ENUM_COLUMNS.items():
        raw = _cell(row, column).lower()
        if not raw:
            continue
        try:
            kw[name] = enum(raw)
        except ValueError:
            allowed = ", ".join(e.value for e in enum)
            raise SkipRow(f"{column}: '{raw}' is not one of {allowed}") from None
    method = kw.get("method", FineTuneMethod.FULL)
    if method is not FineTuneMethod.FULL:
        rank = _cell(row, "lora_rank")
        if rank:
            try:
                kw["lora_rank"] = int(float(rank))
            except ValueError:
                raise SkipRow(f"lora_rank is not a number: '{rank}'") from None
        else:
            notes.append("lora_rank=8 (PEFT default)")
        dropout = _LORA_DROPOUT.search(row.get("notes") or "")
        if dropout:
            kw["lora_dropout"] = float(dropout.group(1))
        targets = _cell(row, "lora_targets")
        if targets:
            kw["lora_targets"] = targets
        else:
            notes.append("lora_targets=qv (PEFT default)")
    else:
        for column in ("lora_rank", "lora_targets"):
            if _cell(row, column):
                raise SkipRow(f"{column} is set but finetune is full (give finetune lora or qlora)")
    notes_text = row.get("notes") or ""
    if _CHUNKED_LOSS.search(notes_text):
        kw["chunked_loss"] = True
    if _OFFLOADED_ACTIVATIONS.search(notes_text):
        kw["offload_activations"] = True
    impl = stated_optimizer_impl(notes_text)
    if impl is not None and kw.get("optimizer", Optimizer.ADAMW) is Optimizer.ADAMW:
        kw["optimizer_impl"] = impl
    try:
        ft = FineTuning(**kw)
    except ValidationError as exc:
        raise SkipRow(f"fine-tuning columns not expressible: {exc.errors()[0]['msg']}") from None
    if not ft.ordinary:
        notes.append(f"fine-tuning: {ft.label()}")
    elif ft.optimizer_impl is not None:
        notes.append(f"optimizer_impl={ft.optimizer_impl.value} (named in notes)")
    return ft, notes


__all__ = ["fine_tuning_from_row", "stated_optimizer_impl"]
