"""The operators a transformer is made of, each declaring its own costs per token.

Every operator is a small frozen dataclass that says what it *is* (shapes, how tensor parallelism
splits it) and answers, per token of one sequence:

- `params`: the weight elements it owns (the tensors a framework allocates and a safetensors
  checkpoint stores);
- `forward_flops(seq_len, causal)`: forward FLOPs, 2 per multiply-accumulate;
- `backward_flops(...)`: backward FLOPs by the operator's own rule (a weight GEMM runs two GEMMs of
  its shape in backward, one for the input gradient and one for the weight gradient: 2 x forward,
  Narayanan et al. 2021 sec. 5.1; attention likewise computes dQ, dK, dV from the two score GEMMs);
- `kv_cache_elements`: elements one token adds to the KV cache (attention only);
- `saved_bytes(saved)`: bytes one token leaves in memory for the operator's backward (the inputs it
  must keep), given a `Saved` context (dtype widths, TP / sequence-parallel split, attention kernel).
  The sum over a layer's operators is Korthikanti et al. 2022 ("Reducing Activation Recomputation in
  Large Transformer Models", sec. 4, Table 2) term by term: per layer sbh(34 + 5as/h) for GPT with
  16-bit activations, dropout and unfused attention (tests check it).

Conventions (one place): FLOPs count only matmuls (Kaplan et al. 2020 sec. 2.1; Narayanan et al.
2021 eq. 3): norms, biases, activations, rotary and softmax are elementwise and carry 0 FLOPs here;
their cost is memory traffic, charged by the step-time models. Embedding lookups are not matmuls.
The output head is a matmul also when its weight is tied to the embedding (it then owns 0 params).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Shard(str, Enum):
    """How tensor parallelism (degree tp) splits a weight GEMM (Megatron-LM, Shoeybi et al. 2019):
    COLUMN splits the output features (out/tp), ROW the input features (in/tp), REPLICATED keeps the
    whole weight on every rank (small down-projections such as MLA's q_a / kv_a and the MoE router),
    EXPERT places whole instances on expert-parallel ranks (each expert's own GEMMs split over the
    expert tensor-parallel degree etp: up COLUMN-like, down ROW-like, see `expert_shard`)."""

    COLUMN = "column"
    ROW = "row"
    REPLICATED = "replicated"
    EXPERT = "expert"


@dataclass(frozen=True)
class Saved:
    """What decides the bytes an operator keeps for backward, per token: activation bytes b (2 for
    bf16/fp16), bytes of a saved linear input li (1 under FP8, the quantised copy), the tensor-
    parallel degree tp and expert tensor-parallel degree etp, sp = tp with sequence parallelism else
    1 (tensors outside TP regions are split over the sequence), whether attention is fused (the s x s
    scores are then never stored) and whether its scores are kept (unfused, no recompute), and the
    keys per query of the scores (s / cp)."""

    act_bytes: float = 2.0
    linear_input_bytes: float = 2.0
    tp: float = 1.0
    sp: float = 1.0
    etp: float = 1.0
    fused_attention: bool = True
    keep_scores: bool = False
    score_keys: float = 0.0
    attention_dropout: bool = False


#: Bytes of the fp32 log-sum-exp FlashAttention keeps per query head for backward.
FLASH_LSE_BYTES = 4.0


class MatmulClass(str, Enum):
    """Which precision recipe a GEMM follows: LAYER GEMMs run in the run's matmul precision (FP8
    recipes convert them); HEAD stays in the activation dtype (Megatron-core's output layer is a
    plain ColumnParallelLinear, torchtitan's float8 converter skips `output`)."""

    LAYER = "layer"
    HEAD = "head"


@dataclass(frozen=True)
class Linear:
    """A weight GEMM y = x W (+ b): in_features -> out_features, `instances` copies of which each
    token uses `active_instances` (MoE routed experts: E instances, top_k active; otherwise 1, 1).

    params = instances x (in x out + bias); forward FLOPs per token = 2 x in x out x active_instances.
    """

    name: str
    in_features: int
    out_features: int
    shard: Shard
    bias: bool = False
    instances: int = 1
    active_instances: float = 1.0
    counts_params: bool = True  # False for a tied output head (its weight is the embedding's)
    matmul_class: MatmulClass = MatmulClass.LAYER
    expert_shard: Shard | None = None  # for Shard.EXPERT: COLUMN (up/gate) or ROW (down) over etp
    #: fused QKV of grouped-query attention: (query heads, kv heads, head_dim). A COLUMN split gives
    #: each rank a/tp query heads and max(1, g/tp) kv heads (with tp > g the kv heads are
    #: replicated, as vLLM's QKVParallelLinear and TensorRT-LLM do).
    grouped_heads: tuple[int, int, int] | None = None
    #: reads the layer's (normed) input: saved at h / sp (the tensor outside the TP region)
    reads_layer_input: bool = False
    #: its input is already kept by another operator reading the same tensor (MLA kv_a beside q_a,
    #: shared experts beside the router): saves nothing more
    input_shared: bool = False
    #: bytes per output element also kept (the router's fp32 probabilities: 4)
    saved_output_bytes: float = 0.0
    #: its output is also kept, in the activation dtype, per routed copy: a routed expert's down
    #: projection, whose output Megatron-core's `unpermute` multiplies by the routing probabilities
    #: (moe_utils.py: `permuted_tokens = permuted_tokens * permuted_probs.unsqueeze(-1)`), so
    #: autograd keeps it for the probabilities' gradient (TE's fused unpermute keeps it likewise)
    keeps_routed_output: bool = False

    def saved_bytes(self, saved: Saved) -> float:
        """The input the weight gradient needs (li bytes per element): h / sp for a layer-input GEMM,
        k / tp for a ROW GEMM (its input is TP-split), k for GEMMs on replicated latents; routed
        experts keep one copy per routed token (active_instances copies of k, the fc2 input split
        over etp, and with `keeps_routed_output` the down projection's output b x out per copy);
        plus `saved_output_bytes` per output element."""
        li = saved.linear_input_bytes
        if self.shard is Shard.EXPERT:
            k = self.in_features / (saved.etp if self.expert_shard is Shard.ROW else 1.0)
            kept = saved.act_bytes * self.out_features if self.keeps_routed_output else 0.0
            return (li * k + kept) * self.active_instances
        out = self.saved_output_bytes * self.out_features
        if self.input_shared:
            return out
        k = self.in_features * (self.instances if self.shard is Shard.ROW else 1)
        if self.reads_layer_input:
            return out + li * k / saved.sp
        if self.shard is Shard.ROW:
            return out + li * k / saved.tp
        return out + li * k

    @property
    def params(self) -> int:
        if not self.counts_params:
            return 0
        return self.instances * (self.in_features * self.out_features + (self.out_features if self.bias else 0))

    @property
    def active_params(self) -> float:
        """Weights one token multiplies (the N of the 6N rule): in x out x active_instances."""
        return self.in_features * self.out_features * self.active_instances

    def forward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        return 2.0 * self.active_params

    def backward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        return 2.0 * self.forward_flops(seq_len, causal)

    @property
    def kv_cache_elements(self) -> int:
        return 0


def attention_flops(batch, heads, qk_head_dim, v_head_dim, pairs):
    """FLOPs of the attention core over `pairs` (query, key) pairs per sequence: Q K^T costs
    2 d_qk and softmax x V 2 d_v per pair and head: 2 batch heads (d_qk + d_v) pairs. The one
    attention-FLOPs formula: the inventory's AttentionCore, serving prefill / decode (with the widths
    the engine's kernel uses, e.g. MLA's absorbed latent), op_cost and kernel analysis call it."""
    return 2.0 * batch * heads * (qk_head_dim + v_head_dim) * pairs


def causal_pairs(q_len, kv_len):
    """(query, key) pairs under a causal mask when the q queries are the last q of kv positions:
    sum_{i=1..q} (kv - q + i) = q (kv - (q - 1) / 2); = q (q + 1) / 2 for q = kv. Works on arrays."""
    return q_len * (kv_len - (q_len - 1.0) / 2.0)


def mean_keys_per_query(seq_len: int, window: int | None, causal: bool) -> float:
    """Mean keys a query attends to in a sequence of `seq_len` tokens.

    Causal: query i (1-based) sees min(i, w) keys, so the mean is (1/s) sum_{i=1..s} min(i, w)
    = (w(w+1)/2 + (s - w) w) / s, which is (s + 1)/2 without a window (w = s). Non-causal (the
    full score matrix, as Megatron's MFU formula counts it): min(s, w)."""
    w = seq_len if window is None else min(window, seq_len)
    if not causal:
        return float(w)
    return (w * (w + 1) / 2 + (seq_len - w) * w) / seq_len


@dataclass(frozen=True)
class AttentionCore:
    """Scaled dot-product attention of `heads` query heads: Q K^T (d_qk per head) and softmax x V
    (d_v per head) over the keys a query sees (`window` tokens at most; None = global).

    forward FLOPs per token = 2 a d_qk n_keys + 2 a d_v n_keys with n_keys = mean_keys_per_query;
    backward = 2 x forward (dS from dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q: four GEMMs of the
    two forward shapes; FlashAttention's recompute of S in backward is extra time, not model FLOPs).
    kv_cache_elements per token: GQA/MHA 2 g d (K and V of g kv heads); MLA the latent r_kv + d_rope
    (DeepSeek-V2 sec. 2.1.2: 512 + 64 = 576 for V3).
    `sinks`: gpt-oss's one learned logit per head (a parameters).
    """

    name: str
    heads: int
    qk_head_dim: int
    v_head_dim: int
    kv_cache_elements: int
    window: int | None = None
    sinks: bool = False
    qkv_elements: int = 0  # elements of Q, K and V per token as the core reads them (kept for backward)

    def saved_bytes(self, saved: Saved) -> float:
        """Q, K, V (b x qkv_elements / tp); fused attention adds the fp32 LSE per head (4 a / tp);
        unfused attention without recompute keeps the s x s scores: a x keys x (b + [1 + b with
        attention dropout: mask and dropped copy]) / tp (Korthikanti's 5as^2b term)."""
        total = saved.act_bytes * self.qkv_elements / saved.tp
        if saved.fused_attention:
            total += FLASH_LSE_BYTES * self.heads / saved.tp
        elif saved.keep_scores:
            per_score = saved.act_bytes + ((1 + saved.act_bytes) if saved.attention_dropout else 0)
            total += self.heads * saved.score_keys * per_score / saved.tp
        return total

    @property
    def params(self) -> int:
        return self.heads if self.sinks else 0

    @property
    def active_params(self) -> float:
        return 0.0

    def forward_flops(self, seq_len: int, causal: bool = True) -> float:
        return attention_flops(1, self.heads, self.qk_head_dim, self.v_head_dim,
                               mean_keys_per_query(seq_len, self.window, causal))

    def backward_flops(self, seq_len: int, causal: bool = True) -> float:
        return 2.0 * self.forward_flops(seq_len, causal)


class NoMatmul:
    """Mixin of the operators that are not matmuls (norms, activations, residual adds, lookups):
    0 FLOPs by the convention of the module docstring, no weights a token multiplies, no KV cache."""

    active_params = 0.0
    kv_cache_elements = 0
    params = 0

    def forward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        return 0.0

    def backward_flops(self, seq_len: int = 1, causal: bool = True) -> float:
        return 0.0


@dataclass(frozen=True)
class Norm(NoMatmul):
    """A normalisation over `width` features: RMSNorm owns `width` weights, LayerNorm 2 x width
    (weight + bias). `instances`: how many such norms (per-head q/k norms: 1 each of head_dim)."""

    name: str
    width: int
    with_bias: bool
    instances: int = 1

    @property
    def params(self) -> int:
        return self.instances * self.width * (2 if self.with_bias else 1)

    def forward_bytes(self, act_bytes: float = 2.0) -> float:
        """HBM bytes per token, fused kernel: read the input and write the output, b each per element."""
        return 2.0 * act_bytes * self.width * self.instances

    def saved_bytes(self, saved: Saved) -> float:
        """Its input (b per element): the layer norms' at h / sp; the MLA latent norms' whole."""
        div = saved.sp if self.name == "layer_norms" else 1.0
        return self.instances * saved.act_bytes * self.width / div



@dataclass(frozen=True)
class Activation(NoMatmul):
    """The FFN nonlinearity on `width` features (gated: gate and up, 2 x width inputs), on
    `active_instances` of `instances` copies per token (MoE experts): 0 FLOPs by convention. Saves
    its input for backward: b x (2 if gated else 1) x width / tp (/ etp for routed experts), per copy."""

    name: str
    width: int
    gated: bool
    shard: Shard = Shard.COLUMN
    instances: int = 1
    active_instances: float = 1.0

    def forward_bytes(self, act_bytes: float = 2.0) -> float:
        """HBM bytes per token and copy, fused kernel: read the input(s), write the output:
        (2 + 1) b x width gated (SwiGLU reads gate and up), (1 + 1) b x width otherwise."""
        return ((2.0 if self.gated else 1.0) + 1.0) * act_bytes * self.width

    def saved_bytes(self, saved: Saved) -> float:
        split = saved.etp if self.shard is Shard.EXPERT else saved.tp
        return saved.act_bytes * (2 if self.gated else 1) * self.width * self.active_instances / split


@dataclass(frozen=True)
class ResidualAdd(NoMatmul):
    """The residual add after a block, on `width` features, fused with dropout where the model has
    it (Megatron's bias-dropout-add). Forward bytes per token: read the two inputs and write the sum
    (3 b per element) plus a 1-byte mask with dropout. Saves the mask (width / sp) for backward."""

    name: str
    width: int
    dropout: bool = False

    def forward_bytes(self, act_bytes: float = 2.0, training: bool = True) -> float:
        """(3 b + 1 mask byte with dropout in training) x width; inference runs no dropout."""
        return (3.0 * act_bytes + (1.0 if self.dropout and training else 0.0)) * self.width

    def saved_bytes(self, saved: Saved) -> float:
        return self.width / saved.sp if self.dropout else 0.0


@dataclass(frozen=True)
class Embedding(NoMatmul):
    """A lookup table of `rows` x `width` (token vocabulary or learned positions): params, 0 FLOPs."""

    name: str
    rows: int
    width: int

    @property
    def params(self) -> int:
        return self.rows * self.width



    def saved_bytes(self, saved: Saved) -> float:
        return 0.0


Operator = Linear | AttentionCore | Norm | Activation | ResidualAdd | Embedding

__all__ = ["attention_flops", "causal_pairs", "Activation", "AttentionCore", "Embedding", "FLASH_LSE_BYTES", "Linear", "MatmulClass", "Norm",
           "NoMatmul", "Operator", "ResidualAdd", "Saved", "Shard", "mean_keys_per_query"]
