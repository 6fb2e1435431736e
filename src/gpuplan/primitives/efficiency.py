"""Achievable efficiency: the fraction of a GPU's peak that real kernels reach.

Peak numbers are never used as achieved numbers (DESIGN.md). Achieved = peak x efficiency, where

    matmul efficiency(gpu, dtype, m, n, k) = ceiling(gpu, dtype) x sm_fill x padding x k_pipeline

- `ceiling`: the best fraction of dense peak a tuned GEMM reaches on that part at its best shape,
  from PUBLISHED microbenchmarks in the catalog's sourced table (catalog/data/ceilings.toml, loaded
  by gpuplan.catalog.ceilings into the knobs `efficiency.matmul_ceiling.<gpu>.<dtype>`): mostly
  stas00/ml-engineering's mamf-finder.py (Maximum Achievable Matmul FLOPS), e.g. A100 SXM BF16
  271.2/312 = 0.869, H100 SXM 794.5/989 = 0.803, B200 1745/2250 = 0.776, MI300X 668.4/1300 = 0.514;
  FP8 H100 1402.6/1979 = 0.709, MI300X 1201.8/2615 = 0.460 (its own FP8/BF16 ratio, AMD's
  hipBLASLt measurement). A part without its own entry takes its generation's
  (`efficiency.matmul_ceiling.family.<family>`: the measured flagship), else the default; a dtype
  without a measurement takes the part's bf16 ceiling x the H100 fp8/bf16 ratio (fp4: x B200's
  measured fp4/bf16 ratio, cuBLASLt FP4 5239 of 9000 TFLOP/s over bf16 1745 of 2250 = 0.751).
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

HBM: achievable fraction of peak memory bandwidth

    hbm_efficiency(gpu) = efficiency.hbm x stream(gpu) / stream_ref

`efficiency.hbm` = 0.80 is NVIDIA aiconfigurator's `mem_bw_empirical_scaling_factor: 0.8` (h100_sxm
system YAML, copied to its other systems: "some nonofficial correction based on observations"), the
fraction serving kernels reach on H100 SXM; `stream(gpu)` is the part's own measured STREAM-copy
fraction of peak (catalog/data/ceilings.toml: BabelStream Copy, e.g. H100 SXM 2.90/3.35 = 0.866,
H200 4.01/4.8 = 0.835, A100 80GB 1.61/2.039 = 0.790, MI300X 4.11/5.3 = 0.775), else its
generation's for an HBM part, else stream_ref; `stream_ref` = H100 SXM's 0.866. So the bandwidth
of two parts relates as their measured copy bandwidths do (H200 / H100 = 4.01 / 2.90, not the
datasheets' 4.8 / 3.35), and a part whose memory system sustains less of its datasheet bandwidth
than Hopper's starts from its own measured ceiling (MI300X 0.80 x 0.775 / 0.866 = 0.716) instead of NVIDIA's.

Every ceiling, the fp8/bf16 ratio, K0 and the HBM fraction is a knob of the one registry
(`efficiency.*` in `gpuplan.knobs`; `gpuplan calibrate knobs` lists them with their sources), read
once per (vectorised) call, so a calibration profile or a cross-validation fold can override it.
"""

from __future__ import annotations

import numpy as np

from gpuplan import knobs
from gpuplan.primitives.attention_head_dim import REFERENCE_HEAD_DIM, AttentionPass, head_dim_efficiency
from gpuplan.specs import Gpu

#: Output tile (m and n) of the modelled GEMM kernel, elements.
GEMM_TILE = 128
#: Fixed per-tile prologue/epilogue cost expressed in k elements (modelling assumption, see module doc).
K_OVERHEAD = knobs.register(
    "efficiency.gemm_k_overhead", unit="k elements", default=64.0, low=0.0, high=1024.0,
    source="modelling assumption: per-tile prologue/epilogue worth about 64 elements of the k loop (k_pipeline >= 0.985 at k >= 4096)",
    scales="every GEMM's k_pipeline factor k / (k + this)")
