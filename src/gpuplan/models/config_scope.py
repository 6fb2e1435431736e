"""What a config.json may hold for gpuplan to model it, and the one-line refusals of the rest.

gpuplan models decoder-only language models: softmax attention (GQA, MLA, windows), dense and MoE
FFNs, and the recurrent mixers of the hybrid families (gpuplan.models.hybrid_config). A config with
anything else is refused with one line naming the layer type and the model_type (InputError, exit
code 2), never read as something it is not:

- a vision tower (`vision_config`, `vision_tower`, `mm_vision_tower`) or an audio encoder
  (`audio_config`) beside the language model (LLaVA, Gemma 3 / Qwen2-VL multimodal, Whisper-style
  speech); pass the language model's own `text_config` to model the LM alone;
- cross-attention (`cross_attention_layers` of Mllama, `add_cross_attention`) and encoder-decoder
  stacks (`is_encoder_decoder`: T5, BART, Whisper);
- recurrent / state-space layers of families not modelled here: Mamba-1 (`mamba`, `falcon_mamba`,
  `jamba`), Zamba, Bamba, Granite-4 hybrids, RWKV, xLSTM, MiniMax lightning attention, Hymba,
  PLaMo-2 -- named by their model_type below, and any other config carrying the fields of such
  layers (SSM_FIELDS);
- a `layer_types` entry other than full / sliding attention, unless the family models it.

An unknown model_type without such fields is read from its fields as a decoder-only transformer,
with a warning that names the model_type and every assumption made (`unknown_family_warning`).
"""

from __future__ import annotations

from typing import Any

from gpuplan.errors import InputError

#: model_type values read with their own rules (gpuplan.models.hf_config); the hybrid ones are
#: gpuplan.models.hybrid_config.HYBRID_FAMILIES.
TRANSFORMER_FAMILIES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3",
    "gemma", "gemma2", "gemma3", "gemma3_text", "gpt2", "gpt_neox", "phi3", "gpt_oss",
)

#: model types whose layers gpuplan does not model, with the layer type named in the refusal
#: (transformers models/<model_type>/modeling_*.py)
UNMODELLED_FAMILIES = {
    "mamba": "Mamba-1 selective-scan", "falcon_mamba": "Mamba-1 selective-scan", "jamba": "Mamba-1 selective-scan",
    "zamba": "Mamba + shared-attention", "zamba2": "Mamba-2 + shared-attention", "bamba": "Mamba-2 (Bamba)",
    "granitemoehybrid": "Mamba-2 (Granite hybrid)", "plamo2": "Mamba (PLaMo-2)", "hymba": "parallel Mamba-head",
    "rwkv": "RWKV time-mix", "rwkv5": "RWKV time-mix", "rwkv6": "RWKV time-mix", "rwkv7": "RWKV time-mix",
    "xlstm": "mLSTM", "minimax": "lightning (linear) attention", "minimax_text_01": "lightning (linear) attention",
    "mllama": "cross-attention", "t5": "encoder-decoder cross-attention", "mt5": "encoder-decoder cross-attention",
    "bart": "encoder-decoder cross-attention", "whisper": "audio encoder + cross-attention",
    "bert": "bidirectional encoder", "roberta": "bidirectional encoder", "modernbert": "bidirectional encoder",
}

#: fields of state-space / recurrent layers (their presence in a config of an unmodelled family is refused)
SSM_FIELDS = (
    "ssm_cfg", "ssm_state_size", "mamba_d_state", "mamba_expand", "mamba_d_conv", "state_size", "d_state",
    "time_step_rank", "attn_layer_period", "attn_layer_indices", "hybrid_override_pattern", "layers_block_type",
    "block_types", "_block_types", "lru_width", "linear_num_key_heads", "linear_key_head_dim", "conv_L_cache",
    "attn_type_list", "rescale_every",
)

#: `layer_types` entries every family reads: window (sliding) or not
ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention")
#: entries that name a mixer other than softmax attention (refused unless the family models it)
RECURRENT_LAYER_TYPES = ("linear_attention", "mamba", "conv", "recurrent", "hybrid", "chunked_attention",
                         "cross_attention", "mlp", "moe")


def _refuse(what: str, family: str, field: str, hint: str = "") -> None:
    raise InputError(f"{what} layers (model_type '{family}') are not modelled by gpuplan{hint}", field=field)


def check_wrapper(cfg: dict[str, Any]) -> None:
    """Refuse a multimodal or encoder-decoder wrapper before its `text_config` is read."""
    family = str(cfg.get("model_type") or "generic")
    hint = "; pass the language model's `text_config` to model the LM alone"
    for key in ("vision_config", "vision_tower", "mm_vision_tower", "visual"):
        if cfg.get(key):
            _refuse(f"vision tower (`{key}`)", family, key, hint)
    for key in ("audio_config", "audio_encoder_config", "speech_config"):
        if cfg.get(key):
            _refuse(f"audio encoder (`{key}`)", family, key, hint)


def check_language_model(cfg: dict[str, Any], family: str, modelled: tuple[str, ...]) -> None:
    """Refuse layers gpuplan does not model in the (unwrapped) language-model config."""
    if family in UNMODELLED_FAMILIES:
        _refuse(UNMODELLED_FAMILIES[family], family, "model_type")
    if cfg.get("is_encoder_decoder") is True or (cfg.get("encoder_layers") and cfg.get("decoder_layers")):
        _refuse("encoder-decoder cross-attention", family, "is_encoder_decoder")
    for key in ("cross_attention_layers", "add_cross_attention"):
        if cfg.get(key):
            _refuse(f"cross-attention (`{key}`)", family, key)
    if family not in modelled:
        present = [key for key in SSM_FIELDS if cfg.get(key) is not None]
        if present:
            _refuse(f"state-space / recurrent (`{present[0]}`)", family, present[0])


def attention_layer_types(types: list[str], family: str) -> list[bool]:
    """`layer_types` of a transformer family -> per layer sliding (True) or global (False).
    Entries must be known strings; a recurrent one is refused by name (module docstring)."""
    out = []
    for t in types:
        if t in ATTENTION_LAYER_TYPES:
            out.append(t == "sliding_attention")
        elif t in RECURRENT_LAYER_TYPES:
            _refuse(f"layer type '{t}'", family, "layer_types")
        else:
            allowed = ", ".join(ATTENTION_LAYER_TYPES)
            raise InputError(f"config field `layer_types` entries must be one of {allowed}, got {t!r}",
                             field="layer_types", allowed=allowed)
    return out


def unknown_family_warning(family: str, assumptions: list[str]) -> str:
    """The warning for a model_type gpuplan has no rules for, naming it and what was assumed."""
    what = "config has no model_type" if family == "generic" else f"model_type '{family}' is not one gpuplan knows"
    return f"{what}: read from its fields as a decoder-only transformer ({'; '.join(assumptions)})"


__all__ = ["ATTENTION_LAYER_TYPES", "RECURRENT_LAYER_TYPES", "SSM_FIELDS", "TRANSFORMER_FAMILIES", "UNMODELLED_FAMILIES",
           "attention_layer_types", "check_language_model", "check_wrapper", "unknown_family_warning"]
