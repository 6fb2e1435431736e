"""THE operator inventory: what each layer of a model is, as operators (`layers.operators`).

`layer_ops(model, i)` lists layer i's operators in three groups, with the shapes frameworks run
(Megatron-core / vLLM / TensorRT-LLM fuse the same way):

attention (h hidden, a heads, g kv heads, d head_dim):
- GQA/MHA/MQA: `qkv` h -> (a + 2g) d (COLUMN; bias a d + 2 g d with qkv_bias), the attention core
  (d_qk = d_v = d, KV 2 g d per token, window of the layer, gpt-oss sinks), per-head `qk_norm`
  (2 norms of d), `out` a d -> h (ROW; bias h).
- MLA (DeepSeek-V2 sec. 2.1, V3): `q_a` h -> r_q (REPLICATED) + RMSNorm r_q + `q_b` r_q -> a (d_nope
  + d_rope) (COLUMN), or `q` h -> a (d_nope + d_rope) without q_lora; `kv_a` h -> r_kv + d_rope
  (REPLICATED) + RMSNorm r_kv + `kv_b` r_kv -> a (d_nope + d_v) (COLUMN); the core (d_qk = d_nope +
  d_rope, d_v, KV latent r_kv + d_rope); `out` a d_v -> h (ROW). The down-projections are replicated
  over TP (vLLM ReplicatedLinear; Megatron-core's MLA `linear_q_down_proj` / `linear_kv_down_proj`).
ffn (f FFN size):
- dense: `fc1` h -> f (gelu) or h -> 2f (gated: gate and up fused, Megatron's linear_fc1), COLUMN;
  `fc2` f -> h, ROW; biases with mlp_bias.
- MoE (Shazeer et al. 2017; GShard): `router` h -> E (REPLICATED, bias with router_bias); routed
  experts `expert_fc1` / `expert_fc2` of the expert size, E instances of which a token uses top_k
  (Shard.EXPERT); shared experts `shared_fc1` / `shared_fc2` of the shared size, S instances all used,
  and with `shared_expert_gate` their sigmoid gate `shared_gate` h -> 1 (REPLICATED).
norms: `norms_per_layer` norms of h (RMSNorm h, LayerNorm 2h).
Qwen3-Next gated attention (`attention_output_gate`) adds `q_gate` h -> a d (COLUMN): its q_proj
emits 2 a d, the query and a sigmoid gate of the output (transformers Qwen3NextAttention).

Hybrid layers (`ModelSpec.layer_mixers` / `layer_ffns`; layers.recurrent gives each core's sources):
- Mamba-2: `mamba_in_proj` h -> d_inner + conv_dim + H (COLUMN; bias with in_proj_bias), the
  Mamba2Scan core, `mamba_out_proj` d_inner -> h (ROW; bias with out_proj_bias).
- Gated DeltaNet: `gdn_in_proj_qkvz` h -> 2 key_dim + 2 value_dim and `gdn_in_proj_ba` h -> 2 Hv
  (COLUMN), the GatedDeltaRule core, `gdn_out_proj` value_dim -> h (ROW).
- short conv: `conv_in_proj` h -> 3h (COLUMN), the ShortConv core, `conv_out_proj` h -> h (ROW),
  biases with conv_bias.
- RG-LRU: `lru_y`, `lru_x` h -> w (COLUMN, bias), the block-diagonal gates `lru_input_gate` and
  `lru_recurrent_gate` (blocks instances of bw -> bw, bias), the RgLruScan core, `lru_out` w -> h
  (ROW, bias).
A layer lists its mixers' operators in order in its `attention` group (the sequence mixer; Falcon-H1
holds attention and Mamba-2 side by side), nothing for an MLP-only layer; its `ffn` group is empty
for a mixer-only layer (Nemotron-H). Each group present ends in one residual add.

`model_ops(model)` adds the input embedding (V x h), learned positions, the final norm, the output
head (a matmul h -> V; owns no parameters when tied) and DeepSeek-V3's MTP modules (per module two
RMSNorms, a 2h -> h projection, one layer shaped like the last main layer and the head norm; its
embedding and head are shared with the main model). Parameter counts, FLOPs per token, KV bytes
per token (layers.params / flops / kv_cache), the training step time and the serving operator
costs are all sums over this one inventory.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpuplan.errors import InputError
from gpuplan.layers.operators import (
    Activation, AttentionCore, Embedding, Linear, MatmulClass, Norm, Operator, ResidualAdd, Saved, Shard,
)
from gpuplan.layers.recurrent import GatedDeltaRule, Mamba2Scan, RecurrentCore, RgLruScan, ShortConv
from gpuplan.specs.mixers import FfnSlot, MixerKind
from gpuplan.specs.model import FfnKind, ModelSpec, NormKind


@dataclass(frozen=True)
class LayerOps:
    """One transformer layer's operators, grouped (see module docstring)."""

    index: int
    attention: tuple[Operator, ...]  # the sequence mixer(s): attention and / or recurrent mixers
    ffn: tuple[Operator, ...]
    norms: tuple[Operator, ...]
    moe: bool
    mixers: tuple[MixerKind, ...] = (MixerKind.ATTENTION,)

    @property
    def ops(self) -> tuple[Operator, ...]:
        return self.attention + self.ffn + self.norms

    @property
    def linears(self) -> tuple[Linear, ...]:
        return tuple(op for op in self.ops if isinstance(op, Linear))

    @property
    def attention_core(self) -> AttentionCore | None:
        """The softmax-attention core of the layer, None for a recurrent-only or MLP-only layer."""
        return next((op for op in self.attention if isinstance(op, AttentionCore)), None)

    @property
    def core(self) -> AttentionCore:
        """The attention core; callers that model attention layers only (the step-time models)
        refuse hybrid models first (`refuse_hybrid`)."""
        core = self.attention_core
        if core is None:
            raise ValueError(f"layer {self.index} has no attention core (mixers: {[m.value for m in self.mixers]})")
        return core

    @property
    def recurrent_cores(self) -> tuple[RecurrentCore, ...]:
        return tuple(op for op in self.attention if isinstance(op, RecurrentCore))

    @property
    def sequence_cores(self) -> tuple[AttentionCore | RecurrentCore, ...]:
        """Every core that mixes positions: the attention core and the recurrent cores."""
        return tuple(op for op in self.attention if isinstance(op, (AttentionCore, RecurrentCore)))

    def linear(self, name: str) -> Linear | None:
        return next((op for op in self.linears if op.name == name), None)

    @property
    def params(self) -> int:
        return sum(op.params for op in self.ops)

    @property
    def active_params(self) -> int:
        """Parameters a token uses: everything except the routed experts it does not pick."""
        total = 0
        for op in self.ops:
            if isinstance(op, Linear) and op.instances > 1:
                total += round(op.params * op.active_instances / op.instances)
            else:
                total += op.params
        return total

    @property
    def matmul_params_per_token(self) -> float:
        """Weights one token multiplies in this layer (routed experts: top_k of E)."""
        return sum(op.active_params for op in self.linears)

    def forward_flops(self, seq_len: int, causal: bool = True) -> float:
        return sum(op.forward_flops(seq_len, causal) for op in self.ops)

    def hidden_elementwise_bytes(self, act_bytes: float = 2.0, training: bool = True) -> float:
        """Forward HBM bytes per token of the layer's hidden-width elementwise kernels (fused): its
        layer norms (read + write) and residual adds (read 2, write 1, dropout mask):
        2 x 4 + 2 x 6 = 20 B per hidden element for a bf16 Llama layer, 22 with dropout (GPT-3 /
        Megatron GPT; inference runs no dropout: `training=False`), 28 for Gemma 2's four norms."""
        total = sum(op.forward_bytes(act_bytes, training) for op in self.ops if isinstance(op, ResidualAdd))
        return total + sum(op.forward_bytes(act_bytes) for op in self.norms if op.name == "layer_norms")

    def activation_bytes_per_ffn_element(self, act_bytes: float = 2.0) -> float:
        """Forward HBM bytes of the FFN activation per intermediate element (its first Activation):
        6 B gated (SwiGLU), 4 B otherwise, with bf16."""
        act = next(op for op in self.ffn if isinstance(op, Activation))
        return act.forward_bytes(act_bytes) / act.width

    def saved_activation_bytes(self, saved: Saved) -> float:
        """Bytes one token leaves for this layer's backward: the sum of its operators' `saved_bytes`."""
        return sum(op.saved_bytes(saved) for op in self.ops)

    def backward_flops(self, seq_len: int, causal: bool = True) -> float:
        return sum(op.backward_flops(seq_len, causal) for op in self.ops)