_MAMF_SOURCE = "stas00/ml-engineering mamf-finder.py (Maximum Achievable Matmul FLOPS), ../shared/reference/ecosystem.md section 1.6"
_MATMUL_PREFIX = "efficiency.matmul_ceiling."
_HBM_PREFIX = "efficiency.hbm_stream."

#: Generations with ceilings (primitives.efficiency._family reads Gpu.family).
FAMILIES = ("volta", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "cdna4")
#: Family bf16 ceilings that are assumptions, not measurements (the measured families' knobs come
#: from catalog/data/ceilings.toml). Knobs `efficiency.matmul_ceiling.family.<family>`.
ASSUMED_FAMILY_CEILING: dict[str, float] = {
    family: knobs.register(f"efficiency.matmul_ceiling.family.{family}", unit="fraction of dense peak", default=v,
                           low=0.2, high=1.0, source=src, scales=f"bf16 GEMMs on {family} parts without a measurement")
    for family, v, src in (
        ("volta", 0.80, "no MAMF entry; assumed like Ampere/Hopper (documented assumption)"),
        ("ada", 794.5 / 989, "assumed like Hopper (H100 SXM mamf-finder 794.5 of 989 TFLOP/s)"),
    )
}
#: Ceiling when nothing is known: the median of the MAMF table (about 0.78).
DEFAULT_CEILING = knobs.register(
    "efficiency.matmul_ceiling.default", unit="fraction of dense peak", default=0.78, low=0.2, high=1.0,
    source=f"median of the mamf-finder table ({_MAMF_SOURCE})",
    scales="bf16 GEMMs on parts of an unknown family without a mamf-finder entry")
#: FP8 / BF16 ceiling ratio when a part has no FP8 measurement: H100 0.709 / 0.803 = 0.883.
FP8_OVER_BF16 = knobs.register(
    "efficiency.fp8_over_bf16_ceiling", unit="ratio", default=(1402.6 / 1979) / (794.5 / 989), low=0.3, high=1.2,
    source=f"{_MAMF_SOURCE}: H100 SXM fp8 0.709 / bf16 0.803",
    scales="fp8 / int8 / fp6 GEMM ceiling on parts without a measurement in that dtype (x the bf16 ceiling)")

#: FP4 / BF16 ceiling ratio when a part has no FP4 measurement: the one published FP4 x FP4 GEMM
#: sweep with a library kernel, B200 cuBLASLt 5239 of 9000 TFLOP/s (catalog/data/ceilings.toml
#: DG_MXF4) over B200's mamf-finder bf16 1745 of 2250: 0.582 / 0.776 = 0.751 (DERIVED). 4-bit GEMMs
#: reach less of their (doubled) peak than fp8 ones (0.883 of bf16 on H100, 0.983 on B200).
FP4_OVER_BF16 = knobs.register(
    "efficiency.fp4_over_bf16_ceiling", unit="ratio", default=(5239.0 / 9000) / (1745.0 / 2250), low=0.3, high=1.2,
    source="B200 cuBLASLt FP4 x FP4 5239 / 9000 TFLOP/s (deepseek-ai/DeepGEMM PR #348 table) over B200 mamf-finder "
           "bf16 1745 / 2250 = 0.751",
    scales="fp4 GEMM ceiling on parts without an fp4 measurement (x the bf16 ceiling)")

#: Achievable fraction of peak HBM bandwidth on H100 SXM (aiconfigurator h100_sxm
#: mem_bw_empirical_scaling_factor); other parts scale it by their measured copy fraction (hbm_efficiency).
HBM_EFFICIENCY = knobs.register(
    "efficiency.hbm", unit="fraction of peak bandwidth", default=0.80, low=0.3, high=1.0,
    source="NVIDIA aiconfigurator h100_sxm / h200_sxm system YAML mem_bw_empirical_scaling_factor: 0.8 "
           "(ecosystem.md section 1.3)",
    scales="every memory-bound operator (achievable HBM bandwidth), every GPU: this on H100 SXM, x the part's "
           "measured STREAM-copy fraction / H100's elsewhere (efficiency.hbm_stream.*)")

