"""Training FLOPs per token as a function of sequence length, attention included: sums over the
operator inventory (layers.inventory; each operator's `forward_flops`).

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

- recurrent mixers (Mamba-2 scan, gated delta rule, short conv, RG-LRU; layers.recurrent): their
  cores' scan and depthwise-conv FLOPs, reported apart as `recurrent_forward`.

backward = 2 x forward (a gradient for the input and one for the weights per matmul);
total = 3 x forward. The 6N rule (Kaplan et al. 2020: C = 6 N D) uses N = active matmul
parameters and omits attention; it is reported as `six_n` for comparison, never as the method.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpuplan.errors import InputError
from gpuplan.layers.inventory import model_ops
from gpuplan.specs.model import ModelSpec


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
    recurrent_forward: float = 0.0  # recurrent mixers' scans and convs (0 for a plain transformer)

    @property
    def attention_convention(self) -> str:
        """`causal` (each query sees the keys before it: what the hardware computes with a causal
        mask) or `megatron_full_scores` (the full s x s score matrix, Megatron's MFU convention,
        Narayanan et al. 2021 eq. 3 / PaLM App. B)."""
        return "causal" if self.causal else "megatron_full_scores"

    @property
    def attention_share(self) -> float:
        return self.attention_forward / self.forward


@lru_cache(maxsize=256)
def matmul_params_per_token(model: ModelSpec) -> int:
    """Weights one token multiplies through the main model (the N of 6N, active experts only):
    the sum of `active_params` over the inventory's weight GEMMs, output head included (a function
    of the model alone: kept per model, as `model_ops` is)."""
    ops = model_ops(model)
    return int(round(sum(lo.matmul_params_per_token for lo in ops.layers) + ops.head.active_params))


def flops_per_token(model: ModelSpec, seq_len: int, causal: bool = True) -> FlopsPerToken:
    """Training FLOPs per token at sequence length `seq_len` (see module docstring)."""
    if not isinstance(seq_len, (int, np.integer)) or seq_len <= 0:
        raise InputError(f"seq_len must be a positive integer, got {seq_len!r}", field="seq_len")
    return _flops_per_token(model, int(seq_len), bool(causal))


@lru_cache(maxsize=1024)
def _flops_per_token(model: ModelSpec, seq_len: int, causal: bool) -> FlopsPerToken:
    """`flops_per_token` of a checked seq_len (a frozen record of the model's inventory alone: kept)."""
    ops = model_ops(model)
    attention = float(sum(lo.attention_core.forward_flops(int(seq_len), causal) for lo in ops.layers
                          if lo.attention_core is not None))
    recurrent = float(sum(core.forward_flops(int(seq_len), causal) for lo in ops.layers for core in lo.recurrent_cores))
    n = matmul_params_per_token(model)
    matmul = 2.0 * n
    forward = matmul + attention + recurrent
    return FlopsPerToken(
        seq_len=int(seq_len), causal=causal, forward=forward, backward=2 * forward, total=3 * forward,
        matmul_forward=matmul, attention_forward=attention, matmul_params=n, six_n=6.0 * n,
        recurrent_forward=recurrent,
    )


__all__ = ["FlopsPerToken", "flops_per_token", "matmul_params_per_token"]
