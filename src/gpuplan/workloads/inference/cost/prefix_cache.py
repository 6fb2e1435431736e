"""Prefix caching (vLLM automatic prefix caching, SGLang RadixAttention, TensorRT-LLM KV reuse):
a request whose prompt starts with tokens already in the KV cache does not recompute them.

Input: the hit rate h = fraction of prompt tokens found in the cache. A request of L prompt
tokens then has floor(h x L) cached tokens, at most L - 1 (the last prompt token is always
computed, to sample the first output token; vLLM recomputes it on a full hit). In the simulator:

- prefill computes only the uncached (1 - h) L tokens: the GEMMs, norms, LM head and all other
  per-token work scale with them (h = 0.5 halves the prefill's linear FLOPs);
- attention of the uncached queries still runs over the cached prefix: the causal pairs are those
  of positions c..L against all earlier keys, pairs(L) - pairs(c), and the prefix's K/V is read;
- KV memory: the cached prefix blocks are shared (one copy, held by the cache), each request holds
  only its private blocks of L - c prompt tokens + its output; the cache itself holds
  `pool_tokens` tokens of KV (default: one request's cached prefix at the mean prompt, a shared
  system prompt), charged once against the KV budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.validation_rules import check_number


@dataclass(frozen=True)
class PrefixCache:
    """Hit rate (fraction of prompt tokens served from the cache) and the cache's KV size."""

    hit_rate: float
    pool_tokens: int | None = None  # tokens of KV the cache holds; None: the mean cached prefix

    def __post_init__(self):
        check_number(self.hit_rate, "prefix_hit_rate", ge=0.0, lt=1.0)
        if self.pool_tokens is not None:
            check_number(self.pool_tokens, "prefix_cache_tokens", ge=0, integer=True)

    def cached_tokens(self, input_len: np.ndarray) -> np.ndarray:
        """floor(h x L), at most L - 1, per request."""
        ins = np.asarray(input_len, dtype=np.int64)
        return np.minimum(np.floor(self.hit_rate * ins).astype(np.int64), ins - 1)

    def pool(self, input_len: np.ndarray) -> int:
        """Tokens of KV the cache holds (the given pool, or the mean cached prefix)."""
        if self.pool_tokens is not None:
            return int(self.pool_tokens)
        return int(round(float(np.mean(self.cached_tokens(input_len))))) if len(input_len) else 0
