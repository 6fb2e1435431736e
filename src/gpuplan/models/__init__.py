"""Models: specs from Hugging Face config.json / bundled names / validation rows, and the exact
counts every other estimate builds on (parameters, FLOPs per token, KV-cache bytes per token)."""

from gpuplan.models.arch_row import model_from_arch_row
from gpuplan.models.bundled import bundled_model_names, bundled_model_source, load_model
from gpuplan.models.flops import FlopsPerToken, flops_per_token
from gpuplan.models.hf_config import model_from_hf_config
from gpuplan.models.kv_cache import kv_cache_bytes_per_token
from gpuplan.models.params import LayerParams, ParamCounts, parameter_counts

__all__ = [
    "FlopsPerToken", "LayerParams", "ParamCounts", "bundled_model_names", "bundled_model_source",
    "flops_per_token", "kv_cache_bytes_per_token", "load_model", "model_from_arch_row",
    "model_from_hf_config", "parameter_counts",
]
