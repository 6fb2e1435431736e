"""The operator inventory (DESIGN.md "layers"): what a transformer layer is, as operators that each
declare their parameters, FLOPs, bytes and KV cache; parameter counts, FLOPs per token and KV bytes
per token are sums over it."""

from gpuplan.layers.flops import FlopsPerToken, flops_per_token, matmul_params_per_token
from gpuplan.layers.inventory import LayerOps, ModelOps, layer_ops, local_gemm_shape, model_ops, refuse_hybrid
from gpuplan.layers.kv_cache import (
    KvSplit, kv_bytes_per_token_split, kv_cache_bytes_per_token, kv_elements_per_token_per_layer, state_bytes_per_sequence,
)
from gpuplan.layers.operators import AttentionCore, Embedding, Linear, MatmulClass, Norm, Shard, mean_keys_per_query
from gpuplan.layers.params import LayerParams, ParamCounts, parameter_counts

__all__ = [
    "AttentionCore", "Embedding", "FlopsPerToken", "KvSplit", "LayerOps", "LayerParams", "Linear", "MatmulClass", "ModelOps",
    "Norm", "ParamCounts", "Shard", "flops_per_token", "kv_bytes_per_token_split", "kv_cache_bytes_per_token",
    "kv_elements_per_token_per_layer", "refuse_hybrid", "state_bytes_per_sequence",
    "layer_ops", "local_gemm_shape", "matmul_params_per_token", "mean_keys_per_query", "model_ops", "parameter_counts",
]
