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
  cross-entropy", "chunked lm_head/cross-entropy") is `chunked_loss`, its chunk size in tokens where the
  notes give LitGPT's `lm_head_chunk_size=N` (`loss_chunk_tokens`; a LitGPT row that does not state it
  takes its scripts' 128, `litgpt_row.LITGPT_HEAD_CHUNK_TOKENS`); "activation offloading on" (torchtune `OffloadActivations`) is
  `offload_activations`; a LoRA description with its dropout ("LoRA r=8, alpha 16, dropout 0.05") is
  `lora_dropout` (adapter rows only); the AdamW implementation the notes name, as Hugging Face
  Trainer's `optim` values or torch.optim's flags (`optimizer_impl`, AdamW rows only): `adamw_hf`
  (transformers.optimization.AdamW, a per-tensor loop) or `foreach=False` is loop; `adamw_torch`
  (torch.optim.AdamW at its CUDA default) or `foreach=True` is foreach; `adamw_torch_fused`,
  `adamw_apex_fused` or `fused=True` is fused. Unnamed: the model's default (the fused pass).
  Under the Hugging Face Trainer (notes name "HF Trainer" or "Hugging Face Trainer"), an adafactor
  or adamw_8bit row whose notes name that optimizer (Trainer `optim` adafactor, adamw_bnb_8bit or
  adamw_8bit, or bitsandbytes' Adam8bit / AdamW8bit class) is loop: transformers' Adafactor and
  bitsandbytes' Optimizer8bit step each parameter tensor in a Python loop.
  "torch.compile on" compiles the model (`compiled_stated`: the plan's `compiled_model`); "optimizer_in_bwd True" (torchtune's option) is `optimizer_in_backward`.
- The bitsandbytes release a 4-bit base ran on (`base_matmul_keeps_input`: before 0.43.2, released
  2024-07-16, each `MatMul4Bit` kept its input): a QLoRA row whose `source` or `notes` name
  bitsandbytes (or bnb) and not torchao takes the version they state ("bitsandbytes 0.41.1"), else
  the latest date its `source` states (ISO `2023-10-27` or a month and year, `Feb-Mar 2024`); with
  neither, the current library.
- An empty `master_weights` cell of a row run by a torchtune recipe (`source` or `notes` name torchtune)
  in bf16 is `none`: torchtune's recipes have no mixed precision ("When dtype=bf16, all activations,
  gradients and optimizer states are in bfloat16 ... Mixed precision training and fp16 precision are
  currently not supported", recipes/lora_finetune_single_device.py at 1814feb17, which also checks
  that the adapters load in that dtype: `validate_expected_param_dtype(adapter_params, dtype)`).
- A row run by Answer.AI's fsdp_qlora train.py (`source` or `notes` name fsdp_qlora) holds the model's
  fp32 logits through backward (`logits_held_in_backward`; train.py@4cd6923 sets `output = None` only
  after `loss.backward()`), unless the notes state a chunked loss.
