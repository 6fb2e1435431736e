"""Training FLOPs per token as a function of sequence length, attention included.

Forward FLOPs of one token, averaged over the positions of a sequence of length s:

- every weight matmul: 2 * (weights the token multiplies), i.e. attention projections, the
  dense FFN or the router + top_k routed + shared experts, and the output head (V * h, also when
  tied). Embedding lookups, norms, biases and elementwise ops are not matmuls and are left out
  (Kaplan et al. 2020 sec. 2.1; Narayanan et al. 2021 eq. 3 count the same way).
- attention scores per layer: 2 * a * d_qk * n_keys (Q K^T) + 2 * a * d_v * n_keys (softmax x V),
  where n_keys is the mean number of keys a query sees. Causal: position i sees min(i, window)
  keys, so n_keys = (1/s) * sum_{i=1..s} min(i, w) = (s + 1) / 2 without a window. Non-causal:
  n_keys = min(s, w). (PaLM, Chowdhery et al. 2022 App. B, counts 6 * L * h * s per token for
  training, the non-causal value; the causal mask halves it.)

backward = 2 x forward (a gradient for the input and one for the weights per matmul);
total = 3 x forward. The 6N rule (Kaplan et al. 2020: C = 6 N D) uses N = active matmul
parameters and omits attention; it is reported as `six_n` for comparison, never as the method.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.models.params import ffn_params
from gpuplan.specs.model import FfnKind, ModelSpec


@dataclass(frozen=True)
class FlopsPerToken:
    """FLOPs per token of training (forward, backward = 2 x forward, total) at `seq_len`."""

    seq_len: int
    causal: bool
    forward: float
    backward: float
    total: float
    matmul_forward: float  # weight matmuls (incl. output head)
    attention_forward: float  # Q K^T and softmax x V
    matmul_params: int  # N of the 6N rule: weights a token multiplies
    six_n: float  # 6 * matmul_params: the rule of thumb, for comparison

    @property
    def attention_share(self) -> float:
        return self.attention_forward / self.forward


def _attention_matmul_weights(model: ModelSpec) -> int:
    h, a, g, d = model.hidden, model.heads, model.kv_heads, model.head_dim
    if model.mla is not None:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = h * m.q_lora_rank + m.q_lora_rank * a * qk if m.q_lora_rank else h * a * qk
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + a * m.v_head_dim * h
    return 2 * h * a * d + 2 * h * g * d


def _ffn_matmul_weights(model: ModelSpec, ffn: int) -> int:
    return (3 if model.ffn_kind is FfnKind.SWIGLU else 2) * model.hidden * ffn


def matmul_params_per_token(model: ModelSpec) -> int:
    """Weights one token multiplies through the main model (the N of 6N, active experts only)."""
    n = model.layers * _attention_matmul_weights(model) + model.vocab * model.hidden
    for layer in range(model.layers):
        if model.is_moe_layer(layer):
            moe = model.moe
            n += model.hidden * moe.num_experts + moe.top_k * _ffn_matmul_weights(model, moe.expert_ffn)
            n += moe.shared_experts * _ffn_matmul_weights(model, moe.shared_expert_ffn or moe.expert_ffn)
        else:
            n += _ffn_matmul_weights(model, model.ffn)
    return n


def mean_keys_per_query(seq_len: int, window: int | None, causal: bool) -> float:
    """Mean keys a query attends to: causal (1/s) sum_{i=1..s} min(i, w); non-causal min(s, w)."""
    w = seq_len if window is None else min(window, seq_len)
    if not causal:
        return float(w)
    # sum_{i=1..s} min(i, w) = w(w+1)/2 + (s - w) * w
    return (w * (w + 1) / 2 + (seq_len - w) * w) / seq_len


def flops_per_token(model: ModelSpec, seq_len: int, causal: bool = True) -> FlopsPerToken:
    """Training FLOPs per token at sequence length `seq_len` (see module docstring)."""
    if not isinstance(seq_len, (int, np.integer)) or seq_len <= 0:
        raise InputError(f"seq_len must be a positive integer, got {seq_len!r}", field="seq_len")
    if model.mla is not None:
        d_qk = model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim
        d_v = model.mla.v_head_dim
    else:
        d_qk = d_v = model.head_dim
    keys = np.array([mean_keys_per_query(seq_len, model.window(i), causal) for i in range(model.layers)])
    attention = float(2 * model.heads * (d_qk + d_v) * keys.sum())
    n = matmul_params_per_token(model)
    matmul = 2.0 * n
    forward = matmul + attention
    return FlopsPerToken(
        seq_len=int(seq_len), causal=causal, forward=forward, backward=2 * forward, total=3 * forward,
        matmul_forward=matmul, attention_forward=attention, matmul_params=n, six_n=6.0 * n,
    )


__all__ = ["FlopsPerToken", "flops_per_token", "matmul_params_per_token", "mean_keys_per_query", "ffn_params"]