def _norm(model: ModelSpec, name: str, width: int | None = None, instances: int = 1) -> Norm:
    return Norm(name, width or model.hidden, model.norm is NormKind.LAYERNORM, instances)


def _attention_ops(model: ModelSpec, layer: int) -> tuple[Operator, ...]:
    h, a, g, d = model.hidden, model.heads, model.kv_heads, model.head_dim
    window = model.window(layer)
    if model.mla is not None:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        ops: list[Operator] = []
        if m.q_lora_rank:
            ops += [Linear("q_a", h, m.q_lora_rank, Shard.REPLICATED, reads_layer_input=True),
                    Norm("q_a_norm", m.q_lora_rank, False),
                    Linear("q_b", m.q_lora_rank, a * qk, Shard.COLUMN)]
        else:
            ops.append(Linear("q", h, a * qk, Shard.COLUMN, reads_layer_input=True))
        ops += [
            Linear("kv_a", h, m.kv_lora_rank + m.qk_rope_head_dim, Shard.REPLICATED, reads_layer_input=True,
                   input_shared=True),
            Norm("kv_a_norm", m.kv_lora_rank, False),
            Linear("kv_b", m.kv_lora_rank, a * (m.qk_nope_head_dim + m.v_head_dim), Shard.COLUMN),
            AttentionCore("core", a, qk, m.v_head_dim, m.kv_lora_rank + m.qk_rope_head_dim, window,
                          model.attention_sinks, qkv_elements=a * (2 * qk + m.v_head_dim)),
            Linear("out", a * m.v_head_dim, h, Shard.ROW, bias=model.attn_out_bias),
        ]
        return tuple(ops)
    ops = [Linear("qkv", h, (a + 2 * g) * d, Shard.COLUMN, bias=model.qkv_bias, grouped_heads=(a, g, d),
                  reads_layer_input=True)]
    if model.attention_output_gate:
        ops.append(Linear("q_gate", h, a * d, Shard.COLUMN, bias=model.qkv_bias, input_shared=True))
    if model.qk_norm:
        ops.append(Norm("qk_norm", d, False, instances=2))
    ops += [AttentionCore("core", a, d, d, 2 * g * d, window, model.attention_sinks, qkv_elements=(a + 2 * g) * d),
            Linear("out", a * d, h, Shard.ROW, bias=model.attn_out_bias)]
    return tuple(ops)


