"""Rows that ran the Hugging Face stack are predicted with `Framework.TRANSFORMERS` (time and memory).

SCHEMA.md's `framework` column has no `transformers` value: a run of the Hugging Face stack is written
`other` (or `fsdp` when torch FSDP sharded it) and its notes say which stack ran. The rule, the same for
every row, reads only the row's `framework`, `notes` and `source` cells:

1. The notes state the Hugging Face stack when they name
   - the HF Trainer ("HF Trainer", "Hugging Face Trainer": transformers `Trainer`, which runs the model's
     own modules and torch.autocast over the model in its loaded dtype, trainer.py `autocast_smart_context_manager`);
   - a transformers model class (`AutoModelForCausalLM`, `AutoModelForSequenceClassification`,
     `LlamaForCausalLM`, `BertForMaskedLM`, ...: the `<Model>For<Task>` classes of
     transformers/models/*/modeling_*.py);
   - PEFT (huggingface/peft: `get_peft_model` wraps a transformers model's Linear modules), TRL
     (`SFTTrainer`, a `transformers.Trainer` subclass) or Axolotl (a configuration layer over
     transformers + PEFT + TRL);
   - Answer.AI's fsdp_qlora (its `source` or `notes` name fsdp_qlora). Its train.py (AnswerDotAI/fsdp_qlora
     at 4cd6923, the commit its benchmark page states) builds the model with
     `AutoModelForCausalLM.from_pretrained(..., _attn_implementation="sdpa")` (lora, full) or
     `AutoModelForCausalLM.from_config` with every `nn.Linear` of `model.model` replaced by bitsandbytes
     `Linear4bit(quant_type='nf4', quant_storage=torch_dtype)` (qlora), adds PEFT's LoRA with
     `get_peft_model(model, LoraConfig(...))` for train_type lora / qlora, wraps the result in torch
     `FullyShardedDataParallel` (auto-wrap on transformers' `LlamaDecoderLayer` / `MistralDecoderLayer`)
     and checkpoints those layers: transformers' eager modules under torch FSDP.
2. Such a row whose `framework` cell is `other`, `fsdp` or empty is `Framework.TRANSFORMERS`; its
   `sharding` cell still says whether torch FSDP shards it (HF Trainer / accelerate's FSDP plugin and
   fsdp_qlora both wrap torch FSDP: `finetune_memory.torch_fsdp`).
3. A stated `megatron`, `torchtitan` or `maxtext` framework runs that stack's own modules, and a stated
   `deepspeed` row runs the DeepSpeed engine, which replaces the Trainer's autocast with its own half-
   precision module weights and fp32 optimizer copy (transformers integrations/deepspeed.py: the
   Trainer's `--fp16` / `--bf16` become DeepSpeed's `fp16` / `bf16` sections, and with either enabled
   DeepSpeed's engine casts the module's parameters to that dtype, deepspeed/runtime/engine.py
   `_configure_distributed_model`: `_cast_module_mixed_precision` at edaa72212, which "replaces blanket
   module.half()/bfloat16()" of the earlier releases): those keep their framework.

Not HF (the rule does not fire, and their notes do not name the stack): LitGPT / lit-gpt runs its own
`litgpt/model.py` modules (`GPT`, `CausalSelfAttention` over one fused qkv Linear, its own `LoRALinear`)
in `--precision bf16-true` (no autocast, no fp32 model); torchtune runs `torchtune.modules`
(`TransformerDecoder`, `MultiHeadAttention`, `RMSNorm`, `RotaryPositionalEmbeddings`) in pure bf16
(`dtype: bf16`, no mixed precision) and its own `LoRALinear`. Their modules are eager PyTorch like
transformers', but what `Framework.TRANSFORMERS` models beyond the modules does not hold for them:
torch.autocast over an fp32 model, PEFT's fp32 adapters over a 16-bit base (`autocast_adapter_dtype`),
transformers' `ForCausalLMLoss` on whole fp32 logits (LitGPT chunks its head and loss, torchtune's
`CEWithChunkedOutputLoss`), and their rotary / qkv layouts differ (docs/training.md).
"""

from __future__ import annotations

import re

from gpuplan.specs.execution import Framework

#: notes naming the HF Trainer (the same words `fine_tuning_row` reads for the Trainer's optimizers)
_HF_TRAINER = re.compile(r"\b(?:HF|Hugging\s*Face)\s+Trainer\b", re.IGNORECASE)
#: transformers' model classes: AutoModelFor<Task> and <Model>For<Task>
_MODEL_CLASS = re.compile(
    r"\b(?:AutoModelFor[A-Z]\w*|[A-Z]\w*For(?:CausalLM|SequenceClassification|MaskedLM|TokenClassification"
    r"|QuestionAnswering|ConditionalGeneration|MultipleChoice|PreTraining))\b")
#: PEFT, TRL / SFTTrainer, Axolotl, by the names their projects use
_HF_LIBRARIES = re.compile(r"\bPEFT\b|\bTRL\b|\bSFTTrainer\b|\b[Aa]xolotl\b")
#: Answer.AI's FSDP + QLoRA training script, named in a row's source or notes
_FSDP_QLORA = re.compile(r"\bfsdp_qlora\b", re.IGNORECASE)
#: framework cells the stated HF stack overrides (module docstring, point 2)
OVERRIDDEN_CELLS = ("", "other", "fsdp")


def hf_stack_named(row: dict[str, str]) -> str | None:
    """The words of the row that state the Hugging Face stack (module docstring, point 1), else None."""
    notes = row.get("notes") or ""
    for pattern in (_HF_TRAINER, _MODEL_CLASS, _HF_LIBRARIES):
        m = pattern.search(notes)
        if m:
            return m.group(0)
    m = _FSDP_QLORA.search(f"{row.get('source') or ''} {notes}")
    return m.group(0) if m else None


def hf_stack_framework(row: dict[str, str]) -> tuple[Framework, str] | None:
    """(Framework.TRANSFORMERS, a note naming why) for a row whose framework cell is other, fsdp or
    empty and whose notes state the Hugging Face stack; None otherwise (module docstring)."""
    cell = (row.get("framework") or "").strip().lower()
    if cell not in OVERRIDDEN_CELLS:
        return None
    named = hf_stack_named(row)
    if named is None:
        return None
    return Framework.TRANSFORMERS, f"framework=transformers (the row names {named})"


__all__ = ["OVERRIDDEN_CELLS", "hf_stack_framework", "hf_stack_named"]
