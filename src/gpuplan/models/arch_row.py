"""ModelSpec from the plain architecture columns of ../shared/validation/SCHEMA.md.

Columns: layers, hidden, heads, kv_heads (empty = heads), ffn (empty = 4 * hidden),
ffn_kind (empty = gelu), vocab, moe_experts, moe_topk, moe_ffn, moe_shared_experts,
moe_dense_layers; seq_len (optional) sizes learned position embeddings.

The columns do not say everything, so the defaults follow the frameworks that produced such
rows (documented, not tuned per row):
- `gelu` rows are Megatron GPT: LayerNorm, biases on every linear, learned absolute positions
  (max_position_embeddings = seq_len), hidden and attention dropout 0.1 (Megatron-LM
  arguments.py defaults), untied input/output embeddings (`--untie-embeddings-and-output-weights`,
  as in the Megatron CI memory tests and every Llama-style recipe).
- `swiglu` rows are Llama style: RMSNorm, no biases, RoPE, no dropout, untied embeddings.

When the row names an `hf_config` (a config.json of ../shared/models by file name without `.json`,
e.g. `deepseek-ai--DeepSeek-V3`), the architecture comes from that file (SCHEMA.md): it expresses
what the columns cannot (MLA, head widths that differ from hidden / heads, windows, sinks, MTP).
The bundled copies of those configs answer to the same names (models.bundled), offline.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.specs.model import FfnKind, ModelSpec, MoeSpec, NormKind
from gpuplan.validation_rules import parse_number

#: Megatron-LM default `--hidden-dropout` and `--attention-dropout` (megatron/training/arguments.py).
MEGATRON_DEFAULT_DROPOUT = 0.1


def _int(row: dict[str, str], column: str, default: int | None = None) -> int | None:
    raw = (row.get(column) or "").strip()
    if raw == "":
        if default is None and column in ("layers", "hidden", "heads", "vocab"):
            raise InputError(f"architecture column `{column}` is empty (required)", field=column)
        return default
    try:
        value = float(parse_number(raw, column))  # ASCII digits only (validation_rules.parse_number)
    except (ValueError, OverflowError):
        raise InputError(f"architecture column `{column}` must be an integer, got '{raw}'", field=column) from None
    if value != int(value) or value < 0:
        raise InputError(f"architecture column `{column}` must be a non-negative integer, got '{raw}'", field=column)
    return int(value)


#: every column `model_from_arch_row` reads: the key of its memo (tests/models/test_arch_row_memo.py
#: checks the function reads no other)
ARCH_COLUMNS = ("hf_config", "model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "ffn_kind", "moe_experts",
                "moe_topk", "moe_ffn", "moe_shared_experts", "moe_dense_layers", "seq_len")


def model_from_arch_row(row: dict[str, str]) -> ModelSpec:
    """Build a ModelSpec from one CSV row's `hf_config` or its architecture columns (module docstring).
    Memoised on those cells (ARCH_COLUMNS): `validate` asks for each row's model three times (the
    prediction, its regime, its band) and many rows share one model; the spec is frozen, so sharing
    it is safe. An InputError is raised again at each call (not memoised)."""
    return _model_from_cells(tuple(row.get(c) for c in ARCH_COLUMNS))


@lru_cache(maxsize=4096)
def _model_from_cells(cells: tuple) -> ModelSpec:
    return _build_model(dict(zip(ARCH_COLUMNS, cells)))


def _build_model(row: dict[str, str]) -> ModelSpec:
    hf_config = (row.get("hf_config") or "").strip()
    if hf_config:
        from gpuplan.models.bundled import load_model

        if "/" in hf_config or hf_config.endswith(".json"):
            raise InputError(f"hf_config names a config by file name without .json, got '{hf_config}'", field="hf_config")
        return load_model(hf_config)
    layers = _int(row, "layers")
    hidden = _int(row, "hidden")
    heads = _int(row, "heads")
    kv_heads = _int(row, "kv_heads", heads)
    ffn = _int(row, "ffn", 4 * hidden)
    vocab = _int(row, "vocab")
    kind_raw = (row.get("ffn_kind") or "gelu").strip().lower()
    try:
        ffn_kind = FfnKind(kind_raw)
    except ValueError:
        raise InputError(f"architecture column `ffn_kind` must be gelu or swiglu, got '{kind_raw}'", field="ffn_kind") from None
    experts = _int(row, "moe_experts", 0)
    moe = None
    if experts:
        try:
            moe = MoeSpec(
                num_experts=experts,
                top_k=_int(row, "moe_topk", 1) or 1,
                expert_ffn=_int(row, "moe_ffn", ffn) or ffn,
                shared_experts=_int(row, "moe_shared_experts", 0),
                dense_layers=_int(row, "moe_dense_layers", 0),
            )
        except ValidationError as exc:
            raise InputError(f"MoE columns: {exc.errors()[0]['msg']}", field="moe_topk") from None
    seq_len = _int(row, "seq_len", 0) or None
    gpt = ffn_kind is FfnKind.GELU
    if hidden % heads:
        raise InputError(f"architecture column `hidden` ({hidden}) must be a multiple of `heads` ({heads})", field="hidden")
    try:
        return ModelSpec(
            name=(row.get("model") or "arch-row").strip() or "arch-row",
            family="megatron-gpt" if gpt else "llama",
            layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=hidden // heads,
            ffn=ffn, ffn_kind=ffn_kind, vocab=vocab, tied_embeddings=False,
            max_position_embeddings=seq_len,
            learned_position_embeddings=gpt and seq_len is not None,
            norm=NormKind.LAYERNORM if gpt else NormKind.RMSNORM,
            qkv_bias=gpt, attn_out_bias=gpt, mlp_bias=gpt,
            moe=moe,
            hidden_dropout=MEGATRON_DEFAULT_DROPOUT if gpt else 0.0,
            attention_dropout=MEGATRON_DEFAULT_DROPOUT if gpt else 0.0,
            source="validation CSV architecture columns",
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"architecture columns: {err['msg']}", field=".".join(map(str, err["loc"])) or "kv_heads") from None