def _mlp(model: ModelSpec, prefix: str, ffn: int, shard_up: Shard, shard_down: Shard, instances: int = 1,
         active: float = 1.0, input_shared: bool = False) -> tuple[Operator, ...]:
    h = model.hidden
    gated = model.ffn_kind is FfnKind.SWIGLU
    expert = shard_up is Shard.EXPERT
    return (
        Linear(f"{prefix}fc1", h, (2 if gated else 1) * ffn, shard_up, bias=model.mlp_bias, instances=instances,
               active_instances=active, expert_shard=Shard.COLUMN if expert else None,
               reads_layer_input=not expert, input_shared=input_shared),
        Activation(f"{prefix}act", ffn * (1 if expert else instances), gated, Shard.EXPERT if expert else Shard.COLUMN,
                   instances=instances if expert else 1, active_instances=active if expert else 1.0),
        Linear(f"{prefix}fc2", ffn, h, shard_down, bias=model.mlp_bias, instances=instances,
               active_instances=active, expert_shard=Shard.ROW if expert else None, keeps_routed_output=expert),
    )


def _ffn_ops(model: ModelSpec, moe_layer: bool) -> tuple[Operator, ...]:
    if not moe_layer:
        return _mlp(model, "", model.ffn, Shard.COLUMN, Shard.ROW)
    moe = model.moe
    assert moe is not None
    ops: list[Operator] = [Linear("router", model.hidden, moe.num_experts, Shard.REPLICATED, bias=moe.router_bias,
                                  reads_layer_input=True, saved_output_bytes=4.0)]
    ops += _mlp(model, "expert_", moe.expert_ffn, Shard.EXPERT, Shard.EXPERT, moe.num_experts, float(moe.top_k))
    if moe.shared_experts:
        fs = moe.shared_expert_ffn or moe.expert_ffn
        ops += _mlp(model, "shared_", fs, Shard.COLUMN, Shard.ROW, moe.shared_experts, float(moe.shared_experts),
                    input_shared=True)
        if moe.shared_expert_gate:  # Qwen3NextSparseMoeBlock.shared_expert_gate: Linear(h, 1, bias=False)
            ops.append(Linear("shared_gate", model.hidden, 1, Shard.REPLICATED, input_shared=True))
    return tuple(ops)


