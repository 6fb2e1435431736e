"""Hugging Face `config.json` -> ModelSpec, offline and without remote code.

Field names per family follow the transformers configuration classes (read from the
published config.json files in catalog/data/models and ../shared/reference/ecosystem.md 2.1).
Traps handled here, each with the family that sets it:

- `num_key_value_heads` absent -> MHA (kv_heads = heads)  [Llama 1/2 7B, GPT-2, GPT-NeoX]
- `head_dim` explicit and != hidden / heads  [Gemma 2/3 (256), Qwen3 (128), gpt-oss (64)]
- nested `text_config` of wrappers without a vision tower [Gemma 3 text configs]; a vision tower,
  audio encoder or cross-attention is refused by name (gpuplan.models.config_scope)
- tied embeddings default differs per family: True for GPT-2, Gemma; False elsewhere
- sliding windows: all layers (Mistral v0.1, Phi-3), alternating `layer_types`
  (gpt-oss, newer Gemma), Gemma 2 odd/even rule, Gemma 3 `sliding_window_pattern`;
  `layer_types` entries must be known strings (config_scope.attention_layer_types)
- booleans given as strings ("false") are read as booleans, anything else is refused
  (gpuplan.models.config_fields.flag): `use_sliding_window: "false"` must not switch windows on
- DeepSeek-V3 `head_dim` in transformers is the rope dim; gpuplan reads the MLA fields instead
- GPT-2 style names: n_embd, n_layer, n_head, n_inner (None -> 4 n_embd), n_positions
- hybrid families (Mamba-2, Gated DeltaNet, short conv, RG-LRU layers): gpuplan.models.hybrid_config
- an unknown model_type is read by its fields with a warning naming it and the assumptions
  (ModelSpec.warnings, announced to `config_warning_listeners`; the CLI prints them on stderr)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.models import config_fields as f
from gpuplan.models.config_scope import (
    TRANSFORMER_FAMILIES, attention_layer_types, check_language_model, check_wrapper, unknown_family_warning,
)
from gpuplan.models.hybrid_config import HYBRID_FAMILIES, attention_fallbacks, hybrid_fields
from gpuplan.specs.model import FfnKind, MlaSpec, ModelSpec, MoeSpec, NormKind
from gpuplan.validation_rules import decode_utf8, load_json_text

#: activations whose MLP is gated (three matrices); everything else is two matrices.
_GATED_ACTS = {"silu", "swiglu", "swish"}

#: model_type values gpuplan reads with their own rules; any other is read by its fields, with a warning.
KNOWN_FAMILIES = TRANSFORMER_FAMILIES + HYBRID_FAMILIES

#: called with each warning of a config read (ModelSpec.warnings); the CLI prints them on stderr.
from gpuplan.notices import config_warning_listeners  # noqa: E402 - the listeners live in gpuplan.notices


def _ffn_kind(cfg: dict[str, Any], family: str) -> FfnKind:
    if family in ("gpt2", "gpt_neox"):
        return FfnKind.GELU
    if family.startswith("gemma"):
        return FfnKind.SWIGLU  # GeGLU: gated, three matrices
    act = _activation(cfg)
    return FfnKind.SWIGLU if act in _GATED_ACTS else FfnKind.GELU


def _activation(cfg: dict[str, Any]) -> str:
    for name in ("hidden_act", "hidden_activation", "activation_function"):
        if cfg.get(name):
            return f.text(cfg, name) or "silu"
    return "silu"


def _layer_windows(cfg: dict[str, Any], family: str, layers: int) -> tuple[int | None, ...]:
    """Per-layer attention window (None = full attention); () when every layer is global."""
    types = f.string_list(cfg, "layer_types")
    sliding = None
    if types is not None:
        if len(types) != layers:
            raise InputError(f"config field `layer_types` must list one entry per layer ({layers})", field="layer_types")
        sliding = attention_layer_types(types, family)
    window = cfg.get("sliding_window")
    if family in ("qwen2", "qwen3", "qwen3_moe") and not f.flag(cfg, "use_sliding_window"):
        return ()
    if not window:
        if sliding and any(sliding):
            raise InputError("config field `layer_types` has sliding_attention layers but `sliding_window` is not set",
                             field="sliding_window")
        return ()
    window = f.integer(cfg, "sliding_window")
    if sliding is not None:
        return tuple(window if s else None for s in sliding)
    if family == "gemma2":  # Gemma2DecoderLayer: even-indexed layers are sliding
        return tuple(window if i % 2 == 0 else None for i in range(layers))
    if family in ("gemma3", "gemma3_text"):  # 5 local : 1 global
        pattern = f.integer(cfg, "sliding_window_pattern", default=6)
        return tuple(None if (i + 1) % pattern == 0 else window for i in range(layers))
    if window >= f.integer(cfg, "max_position_embeddings", default=window + 1):
        return ()
    return tuple(window for _ in range(layers))


def _moe(cfg: dict[str, Any], family: str, layers: int) -> MoeSpec | None:
    names = [n for n in ("num_local_experts", "num_experts", "n_routed_experts") if cfg.get(n)]
    if not names:
        return None
    experts = f.integer(cfg, names[0])
    top_k = f.integer(cfg, "num_experts_per_tok", "experts_per_token")
    if family == "mixtral" or family == "gpt_oss":
        expert_ffn = f.integer(cfg, "intermediate_size")
    else:
        expert_ffn = f.integer(cfg, "moe_intermediate_size")
    dense_layers = f.integer(cfg, "first_k_dense_replace", default=0, minimum=0)
    layer_freq = f.integer(cfg, "moe_layer_freq", "decoder_sparse_step", default=1)
    if cfg.get("mlp_only_layers"):
        raise InputError("config field `mlp_only_layers` (dense layers inside a MoE stack) is not supported", field="mlp_only_layers")
    shared = f.integer(cfg, "n_shared_experts", default=0, minimum=0)
    # node-limited routing (DeepSeek-V2 / V3 `n_group` groups, `topk_group` of them per token): only a real
    # limit, and not under DeepSeek-V2's `topk_method: greedy` (modeling_deepseek.py MoEGate: groups are
    # used by "group_limited_greedy" and V3's "noaux_tc" only)
    groups = f.integer(cfg, "n_group", default=None, minimum=1)
    groups_per_token = f.integer(cfg, "topk_group", default=None, minimum=1)
    limited = (groups is not None and groups_per_token is not None and groups_per_token < groups
               and cfg.get("topk_method") != "greedy")
    try:
        return MoeSpec(
            num_experts=experts, top_k=top_k, expert_ffn=expert_ffn, shared_experts=shared,
            dense_layers=dense_layers, layer_freq=layer_freq,
            expert_groups=groups if limited else None, groups_per_token=groups_per_token if limited else None,
            # gpt-oss router has a bias; DeepSeek-V3 carries e_score_correction_bias (one per expert)
            router_bias=family in ("gpt_oss", "deepseek_v3"),
        )
    except ValidationError as exc:
        raise InputError(f"config MoE fields are inconsistent: {exc.errors()[0]['msg']}", field="num_experts") from None


def _mla(cfg: dict[str, Any]) -> MlaSpec | None:
    if not cfg.get("kv_lora_rank"):
        return None
    return MlaSpec(
        q_lora_rank=f.integer(cfg, "q_lora_rank", default=None, minimum=0) or None,
        kv_lora_rank=f.integer(cfg, "kv_lora_rank"),
        qk_nope_head_dim=f.integer(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=f.integer(cfg, "qk_rope_head_dim"),
        v_head_dim=f.integer(cfg, "v_head_dim"),
    )


def _language_model_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's fields: a wrapper's `text_config` (with the wrapper's model_type and tie
    flag when it has none), after refusing a vision tower or audio encoder beside it."""
    if not isinstance(cfg, dict):
        raise InputError("config.json must hold a JSON object", field="config")
    check_wrapper(cfg)
    if isinstance(cfg.get("text_config"), dict):
        inner = dict(cfg["text_config"])
        inner.setdefault("model_type", cfg.get("model_type", ""))
        if "tie_word_embeddings" in cfg and "tie_word_embeddings" not in inner:
            inner["tie_word_embeddings"] = cfg["tie_word_embeddings"]
        check_wrapper(inner)
        return inner
    return cfg


