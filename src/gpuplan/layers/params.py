"""Exact parameter counts of a ModelSpec, per component and per layer: sums over the operator
inventory (layers.inventory), each operator owning its own `params`.

Each count is the number of elements of the weight tensors a framework allocates (the same
tensors a safetensors checkpoint stores, minus non-parameter buffers such as rotary
`inv_freq`). Formulas, with h = hidden, d = head_dim, a = heads, g = kv_heads, f = FFN size,
V = vocab:

- attention (GQA/MHA): q h*a*d, k and v h*g*d each, out a*d*h; biases a*d + 2*g*d (qkv) and h (out);
  per-head q/k norms 2*d; attention sinks a.
- attention (MLA, DeepSeek-V2 sec. 2.1): q_a h*r_q + norm r_q + q_b r_q*a*(d_nope+d_rope)
  (or h*a*(d_nope+d_rope) without q_lora); kv_a h*(r_kv+d_rope) + norm r_kv; kv_b r_kv*a*(d_nope+d_v);
  out a*d_v*h.
- FFN: gelu 2*h*f (+ f + h biases), gated (SwiGLU/GeGLU) 3*h*f (+ 2f + h biases).
- MoE layer: router h*E (+ E bias), E routed experts, shared experts, each an FFN of its size.
- norms: RMSNorm h, LayerNorm 2h; `norms_per_layer` per layer plus the final norm.
- embeddings: V*h input table, V*h output head unless tied, learned positions max_pos*h.
- recurrent mixers (layers.inventory / layers.recurrent): their projections and cores, reported per
  kind (`mamba2`, `gated_deltanet`, `short_conv`, `rg_lru`) and only for models that have them;
  `attention` then counts the attention layers' own operators.
- DeepSeek-V3 MTP module (DeepSeek-V3 tech report sec. 2.2): per module two RMSNorms (2h), a
  projection 2h*h, one MoE transformer layer and the output-head norm h; its embedding and head are
  shared with the main model (the HF checkpoint stores copies), so they are not counted again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from gpuplan.layers.inventory import layer_ops, model_ops
from gpuplan.specs.model import ModelSpec


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer layer; `active` counts the routed experts a token uses."""

    attention: int
    ffn: int  # dense FFN, or routed + shared experts + router for a MoE layer
    norms: int
    total: int
    active: int
    moe: bool


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of the main model (MTP modules reported apart in `mtp`).

    `embedding` = input table + learned position table + untied output head (every
    vocabulary- or position-sized table); `non_embedding` = total - embedding.
    `active` = parameters used per token: all non-expert weights plus top_k routed experts
    (input embedding included, as DeepSeek and OpenAI count it for V3 and gpt-oss).
    """

    total: int
    active: int
    embedding: int
    non_embedding: int
    mtp: int
    components: dict[str, int] = field(default_factory=dict)
    per_layer: tuple[LayerParams, ...] = ()

    @property
    def active_excluding_input_embedding(self) -> int:
        """Active parameters without the input embedding table (a lookup, not a matmul): the
        convention of the gpt-oss model card (5.13B / 3.61B active) and DeepSeek-V3 (36.6B, "37B")."""
        return self.active - self.components.get("embedding", 0)

    @property
    def total_with_mtp(self) -> int:
        return self.total + self.mtp


def norm_params(model: ModelSpec) -> int:
    """Parameters of one norm of width h: RMSNorm h (weight), LayerNorm 2h (weight + bias)."""
    return model_ops(model).final_norm.params


#: operator-name prefixes of the recurrent mixers (layers.inventory._recurrent_ops) -> component
_MIXER_COMPONENTS = {"mamba_": "mamba2", "gdn_": "gated_deltanet", "conv_": "short_conv", "lru_": "rg_lru"}


def _mixer_component(op) -> str:
    return next((c for prefix, c in _MIXER_COMPONENTS.items() if op.name.startswith(prefix)), "attention")


def _component(op) -> str:
    if op.name == "router":
        return "moe_router"
    if op.name.startswith("expert_"):
        return "moe_routed_experts"
    if op.name.startswith("shared_"):
        return "moe_shared_experts"
    return "ffn_dense"


@lru_cache(maxsize=8192)
def layer_params(model: ModelSpec, layer: int) -> LayerParams:
    """Parameters of one layer, from its operators: attention, FFN (dense, or router + experts), norms."""
    lo = layer_ops(model, layer)
    attn = sum(op.params for op in lo.attention)
    ffn = sum(op.params for op in lo.ffn)
    norms = sum(op.params for op in lo.norms)
    return LayerParams(attn, ffn, norms, lo.params, lo.active_params, lo.moe)


def mtp_params(model: ModelSpec) -> int:
    """DeepSeek-V3 MTP modules: per module 2 norms + 2h*h projection + one MoE layer + head norm."""
    return sum(op.params for op in model_ops(model).mtp)


@lru_cache(maxsize=512)
def parameter_counts(model: ModelSpec) -> ParamCounts:
    """Exact counts: total, active per token, embedding / non-embedding, per component and per layer,
    each a sum over the operator inventory (layers.inventory.model_ops)."""
    ops = model_ops(model)
    layers = tuple(layer_params(model, i) for i in range(model.layers))
    tables = {e.name: e.params for e in ops.embeddings}
    embed = tables.get("embedding", 0)
    positions = tables.get("position_embedding", 0)
    head = ops.head.params
    final_norm = ops.final_norm.params
    components = {
        "embedding": embed,
        "position_embedding": positions,
        "lm_head": head,
        "attention": sum(lp.attention for lp in layers),
        "ffn_dense": 0,
        "norms": sum(lp.norms for lp in layers) + final_norm,
    }
    if model.moe is not None:
        components.update(moe_routed_experts=0, moe_shared_experts=0, moe_router=0)
    for lo in ops.layers:
        for op in lo.ffn:
            components[_component(op)] += op.params
        for op in lo.attention:
            kind = _mixer_component(op)
            if kind != "attention":  # recurrent mixers apart from the attention layers' operators
                components[kind] = components.get(kind, 0) + op.params
                components["attention"] -= op.params
    body = sum(lp.total for lp in layers)
    body_active = sum(lp.active for lp in layers)
    total = embed + positions + head + body + final_norm
    active = embed + positions + head + body_active + final_norm
    embedding = embed + positions + head
    return ParamCounts(
        total=total,
        active=active,
        embedding=embedding,
        non_embedding=total - embedding,
        mtp=mtp_params(model),
        components=components,
        per_layer=layers,
    )