- A row whose `source` is LitGPT's (names lit-gpt or litgpt; notes that cite its config files for an
  architecture do not count) runs its attention: q, k and v split from one fused projection by views,
  one LoRA over it (`fused_qkv_views`); and its loop holds the model's output converted to fp32 through
  backward (`logits_held_in_backward`: Lightning Fabric's module wrapper converts every output to the
  default dtype, and lit-gpt's finetune scripts keep `logits` bound across `fabric.backward`). A LitGPT
  QLoRA row quantises its output head too (`quantized_head`: `--quantize bnb.*` builds Lightning's
  `BitsandbytesPrecision` without `ignore_modules`, which replaces every `torch.nn.Linear`).
- An HF Trainer row (notes name "HF Trainer" or "Hugging Face Trainer") whose source is dated before
  March 2023 (the latest ISO date or month and year its `source` states, as for bitsandbytes below, else
  `source_dates.source_date`: a year before 2023, or January / February 2023) and whose notes
  state no PyTorch 2.x keeps its gradient buffers between steps (`zero_grad_keeps_buffers`): its
  Trainer called `model.zero_grad()` (set_to_none from transformers PR #22136 of 2023-03-13) on a
  PyTorch before 2.0 (2023-03-15), which zeroed them in place.
- A LitGPT quantisation name in `notes` (`bnb.nf4`, `bnb.nf4-dq`, `bnb.fp4`, `bnb.fp4-dq`: finetune/lora.py
  `--quantize`) says whether the 4-bit scales are double-quantised (`-dq`) or not.
A value the schema does not allow is a SkipRow naming the column and the allowed values; a
combination the plan refuses (specs.finetune, specs.plan) likewise.
"""

from __future__ import annotations

import re
from enum import Enum

from pydantic import ValidationError

from gpuplan.interfaces.row_types import SkipRow
from gpuplan.interfaces.validation import source_dates
from gpuplan.interfaces.validation.litgpt_row import LITGPT_HEAD_CHUNK_TOKENS, litgpt_source
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
_CHUNKED_LOSS = re.compile(r"CEWithChunkedOutputLoss|chunked (?:lm_head ?/ ?)?cross.entropy", re.IGNORECASE)
#: LitGPT's chunk size of the output head and loss, as its `lm_head_chunk_size` argument (module docstring)
_HEAD_CHUNK_TOKENS = re.compile(r"\blm_head_chunk_size\s*=\s*(\d+)")
_OFFLOADED_ACTIVATIONS = re.compile(r"\bactivation offloading on\b", re.IGNORECASE)
_LORA_DROPOUT = re.compile(r"\bLoRA\b[^.;]*?\bdropout\s+(\d*\.?\d+)", re.IGNORECASE)
#: notes that name an AdamW implementation (module docstring), checked in this order
_OPTIMIZER_IMPLS: tuple[tuple[re.Pattern[str], OptimizerImpl], ...] = (
    (re.compile(r"\badamw_(?:torch|apex)_fused\b|\bfused\s*=\s*True\b", re.IGNORECASE), OptimizerImpl.FUSED),
    (re.compile(r"\badamw_hf\b|\bforeach\s*=\s*False\b", re.IGNORECASE), OptimizerImpl.LOOP),
    (re.compile(r"\badamw_torch\b|\bforeach\s*=\s*True\b", re.IGNORECASE), OptimizerImpl.FOREACH),
)


_HF_TRAINER = re.compile(r"\b(?:HF|Hugging\s*Face)\s+Trainer\b", re.IGNORECASE)
#: notes naming an optimizer the HF Trainer steps as a per-tensor loop, by optimizer column value
_TRAINER_LOOP_OPTIMIZERS: dict[Optimizer, re.Pattern[str]] = {
    Optimizer.ADAFACTOR: re.compile(r"\badafactor\b", re.IGNORECASE),
    Optimizer.ADAMW_8BIT: re.compile(r"\badamw_(?:bnb_)?8bit\b|\bAdamW?8bit\b", re.IGNORECASE),
}


def trainer_loop_optimizer(notes: str, optimizer: Optimizer) -> bool:
    """Whether the notes say the HF Trainer runs `optimizer`'s own per-tensor step (module docstring)."""
    pattern = _TRAINER_LOOP_OPTIMIZERS.get(optimizer)
    return pattern is not None and bool(_HF_TRAINER.search(notes)) and bool(pattern.search(notes))


def stated_optimizer_impl(notes: str) -> OptimizerImpl | None:
    """The AdamW implementation a row's notes name (module docstring), else None."""
    for pattern, impl in _OPTIMIZER_IMPLS:
        if pattern.search(notes):
            return impl
    return None


_LITGPT_QUANTIZE = re.compile(r"\bbnb\.(nf4|fp4)(-dq)?\b", re.IGNORECASE)
_OPTIMIZER_IN_BACKWARD = re.compile(r"\boptimizer_in_bwd:?\s*True\b")
_TORCHTUNE = re.compile(r"\btorchtune\b", re.IGNORECASE)
#: Answer.AI's FSDP + QLoRA training script (github.com/AnswerDotAI/fsdp_qlora, train.py), named in a row's source or notes
_FSDP_QLORA = re.compile(r"\bfsdp_qlora\b", re.IGNORECASE)
_COMPILED = re.compile(r"\btorch\.compile on\b", re.IGNORECASE)
_BITSANDBYTES = re.compile(r"\b(bitsandbytes|bnb)\b", re.IGNORECASE)
_TORCHAO = re.compile(r"\btorchao\b", re.IGNORECASE)
_BNB_VERSION = re.compile(r"\bbitsandbytes\s+v?(\d+)\.(\d+)(?:\.(\d+))?", re.IGNORECASE)
#: bitsandbytes 0.43.2, the first release whose MatMul4Bit keeps only the packed weight (PR #1270,
#: commit 9e753741 of 2024-07-16): version and date
BNB_INPUT_FIX_VERSION = (0, 43, 2)
BNB_INPUT_FIX_DATE = (2024, 7, 16)


def bitsandbytes_keeps_matmul_input(row: dict[str, str]) -> bool:
    """Whether a 4-bit bitsandbytes base of this row ran a release before 0.43.2 (module docstring)."""
    text = f"{row.get('source') or ''} {row.get('notes') or ''}"
    if not _BITSANDBYTES.search(text) or _TORCHAO.search(text):
        return False
    version = _BNB_VERSION.search(text)
    if version:
        return tuple(int(v or 0) for v in version.groups()) < BNB_INPUT_FIX_VERSION
    date = source_dates.source_day(row.get("source") or "")
    return date is not None and date < BNB_INPUT_FIX_DATE


#: the first month whose HF Trainer runs free their gradients in zero_grad (module docstring)
TRAINER_SET_TO_NONE_SINCE = (2023, 3)


def trainer_zero_grad_keeps_buffers(row: dict[str, str]) -> bool:
    """Whether an HF Trainer row ran `zero_grad()` that zeroes gradients in place (module docstring)."""
    notes = row.get("notes") or ""
    if not _HF_TRAINER.search(notes):
        return False
    torch = source_dates.stated_torch_version(notes)
    if torch:
        return torch[0] < 2
    date = source_dates.latest_source_month(row.get("source") or "")
    if date is None:
        return False
    year, month = date
    first_year, first_month = TRAINER_SET_TO_NONE_SINCE
    return year < first_year or (year == first_year and month is not None and month < first_month)


def _cell(row: dict[str, str], key: str) -> str:
    return (row.get(key) or "").strip()


def compiled_stated(row: dict[str, str]) -> bool:
    """Whether a fine-tuning row's notes say "torch.compile on" (the plan's `compiled_model`)."""
    return bool(_COMPILED.search(row.get("notes") or ""))


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
        chunk = _HEAD_CHUNK_TOKENS.search(notes_text)
        if chunk:
            kw["loss_chunk_tokens"] = int(chunk.group(1))
    if _OFFLOADED_ACTIVATIONS.search(notes_text):
        kw["offload_activations"] = True
    impl = stated_optimizer_impl(notes_text)
    if impl is not None and kw.get("optimizer", Optimizer.ADAMW) is Optimizer.ADAMW:
        kw["optimizer_impl"] = impl
    elif trainer_loop_optimizer(notes_text, kw.get("optimizer", Optimizer.ADAMW)):
        kw["optimizer_impl"] = OptimizerImpl.LOOP
    quantize = _LITGPT_QUANTIZE.search(notes_text)
    if quantize and method is FineTuneMethod.QLORA:
        kw["double_quant"] = quantize.group(2) is not None
    if (not _cell(row, "master_weights") and _cell(row, "precision").lower() in ("", "bf16")
            and _TORCHTUNE.search(f"{row.get('source') or ''} {notes_text}")):
        kw["master_weights"] = MasterWeights.NONE
        notes.append("master_weights=none (torchtune recipes train in their dtype, no mixed precision)")
    if _OPTIMIZER_IN_BACKWARD.search(notes_text):
        kw["optimizer_in_backward"] = True
    if _FSDP_QLORA.search(f"{row.get('source') or ''} {notes_text}") and not kw.get("chunked_loss"):
        kw["logits_held_in_backward"] = True
    if litgpt_source(row):
        kw["fused_qkv_views"] = True
        kw["logits_held_in_backward"] = True
        if kw.get("chunked_loss") and "loss_chunk_tokens" not in kw:
            kw["loss_chunk_tokens"] = LITGPT_HEAD_CHUNK_TOKENS
    if trainer_zero_grad_keeps_buffers(row):
        kw["zero_grad_keeps_buffers"] = True
    if method is FineTuneMethod.QLORA and litgpt_source(row):
        kw["quantized_head"] = True
    four_bit = kw.get("base_dtype", BaseDtype.NF4 if method is FineTuneMethod.QLORA else None)
    if method is FineTuneMethod.QLORA and four_bit is not None and four_bit.four_bit and bitsandbytes_keeps_matmul_input(row):
        kw["base_matmul_keeps_input"] = True
    try:
        ft = FineTuning(**kw)
    except ValidationError as exc:
        raise SkipRow(f"fine-tuning columns not expressible: {exc.errors()[0]['msg']}") from None
    if not ft.ordinary:
        notes.append(f"fine-tuning: {ft.label()}")
    elif ft.optimizer_impl is not None:
        notes.append(f"optimizer_impl={ft.optimizer_impl.value} (named in notes)")
    return ft, notes


__all__ = ["BNB_INPUT_FIX_DATE", "BNB_INPUT_FIX_VERSION", "bitsandbytes_keeps_matmul_input", "fine_tuning_from_row",
           "stated_optimizer_impl", "trainer_loop_optimizer", "trainer_zero_grad_keeps_buffers"]