#: FlashAttention-class attention kernels: best fraction of dense peak, by architecture family:
#: knobs `efficiency.attention_ceiling.<family>` from catalog/data/ceilings.toml (FlashAttention-2 on
#: A100 0.72, FlashAttention-3 on H100 0.66, FlashAttention-4 on B200 0.71), else this default.
DEFAULT_ATTENTION_CEILING = knobs.register(
    "efficiency.attention_ceiling.default", unit="fraction of dense peak", default=0.60, low=0.05, high=1.0,
    source="assumption: below the measured FlashAttention fractions (A100 0.72, H100 0.66, B200 0.71) for architectures without a measurement",
    scales="FlashAttention-class attention core on other architectures")
#: FP8 / BF16 ratio of a FlashAttention-class kernel's fraction of dense peak: the attention ceilings
#: above are 16-bit measurements, and the one published kernel measured in both formats on one part
#: reaches less of the fp8 peak than of the bf16 one. FlashAttention-3 (Shah et al. 2024,
#: arXiv:2407.08608, abstract): "FP16 reaching up to 740 TFLOPs/s (75% utilization), and with FP8
#: reaching close to 1.2 PFLOPs/s" on H100 SXM (dense peaks 989 / 1979 TFLOP/s), so
#: (1200 / 1979) / (740 / 989) = 0.606 / 0.748 = 0.810 (DERIVED). Applied to every family's ceiling
#: when the attention core computes in fp8 (`attention_ceiling(gpu, "fp8")`).
FP8_OVER_BF16_ATTENTION = knobs.register(
    "efficiency.fp8_over_bf16_attention_ceiling", unit="ratio", default=(1200 / 1979) / (740 / 989), low=0.3, high=1.2,
    source="FlashAttention-3 (arXiv:2407.08608) abstract: FP16 up to 740 TFLOP/s of 989, FP8 close to 1.2 PFLOP/s "
           "of 1979 on H100 SXM -> (1200/1979) / (740/989) = 0.810",
    scales="the attention ceiling of an attention core computing in fp8 (x the family's 16-bit ceiling)")


def _family(gpu: Gpu) -> str | None:
    if gpu.family in FAMILIES:  # Gpu.family: the one reading of the architecture string
        return gpu.family
    if "mi300" in gpu.id or "mi325" in gpu.id:
        return "cdna3"
    return None


def _measured(prefix: str) -> dict[str, set[str]]:
    """{part key: its measured suffixes} of the registered knobs `<prefix><part>.<suffix>` (GEMM:
    dtypes) or `<prefix><part>` (bandwidth: suffix ""), without family / default / reference knobs."""
    out: dict[str, set[str]] = {}
    for name in knobs.REGISTRY:
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix):]
        if rest.startswith(("family.", "default", "reference")):
            continue
        part, suffix = rest.rsplit(".", 1) if prefix == _MATMUL_PREFIX else (rest, "")
        out.setdefault(part, set()).add(suffix)
    return out


def _part_key(gpu: Gpu, measured: dict[str, set[str]]) -> str | None:
    """The measured part a GPU is (Gpu.measured_part: its id, else the longest measured id it starts with)."""
    return gpu.measured_part(measured)


#: (gpu id, architecture, memory type, registry size) -> (GEMM part, family, bf16 ceiling knob,
#: measured GEMM dtypes, HBM stream knob or None): knob reads stay one lookup per vectorised call.
_GPU_KEYS: dict[tuple, tuple] = {}


