"""Time of one operator on one GPU: a roofline with achievable efficiency.

    time = max(flops / (peak(dtype) x matmul_efficiency), bytes / (hbm_bandwidth x hbm_efficiency))

`bound` says which side won. Efficiencies come from `gpuplan.primitives.efficiency` (documented
functions of GEMM shape and dtype with sourced ceilings); peaks from the catalog, always dense.
Scalar functions return an `OpCost`; `gemm_time_array` is the numpy path for plan searches and
evaluates the same formulas.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from gpuplan.errors import InputError
from gpuplan.primitives.efficiency import (
    attention_ceiling,
    hbm_efficiency,
    matmul_ceiling,
    matmul_efficiency,
)
from gpuplan.layers.operators import attention_flops as layer_attention_flops, causal_pairs
from gpuplan.specs import Gpu
from gpuplan.specs.dtypes import FORMATS, Weights

#: Bytes per element of each matmul dtype (the one table: specs.dtypes.FORMATS; fp6 packs 4 in 3 bytes).
BYTES_PER_ELEMENT: dict[str, float] = {
    name: FORMATS[name].bytes_per_element for name in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp6", "fp4")
}


class Bound(str, Enum):
    COMPUTE = "compute"
    MEMORY = "memory"


class Phase(str, Enum):
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class OpCost:
    """Cost of one operator: time (s), FLOPs, bytes moved to/from HBM, which roof bounds it, and
    the compute efficiency used (achieved / dense peak; 0 for pure memory ops)."""

    time_s: float
    flops: float
    bytes: float
    bound: Bound
    efficiency: float


def bytes_per_element(dtype: str) -> float:
    """Storage bytes of one element of `dtype` (BYTES_PER_ELEMENT); InputError names the allowed dtypes."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        raise InputError(f"dtype: unknown '{dtype}'; allowed: {', '.join(BYTES_PER_ELEMENT)}", field="dtype") from None


def output_bytes_per_element(dtype: str) -> float:
    """GEMM outputs of 8-bit and narrower inputs are written in bf16 (2 bytes); others in their own dtype."""
    return 2.0 if bytes_per_element(dtype) < 2 else bytes_per_element(dtype)


def _peak_flops(gpu: Gpu, dtype: str) -> float:
    """Dense tensor-core peak FLOP/s of a GEMM with operands in `dtype`: `Gpu.matmul_peak_tflops`
    (the precision specs.dtypes.gemm_compute_dtype gives, e.g. fp8 on A100 -> bf16)."""
    return gpu.matmul_peak_tflops(dtype) * 1e12


def _effective_dtype(gpu: Gpu, dtype: str) -> str:
    """The dtype whose efficiency ceiling applies: the precision the GEMM runs at on this part
    (specs.dtypes.gemm_compute_dtype; operands given in `dtype`, Weights.STORED)."""
    return gpu.gemm_compute_dtype(dtype, weights=Weights.STORED)


def memory_bandwidth_bytes_s(gpu: Gpu) -> float:
    """Achievable HBM bandwidth, B/s = memory_bandwidth_gbps x 1e9 x hbm_efficiency(gpu)."""
    return gpu.memory_bandwidth_gbps * 1e9 * hbm_efficiency(gpu)


def gemm_time_array(gpu: Gpu, m, n, k, dtype: str, batch=1):
    """Vectorised GEMM roofline over numpy arrays of m, n, k (broadcast); returns time_s array.

    flops = 2 m n k batch; bytes = batch ((m k + k n) b_in + m n b_out);
    time = max(flops / (peak x matmul_efficiency), bytes / achievable HBM bandwidth).
    """
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    b_in = bytes_per_element(dtype)
    flops = 2.0 * m * n * k * batch
    moved = batch * ((m * k + k * n) * b_in + m * n * output_bytes_per_element(dtype))
    eff = matmul_efficiency(gpu, _effective_dtype(gpu, dtype), m, n, k, batch)
    compute_s = flops / (_peak_flops(gpu, dtype) * eff)
    memory_s = moved / memory_bandwidth_bytes_s(gpu)
    return np.maximum(compute_s, memory_s)


