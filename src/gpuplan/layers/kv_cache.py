"""KV-cache bytes per token (what one more token of context costs) and the constant state bytes per
sequence of recurrent layers, as sums over the operator inventory's layers.

Per attention layer and token (elements):
- GQA / MHA / MQA: 2 * kv_heads * head_dim (K and V), head_dim from config (not hidden / heads).
- MLA (DeepSeek-V2 sec. 2.1.2; V3): kv_lora_rank + qk_rope_head_dim (the compressed latent and
  the shared decoupled RoPE key), 512 + 64 = 576 for V3. Engines that cache decompressed K/V pay
  heads * (qk_nope + qk_rope + v_head_dim) instead; `mla_latent=False` gives that figure.
- Sliding-window layers keep at most `window` tokens: with a context of C tokens such a layer
  holds min(C, window) tokens, so its average cost per context token is min(C, window) / C.
  Without `context_len` every layer is charged as global (the per-token cost of an unbounded context
  is the global layers' cost; pass context_len for the real average).
Layers without attention (Mamba-2, Gated DeltaNet, short conv, RG-LRU, MLP-only) add nothing per
token: only the attention layers of a hybrid model grow with the context, as hf-mem counts a hybrid
cache (alvarobartt/hf-mem safetensors/kv_cache.py: `layer_types` entries that are attention).
Their state is per sequence instead (`state_bytes_per_sequence`): the conv window and the recurrent
state of each recurrent core (layers.recurrent), the same for any context length.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.layers.inventory import model_ops
from gpuplan.specs.model import ModelSpec


def _attention_cores(model: ModelSpec):
    return [core for core in (lo.attention_core for lo in model_ops(model).layers) if core is not None]


def _kv_elements(model: ModelSpec, core, mla_latent: bool) -> int:
    if model.mla is not None and not mla_latent:
        m = model.mla
        return model.heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    return core.kv_cache_elements


def _check_bytes(bytes_per_element: float, name: str = "bytes_per_element") -> None:
    if not bytes_per_element > 0:
        raise InputError(f"{name} must be positive, got {bytes_per_element}", field=name)


def kv_elements_per_token_per_layer(model: ModelSpec, mla_latent: bool = True) -> int:
    """KV elements one token adds to one attention layer's cache (module docstring); 0 for a model
    without attention layers."""
    cores = _attention_cores(model)
    return _kv_elements(model, cores[0], mla_latent) if cores else 0


def kv_cache_bytes_per_token(
    model: ModelSpec, bytes_per_element: float, context_len: int | None = None, mla_latent: bool = True
) -> float:
    """Average KV-cache bytes per token of context, summed over the attention layers.

    = sum over attention layers of kv_elements * bytes_per_element * min(C, window_l) / C.
    """
    _check_bytes(bytes_per_element)
    if context_len is not None and context_len <= 0:
        raise InputError(f"context_len must be a positive number of tokens, got {context_len}", field="context_len")
    total = 0.0
    for core in _attention_cores(model):
        per_layer = _kv_elements(model, core, mla_latent) * bytes_per_element
        window = core.window
        if window is None or context_len is None or context_len <= window:
            total += per_layer
        else:
            total += per_layer * window / context_len
    return total


@dataclass(frozen=True)
class KvSplit:
    """KV bytes per token of the global attention layers and of the sliding-window ones (each
    charged in full), and the largest window (0: none)."""

    global_bytes_per_token: float
    window_bytes_per_token: float
    window: int

    @property
    def total_bytes_per_token(self) -> float:
        return self.global_bytes_per_token + self.window_bytes_per_token


def kv_bytes_per_token_split(model: ModelSpec, bytes_per_element: float) -> KvSplit:
    """The per-token KV bytes of `model`'s attention layers, global and windowed apart (a serving
    memory plan caps the windowed part at the window)."""
    _check_bytes(bytes_per_element)
    global_bytes = window_bytes = 0.0
    window = 0
    for core in _attention_cores(model):
        per_layer = core.kv_cache_elements * bytes_per_element
        if core.window is None:
            global_bytes += per_layer
        else:
            window_bytes += per_layer
            window = max(window, core.window)
    return KvSplit(global_bytes, window_bytes, window)


def state_bytes_per_sequence(model: ModelSpec, bytes_per_element: float,
                             recurrent_bytes_per_element: float | None = None) -> float:
    """Bytes one sequence keeps in the recurrent layers, whatever its length: sum over the
    recurrent cores of conv_state_elements x bytes_per_element + recurrent_state_elements x
    recurrent_bytes_per_element (default bytes_per_element). vLLM keeps both in the model dtype
    unless told otherwise (CacheConfig `mamba_cache_dtype` / `mamba_ssm_cache_dtype` "auto");
    0 for a model without recurrent layers."""
    _check_bytes(bytes_per_element)
    rec = bytes_per_element if recurrent_bytes_per_element is None else recurrent_bytes_per_element
    _check_bytes(rec, "recurrent_bytes_per_element")
    total = 0.0
    for lo in model_ops(model).layers:
        for core in lo.recurrent_cores:
            total += core.conv_state_elements * bytes_per_element + core.recurrent_state_elements * rec
    return total


__all__ = ["KvSplit", "kv_bytes_per_token_split", "kv_cache_bytes_per_token", "kv_elements_per_token_per_layer",
           "state_bytes_per_sequence"]
