"""config.json of the hybrid families -> the per-layer pattern and mixer shapes of a ModelSpec.

Each family's rules are those of its transformers configuration and modeling classes (cited per
family below); the operators and their formulas are gpuplan.layers.inventory / layers.recurrent.

- nemotron_h (NemotronHConfig, NemotronHBlock): one norm + one mixer per block, the block type from
  `hybrid_override_pattern` ("M" Mamba-2, "*" attention, "-" MLP, "E" MoE) or the list
  `layers_block_type` / `layer_types` ("mamba" or "linear_attention", "attention" or
  "full_attention", "mlp", "moe"; NemotronHConfig._pattern_to_list, remap_legacy_layer_types). The
  pattern gives the layer count. Mamba-2: mamba_num_heads x mamba_head_dim, ssm_state_size, n_groups,
  conv_kernel, chunk_size, biases use_bias / use_conv_bias (legacy names mamba_*). MLP up/down with
  mlp_hidden_act (relu2: two matrices), attention head_dim from `head_dim` or `attention_head_dim`.
  MoE blocks: n_routed_experts of moe_intermediate_size (two matrices, relu2), one shared expert of
  moe_shared_expert_intermediate_size, router h x E with its e_score_correction_bias; MoE latent
  projections (`moe_latent_size`) are refused. MTP weights are ignored on load (`mtp.*`): not counted.
- qwen3_next (Qwen3NextConfig, Qwen3NextDecoderLayer): `layer_types` or every
  `full_attention_interval`-th layer full attention ((i + 1) % interval == 0), the others Gated
  DeltaNet (linear_num_key_heads, linear_key_head_dim, linear_num_value_heads,
  linear_value_head_dim, linear_conv_kernel_dim). Gated attention (q_proj 2 a d) with q/k norms.
  MoE where the layer is not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0, else the
  dense MLP; one shared expert (shared_expert_intermediate_size) with its sigmoid gate h -> 1.
- falcon_h1 (FalconH1Config, FalconH1DecoderLayer): every layer attention and a Mamba-2 mixer in
  parallel, then a gated MLP. Mamba-2: d_ssm = mamba_d_ssm (or mamba_expand x hidden), mamba_n_heads,
  mamba_d_head ("auto": d_ssm / heads), mamba_d_state, mamba_n_groups, mamba_d_conv,
  mamba_chunk_size; in_proj bias mamba_proj_bias, out_proj bias projectors_bias, conv bias
  mamba_conv_bias (default true), gated norm only with mamba_rms_norm (default false).
- mamba2 (Mamba2Config, Mamba2Block): every layer one norm + a Mamba-2 mixer (num_heads, head_dim,
  state_size, n_groups, conv_kernel, chunk_size; expand x hidden must equal num_heads x head_dim),
  no FFN, no attention; biases use_bias / use_conv_bias (default true).
- lfm2 (Lfm2Config, Lfm2DecoderLayer): `layer_types` ("conv", "full_attention") or full_attn_idxs;
  short conv of conv_L_cache taps (bias conv_bias); attention with q/k layernorms; SwiGLU MLP
  (w1, w3, w2) of block_ff_dim / intermediate_size, with block_auto_adjust_ff_dim: int(2 f / 3),
  times block_ffn_dim_multiplier, rounded up to block_multiple_of (Lfm2MLP). Tied by
  `tie_embedding` / `tie_word_embeddings` (default true).
- recurrent_gemma (RecurrentGemmaConfig, RecurrentGemmaDecoderLayer): `block_types` / `_block_types`
  (default recurrent, recurrent, attention) repeated over the layers; local attention of
  attention_window_size (o_proj with bias); RG-LRU of lru_width (default hidden) with
  num_attention_heads blocks and conv1d_width taps; gated MLP of intermediate_size // 2 with biases
  (RecurrentGemmaMlp); tied embeddings.
"""

from __future__ import annotations

from typing import Any

