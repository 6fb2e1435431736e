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

Every ceiling, the fp8/bf16 ratio, K0 and the HBM fraction is a knob of the one registry
(`efficiency.*` in `gpuplan.knobs`; `gpuplan calibrate knobs` lists them with their sources), read
once per (vectorised) call, so a calibration profile or a cross-validation fold can override it.
"""

from __future__ import annotations

import numpy as np

from gpuplan import knobs
from gpuplan.specs import Gpu

#: Output tile (m and n) of the modelled GEMM kernel, elements.
GEMM_TILE = 128
#: Fixed per-tile prologue/epilogue cost expressed in k elements (modelling assumption, see module doc).
K_OVERHEAD = knobs.register(
    "efficiency.gemm_k_overhead", unit="k elements", default=64.0, low=0.0, high=1024.0,
    source="modelling assumption: per-tile prologue/epilogue worth about 64 elements of the k loop (k_pipeline >= 0.985 at k >= 4096)",
    scales="every GEMM's k_pipeline factor k / (k + this)")
_MAMF_SOURCE = "stas00/ml-engineering mamf-finder.py (Maximum Achievable Matmul FLOPS), ../shared/reference/ecosystem.md section 1.6"
_CEILING_SCALES = "every GEMM on this part in this dtype (training and serving): achieved = dense peak x ceiling x shape factor"


def _ceiling_knob(name: str, default: float, source: str, scales: str = _CEILING_SCALES) -> float:
    return knobs.register(name, unit="fraction of dense peak", default=default, low=0.2, high=1.0, source=source,
                          scales=scales)


#: Best achieved / dense peak, by GPU id, from mamf-finder (ecosystem.md section 1.6). fp16 uses bf16.
#: Each entry is the default of the knob `efficiency.matmul_ceiling.<gpu>.<dtype>`.
MAMF_CEILING: dict[str, dict[str, float]] = {
    gpu_key: {dtype: _ceiling_knob(f"efficiency.matmul_ceiling.{gpu_key}.{dtype}", achieved / peak,
                                   f"{_MAMF_SOURCE}: {achieved:g} of {peak:g} TFLOP/s")
              for dtype, (achieved, peak) in entries.items()}
    for gpu_key, entries in {
        "a100-sxm4-80gb": {"bf16": (271.2, 312)},
        "a100-sxm4-40gb": {"bf16": (271.2, 312)},
        "h100-sxm5-80gb": {"bf16": (794.5, 989), "fp8": (1402.6, 1979)},
        "h200-sxm-141gb": {"bf16": (794.5, 989), "fp8": (1453.4, 1979)},
        "gh200": {"bf16": (828.6, 989)},
        "b200": {"bf16": (1745, 2250), "fp8": (3432.5, 4500)},
        "b300": {"bf16": (1769, 2250)},
        "gb200": {"bf16": (1822, 2500), "fp8": (3615.6, 5000)},
        "mi300x": {"bf16": (668.4, 1300)},
        "mi325x": {"bf16": (784.9, 1300)},
        "mi355x": {"bf16": (1565, 2300)},
        "gaudi2": {"bf16": (418.7, 432)},
        "gaudi3": {"bf16": (1243, 1677)},
    }.items()
}
_MAMF_KNOB: dict[tuple[str, str], str] = {
    (gpu_key, dtype): f"efficiency.matmul_ceiling.{gpu_key}.{dtype}" for gpu_key, e in MAMF_CEILING.items() for dtype in e
}

#: Family defaults (architecture keyword -> bf16 ceiling) for parts mamf-finder did not list:
#: the measured value of the family's flagship above. Knobs `efficiency.matmul_ceiling.family.<family>`.
FAMILY_CEILING: dict[str, float] = {
    family: _ceiling_knob(f"efficiency.matmul_ceiling.family.{family}", v, src,
                          f"bf16 GEMMs on {family} parts without a mamf-finder entry")
    for family, v, src in (
        ("volta", 0.80, "no MAMF entry; assumed like Ampere/Hopper (documented assumption)"),
        ("ampere", 271.2 / 312, f"{_MAMF_SOURCE}: A100 SXM 271.2 of 312 TFLOP/s"),
        ("ada", 794.5 / 989, "assumed like Hopper (H100 SXM mamf-finder 794.5 of 989 TFLOP/s)"),
        ("hopper", 794.5 / 989, f"{_MAMF_SOURCE}: H100 SXM 794.5 of 989 TFLOP/s"),
        ("blackwell", 1745 / 2250, f"{_MAMF_SOURCE}: B200 1745 of 2250 TFLOP/s"),
        ("cdna3", 668.4 / 1300, f"{_MAMF_SOURCE}: MI300X 668.4 of 1300 TFLOP/s"),
        ("cdna4", 1565 / 2300, f"{_MAMF_SOURCE}: MI355X 1565 of 2300 TFLOP/s"),
    )
}
#: Ceiling when nothing is known: the median of the MAMF table (about 0.78).
DEFAULT_CEILING = _ceiling_knob("efficiency.matmul_ceiling.default", 0.78,
                                f"median of the mamf-finder table ({_MAMF_SOURCE})",
                                "bf16 GEMMs on parts of an unknown family without a mamf-finder entry")
#: FP8 / BF16 ceiling ratio when a part has no FP8 measurement: H100 0.709 / 0.803 = 0.883.
FP8_OVER_BF16 = knobs.register(
    "efficiency.fp8_over_bf16_ceiling", unit="ratio", default=(1402.6 / 1979) / (794.5 / 989), low=0.3, high=1.2,
    source=f"{_MAMF_SOURCE}: H100 SXM fp8 0.709 / bf16 0.803",
    scales="fp8 / int8 / fp6 / fp4 GEMM ceiling on parts without a measurement in that dtype (x the bf16 ceiling)")

#: Achievable fraction of peak HBM bandwidth (aiconfigurator h200_sxm mem_bw_empirical_scaling_factor).
HBM_EFFICIENCY = knobs.register(
    "efficiency.hbm", unit="fraction of peak bandwidth", default=0.80, low=0.3, high=1.0,
    source="NVIDIA aiconfigurator h200_sxm system YAML mem_bw_empirical_scaling_factor: 0.8 (ecosystem.md section 1.3)",
    scales="every memory-bound operator (achievable HBM bandwidth), every GPU")

#: FlashAttention-class attention kernels: best fraction of dense peak, by architecture family.
#: FlashAttention-2 (Dao 2023): up to 225 TFLOP/s fwd+bwd on A100 = 72% of 312. FlashAttention-3
#: (Shah et al. 2024): about 650 TFLOP/s BF16 forward at head_dim 128 on H100 = 66% of 989 (740 at 256).
#: FlashAttention-4 (Zadouri, Dao et al. 2026): up to 1613 TFLOP/s BF16 on B200 = 71% of 2250.
#: Knobs `efficiency.attention_ceiling.<family>`.
ATTENTION_CEILING: dict[str, float] = {
    family: knobs.register(
        f"efficiency.attention_ceiling.{family}", unit="fraction of dense peak", default=v, low=0.05, high=1.0,
        source=src, scales=f"FlashAttention-class attention core (serving, op_cost.attention_time) on {family}")
    for family, v, src in (
        ("ampere", 0.72, "Dao 2023 (FlashAttention-2): up to 225 TFLOP/s fwd+bwd on A100 = 72% of 312"),
        ("hopper", 0.66, "Shah et al. 2024 (FlashAttention-3): about 650 TFLOP/s BF16 forward at head_dim 128 on H100 = 66% of 989"),
        ("blackwell", 0.71, "Zadouri, Dao et al. 2026 (FlashAttention-4, arXiv abstract): up to 1613 TFLOP/s BF16 on B200 = 71% "
                            "of 2250 (1.3x cuDNN 9.13)"),
    )
}
DEFAULT_ATTENTION_CEILING = knobs.register(
    "efficiency.attention_ceiling.default", unit="fraction of dense peak", default=0.60, low=0.05, high=1.0,
    source="assumption: below the measured FlashAttention fractions (A100 0.72, H100 0.66, B200 0.71) for architectures without a measurement",
    scales="FlashAttention-class attention core on other architectures")


def _family(gpu: Gpu) -> str | None:
    if gpu.family in FAMILY_CEILING:
        return gpu.family
    if "mi300" in gpu.id or "mi325" in gpu.id:
        return "cdna3"
    return None


def _mamf_key(gpu: Gpu) -> str | None:
    if gpu.id in MAMF_CEILING:
        return gpu.id
    for key in MAMF_CEILING:  # e.g. "b200-sxm" -> "b200", "mi300x-oam" -> "mi300x"
        if gpu.id.startswith(key):
            return key
    return None


#: (gpu id, architecture) -> (mamf-finder key, family, bf16 ceiling knob name): knob reads stay one
#: dictionary lookup per vectorised call.
_GPU_KEYS: dict[tuple[str, str], tuple[str | None, str | None, str]] = {}


def _gpu_keys(gpu: Gpu) -> tuple[str | None, str | None, str]:
    """The part's mamf-finder key, its family, and the name of the knob holding its bf16 ceiling
    (its mamf-finder entry, else its family's, else the default)."""
    cache_key = (gpu.id, gpu.architecture)
    hit = _GPU_KEYS.get(cache_key)
    if hit is None:
        key, family = _mamf_key(gpu), _family(gpu)
        if key is not None and "bf16" in MAMF_CEILING[key]:
            bf16 = _MAMF_KNOB[(key, "bf16")]
        else:
            bf16 = f"efficiency.matmul_ceiling.family.{family}" if family else "efficiency.matmul_ceiling.default"
        hit = _GPU_KEYS[cache_key] = (key, family, bf16)
    return hit


def matmul_ceiling(gpu: Gpu, dtype: str) -> float:
    """Best achievable fraction of dense peak for a large GEMM on `gpu` in `dtype` (see module doc):
    the knob `efficiency.matmul_ceiling.<gpu>.<dtype>` where mamf-finder measured it, else the
    bf16 ceiling (the part's, its family's, or the default) x `efficiency.fp8_over_bf16_ceiling`
    for 8-bit and narrower dtypes."""
    key, _, bf16_knob = _gpu_keys(gpu)
    bf16 = knobs.value(bf16_knob)
    if dtype in ("bf16", "fp16", "tf32", "fp32"):
        return bf16
    if key is not None and dtype in MAMF_CEILING[key]:
        return knobs.value(_MAMF_KNOB[(key, dtype)])
    # fp8 / int8 / fp6 / fp4 without a measurement: bf16 ceiling x the measured H100 fp8/bf16 ratio
    return bf16 * knobs.value("efficiency.fp8_over_bf16_ceiling")


def shape_factor(gpu: Gpu, m, n, k, batch=1):
    """sm_fill x padding x k_pipeline for GEMMs of shape (batch x) m x n x k; numpy-broadcasting.

    sm_fill = min(1, batch ceil(m/128) ceil(n/128) / sm_count); padding = m/(128 ceil(m/128)) x
    n/(128 ceil(n/128)); k_pipeline = k / (k + 64). See the module docstring for sources.
    """
    m = np.asarray(m, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    sms = gpu.sm_count_or_default
    tiles = np.asarray(batch, dtype=np.float64) * np.ceil(m / GEMM_TILE) * np.ceil(n / GEMM_TILE)
    sm_fill = np.minimum(1.0, tiles / sms)
    padding = (m / (GEMM_TILE * np.ceil(m / GEMM_TILE))) * (n / (GEMM_TILE * np.ceil(n / GEMM_TILE)))
    k_pipeline = k / (k + knobs.value("efficiency.gemm_k_overhead"))
    return sm_fill * padding * k_pipeline


def matmul_efficiency(gpu: Gpu, dtype: str, m, n, k, batch=1):
    """Achievable fraction of dense peak: matmul_ceiling(gpu, dtype) x shape_factor(...)."""
    return matmul_ceiling(gpu, dtype) * shape_factor(gpu, m, n, k, batch)


def hbm_efficiency(gpu: Gpu) -> float:
    """Achievable fraction of peak HBM bandwidth (knob `efficiency.hbm`, 0.80, see module doc); same for every part."""
    return knobs.value("efficiency.hbm")


def attention_ceiling(gpu: Gpu) -> float:
    """Best fraction of dense peak a FlashAttention-class kernel reaches (knob
    `efficiency.attention_ceiling.<family>`, else `.default`; ATTENTION_CEILING)."""
    family = _gpu_keys(gpu)[1]
    return knobs.value(f"efficiency.attention_ceiling.{family}" if family in ATTENTION_CEILING
                       else "efficiency.attention_ceiling.default")