def _gpu_keys(gpu: Gpu) -> tuple[str | None, str | None, str, frozenset, str | None]:
    """The part's GEMM table key, its family, the knob holding its bf16 ceiling (its own
    measurement, else its family's, else the default), the dtypes measured on it, and the knob of
    its STREAM-copy fraction (its own, else its generation's for an HBM part, else None)."""
    cache_key = (gpu.id, gpu.architecture, gpu.memory_type, len(knobs.REGISTRY))
    hit = _GPU_KEYS.get(cache_key)
    if hit is None:
        gemm = _measured(_MATMUL_PREFIX)
        key, family = _part_key(gpu, gemm), _family(gpu)
        dtypes = frozenset(gemm.get(key, ())) if key else frozenset()
        if "bf16" in dtypes:
            bf16 = f"{_MATMUL_PREFIX}{key}.bf16"
        elif family and f"{_MATMUL_PREFIX}family.{family}" in knobs.REGISTRY:
            bf16 = f"{_MATMUL_PREFIX}family.{family}"
        else:
            bf16 = "efficiency.matmul_ceiling.default"
        hbm_key = _part_key(gpu, _measured(_HBM_PREFIX))
        if hbm_key is not None:
            hbm = f"{_HBM_PREFIX}{hbm_key}"
        elif (family and gpu.memory_type.upper().startswith("HBM")
              and f"{_HBM_PREFIX}family.{family}" in knobs.REGISTRY):
            hbm = f"{_HBM_PREFIX}family.{family}"
        else:
            hbm = None
        hit = _GPU_KEYS[cache_key] = (key, family, bf16, dtypes, hbm)
    return hit


def matmul_ceiling(gpu: Gpu, dtype: str) -> float:
    """Best achievable fraction of dense peak for a large GEMM on `gpu` in `dtype` (see module doc):
    the knob `efficiency.matmul_ceiling.<gpu>.<dtype>` where the part was measured in that dtype, else
    the bf16 ceiling (the part's, its family's, or the default) x `efficiency.fp4_over_bf16_ceiling`
    for fp4, x `efficiency.fp8_over_bf16_ceiling` for the other 8-bit and narrower dtypes."""
    key, _, bf16_knob, dtypes, _ = _gpu_keys(gpu)
    bf16 = knobs.value(bf16_knob)
    if dtype in ("bf16", "fp16", "tf32", "fp32"):
        return bf16
    if dtype in dtypes:
        return knobs.value(f"{_MATMUL_PREFIX}{key}.{dtype}")
    if dtype == "fp4":  # fp4 without a measurement: bf16 ceiling x the measured B200 fp4/bf16 ratio
        return bf16 * knobs.value("efficiency.fp4_over_bf16_ceiling")
    # fp8 / int8 / fp6 without a measurement: bf16 ceiling x the measured H100 fp8/bf16 ratio
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
    """Achievable fraction of peak HBM bandwidth: efficiency.hbm x stream(gpu) / stream_ref (module
    doc; knobs `efficiency.hbm`, `efficiency.hbm_stream.<gpu>` or `.family.<family>`,
    `efficiency.hbm_stream.reference`); `efficiency.hbm` alone for a part without a measurement."""
    stream_knob = _gpu_keys(gpu)[4]
    base = knobs.value("efficiency.hbm")
    if stream_knob is None or "efficiency.hbm_stream.reference" not in knobs.REGISTRY:
        return base
    return min(1.0, base * knobs.value(stream_knob) / knobs.value("efficiency.hbm_stream.reference"))


def attention_ceiling(gpu: Gpu, precision: str = "bf16", head_dim: float = REFERENCE_HEAD_DIM) -> float:
    """Best fraction of the `precision` dense peak a FlashAttention-class forward kernel reaches at
    `head_dim`: the knob `efficiency.attention_ceiling.<family>` from catalog/data/ceilings.toml (else
    `.default`), a 16-bit measurement at head_dim 128, x head_dim_efficiency(family, head_dim, FORWARD)
    (primitives.attention_head_dim), x `efficiency.fp8_over_bf16_attention_ceiling` when the kernel
    computes in fp8 (FP8_OVER_BF16_ATTENTION: FlashAttention-3's fp8 / bf16 fractions of peak)."""
    family = _gpu_keys(gpu)[1]
    name = f"efficiency.attention_ceiling.{family}"
    ceiling = (knobs.value(name if name in knobs.REGISTRY else "efficiency.attention_ceiling.default")
               * head_dim_efficiency(gpu.family, head_dim, AttentionPass.FORWARD))
    if precision == "fp8":
        return ceiling * knobs.value("efficiency.fp8_over_bf16_attention_ceiling")
    return ceiling