def _transformer_fields(cfg: dict[str, Any], family: str) -> dict[str, Any]:
    """ModelSpec keyword arguments of a decoder-only transformer read from `cfg` (module docstring)."""
    hybrid = family in HYBRID_FAMILIES
    layers = f.integer(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = f.integer(cfg, "hidden_size", "n_embd", "d_model")
    heads = f.integer(cfg, "num_attention_heads", "n_head")
    is_gpt2 = family == "gpt2"
    mla = _mla(cfg)
    head_dim = cfg.get("head_dim") if family not in ("deepseek_v2", "deepseek_v3") else None
    if head_dim is None:
        if hidden % heads:
            raise InputError(f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads}) and no head_dim is given", field="head_dim")
        head_dim = hidden // heads
    else:
        head_dim = f.integer(cfg, "head_dim")
    if mla is not None:
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    layernorm = family in ("gpt2", "gpt_neox")
    attention_bias = f.flag(cfg, "attention_bias")
    gpt2 = family == "gpt2"
    return dict(
        layers=layers, hidden=hidden, heads=heads,
        kv_heads=f.integer(cfg, "num_key_value_heads", "num_kv_heads", default=heads),
        head_dim=head_dim,
        ffn=f.integer(cfg, "n_inner", default=4 * hidden) if is_gpt2 else f.integer(cfg, "intermediate_size", default=4 * hidden),
        ffn_kind=_ffn_kind(cfg, family),
        vocab=f.integer(cfg, "vocab_size"),
        tied_embeddings=f.flag(cfg, "tie_word_embeddings", default=is_gpt2 or family.startswith("gemma")),
        max_position_embeddings=f.integer(cfg, "max_position_embeddings", "n_positions", default=None, minimum=0) or None,
        learned_position_embeddings=is_gpt2,
        norm=NormKind.LAYERNORM if layernorm else NormKind.RMSNORM,
        qkv_bias=family == "qwen2" or attention_bias or layernorm,
        attn_out_bias=attention_bias or layernorm,
        mlp_bias=f.flag(cfg, "mlp_bias") or layernorm or family == "gpt_oss",
        qk_norm=family in ("qwen3", "qwen3_moe", "gemma3"),
        mla=mla,
        moe=None if hybrid else _moe(cfg, family, layers),
        layer_windows=() if hybrid else _layer_windows(cfg, family, layers),
        attention_sinks=family == "gpt_oss",
        mtp_layers=f.integer(cfg, "num_nextn_predict_layers", default=0, minimum=0),
        norms_per_layer=4 if family in ("gemma2", "gemma3") else 2,
        hidden_dropout=f.fraction(cfg, "resid_pdrop") if gpt2 else f.fraction(cfg, "hidden_dropout", "resid_pdrop"),
        attention_dropout=f.fraction(cfg, "attn_pdrop") if gpt2 else f.fraction(cfg, "attention_dropout"),
    )