def _recurrent_ops(model: ModelSpec, kind: MixerKind) -> tuple[Operator, ...]:
    """The operators of one recurrent mixer (module docstring; shapes from layers.recurrent's sources)."""
    h = model.hidden
    if kind is MixerKind.MAMBA2:
        m = model.mamba2
        assert m is not None
        return (Linear("mamba_in_proj", h, m.inner + m.conv_dim + m.heads, Shard.COLUMN, bias=m.in_proj_bias,
                       reads_layer_input=True),
                Mamba2Scan("mamba_scan", m),
                Linear("mamba_out_proj", m.inner, h, Shard.ROW, bias=m.out_proj_bias))
    if kind is MixerKind.GATED_DELTANET:
        g = model.gated_deltanet
        assert g is not None
        return (Linear("gdn_in_proj_qkvz", h, 2 * g.key_dim + 2 * g.value_dim, Shard.COLUMN, reads_layer_input=True),
                Linear("gdn_in_proj_ba", h, 2 * g.value_heads, Shard.COLUMN, input_shared=True),
                GatedDeltaRule("gdn_core", g),
                Linear("gdn_out_proj", g.value_dim, h, Shard.ROW))
    if kind is MixerKind.SHORT_CONV:
        c = model.short_conv
        assert c is not None
        return (Linear("conv_in_proj", h, 3 * h, Shard.COLUMN, bias=c.bias, reads_layer_input=True),
                ShortConv("conv_core", c, h),
                Linear("conv_out_proj", h, h, Shard.ROW, bias=c.bias))
    r = model.rg_lru
    assert r is not None and kind is MixerKind.RG_LRU
    bw = r.block_width
    return (Linear("lru_y", h, r.width, Shard.COLUMN, bias=True, reads_layer_input=True),
            Linear("lru_x", h, r.width, Shard.COLUMN, bias=True, input_shared=True),
            Linear("lru_input_gate", bw, bw, Shard.COLUMN, bias=True, instances=r.blocks, active_instances=float(r.blocks)),
            Linear("lru_recurrent_gate", bw, bw, Shard.COLUMN, bias=True, instances=r.blocks,
                   active_instances=float(r.blocks)),
            RgLruScan("lru_scan", r),
            Linear("lru_out", r.width, h, Shard.ROW, bias=True))


def _mixer_ops(model: ModelSpec, layer: int) -> tuple[Operator, ...]:
    ops: tuple[Operator, ...] = ()
    for kind in model.mixers(layer):
        ops += _attention_ops(model, layer) if kind is MixerKind.ATTENTION else _recurrent_ops(model, kind)
    return ops


@lru_cache(maxsize=4096)
def layer_ops(model: ModelSpec, layer: int) -> LayerOps:
    """The operators of 0-based `layer` of `model` (see module docstring)."""
    if not 0 <= layer < model.layers:
        raise IndexError(f"layer {layer} of a {model.layers}-layer model")
    slot = model.ffn_slot(layer)
    moe_layer = slot is FfnSlot.MOE
    norms = (_norm(model, "layer_norms", instances=model.norms_per_layer),) if model.norms_per_layer else ()
    attention = _mixer_ops(model, layer)
    ffn = _ffn_ops(model, moe_layer) if slot is not FfnSlot.NONE else ()
    dropout = model.hidden_dropout > 0  # residual dropout after attention and after the FFN
    if attention:
        attention += (ResidualAdd("attn_residual", model.hidden, dropout),)
    if ffn:
        ffn += (ResidualAdd("ffn_residual", model.hidden, dropout),)
    return LayerOps(layer, attention, ffn, norms, moe_layer, model.mixers(layer))


