"""ADAPTERS to colleagues' modules (gpuplan.models, gpuplan.primitives.op_cost/collectives).

Every function here calls the colleague's implementation when it is importable and otherwise
falls back to a minimal local version, marked FALLBACK. The fallbacks exist only so that the
serving model works while those modules land; the colleague's function is the reference (the
tests cross-check against it and skip when it is absent).
"""

from __future__ import annotations

import math

from gpuplan.specs import FfnKind, Gpu, ModelSpec, MoeSpec, System

# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------


def have_models() -> bool:
    try:
        import gpuplan.models as m  # noqa: F401

        return hasattr(m, "kv_cache_bytes_per_token") and hasattr(m, "load_model")
    except Exception:  # pragma: no cover - import-time failure in a colleague's module
        return False


def kv_cache_bytes_per_token(model: ModelSpec, bytes_per_element: float, context_len: int | None = None) -> float:
    """KV-cache bytes per token of the whole model (all layers, all KV heads, one replica).

    Delegates to gpuplan.models.kv_cache_bytes_per_token. FALLBACK formula (same definition):
    GQA/MHA: 2 (K and V) x kv_heads x head_dim x bytes per layer; MLA (DeepSeek-V2 sec. 2.1):
    (kv_lora_rank + qk_rope_head_dim) x bytes per layer; a sliding-window layer with window w holds
    min(context, w) tokens, so averaged over a `context_len`-token sequence it costs
    min(context, w) / context of a global layer.
    """
    if have_models():
        from gpuplan.models import kv_cache_bytes_per_token as impl

        return float(impl(model, bytes_per_element, context_len=context_len))
    if model.mla is not None:
        per_layer = (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * bytes_per_element
    else:
        per_layer = 2 * model.kv_heads * model.head_dim * bytes_per_element
    total = 0.0
    for layer in range(model.layers):
        w = model.window(layer)
        if w is None or context_len is None or context_len <= w:
            total += per_layer
        else:
            total += per_layer * w / context_len
    return total


def load_model(name_or_path: str) -> ModelSpec:
    """A ModelSpec from a bundled name or a config.json path (gpuplan.models.load_model)."""
    from gpuplan.errors import InputError

    if have_models():
        from gpuplan.models import load_model as impl

        return impl(name_or_path)
    raise InputError(  # FALLBACK: the models module has not landed
        f"model: cannot load '{name_or_path}' (gpuplan.models is not available in this build)", field="model"
    )


def _cell(row: dict[str, str], key: str) -> str:
    return (row.get(key) or "").strip()


def model_from_arch_row(row: dict[str, str]) -> ModelSpec:
    """A ModelSpec from the architecture columns of a validation CSV row.

    Delegates to gpuplan.models.model_from_arch_row. FALLBACK follows SCHEMA.md defaults:
    kv_heads empty = heads; ffn empty = 4 x hidden; ffn_kind empty = gelu; moe_* empty = dense.
    """
    try:
        from gpuplan.models import model_from_arch_row as impl

        return impl(row)
    except ImportError:
        pass
    layers, hidden, heads = int(_cell(row, "layers")), int(_cell(row, "hidden")), int(_cell(row, "heads"))
    kv_heads = int(_cell(row, "kv_heads") or heads)
    ffn = int(_cell(row, "ffn") or 4 * hidden)
    moe = None
    if _cell(row, "moe_experts") and int(_cell(row, "moe_experts")) > 1:
        moe = MoeSpec(
            num_experts=int(_cell(row, "moe_experts")),
            top_k=int(_cell(row, "moe_topk") or 2),
            expert_ffn=int(_cell(row, "moe_ffn") or ffn),
            shared_experts=int(_cell(row, "moe_shared_experts") or 0),
            dense_layers=int(_cell(row, "moe_dense_layers") or 0),
        )
    return ModelSpec(
        name=_cell(row, "model") or "row-model", layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=hidden // heads, ffn=ffn, ffn_kind=FfnKind(_cell(row, "ffn_kind") or "gelu"),
        vocab=int(_cell(row, "vocab") or 32000), moe=moe, source="validation row (fallback adapter)",
    )


# ---------------------------------------------------------------------------------------------
# primitives: achievable GEMM rate, HBM bandwidth, collectives
# ---------------------------------------------------------------------------------------------

#: Achievable fraction of HBM bandwidth for streaming reads: NVIDIA aiconfigurator system YAMLs
#: (h100_sxm / h200_sxm) `mem_bw_empirical_scaling_factor: 0.8` (ai-dynamo/aiconfigurator @095f58a).
HBM_EFFICIENCY_FALLBACK = 0.80

#: Achievable fraction of dense tensor-core peak for large GEMMs (stas00/ml-engineering MAMF table:
#: A100 SXM bf16 271.2/312 = 0.87, H100 SXM bf16 794.5/989 = 0.80, H100 fp8 1402.6/1979 = 0.71,
#: B200 bf16 1745/2250 = 0.78, MI300X bf16 668.4/1300 = 0.51). Used when op_cost is absent.
MATMUL_EFFICIENCY_FALLBACK = {"bf16": 0.80, "fp16": 0.80, "fp8": 0.71, "int8": 0.71, "fp4": 0.65, "fp32": 0.80, "tf32": 0.80}


def have_op_cost() -> bool:
    try:
        from gpuplan.primitives import op_cost  # noqa: F401

        return hasattr(op_cost, "gemm_time")
    except Exception:
        return False


def achievable_hbm_gbps(gpu: Gpu) -> float:
    """Achievable streaming HBM bandwidth, GB/s.

    Delegates to op_cost.memory_bound_time on a 1 GB read (bytes / time, which folds in its
    efficiency); FALLBACK: peak x HBM_EFFICIENCY_FALLBACK.
    """
    if have_op_cost():
        try:
            from gpuplan.primitives.op_cost import memory_bound_time

            size = 1e9
            cost = memory_bound_time(gpu, size)
            t = float(getattr(cost, "time_s", cost))
            if t > 0:
                return size / t / 1e9
        except Exception:
            pass
    return gpu.memory_bandwidth_gbps * HBM_EFFICIENCY_FALLBACK


def achievable_matmul_tflops(gpu: Gpu, precision: str) -> float:
    """Achievable dense tensor-core rate for a large, compute-bound GEMM, TFLOP/s.

    Delegates to op_cost.gemm_time on an 8192^3 GEMM (flops / time); FALLBACK: peak x
    MATMUL_EFFICIENCY_FALLBACK[precision].
    """
    if have_op_cost():
        try:
            from gpuplan.primitives.op_cost import gemm_time

            cost = gemm_time(gpu, 8192, 8192, 8192, precision)
            if cost.time_s > 0:
                return float(cost.flops) / float(cost.time_s) / 1e12
        except Exception:
            pass
    return gpu.matmul_peak_tflops(precision) * MATMUL_EFFICIENCY_FALLBACK.get(precision, 0.7)


#: FALLBACK all-reduce model (when primitives.collectives is absent): alpha-beta ring,
#: alpha = 8 us per call for NCCL/custom all-reduce inside an NVLink node (nccl-tests small-message
#: latency on DGX H100 is ~ 8-15 us; TensorRT-LLM's one-shot custom all-reduce is ~ 5-8 us),
#: busbw = 80% of the per-direction scale-up bandwidth.
ALLREDUCE_LATENCY_S_FALLBACK = 8e-6
ALLREDUCE_BUSBW_FRACTION_FALLBACK = 0.80


def have_collectives() -> bool:
    try:
        from gpuplan.primitives import collectives  # noqa: F401

        return hasattr(collectives, "collective_time")
    except Exception:
        return False


def _collective_seconds(op: str, size_bytes: float, system: System, num_gpus: int) -> float:
    if num_gpus <= 1 or size_bytes <= 0:
        return 0.0
    if have_collectives():
        try:
            from gpuplan.primitives.collectives import collective_time

            res = collective_time(op, int(size_bytes), system, num_gpus)
            return float(getattr(res, "time_s", res))
        except Exception:
            pass
    bw = (system.scaleup_bandwidth_gbps or 50.0) * ALLREDUCE_BUSBW_FRACTION_FALLBACK * 1e9
    n = num_gpus
    factor = {"all_reduce": 2 * (n - 1) / n, "all_to_all": (n - 1) / n, "all_gather": (n - 1) / n}.get(op, 1.0)
    return ALLREDUCE_LATENCY_S_FALLBACK + factor * size_bytes / bw


def collective_seconds_grid(op: str, sizes_bytes, system: System, num_gpus: int, gpu: Gpu | None = None):
    """Collective time for an array of message sizes, s. Delegates to
    primitives.collectives.collective_time_array (vectorised); FALLBACK: the alpha-beta ring above
    evaluated on a log grid of sizes and interpolated in log-log space."""
    import numpy as np

    sizes = np.asarray(sizes_bytes, dtype=float)
    out = np.zeros_like(sizes)
    if num_gpus <= 1:
        return out
    pos = sizes > 0
    if not pos.any():
        return out
    if have_collectives():
        try:
            from gpuplan.primitives.collectives import collective_time_array

            out[pos] = collective_time_array(op, sizes[pos], system, num_gpus, gpu=gpu)
            return out
        except Exception:
            pass
    lo, hi = math.log2(max(1.0, sizes[pos].min())), math.log2(max(2.0, sizes[pos].max()))
    grid = np.exp2(np.linspace(lo, hi + 1e-9, 48))
    times = np.array([_collective_seconds(op, s, system, num_gpus) for s in grid])
    out[pos] = np.exp(np.interp(np.log(sizes[pos]), np.log(grid), np.log(np.maximum(times, 1e-12))))
    return out


#: Tile-occupancy term: a GEMM with m token rows reaches m / (m + 32) of its large-shape ceiling.
#: Serving engines run small-m (decode) GEMMs with small-row / split-K kernels that keep them
#: memory-bound (lmdeploy A100 Llama-2-7B batch-1 TPOT 10 ms = 13.5 GB of weights at 0.8 x 2.04
#: TB/s + launch costs), so the 128-row tile / wave model of primitives.efficiency.shape_factor
#: (right for training GEMMs) is not used here; only its MAMF-sourced ceiling is. Estimate.
GEMM_HALF_EFFICIENCY_TOKENS = 32.0


def matmul_efficiency(gpu: Gpu, precision: str, m, n, k):
    """Achievable fraction of dense peak of an (m x k) @ (k x n) serving GEMM (numpy arrays broadcast):
    primitives.efficiency.matmul_ceiling(gpu, dtype) (MAMF-sourced) x m / (m + 32).
    FALLBACK ceiling when primitives is absent: MATMUL_EFFICIENCY_FALLBACK[precision]."""
    import numpy as np

    m = np.maximum(np.asarray(m, dtype=float), 1.0)
    try:
        from gpuplan.primitives.efficiency import matmul_ceiling

        dtype = precision if precision in gpu.peak_tflops else ("bf16" if "bf16" in gpu.peak_tflops else precision)
        ceiling = float(matmul_ceiling(gpu, dtype))
    except ImportError:
        ceiling = MATMUL_EFFICIENCY_FALLBACK.get(precision, 0.7)
    return ceiling * m / (m + GEMM_HALF_EFFICIENCY_TOKENS)


#: FALLBACK FlashAttention ceiling (fraction of dense peak): FA2 paper 50-73% on A100, FA3 75% on H100.
ATTENTION_CEILING_FALLBACK = 0.60


def attention_ceiling(gpu: Gpu) -> float:
    """Best fraction of dense peak a FlashAttention-class kernel reaches (primitives.efficiency)."""
    try:
        from gpuplan.primitives.efficiency import attention_ceiling as impl

        return float(impl(gpu))
    except ImportError:
        return ATTENTION_CEILING_FALLBACK