def _unknown_family_assumptions(cfg: dict[str, Any], kw: dict[str, Any]) -> list[str]:
    gated = kw["ffn_kind"] is FfnKind.SWIGLU
    return [
        f"{'gated 3-matrix' if gated else '2-matrix'} MLP from activation '{_activation(cfg)}'",
        "RMSNorm, rotary positions",
        f"{'tied' if kw['tied_embeddings'] else 'untied'} embeddings",
        f"attention bias {'on' if kw['attn_out_bias'] else 'off'}",
    ]


def model_from_hf_config(cfg: dict[str, Any], name: str, source: str = "") -> ModelSpec:
    """Build a ModelSpec from a parsed config.json dict. Bad or missing fields -> InputError naming the
    field; layers gpuplan cannot model -> InputError naming the layer type and the model_type."""
    cfg = _language_model_config(cfg)
    family = str(f.text(cfg, "model_type", default="") or "generic")
    if family == "gemma3_text":
        family = "gemma3"
    check_language_model(cfg, family, KNOWN_FAMILIES)
    if family in HYBRID_FAMILIES:
        cfg = {**attention_fallbacks(cfg, family), **cfg}
    try:
        kw = _transformer_fields(cfg, family)
        if family in HYBRID_FAMILIES:
            kw = hybrid_fields(cfg, family, kw)
        elif family not in KNOWN_FAMILIES:
            kw["warnings"] = (unknown_family_warning(family, _unknown_family_assumptions(cfg, kw)),)
        spec = ModelSpec(name=name, family=family, source=source, **kw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "config"
        raise InputError(f"config field `{where}`: {err['msg']}", field=where) from None
    announce_warnings(spec)
    return spec


def announce_warnings(spec: ModelSpec) -> None:
    """Hand each of the spec's config warnings to `config_warning_listeners` (the CLI prints them)."""
    for warning in spec.warnings:
        for listener in config_warning_listeners:
            listener(warning)


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a config.json (gpuplan.input_files: bounded, a pipe read as a stream); unreadable or
    invalid JSON -> InputError naming the file."""
    from gpuplan.input_files import MAX_SETTINGS_BYTES, read_input_bytes

    raw = read_input_bytes(path, "model", max_bytes=MAX_SETTINGS_BYTES, what="config.json")
    what = f"model config '{path}'"
    return load_json_text(decode_utf8(raw, what, "model"), what, "model")