@lru_cache(maxsize=256)
def layer_kinds(model: ModelSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(kind of each layer, a representative layer of each kind): layers whose operators are equal
    (all but the layer's index) are one kind; every per-layer quantity of the memory model is a
    function of the operators."""
    first_of: dict[object, int] = {}
    kind = []
    for i in range(model.layers):
        lo = layer_ops(model, i)
        kind.append(first_of.setdefault((lo.attention, lo.ffn, lo.norms, lo.moe), len(first_of)))
    representative = [0] * len(first_of)
    for i in reversed(range(model.layers)):
        representative[kind[i]] = i
    return tuple(kind), tuple(representative)


def refuse_hybrid(model: ModelSpec, purpose: str) -> None:
    """InputError when `model` has layers other than one attention block + one FFN: `purpose`
    (a step-time model) covers those only. Names the layer types and the model_type."""
    if not model.is_hybrid:
        return
    kinds = sorted({k.value for i in range(model.layers) for k in model.mixers(i)} - {MixerKind.ATTENTION.value})
    if any(model.ffn_slot(i) is FfnSlot.NONE for i in range(model.layers)):
        kinds.append("mixer-only or MLP-only")
    raise InputError(
        f"{purpose} of {' and '.join(kinds)} layers (model_type '{model.family}') is not modelled yet; "
        f"`gpuplan model show` gives its parameters, FLOPs and KV / state bytes", field="model")


@dataclass(frozen=True)
class ModelOps:
    """Every operator of a model: embeddings, the layers, the final norm, the head, MTP modules."""

    embeddings: tuple[Embedding, ...]
    layers: tuple[LayerOps, ...]
    final_norm: Norm
    head: Linear
    mtp: tuple[Operator, ...]  # all MTP modules' operators (reported apart from the main model)

    @property
    def dense_layer(self) -> LayerOps | None:
        """A representative dense-FFN layer (the first), None when every layer is MoE."""
        return next((lo for lo in self.layers if not lo.moe), None)

    @property
    def moe_layer(self) -> LayerOps | None:
        """A representative MoE layer (the first), None for a dense model."""
        return next((lo for lo in self.layers if lo.moe), None)

    @property
    def num_moe_layers(self) -> int:
        return sum(1 for lo in self.layers if lo.moe)


@lru_cache(maxsize=512)
def model_ops(model: ModelSpec) -> ModelOps:
    """The whole operator inventory of `model` (see module docstring)."""
    h, V = model.hidden, model.vocab
    embeddings = [Embedding("embedding", V, h)]
    if model.learned_position_embeddings and model.max_position_embeddings:
        embeddings.append(Embedding("position_embedding", model.max_position_embeddings, h))
    layers = tuple(layer_ops(model, i) for i in range(model.layers))
    head = Linear("lm_head", h, V, Shard.COLUMN, counts_params=not model.tied_embeddings, matmul_class=MatmulClass.HEAD)
    mtp: list[Operator] = []
    for j in range(model.mtp_layers):
        last = layers[-1]
        mtp += [_norm(model, f"mtp{j}.input_norms", instances=2),
                Linear(f"mtp{j}.proj", 2 * h, h, Shard.REPLICATED), *last.ops, _norm(model, f"mtp{j}.head_norm")]
    return ModelOps(tuple(embeddings), layers, _norm(model, "final_norm"), head, tuple(mtp))


def local_gemm_shape(op: Linear, tp, etp=1):
    """(n_out, k_in) of `op` on one GPU: COLUMN n/tp, ROW k/tp, REPLICATED whole; a routed expert's
    own GEMM split over the expert tensor-parallel degree etp (fc1 COLUMN-like, fc2 ROW-like).
    Instances that all run on every token (shared experts) are one fused GEMM of instances x n
    (fc1) or instances x k (fc2). A grouped-query QKV keeps at least one kv head per rank
    (Linear.grouped_heads). Works on numpy arrays for tp / etp."""
    n, k = op.out_features, op.in_features
    if op.shard is not Shard.EXPERT and op.instances > 1:
        if op.shard is Shard.ROW:
            k = k * op.instances
        else:
            n = n * op.instances
    if op.shard is Shard.COLUMN:
        if op.grouped_heads is not None:
            a, g, d = op.grouped_heads
            return (a / tp + 2.0 * np.maximum(1.0, np.ceil(g / tp))) * d, k
        return n / tp, k
    if op.shard is Shard.ROW:
        return n, k / tp
    if op.shard is Shard.EXPERT:
        return (n / etp, k) if op.expert_shard is Shard.COLUMN else (n, k / etp)
    return n, k


__all__ = ["LayerOps", "ModelOps", "layer_kinds", "layer_ops", "local_gemm_shape", "model_ops", "refuse_hybrid"]
