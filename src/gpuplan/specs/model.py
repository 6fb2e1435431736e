"""The transformer model spec: the architecture facts every count, FLOP and memory formula needs.

Built from a Hugging Face config.json (gpuplan.models.hf_config), a bundled name, or the plain
architecture columns of a validation CSV. Parameter counts, FLOPs and KV-cache sizes are
functions over this spec (gpuplan.layers.*), never stored on it.

Hybrid models (Nemotron-H, Qwen3-Next, Falcon-H1, Mamba-2, LFM2, RecurrentGemma) list each
layer's sequence mixers (`layer_mixers`) and channel mixer (`layer_ffns`); the shapes of the
non-attention mixers are gpuplan.specs.mixers specs. Empty tuples mean the plain transformer:
every layer one attention block and one FFN.
"""

from __future__ import annotations

import weakref
from enum import Enum

from pydantic import Field, model_serializer, model_validator

from gpuplan.validation_rules import MAX_LAYERS, MAX_WIDTH

from gpuplan.specs._base import Spec
from gpuplan.specs.mixers import FfnSlot, GatedDeltaNetSpec, Mamba2Spec, MixerKind, RgLruSpec, ShortConvSpec


class FfnKind(str, Enum):
    GELU = "gelu"  # two matrices: up (h x f) and down (f x h); any non-gated activation
    SWIGLU = "swiglu"  # three matrices: gate, up (h x f each) and down (f x h); any gated activation


class NormKind(str, Enum):
    LAYERNORM = "layernorm"  # weight + bias: 2h parameters
    RMSNORM = "rmsnorm"  # weight only: h parameters


class MlaSpec(Spec):
    """DeepSeek-V2/V3 multi-head latent attention (DeepSeek-V2 paper, sec. 2.1)."""

    q_lora_rank: int | None = Field(default=None, gt=0)  # None: plain q projection (V2-Lite)
    kv_lora_rank: int = Field(gt=0)  # d_c, the latent cached per token
    qk_nope_head_dim: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)  # decoupled RoPE key, shared across heads, cached per token
    v_head_dim: int = Field(gt=0)


class MoeSpec(Spec):
    num_experts: int = Field(gt=0, le=MAX_WIDTH)  # routed experts per MoE layer
    top_k: int = Field(gt=0)  # routed experts per token
    expert_ffn: int = Field(gt=0, le=MAX_WIDTH)  # intermediate size of one routed expert
    shared_experts: int = Field(default=0, ge=0)
    shared_expert_ffn: int | None = Field(default=None, gt=0)  # intermediate size of ONE shared expert; None = expert_ffn
    dense_layers: int = Field(default=0, ge=0)  # the first k layers use a dense FFN of size `ffn`
    layer_freq: int = Field(default=1, gt=0)  # every n-th layer (after dense_layers) is MoE
    router_bias: bool = False
    shared_expert_gate: bool = False  # Qwen3-Next: a sigmoid gate h -> 1 scales the shared experts' output
    #: Node-limited (group-limited) routing: the routed experts form `expert_groups` groups of consecutive
    #: experts and each token takes its top_k experts inside `groups_per_token` of them (DeepSeek-V3 HF config
    #: n_group 8 / topk_group 4; report arXiv 2412.19437 sec. 2.1.2: "each token will be sent to at most M
    #: nodes", M = 4; Megatron-core `--moe-router-num-groups` / `--moe-router-group-topk`). None: no limit.
    expert_groups: int | None = Field(default=None, gt=0)
    groups_per_token: int | None = Field(default=None, gt=0)
    #: A benchmark gate in place of the learned router that sends token i to experts (i k + j) mod E,
    #: j < k: consecutive experts, perfectly balanced (NeMo AutoModel `FakeBalancedGate`, nemo_automodel/
    #: components/moe/layers.py: `torch.arange(n_tokens * k).view(-1, k) % n_experts`). Routing locality:
    #: `workloads.training.step.expert_routing.round_robin_domains_hit`.
    round_robin_routing: bool = False

    @model_validator(mode="after")
    def _topk_le_experts(self):
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds num_experts ({self.num_experts})")
        if (self.expert_groups is None) != (self.groups_per_token is None):
            raise ValueError("expert_groups and groups_per_token go together (both or neither)")
        if self.expert_groups is not None:
            if self.num_experts % self.expert_groups:
                raise ValueError(f"expert_groups ({self.expert_groups}) must divide num_experts ({self.num_experts})")
            if self.groups_per_token > self.expert_groups:
                raise ValueError(f"groups_per_token ({self.groups_per_token}) exceeds expert_groups ({self.expert_groups})")
        return self

    @model_serializer(mode="wrap")
    def _omit_unlimited_routing(self, handler):
        """A dump leaves out the routing group fields where routing is unlimited and the round-robin
        flag where the router is learned, so the dumps (and hashes) of every model written before the
        fields existed are unchanged."""
        data = handler(self)
        if isinstance(data, dict) and self.expert_groups is None:
            data.pop("expert_groups", None)
            data.pop("groups_per_token", None)
        if isinstance(data, dict) and not self.round_robin_routing:
            data.pop("round_robin_routing", None)
        return data


#: id(ModelSpec) -> its hash, while that model lives (ModelSpec.__hash__)
_HASHES: dict[int, int] = {}