from gpuplan.errors import InputError
from gpuplan.models import config_fields as f
from gpuplan.specs.mixers import FfnSlot, GatedDeltaNetSpec, Mamba2Spec, MixerKind, RgLruSpec, ShortConvSpec
from gpuplan.specs.model import FfnKind, MoeSpec
from gpuplan.validation_rules import MAX_LAYERS

HYBRID_FAMILIES = ("nemotron_h", "qwen3_next", "falcon_h1", "mamba2", "lfm2", "recurrent_gemma")

A, M, G, C, R = MixerKind.ATTENTION, MixerKind.MAMBA2, MixerKind.GATED_DELTANET, MixerKind.SHORT_CONV, MixerKind.RG_LRU
#: Nemotron-H block types: pattern character or list entry -> (mixers, FFN)
_NEMOTRON_BLOCKS = {
    "M": ((M,), FfnSlot.NONE), "*": ((A,), FfnSlot.NONE), "-": ((), FfnSlot.DENSE), "E": ((), FfnSlot.MOE),
    "mamba": ((M,), FfnSlot.NONE), "linear_attention": ((M,), FfnSlot.NONE),
    "attention": ((A,), FfnSlot.NONE), "full_attention": ((A,), FfnSlot.NONE),
    "mlp": ((), FfnSlot.DENSE), "moe": ((), FfnSlot.MOE),
}


def attention_fallbacks(cfg: dict[str, Any], family: str) -> dict[str, Any]:
    """Fields a family's config may lack that the generic reader needs: a pure Mamba-2 model has no
    attention, so its heads stand in for the (unused) attention shape and d_inner for the FFN."""
    if family == "mamba2":
        heads = f.integer(cfg, "num_heads")
        return {"num_attention_heads": heads, "num_key_value_heads": heads,
                "intermediate_size": heads * f.integer(cfg, "head_dim")}
    if family == "nemotron_h" and "head_dim" not in cfg and "attention_head_dim" in cfg:
        return {"head_dim": cfg["attention_head_dim"]}
    return {}


def _entries(types: list[str], table: dict, field: str, family: str) -> list:
    out = []
    for t in types:
        if t not in table:
            allowed = ", ".join(sorted(k for k in table if len(k) > 1) or sorted(table))
            raise InputError(f"config field `{field}` of model_type '{family}' has entry {f.short(t)}; allowed: {allowed}",
                             field=field, allowed=allowed)
        out.append(table[t])
    return out


def _pattern(cfg: dict[str, Any], family: str, names: tuple[str, ...], table: dict, layers: int | None) -> list | None:
    """Per-layer entries of the first list field among `names` (checked against `table`)."""
    for name in names:
        types = f.string_list(cfg, name)
        if types is not None:
            if layers is not None and len(types) != layers:
                raise InputError(f"config field `{name}` lists {len(types)} layers for num_hidden_layers = {layers}",
                                 field=name)
            return _entries(types, table, name, family)
    return None


def _mamba2(cfg: dict[str, Any], *, heads: str, head_dim: str, state: str, groups: str, kernel: str, chunk: str,
            in_bias: bool, out_bias: bool, conv_bias: bool, gated_norm: bool) -> Mamba2Spec:
    return Mamba2Spec(heads=f.integer(cfg, heads), head_dim=f.integer(cfg, head_dim), state_size=f.integer(cfg, state),
                      groups=f.integer(cfg, groups), conv_kernel=f.integer(cfg, kernel),
                      chunk_size=f.integer(cfg, chunk, default=256), in_proj_bias=in_bias, out_proj_bias=out_bias,
                      conv_bias=conv_bias, gated_norm=gated_norm)


