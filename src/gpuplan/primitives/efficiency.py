"""Achievable efficiency: the fraction of a GPU's peak that real kernels reach.

Peak numbers are never used as achieved numbers (DESIGN.md). Achieved = peak x efficiency, where

    matmul efficiency(gpu, dtype, m, n, k) = ceiling(gpu, dtype) x sm_fill x padding x k_pipeline

- `ceiling`: the best fraction of dense peak a tuned GEMM reaches on that part at its best shape,
  measured by stas00/ml-engineering's mamf-finder.py (Maximum Achievable Matmul FLOPS) and listed in
  ../shared/reference/ecosystem.md section 1.6: e.g. A100 SXM BF16 271.2/312 = 0.869, H100 SXM
  794.5/989 = 0.803, B200 1745/2250 = 0.776, MI300X 668.4/1300 = 0.514; FP8 H100 1402.6/1979 = 0.709.
- `sm_fill`: a GEMM is cut into output tiles (128 x 128, the common cuBLAS/CUTLASS tile on
  Ampere and later) spread over the SMs; with fewer tiles than SMs the rest idle:
  min(1, tiles / sm_count) (NVIDIA "Matrix Multiplication Background User's Guide", wave
  quantization). Partial last waves are assumed recovered by stream-K / split-K scheduling
  (Osama et al., "Stream-K", PPoPP 2023), which cuBLAS uses on Hopper.
- `padding`: a dimension that is not a multiple of the tile wastes the rest of its last tile:
  d / (128 ceil(d/128)) for m and n. (With one granularity for tiles and padding, time never
  drops when a dimension grows; an under-filled GPU takes one tile's time.)
- `k_pipeline`: each output tile pays a fixed prologue/epilogue (loading the first stages and
  writing the tile) worth about K0 = 64 elements of the k loop: k / (k + K0). Modelling
  assumption (documented here, overridable); at the MAMF shapes (k >= 4096) it is >= 0.985.

HBM: achievable fraction of peak memory bandwidth = 0.80, NVIDIA aiconfigurator's
`mem_bw_empirical_scaling_factor: 0.8` (h200_sxm system YAML, ecosystem.md section 1.3), in line
with STREAM-like copy kernels reaching 80-90% of datasheet bandwidth.
"""

from __future__ import annotations

import numpy as np

from gpuplan.specs import Gpu

#: Output tile (m and n) of the modelled GEMM kernel, elements.
GEMM_TILE = 128
#: Fixed per-tile prologue/epilogue cost expressed in k elements (modelling assumption, see module doc).
K_OVERHEAD = 64.0
#: SM count assumed when the catalog has none.
DEFAULT_SM_COUNT = 132

#: Best achieved / dense peak, by GPU id, from mamf-finder (ecosystem.md section 1.6). fp16 uses bf16.
MAMF_CEILING: dict[str, dict[str, float]] = {
    "a100-sxm4-80gb": {"bf16": 271.2 / 312},
    "a100-sxm4-40gb": {"bf16": 271.2 / 312},
    "h100-sxm5-80gb": {"bf16": 794.5 / 989, "fp8": 1402.6 / 1979},
    "h200-sxm-141gb": {"bf16": 794.5 / 989, "fp8": 1453.4 / 1979},
    "gh200": {"bf16": 828.6 / 989},
    "b200": {"bf16": 1745 / 2250, "fp8": 3432.5 / 4500},
    "b300": {"bf16": 1769 / 2250},
    "gb200": {"bf16": 1822 / 2500, "fp8": 3615.6 / 5000},
    "mi300x": {"bf16": 668.4 / 1300},
    "mi325x": {"bf16": 784.9 / 1300},
    "mi355x": {"bf16": 1565 / 2300},
    "gaudi2": {"bf16": 418.7 / 432},
    "gaudi3": {"bf16": 1243 / 1677},
}

#: Family defaults (architecture keyword -> bf16 ceiling) for parts mamf-finder did not list:
#: the measured value of the family's flagship above.
FAMILY_CEILING: dict[str, float] = {
    "volta": 0.80,  # no MAMF entry; assumed like Ampere/Hopper (documented assumption)
    "ampere": 271.2 / 312,
    "ada": 794.5 / 989,  # assumed like Hopper
    "hopper": 794.5 / 989,
    "blackwell": 1745 / 2250,
    "cdna3": 668.4 / 1300,
    "cdna4": 1565 / 2300,
}
#: Ceiling when nothing is known: the median of the MAMF table (about 0.78).
DEFAULT_CEILING = 0.78
#: FP8 / BF16 ceiling ratio when a part has no FP8 measurement: H100 0.709 / 0.803 = 0.883.
FP8_OVER_BF16 = (1402.6 / 1979) / (794.5 / 989)