def gemm_time(gpu: Gpu, m: int, n: int, k: int, dtype: str, batch: int = 1) -> OpCost:
    """One (batched) GEMM C[m,n] = A[m,k] B[k,n] on `gpu`; formula in `gemm_time_array`."""
    for name, value in (("m", m), ("n", n), ("k", k), ("batch", batch)):
        if value < 1:
            raise InputError(f"{name}: GEMM dimensions must be >= 1, got {value}", field=name)
    b_in = bytes_per_element(dtype)
    flops = 2.0 * m * n * k * batch
    moved = batch * ((m * k + k * n) * b_in + m * n * output_bytes_per_element(dtype))
    eff = float(matmul_efficiency(gpu, _effective_dtype(gpu, dtype), m, n, k, batch))
    compute_s = flops / (_peak_flops(gpu, dtype) * eff)
    memory_s = moved / memory_bandwidth_bytes_s(gpu)
    bound = Bound.COMPUTE if compute_s >= memory_s else Bound.MEMORY
    return OpCost(max(compute_s, memory_s), flops, moved, bound, eff)


def memory_bound_time(gpu: Gpu, bytes_moved: float, flops: float = 0.0) -> OpCost:
    """An elementwise / reduction op (norms, activations, optimizer step): bytes / achievable HBM
    bandwidth. `flops` is carried for accounting only (these ops are far below the ridge point)."""
    if bytes_moved < 0:
        raise InputError(f"bytes_moved: must be >= 0, got {bytes_moved}", field="bytes_moved")
    return OpCost(bytes_moved / memory_bandwidth_bytes_s(gpu), flops, bytes_moved, Bound.MEMORY, 0.0)


def attention_flops(batch, q_len, kv_len, heads, head_dim, causal: bool = True):
    """FLOPs of the attention core (QK^T and PV), FlashAttention counting:
    4 b h d x (query-key pairs), pairs = q kv (full) or q (kv - (q-1)/2) with a causal mask whose
    queries are the last q of the kv positions (= q(q+1)/2 for q = kv, about half)."""
    q = np.asarray(q_len, dtype=np.float64)
    kv = np.asarray(kv_len, dtype=np.float64)
    pairs = causal_pairs(q, kv) if causal else q * kv
    return layer_attention_flops(batch, heads, head_dim, head_dim, pairs)


def attention_time(
    gpu: Gpu,
    batch: int,
    q_len: int,
    kv_len: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    dtype: str,
    causal: bool = True,
    phase: str | Phase = Phase.PREFILL,
) -> OpCost:
    """FlashAttention-style attention core (forward) for `batch` sequences.

    flops = attention_flops(...); bytes = Q, K, V, O read/written once:
    b d bytes(dtype) (2 q heads + 2 kv kv_heads). Compute efficiency = attention_ceiling(gpu, head_dim)
    (FlashAttention-2/3 measurements) x SM fill min(1, b heads ceil(q/128) / sm_count); decode
    (q small) is bandwidth-bound on reading the KV cache.
    """
    phase = Phase(phase)
    if kv_heads < 1 or heads % kv_heads:
        raise InputError(f"kv_heads: must divide heads ({heads}), got {kv_heads}", field="kv_heads")
    if q_len > kv_len:
        raise InputError(f"q_len: cannot exceed kv_len ({kv_len}), got {q_len}", field="q_len")
    elem = bytes_per_element(dtype)
    flops = float(attention_flops(batch, q_len, kv_len, heads, head_dim, causal))
    moved = batch * head_dim * elem * (2.0 * q_len * heads + 2.0 * kv_len * kv_heads)
    sms = gpu.sm_count_or_default
    fill = min(1.0, batch * heads * -(-q_len // 128) / sms)
    eff = attention_ceiling(gpu, head_dim=head_dim) * fill
    compute_s = flops / (_peak_flops(gpu, dtype) * eff)
    memory_s = moved / memory_bandwidth_bytes_s(gpu)
    bound = Bound.COMPUTE if compute_s >= memory_s else Bound.MEMORY
    return OpCost(max(compute_s, memory_s), flops, moved, bound, eff)


__all__ = [
    "BYTES_PER_ELEMENT", "Bound", "OpCost", "Phase", "attention_flops", "attention_time", "bytes_per_element",
    "gemm_time", "gemm_time_array", "matmul_ceiling", "memory_bandwidth_bytes_s", "memory_bound_time",
]