def _nemotron_h(cfg: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_LAYERS:
            raise InputError(f"config field `hybrid_override_pattern` must be a string of M, *, - and E, got "
                             f"{f.short(pattern)}", field="hybrid_override_pattern", allowed="M, *, - or E per layer")
        blocks = _entries(list(pattern), {k: v for k, v in _NEMOTRON_BLOCKS.items() if len(k) == 1},
                          "hybrid_override_pattern", "nemotron_h")
    else:
        blocks = _pattern(cfg, "nemotron_h", ("layers_block_type", "layer_types"), _NEMOTRON_BLOCKS, None)
        if blocks is None:
            raise InputError("config of model_type 'nemotron_h' has no `hybrid_override_pattern` or `layers_block_type`",
                             field="hybrid_override_pattern")
    warnings = list(kw.get("warnings", ()))
    if kw["layers"] != len(blocks):  # NemotronHConfig: the pattern's length wins, with a warning
        warnings.append(f"num_hidden_layers ({kw['layers']}) differs from the {len(blocks)} layers of the block "
                        f"pattern; the pattern is used (as transformers NemotronHConfig does)")
    mixers, ffns = [b[0] for b in blocks], [b[1] for b in blocks]
    conv_bias = f.flag(cfg, "use_conv_bias", "mamba_conv_bias", default=True)
    proj_bias = f.flag(cfg, "use_bias")
    moe = None
    if FfnSlot.MOE in ffns:
        if cfg.get("moe_latent_size") is not None:
            raise InputError("MoE latent projections (`moe_latent_size`) of model_type 'nemotron_h' are not modelled "
                             "by gpuplan", field="moe_latent_size")
        moe = MoeSpec(num_experts=f.integer(cfg, "n_routed_experts"), top_k=f.integer(cfg, "num_experts_per_tok"),
                      expert_ffn=f.integer(cfg, "moe_intermediate_size"),
                      shared_experts=f.integer(cfg, "n_shared_experts", default=1, minimum=0),
                      shared_expert_ffn=f.integer(cfg, "moe_shared_expert_intermediate_size"), router_bias=True)
    act = f.text(cfg, "mlp_hidden_act", default="relu2")
    kw.update(
        layers=len(blocks), layer_mixers=tuple(tuple(m) for m in mixers), layer_ffns=tuple(ffns), moe=moe,
        mamba2=_mamba2(cfg, heads="mamba_num_heads", head_dim="mamba_head_dim", state="ssm_state_size",
                       groups="n_groups" if "n_groups" in cfg else "mamba_n_groups",
                       kernel="conv_kernel" if "conv_kernel" in cfg else "mamba_d_conv",
                       chunk="chunk_size" if "chunk_size" in cfg else "mamba_chunk_size",
                       in_bias=proj_bias, out_bias=proj_bias, conv_bias=conv_bias, gated_norm=True)
        if M in {m for ms in mixers for m in ms} else None,
        ffn_kind=FfnKind.SWIGLU if act in ("silu", "swish", "swiglu") else FfnKind.GELU,
        norms_per_layer=1, mtp_layers=0, warnings=tuple(warnings),
    )
    if kw["layer_windows"]:
        kw["layer_windows"] = ()  # NemotronHAttention: global attention
    return kw


def _qwen3_next(cfg: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    layers = kw["layers"]
    table = {"linear_attention": (G,), "full_attention": (A,)}
    mixers = _pattern(cfg, "qwen3_next", ("layer_types",), table, layers)
    if mixers is None:
        interval = f.integer(cfg, "full_attention_interval", default=4)
        mixers = [(G,) if (i + 1) % interval else (A,) for i in range(layers)]
    experts = f.integer(cfg, "num_experts", default=0, minimum=0)
    step = f.integer(cfg, "decoder_sparse_step", default=1)
    dense_only = set(f.int_list(cfg, "mlp_only_layers", layers) or ())
    ffns = [FfnSlot.MOE if experts and i not in dense_only and (i + 1) % step == 0 else FfnSlot.DENSE
            for i in range(layers)]
    moe = None
    if FfnSlot.MOE in ffns:
        moe = MoeSpec(num_experts=experts, top_k=f.integer(cfg, "num_experts_per_tok"),
                      expert_ffn=f.integer(cfg, "moe_intermediate_size"), shared_experts=1,
                      shared_expert_ffn=f.integer(cfg, "shared_expert_intermediate_size"), shared_expert_gate=True)
    kw.update(layer_mixers=tuple(mixers), layer_ffns=tuple(ffns), moe=moe, attention_output_gate=True, qk_norm=True,
              gated_deltanet=GatedDeltaNetSpec(
                  key_heads=f.integer(cfg, "linear_num_key_heads"), key_head_dim=f.integer(cfg, "linear_key_head_dim"),
                  value_heads=f.integer(cfg, "linear_num_value_heads"),
                  value_head_dim=f.integer(cfg, "linear_value_head_dim"),
                  conv_kernel=f.integer(cfg, "linear_conv_kernel_dim", default=4)),
              layer_windows=())
    return kw


def _falcon_h1(cfg: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    hidden = kw["hidden"]
    heads = f.integer(cfg, "mamba_n_heads")
    d_ssm = f.integer(cfg, "mamba_d_ssm", default=None) or f.integer(cfg, "mamba_expand", default=2) * hidden
    head_dim = cfg.get("mamba_d_head")
    head_dim = d_ssm // heads if head_dim in (None, "auto") else f.integer(cfg, "mamba_d_head")
    if head_dim * heads != d_ssm:  # FalconH1Config.validate_architecture
        raise InputError(f"config fields `mamba_d_head` x `mamba_n_heads` ({head_dim} x {heads}) must equal the Mamba "
                         f"width {d_ssm}", field="mamba_d_head")
    m = Mamba2Spec(heads=heads, head_dim=head_dim, state_size=f.integer(cfg, "mamba_d_state"),
                   groups=f.integer(cfg, "mamba_n_groups", default=1), conv_kernel=f.integer(cfg, "mamba_d_conv", default=4),
                   chunk_size=f.integer(cfg, "mamba_chunk_size", default=256),
                   in_proj_bias=f.flag(cfg, "mamba_proj_bias"), out_proj_bias=f.flag(cfg, "projectors_bias"),
                   conv_bias=f.flag(cfg, "mamba_conv_bias", default=True), gated_norm=f.flag(cfg, "mamba_rms_norm"))
    kw.update(layer_mixers=tuple((A, M) for _ in range(kw["layers"])), mamba2=m)
    return kw


def _mamba2_family(cfg: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    m = _mamba2(cfg, heads="num_heads", head_dim="head_dim", state="state_size", groups="n_groups", kernel="conv_kernel",
                chunk="chunk_size", in_bias=f.flag(cfg, "use_bias"), out_bias=f.flag(cfg, "use_bias"),
                conv_bias=f.flag(cfg, "use_conv_bias", default=True), gated_norm=True)
    expand = f.integer(cfg, "expand", default=2)
    if expand * kw["hidden"] != m.inner:  # Mamba2Mixer: intermediate_size = expand x hidden = num_heads x head_dim
        raise InputError(f"config fields `num_heads` x `head_dim` ({m.heads} x {m.head_dim}) must equal expand x "
                         f"hidden_size ({expand} x {kw['hidden']})", field="num_heads")
    layers = kw["layers"]
    kw.update(layer_mixers=tuple((M,) for _ in range(layers)), layer_ffns=tuple(FfnSlot.NONE for _ in range(layers)),
              mamba2=m, norms_per_layer=1, qk_norm=False, layer_windows=())
    return kw


def _lfm2_ffn(cfg: dict[str, Any]) -> int:
    """Lfm2MLP's intermediate size (module docstring)."""
    ffn = f.integer(cfg, "block_ff_dim", "intermediate_size")
    if f.flag(cfg, "block_auto_adjust_ff_dim", default=True):
        ffn = int(2 * ffn / 3)
        multiplier = cfg.get("block_ffn_dim_multiplier", 1.0)
        if multiplier is not None:
            ffn = int(f.number(cfg, "block_ffn_dim_multiplier", 1.0, 0.0, 64.0) * ffn)
            multiple = f.integer(cfg, "block_multiple_of", default=256)
            ffn = multiple * ((ffn + multiple - 1) // multiple)
    if ffn < 1:
        raise InputError(f"config fields `block_ff_dim` / `block_ffn_dim_multiplier` give an FFN of {ffn}",
                         field="block_ff_dim")
    return ffn


def _lfm2(cfg: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    layers = kw["layers"]
    mixers = _pattern(cfg, "lfm2", ("layer_types",), {"conv": (C,), "full_attention": (A,)}, layers)
    if mixers is None:
        attn = set(f.int_list(cfg, "full_attn_idxs", layers) or range(layers))
        mixers = [(A,) if i in attn else (C,) for i in range(layers)]
    kw.update(layer_mixers=tuple(mixers), ffn=_lfm2_ffn(cfg), ffn_kind=FfnKind.SWIGLU, qk_norm=True, qkv_bias=False,
              attn_out_bias=False, mlp_bias=False, layer_windows=(),
              short_conv=ShortConvSpec(conv_kernel=f.integer(cfg, "conv_L_cache", default=3), bias=f.flag(cfg, "conv_bias")),
              tied_embeddings=f.flag(cfg, "tie_embedding", "tie_word_embeddings", default=True))
    return kw


def _recurrent_gemma(cfg: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    layers = kw["layers"]
    block_types = f.string_list(cfg, "block_types") or f.string_list(cfg, "_block_types") or [
        "recurrent", "recurrent", "attention"]  # RecurrentGemmaConfig default
    mixers = _entries(block_types, {"recurrent": (R,), "attention": (A,)}, "block_types", "recurrent_gemma")
    mixers = [mixers[i % len(mixers)] for i in range(layers)]  # layers_block_type = (block_types * 100)[:layers]
    window = f.integer(cfg, "attention_window_size", default=2048)
    kw.update(layer_mixers=tuple(mixers), ffn=f.integer(cfg, "intermediate_size") // 2, ffn_kind=FfnKind.SWIGLU,
              mlp_bias=True, attn_out_bias=True, qkv_bias=f.flag(cfg, "attention_bias"),
              layer_windows=tuple(window if m == (A,) else None for m in mixers),
              rg_lru=RgLruSpec(width=f.integer(cfg, "lru_width", default=kw["hidden"]), blocks=kw["heads"],
                               conv_kernel=f.integer(cfg, "conv1d_width", default=4)),
              tied_embeddings=f.flag(cfg, "tie_word_embeddings", default=True), norms_per_layer=2)
    if kw["ffn"] < 1:
        raise InputError("config field `intermediate_size` must be >= 2 (the MLP is intermediate_size // 2)",
                         field="intermediate_size")
    if kw["rg_lru"].width % kw["heads"]:
        raise InputError(f"config field `lru_width` ({kw['rg_lru'].width}) must be a multiple of num_attention_heads "
                         f"({kw['heads']}): the RG-LRU gates are that many blocks", field="lru_width")
    return kw


_READERS = {"nemotron_h": _nemotron_h, "qwen3_next": _qwen3_next, "falcon_h1": _falcon_h1, "mamba2": _mamba2_family,
            "lfm2": _lfm2, "recurrent_gemma": _recurrent_gemma}


def hybrid_fields(cfg: dict[str, Any], family: str, kw: dict[str, Any]) -> dict[str, Any]:
    """ModelSpec keyword arguments of a hybrid family: the generic ones `kw` with the family's
    layer pattern, mixer shapes and overrides (module docstring)."""
    return _READERS[family](cfg, dict(kw))


__all__ = ["HYBRID_FAMILIES", "attention_fallbacks", "hybrid_fields"]