class ModelSpec(Spec):
    name: str
    family: str = "generic"  # llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, deepseek_v3, gemma2, gpt2, ...
    layers: int = Field(gt=0, le=MAX_LAYERS)  # cap: gpuplan.validation_rules.MAX_LAYERS (per-layer work)
    hidden: int = Field(gt=0, le=MAX_WIDTH)
    heads: int = Field(gt=0, le=MAX_WIDTH)
    kv_heads: int = Field(gt=0, le=MAX_WIDTH)  # == heads for MHA, 1 for MQA
    head_dim: int = Field(gt=0, le=MAX_WIDTH)  # from config when given (Gemma, Qwen3): may differ from hidden / heads
    ffn: int = Field(gt=0, le=MAX_WIDTH)  # dense FFN intermediate size
    ffn_kind: FfnKind = FfnKind.GELU
    vocab: int = Field(gt=0, le=MAX_WIDTH)
    tied_embeddings: bool = False
    max_position_embeddings: int | None = Field(default=None, gt=0)
    learned_position_embeddings: bool = False  # GPT-2/GPT-3: a (max_pos x hidden) table
    norm: NormKind = NormKind.RMSNORM
    qkv_bias: bool = False
    attn_out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # Qwen3/Gemma3 per-head q/k RMSNorm (head_dim params each)
    mla: MlaSpec | None = None
    moe: MoeSpec | None = None
    #: per-layer attention window in tokens (None = global); empty tuple = all layers global
    layer_windows: tuple[int | None, ...] = ()
    attention_sinks: bool = False  # gpt-oss: one learned sink logit per head per layer
    mtp_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)  # DeepSeek-V3 multi-token-prediction modules (reported apart)
    norms_per_layer: int = Field(default=2, ge=0)  # 2 (pre-attn, pre-MLP); Gemma 2/3: 4 (pre and post each)
    hidden_dropout: float = Field(default=0.0, ge=0.0, lt=1.0)  # residual dropout (GPT-2/Megatron GPT: 0.1); masks cost memory
    attention_dropout: float = Field(default=0.0, ge=0.0, lt=1.0)  # dropout on attention probabilities
    attention_output_gate: bool = False  # Qwen3-Next gated attention: q_proj also emits a sigmoid gate of a x d
    #: per-layer sequence mixers (empty: every layer one attention block); () for an MLP-only layer
    layer_mixers: tuple[tuple[MixerKind, ...], ...] = ()
    #: per-layer channel mixer (empty: the dense / MoE rule of `moe`)
    layer_ffns: tuple[FfnSlot, ...] = ()
    mamba2: Mamba2Spec | None = None
    gated_deltanet: GatedDeltaNetSpec | None = None
    short_conv: ShortConvSpec | None = None
    rg_lru: RgLruSpec | None = None
    #: what was read with an assumption the user should know (unknown model_type ...); shown by `model show`
    warnings: tuple[str, ...] = ()
    source: str = ""  # where the config came from

    @model_validator(mode="after")
    def _consistent(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) is not a multiple of kv_heads ({self.kv_heads})")
        if self.layer_windows and len(self.layer_windows) != self.layers:
            raise ValueError(f"layer_windows has {len(self.layer_windows)} entries for {self.layers} layers")
        for name in ("layer_mixers", "layer_ffns"):
            if getattr(self, name) and len(getattr(self, name)) != self.layers:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries for {self.layers} layers")
        needs = {MixerKind.MAMBA2: "mamba2", MixerKind.GATED_DELTANET: "gated_deltanet",
                 MixerKind.SHORT_CONV: "short_conv", MixerKind.RG_LRU: "rg_lru"}
        for kind in {k for mixers in self.layer_mixers for k in mixers}:
            if kind in needs and getattr(self, needs[kind]) is None:
                raise ValueError(f"{kind.value} layers need the `{needs[kind]}` shape")
        if FfnSlot.MOE in self.layer_ffns and self.moe is None:
            raise ValueError("layer_ffns names MoE layers but the model has no `moe` shape")
        return self

    def __hash__(self) -> int:
        """pydantic's hash of a frozen model (of the tuple of every field value, its `make_hash_func`),
        computed once per instance: a ModelSpec keys the lru caches of the inventory and the memory
        model, ~10^4 look-ups in one `gpuplan plan`, at ~6 us a hash of gpt3-175b (timeit, 2026-11-28)."""
        key = id(self)
        value = _HASHES.get(key)
        if value is None:
            value = hash(tuple(self.__dict__[name] for name in type(self).model_fields))
            _HASHES[key] = value
            weakref.finalize(self, _HASHES.pop, key, None)  # the id may be reused once this model is gone
        return value

    def mixers(self, layer: int) -> tuple[MixerKind, ...]:
        """The sequence mixers of 0-based `layer` (attention for a plain transformer)."""
        return self.layer_mixers[layer] if self.layer_mixers else (MixerKind.ATTENTION,)

    def ffn_slot(self, layer: int) -> FfnSlot:
        """The channel mixer of 0-based `layer`: `layer_ffns`, else MoE by the `moe` rule, else dense."""
        if self.layer_ffns:
            return self.layer_ffns[layer]
        if self.moe is None or layer < self.moe.dense_layers:
            return FfnSlot.DENSE
        return FfnSlot.MOE if (layer - self.moe.dense_layers) % self.moe.layer_freq == 0 else FfnSlot.DENSE

    def is_moe_layer(self, layer: int) -> bool:
        """Whether 0-based `layer` has a routed-expert FFN."""
        return self.ffn_slot(layer) is FfnSlot.MOE

    @property
    def is_hybrid(self) -> bool:
        """Whether any layer differs from one attention block + one FFN (recurrent mixers,
        mixer-only or MLP-only layers): the step-time models do not cover such layers yet."""
        if not self.layer_mixers and not self.layer_ffns:  # attention everywhere, an FFN in every layer
            return False
        return any(self.mixers(i) != (MixerKind.ATTENTION,) or self.ffn_slot(i) is FfnSlot.NONE
                   for i in range(self.layers))

    def window(self, layer: int) -> int | None:
        return self.layer_windows[layer] if self.layer_windows else None
