"""What a training.csv row measured with LitGPT (Lightning-AI/litgpt, formerly lit-gpt) runs, beyond its
columns: the stack is named by the row's `source` (SCHEMA.md: the document the figure comes from), not by
notes that cite LitGPT's config files for an architecture.

- No dropout: LitGPT's GPT has no dropout module anywhere (lit_gpt/model.py@8641822: `GPT`, `Block`,
  `CausalSelfAttention`, `GptNeoxMLP`, `LLaMAMLP` hold none, and attention runs with `dropout_p=0.0` in both
  `flash_attn_func` and `scaled_dot_product_attention`), whatever dropout the architecture's defaults carry
  (`litgpt_dropout_free`).
- Its fine-tuning loop and attention: `fine_tuning_row` (fused QKV split by views, fp32 logits held through
  backward, the head and loss in 128-token chunks, a quantised output head under `--quantize bnb.*`).
"""

from __future__ import annotations

import re

from gpuplan.specs.model import ModelSpec

#: tokens per chunk of the output head and loss LitGPT's finetune scripts ask for: finetune/lora.py@8641822
#: `logits = model(input_ids, lm_head_chunk_size=128)` (a literal in the script, then `chunked_cross_entropy`)
LITGPT_HEAD_CHUNK_TOKENS = 128
#: LitGPT (Lightning-AI/litgpt, formerly lit-gpt) as the stack a row's source measured
LITGPT = re.compile(r"\blit[-_]?gpt\b", re.IGNORECASE)


def litgpt_source(row: dict[str, str]) -> bool:
    """Whether the row's `source` is LitGPT's (module docstring)."""
    return bool(LITGPT.search(row.get("source") or ""))


def litgpt_dropout_free(model: ModelSpec, row: dict[str, str]) -> ModelSpec:
    """The row's model without dropout when LitGPT measured it (module docstring); unchanged otherwise."""
    if not litgpt_source(row) or not (model.hidden_dropout or model.attention_dropout):
        return model
    return model.model_copy(update={"hidden_dropout": 0.0, "attention_dropout": 0.0})


__all__ = ["LITGPT", "LITGPT_HEAD_CHUNK_TOKENS", "litgpt_dropout_free", "litgpt_source"]