#: Achievable fraction of peak HBM bandwidth (aiconfigurator h200_sxm mem_bw_empirical_scaling_factor).
HBM_EFFICIENCY = 0.80

#: FlashAttention-class attention kernels: best fraction of dense peak, by architecture family.
#: FlashAttention-2 (Dao 2023): up to 225 TFLOP/s fwd+bwd on A100 = 72% of 312. FlashAttention-3
#: (Shah et al. 2024): about 650 TFLOP/s BF16 forward at head_dim 128 on H100 = 66% of 989 (740 at 256).
ATTENTION_CEILING: dict[str, float] = {"ampere": 0.72, "hopper": 0.66, "blackwell": 0.60}
DEFAULT_ATTENTION_CEILING = 0.60


def _family(gpu: Gpu) -> str | None:
    arch = gpu.architecture.lower()
    for name in FAMILY_CEILING:
        if name in arch:
            return name
    if "mi300" in gpu.id or "mi325" in gpu.id:
        return "cdna3"
    return None


def _mamf_entry(gpu: Gpu) -> dict[str, float] | None:
    if gpu.id in MAMF_CEILING:
        return MAMF_CEILING[gpu.id]
    for key, entry in MAMF_CEILING.items():  # e.g. "b200-sxm" -> "b200", "mi300x-oam" -> "mi300x"
        if gpu.id.startswith(key):
            return entry
    return None


def matmul_ceiling(gpu: Gpu, dtype: str) -> float:
    """Best achievable fraction of dense peak for a large GEMM on `gpu` in `dtype` (see module doc)."""
    entry = _mamf_entry(gpu)
    family = _family(gpu)
    bf16 = (entry or {}).get("bf16") or FAMILY_CEILING.get(family or "", DEFAULT_CEILING)
    if dtype in ("bf16", "fp16", "tf32", "fp32"):
        return bf16
    if entry and dtype in entry:
        return entry[dtype]
    # fp8 / int8 / fp6 / fp4 without a measurement: bf16 ceiling x the measured H100 fp8/bf16 ratio
    return bf16 * FP8_OVER_BF16


def shape_factor(gpu: Gpu, m, n, k, batch=1):
    """sm_fill x padding x k_pipeline for GEMMs of shape (batch x) m x n x k; numpy-broadcasting.

    sm_fill = min(1, batch ceil(m/128) ceil(n/128) / sm_count); padding = m/(128 ceil(m/128)) x
    n/(128 ceil(n/128)); k_pipeline = k / (k + 64). See the module docstring for sources.
    """
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    sms = gpu.sm_count or DEFAULT_SM_COUNT
    tiles = np.asarray(batch, dtype=np.float64) * np.ceil(m / GEMM_TILE) * np.ceil(n / GEMM_TILE)
    sm_fill = np.minimum(1.0, tiles / sms)
    padding = (m / (GEMM_TILE * np.ceil(m / GEMM_TILE))) * (n / (GEMM_TILE * np.ceil(n / GEMM_TILE)))
    k_pipeline = k / (k + K_OVERHEAD)
    return sm_fill * padding * k_pipeline


def matmul_efficiency(gpu: Gpu, dtype: str, m, n, k, batch=1):
    """Achievable fraction of dense peak: matmul_ceiling(gpu, dtype) x shape_factor(...)."""
    return matmul_ceiling(gpu, dtype) * shape_factor(gpu, m, n, k, batch)


def hbm_efficiency(gpu: Gpu) -> float:
    """Achievable fraction of peak HBM bandwidth (0.80, see module doc); same for every part."""
    return HBM_EFFICIENCY


def attention_ceiling(gpu: Gpu) -> float:
    """Best fraction of dense peak a FlashAttention-class kernel reaches (ATTENTION_CEILING)."""
    return ATTENTION_CEILING.get(_family(gpu) or "", DEFAULT_ATTENTION_CEILING)
