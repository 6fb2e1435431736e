"""Hugging Face `config.json` -> ModelSpec, offline and without remote code.

Field names per family follow the transformers configuration classes (read from the
published config.json files in catalog/data/models and ../shared/reference/ecosystem.md 2.1).
Traps handled here, each with the family that sets it:

- `num_key_value_heads` absent -> MHA (kv_heads = heads)  [Llama 1/2 7B, GPT-2, GPT-NeoX]
- `head_dim` explicit and != hidden / heads  [Gemma 2/3 (256), Qwen3 (128), gpt-oss (64)]
- nested `text_config` of multimodal wrappers  [Gemma 3 `Gemma3ForConditionalGeneration`]
- tied embeddings default differs per family: True for GPT-2, Gemma; False elsewhere
- sliding windows: all layers (Mistral v0.1, Phi-3), alternating `layer_types`
  (gpt-oss, newer Gemma), Gemma 2 odd/even rule, Gemma 3 `sliding_window_pattern`
- DeepSeek-V3 `head_dim` in transformers is the rope dim; gpuplan reads the MLA fields instead
- GPT-2 style names: n_embd, n_layer, n_head, n_inner (None -> 4 n_embd), n_positions
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.specs.model import FfnKind, MlaSpec, ModelSpec, MoeSpec, NormKind
from gpuplan.validation_rules import MAX_LAYERS, MAX_WIDTH, decode_utf8, load_json_text

#: config fields that count layers (capped at MAX_LAYERS); every other integer field is a width
#: or a count capped at MAX_WIDTH (see gpuplan.validation_rules for why).
_LAYER_FIELDS = {"num_hidden_layers", "n_layer", "num_layers", "first_k_dense_replace", "num_nextn_predict_layers"}

#: activations whose MLP is gated (three matrices); everything else is two matrices.
_GATED_ACTS = {"silu", "swiglu", "swish"}
_GELU_ACTS = {"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "relu", "quick_gelu"}

#: model_type values gpuplan understands (others are parsed as Llama-like if the core fields exist).
KNOWN_FAMILIES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3",
    "gemma", "gemma2", "gemma3", "gemma3_text", "gpt2", "gpt_neox", "phi3", "gpt_oss",
)


def _field(cfg: dict[str, Any], *names: str, default: Any = ..., kind: type = int, minimum: int = 1) -> Any:
    """The first present, non-null field among `names`, checked to be of `kind` (an int: between
    `minimum` and MAX_LAYERS / MAX_WIDTH)."""
    for name in names:
        if name in cfg and cfg[name] is not None:
            value = cfg[name]
            if kind is int:
                cap = MAX_LAYERS if name in _LAYER_FIELDS else MAX_WIDTH
                if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= cap:
                    allowed = f"an integer >= {minimum} and <= {cap:,}"
                    raise InputError(f"config field `{name}` must be {allowed}, got {_short(value)}", field=name,
                                     allowed=allowed)
            elif kind is bool and not isinstance(value, bool):
                raise InputError(f"config field `{name}` must be true or false, got {value!r}", field=name)
            return value
    if default is ...:
        raise InputError(f"config is missing `{names[0]}` (needed to size the model)", field=names[0])
    return default


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fraction(cfg: dict[str, Any], *names: str) -> float:
    """The first truthy field among `names` as a dropout probability in [0, 1); 0.0 if none."""
    for name in names:
        value = cfg.get(name)
        if value:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise InputError(f"config field `{name}` must be a number >= 0 and < 1, got {_short(value)}", field=name,
                                 allowed=">= 0 and < 1")
            return float(value)
    return 0.0


def _ffn_kind(cfg: dict[str, Any], family: str) -> FfnKind:
    if family in ("gpt2", "gpt_neox"):
        return FfnKind.GELU
    if family.startswith("gemma"):
        return FfnKind.SWIGLU  # GeGLU: gated, three matrices
    act = cfg.get("hidden_act") or cfg.get("hidden_activation") or cfg.get("activation_function") or "silu"
    if not isinstance(act, str):
        raise InputError(f"config field `hidden_act` must be a string, got {act!r}", field="hidden_act")
    return FfnKind.SWIGLU if act in _GATED_ACTS else FfnKind.GELU


def _layer_windows(cfg: dict[str, Any], family: str, layers: int) -> tuple[int | None, ...]:
    """Per-layer attention window (None = full attention); () when every layer is global."""
    window = cfg.get("sliding_window")
    if family in ("qwen2", "qwen3", "qwen3_moe") and not cfg.get("use_sliding_window", False):
        return ()
    if not window:
        return ()
    window = _field(cfg, "sliding_window")
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers:
            raise InputError(
                f"config field `layer_types` must list one entry per layer ({layers})", field="layer_types"
            )
        return tuple(window if t == "sliding_attention" else None for t in types)
    if family == "gemma2":  # Gemma2DecoderLayer: even-indexed layers are sliding
        return tuple(window if i % 2 == 0 else None for i in range(layers))
    if family in ("gemma3", "gemma3_text"):  # 5 local : 1 global
        pattern = _field(cfg, "sliding_window_pattern", default=6)
        return tuple(None if (i + 1) % pattern == 0 else window for i in range(layers))
    if window >= _field(cfg, "max_position_embeddings", default=window + 1):
        return ()
    return tuple(window for _ in range(layers))


def _moe(cfg: dict[str, Any], family: str, layers: int) -> MoeSpec | None:
    names = [n for n in ("num_local_experts", "num_experts", "n_routed_experts") if cfg.get(n)]
    if not names:
        return None
    experts = _field(cfg, names[0])
    top_k = _field(cfg, "num_experts_per_tok", "experts_per_token")
    if family == "mixtral" or family == "gpt_oss":
        expert_ffn = _field(cfg, "intermediate_size")
    else:
        expert_ffn = _field(cfg, "moe_intermediate_size")
    dense_layers = _field(cfg, "first_k_dense_replace", default=0, minimum=0)
    layer_freq = _field(cfg, "moe_layer_freq", "decoder_sparse_step", default=1)
    if cfg.get("mlp_only_layers"):
        raise InputError("config field `mlp_only_layers` (dense layers inside a MoE stack) is not supported", field="mlp_only_layers")
    shared = _field(cfg, "n_shared_experts", default=0, minimum=0)
    try:
        return MoeSpec(
            num_experts=experts, top_k=top_k, expert_ffn=expert_ffn, shared_experts=shared,
            dense_layers=dense_layers, layer_freq=layer_freq,
            # gpt-oss router has a bias; DeepSeek-V3 carries e_score_correction_bias (one per expert)
            router_bias=family in ("gpt_oss", "deepseek_v3"),
        )
    except ValidationError as exc:
        raise InputError(f"config MoE fields are inconsistent: {exc.errors()[0]['msg']}", field="num_experts") from None


def _mla(cfg: dict[str, Any]) -> MlaSpec | None:
    if not cfg.get("kv_lora_rank"):
        return None
    return MlaSpec(
        q_lora_rank=_field(cfg, "q_lora_rank", default=None, minimum=0) or None,
        kv_lora_rank=_field(cfg, "kv_lora_rank"),
        qk_nope_head_dim=_field(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=_field(cfg, "qk_rope_head_dim"),
        v_head_dim=_field(cfg, "v_head_dim"),
    )


def model_from_hf_config(cfg: dict[str, Any], name: str, source: str = "") -> ModelSpec:
    """Build a ModelSpec from a parsed config.json dict. Bad or missing fields -> InputError naming the field."""
    if not isinstance(cfg, dict):
        raise InputError("config.json must hold a JSON object", field="config")
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrapper (Gemma 3, Llama 4 ...): the LM lives inside
        inner = dict(cfg["text_config"])
        inner.setdefault("model_type", cfg.get("model_type", ""))
        if "tie_word_embeddings" in cfg and "tie_word_embeddings" not in inner:
            inner["tie_word_embeddings"] = cfg["tie_word_embeddings"]
        cfg = inner
    family = str(cfg.get("model_type") or "generic")
    if family == "gemma3_text":
        family = "gemma3"

    layers = _field(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _field(cfg, "hidden_size", "n_embd", "d_model")
    heads = _field(cfg, "num_attention_heads", "n_head")
    kv_heads = _field(cfg, "num_key_value_heads", "num_kv_heads", default=heads)
    vocab = _field(cfg, "vocab_size")
    is_gpt2 = family == "gpt2"
    ffn = _field(cfg, "n_inner", default=4 * hidden) if is_gpt2 else _field(cfg, "intermediate_size", default=4 * hidden)
    mla = _mla(cfg)
    head_dim = cfg.get("head_dim") if family not in ("deepseek_v2", "deepseek_v3") else None
    if head_dim is None:
        if hidden % heads:
            raise InputError(f"hidden_size ({hidden}) is not a multiple of num_attention_heads ({heads}) and no head_dim is given", field="head_dim")
        head_dim = hidden // heads
    else:
        head_dim = _field(cfg, "head_dim")
    if mla is not None:
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    tied_default = is_gpt2 or family.startswith("gemma")
    tied = _field(cfg, "tie_word_embeddings", default=tied_default, kind=bool)
    max_pos = _field(cfg, "max_position_embeddings", "n_positions", default=None, minimum=0) or None
    layernorm = family in ("gpt2", "gpt_neox")
    attention_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = family == "qwen2" or attention_bias or layernorm
    moe = _moe(cfg, family, layers)
    if family == "gpt2":
        hidden_dropout = _fraction(cfg, "resid_pdrop")
        attention_dropout = _fraction(cfg, "attn_pdrop")
    else:
        hidden_dropout = _fraction(cfg, "hidden_dropout", "resid_pdrop")
        attention_dropout = _fraction(cfg, "attention_dropout")
    try:
        return ModelSpec(
            name=name,
            family=family,
            layers=layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            ffn=ffn,
            ffn_kind=_ffn_kind(cfg, family),
            vocab=vocab,
            tied_embeddings=tied,
            max_position_embeddings=max_pos,
            learned_position_embeddings=is_gpt2,
            norm=NormKind.LAYERNORM if layernorm else NormKind.RMSNORM,
            qkv_bias=qkv_bias,
            attn_out_bias=attention_bias or layernorm,
            mlp_bias=bool(cfg.get("mlp_bias", False)) or layernorm or family == "gpt_oss",
            qk_norm=family in ("qwen3", "qwen3_moe", "gemma3"),
            mla=mla,
            moe=moe,
            layer_windows=_layer_windows(cfg, family, layers),
            attention_sinks=family == "gpt_oss",
            mtp_layers=_field(cfg, "num_nextn_predict_layers", default=0, minimum=0),
            norms_per_layer=4 if family in ("gemma2", "gemma3") else 2,
            hidden_dropout=hidden_dropout,
            attention_dropout=attention_dropout,
            source=source,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "config"
        raise InputError(f"config field `{where}`: {err['msg']}", field=where) from None


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a config.json (gpuplan.input_files: bounded, a pipe read as a stream); unreadable or
    invalid JSON -> InputError naming the file."""
    from gpuplan.input_files import MAX_SETTINGS_BYTES, read_input_bytes

    raw = read_input_bytes(path, "model", max_bytes=MAX_SETTINGS_BYTES, what="config.json")
    what = f"model config '{path}'"
    return load_json_text(decode_utf8(raw, what, "model"), what, "model")
