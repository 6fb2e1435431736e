"""KV-cache bytes per token: what one more token of context costs in memory.

Per layer and token (elements):
- GQA / MHA / MQA: 2 * kv_heads * head_dim (K and V), head_dim from config (not hidden / heads).
- MLA (DeepSeek-V2 sec. 2.1.2; V3): kv_lora_rank + qk_rope_head_dim (the compressed latent and
  the shared decoupled RoPE key), 512 + 64 = 576 for V3. Engines that cache decompressed K/V pay
  heads * (qk_nope + qk_rope + v_head_dim) instead; `mla_latent=False` gives that figure.
- Sliding-window layers keep at most `window` tokens: with a context of C tokens such a layer
  holds min(C, window) tokens, so its average cost per context token is min(C, window) / C.
  Without `context_len` every layer is charged as global (the per-token cost of an unbounded context
  is the global layers' cost; pass context_len for the real average).
"""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.layers.inventory import layer_ops, model_ops
from gpuplan.specs.model import ModelSpec


def kv_elements_per_token_per_layer(model: ModelSpec, mla_latent: bool = True) -> int:
    """KV elements one token adds to one layer's cache (see module docstring)."""
    core = layer_ops(model, 0).core
    if model.mla is not None and not mla_latent:
        m = model.mla
        return model.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    return core.kv_cache_elements


def kv_cache_bytes_per_token(
    model: ModelSpec, bytes_per_element: float, context_len: int | None = None, mla_latent: bool = True
) -> float:
    """Average KV-cache bytes per token of context, summed over layers.

    = sum over layers of kv_elements * bytes_per_element * min(C, window_l) / C.
    """
    if bytes_per_element <= 0:
        raise InputError(f"bytes_per_element must be positive, got {bytes_per_element}", field="bytes_per_element")
    if context_len is not None and context_len <= 0:
        raise InputError(f"context_len must be a positive number of tokens, got {context_len}", field="context_len")
    per_layer = kv_elements_per_token_per_layer(model, mla_latent) * bytes_per_element
    total = 0.0
    for lo in model_ops(model).layers:
        window = lo.core.window
        if window is None or context_len is None or context_len <= window:
            total += per_layer
        else:
            total += per_layer * window / context_len
    return total
