"""Exact parameter counts of a ModelSpec, per component and per layer.

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
- DeepSeek-V3 MTP module (DeepSeek-V3 tech report sec. 2.2): per module two RMSNorms (2h), a
  projection 2h*h, one MoE transformer layer and the output-head norm h; its embedding and head are
  shared with the main model (the HF checkpoint stores copies), so they are not counted again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpuplan.specs.model import FfnKind, ModelSpec, NormKind


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
    """Parameters of one norm: RMSNorm h (weight), LayerNorm 2h (weight + bias)."""
    return model.hidden * (2 if model.norm is NormKind.LAYERNORM else 1)


def attention_params(model: ModelSpec) -> int:
    """Parameters of one attention block (see module docstring)."""
    h, a, g, d = model.hidden, model.heads, model.kv_heads, model.head_dim
    if model.mla is not None:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a * qk if m.q_lora_rank else h * a * qk
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank + m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)
        out = a * m.v_head_dim * h
        return q + kv + out
    n = h * a * d + 2 * h * g * d + a * d * h
    if model.qkv_bias:
        n += a * d + 2 * g * d
    if model.attn_out_bias:
        n += h
    if model.qk_norm:
        n += 2 * d
    if model.attention_sinks:
        n += a
    return n


def ffn_params(model: ModelSpec, ffn: int) -> int:
    """One FFN of intermediate size `ffn`: gelu 2hf (+f+h bias), gated 3hf (+2f+h bias)."""
    h = model.hidden
    if model.ffn_kind is FfnKind.SWIGLU:
        return 3 * h * ffn + ((2 * ffn + h) if model.mlp_bias else 0)
    return 2 * h * ffn + ((ffn + h) if model.mlp_bias else 0)


def moe_layer_params(model: ModelSpec) -> tuple[int, int]:
    """(total, active per token) of one MoE FFN: router + experts + shared experts."""
    moe = model.moe
    assert moe is not None
    router = model.hidden * moe.num_experts + (moe.num_experts if moe.router_bias else 0)
    expert = ffn_params(model, moe.expert_ffn)
    shared = moe.shared_experts * ffn_params(model, moe.shared_expert_ffn or moe.expert_ffn)
    return router + moe.num_experts * expert + shared, router + moe.top_k * expert + shared


def layer_params(model: ModelSpec, layer: int) -> LayerParams:
    attn = attention_params(model)
    norms = model.norms_per_layer * norm_params(model)
    if model.is_moe_layer(layer):
        ffn_total, ffn_active = moe_layer_params(model)
        moe = True
    else:
        ffn_total = ffn_active = ffn_params(model, model.ffn)
        moe = False
    return LayerParams(attn, ffn_total, norms, attn + ffn_total + norms, attn + ffn_active + norms, moe)


def mtp_params(model: ModelSpec) -> int:
    """DeepSeek-V3 MTP modules: per module 2 norms + 2h*h projection + one MoE layer + head norm."""
    if not model.mtp_layers:
        return 0
    h = model.hidden
    last = layer_params(model, model.layers - 1)  # an MTP layer has the shape of a (MoE) main layer
    return model.mtp_layers * (3 * norm_params(model) + 2 * h * h + last.total)


def parameter_counts(model: ModelSpec) -> ParamCounts:
    """Exact counts: total, active per token, embedding / non-embedding, per component and per layer."""
    h, V = model.hidden, model.vocab
    layers = tuple(layer_params(model, i) for i in range(model.layers))
    embed = V * h
    positions = (model.max_position_embeddings or 0) * h if model.learned_position_embeddings else 0
    head = 0 if model.tied_embeddings else V * h
    final_norm = norm_params(model)
    totals = np.array([(lp.attention, lp.ffn, lp.norms, lp.total, lp.active) for lp in layers], dtype=np.int64)
    attn, ffn, norms, body, body_active = (int(x) for x in totals.sum(axis=0))
    moe_layers = [lp for lp in layers if lp.moe]
    components = {
        "embedding": embed,
        "position_embedding": positions,
        "lm_head": head,
        "attention": attn,
        "ffn_dense": sum(lp.ffn for lp in layers if not lp.moe),
        "norms": norms + final_norm,
    }
    if model.moe is not None:
        moe = model.moe
        n_moe = len(moe_layers)  # components are disjoint: they sum to the total
        components["moe_routed_experts"] = n_moe * moe.num_experts * ffn_params(model, moe.expert_ffn)
        components["moe_shared_experts"] = n_moe * moe.shared_experts * ffn_params(model, moe.shared_expert_ffn or moe.expert_ffn)
        components["moe_router"] = n_moe * (h * moe.num_experts + (moe.num_experts if moe.router_bias else 0))
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
