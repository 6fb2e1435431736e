"""THE dtype table and THE GEMM-precision rule: storage bits per element (block scales included),
and the tensor-core precision a GEMM of two operand formats runs at on a part.

Storage:

    bits_per_element = element_bits + scale_bits / block_size

- OCP Microscaling (MX) v1.0, table 1: MXFP8 (E4M3/E5M2), MXFP6, MXFP4 (E2M1) with one E8M0
  (8-bit) scale per 32 elements: 8.25, 6.25, 4.25 bits.
- NVFP4 (NVIDIA "Introducing NVFP4", 2025): E2M1 with one FP8 E4M3 scale per 16 elements (the
  per-tensor fp32 scale is negligible): 4.5 bits.
- int4 weight-only group quantisation as AWQ/GPTQ ship it: one fp16 scale per 128 (AWQ, Lin et al.
  2023 sec. 4): 4.125 bits. int8 and OFP8 fp8: per-tensor or per-channel scales, 8 bits.
- Raw tensor-core element types (`fp4`, `fp6`) without scales: 4 and 6 bits.

GEMM precision (`gemm_compute_dtype`): a GEMM's two operands meet in one tensor-core input type,
the wider of the two (the narrower operand is dequantised inside the kernel: Marlin / Machete
W4A16, TensorRT-LLM W4A8 AWQ, the W4A8 MXFP4 x MXFP8 MoE GEMMs of Blackwell); int4 is weight-only
and always widened. A block-scaled operand that is not widened (MXFP8, MXFP6, MXFP4, NVFP4) needs
block-scaled tensor cores: PTX ISA 8.7 `mma ... .block_scale` (kind::mxf8f6f4, kind::mxf4nvf4,
sm_120a) and `tcgen05.mma ... block_scale` (sm_100a), CDNA4's scaled MFMA (V_MFMA_SCALE_F32_*_F8F6F4,
E8M0 scales). Those generations are exactly the ones that added fp4 / fp6 tensor cores, so a part
scales blocks in hardware iff its catalog entry has an fp4 or fp6 peak; Hopper, Ada and CDNA3 have
fp8 tensor cores but no block scaling.

Where the part lacks that precision, what runs depends on where the weights come from (`Weights`),
the one difference between serving and training:

- `Weights.STORED` (serving; kernel analysis): the weights are a quantised checkpoint (or a kernel's
  input) in that format; a kernel can only widen them, so the GEMM runs on 16-bit activations with
  the weights dequantised (W4A16 / W8A16). vLLM's kernel registry
  (vllm/model_executor/kernels/linear/__init__.py): MXFP8 tries the FlashInfer CUTLASS / CuTe-DSL
  kernels (sm100) and then `MarlinMxfp8LinearKernel` ("MXFP8 W8A16 GEMM via Marlin (SM80+)"); NVFP4
  the W4A4 CUTLASS / FlashInfer kernels and then, "weight-only: a fallback on a W4A4-capable
  checkpoint", `MarlinNvFp4LinearKernel`; MXFP4 FlashInfer and then Marlin; MXFP6 Humming or
  emulation; ROCm MXFP8 the native CDNA4 kernel, "BF16 emulation (hipBLASLt) elsewhere"; FP8 on
  Ampere the Marlin W8A16 kernel (vLLM FP8 docs: "Ampere GPUs are supported for W8A16"). TensorRT-LLM
  (docs/source/features/quantization.md, Hardware Support Matrix): NVFP4 and MXFP4 on Blackwell
  only; W4A8 AWQ on Hopper and Ada; gpt-oss MXFP4 on Hopper as W4A16 (Triton MoE backend).
- `Weights.CAST` (training): both operands are cast from 16-bit master weights per GEMM by a
  recipe, so a recipe the part lacks is replaced by the nearest narrower one it has, along
  RECIPE_FALLBACK. TransformerEngine (transformer_engine/pytorch/quantization.py): NVFP4BlockScaling
  and MXFP8BlockScaling need compute capability 10.0; Float8BlockScaling (sm90, CUDA 12.9),
  Float8CurrentScaling and DelayedScaling (sm89+) run at the fp8 rate; its recipes have no FP6, so
  fp4 falls back to fp8. MXFP8 on Hopper therefore runs at fp8 (blockwise or per-tensor scaling on
  the same fp8 tensor cores), NVFP4 on Hopper at fp8, either on Ampere at bf16.

So NVFP4 / MXFP4 / MXFP8 GEMMs on H100 run at bf16 when served from a checkpoint and at fp8 when
trained with a recipe; on B200 both give fp4 (fp8 for MXFP8).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Collection

from gpuplan.errors import InputError


@dataclass(frozen=True)
class NumberFormat:
    name: str
    element_bits: float
    #: catalog peak key its GEMMs run at where the part has it; None for a weight-only format
    #: (int4), which is always dequantised to the other operand's format
    tensor_core: str | None
    block_size: int = 0  # elements per shared scale (0: none, or per-tensor / per-channel)
    scale_bits: float = 0.0

    @property
    def bits_per_element(self) -> float:
        return self.element_bits + (self.scale_bits / self.block_size if self.block_size else 0.0)

    @property
    def bytes_per_element(self) -> float:
        return self.bits_per_element / 8.0

    @property
    def block_scaled(self) -> bool:
        """Whether its tensor-core GEMMs need block scales applied by the tensor cores (MX, NVFP4)."""
        return self.block_size > 0 and self.tensor_core is not None


FORMATS: dict[str, NumberFormat] = {f.name: f for f in (
    NumberFormat("fp64", 64, "fp64"),
    NumberFormat("fp32", 32, "fp32"),
    NumberFormat("tf32", 32, "tf32"),  # stored as fp32
    NumberFormat("bf16", 16, "bf16"),
    NumberFormat("fp16", 16, "fp16"),
    NumberFormat("fp8", 8, "fp8"),
    NumberFormat("int8", 8, "int8"),
    NumberFormat("fp6", 6, "fp6"),
    NumberFormat("fp4", 4, "fp4"),
    NumberFormat("mxfp8", 8, "fp8", 32, 8),
    NumberFormat("mxfp6", 6, "fp6", 32, 8),
    NumberFormat("mxfp4", 4, "fp4", 32, 8),
    NumberFormat("nvfp4", 4, "fp4", 16, 8),
    NumberFormat("int4", 4, None, 128, 16),  # weight-only: dequantised to the activation format
)}


class StoredFormat(str, Enum):
    """Formats a served model's weights, KV cache or activations are stored in: every precision
    training accepts (specs.plan.Precision) and the weight-only and block-scaled checkpoint formats."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    MXFP8 = "mxfp8"
    INT8 = "int8"
    MXFP6 = "mxfp6"
    INT4 = "int4"
    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"


class Weights(str, Enum):
    """Where a GEMM's weight operand comes from (module docstring): the one difference between the
    serving and the training fallback of a format the part lacks."""

    STORED = "stored"  # a quantised checkpoint (serving) or a kernel's input: only widened in-kernel
    CAST = "cast"  # cast per GEMM from 16-bit master weights by a recipe (training)


#: The recipe a training run falls back to on a part without the precision (module docstring:
#: TransformerEngine recipes; no FP6 recipe, so fp4 and fp6 fall back to fp8), then the 16-bit rates.
RECIPE_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp8", "bf16", "fp16"),
    "fp6": ("fp8", "bf16", "fp16"),
    "fp8": ("bf16", "fp16"),
    "int8": ("bf16", "fp16"),
    "bf16": ("fp16",),
    "fp16": ("bf16",),
    "tf32": ("fp32",),
    "fp64": ("fp32",),
}
#: What a stored (checkpoint) operand the part cannot multiply runs at: dequantised to the 16-bit
#: activations (W4A16 / W8A16 kernels), fp16 on parts without bf16 (Volta, Turing).
UNQUANTISED = ("bf16", "fp16")


def number_format(name: str) -> NumberFormat:
    """The NumberFormat of `name` (KeyError if unknown; callers at the boundary turn it into InputError)."""
    return FORMATS[str(getattr(name, "value", name))]


def bytes_per_element(name: "str | StoredFormat") -> float:
    """Storage bytes per element including block scales (module docstring), e.g. mxfp4 4.25 / 8 =
    0.53125 B."""
    return number_format(name).bytes_per_element


def parse_stored_format(value: "str | StoredFormat", field: str = "dtype") -> StoredFormat:
    """A StoredFormat from its name; InputError naming `field` and the allowed values otherwise."""
    if isinstance(value, StoredFormat):
        return value
    try:
        return StoredFormat(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(d.value for d in StoredFormat)
        raise InputError(f"{field}: unknown format '{value}'; allowed: {allowed}", field=field, allowed=allowed) from None


def block_scaled_mma(available: Collection[str]) -> bool:
    """Whether a part's tensor cores apply block scales (module docstring): it has an fp4 or fp6 peak."""
    return "fp4" in available or "fp6" in available


def _tensor_core(name: str) -> str | None:
    """The tensor-core input type of a format; a catalog peak key outside FORMATS (fp64_tensor) is its own."""
    key = str(getattr(name, "value", name))
    return FORMATS[key].tensor_core if key in FORMATS else key


def _bits(tensor_core: str) -> float:
    return FORMATS[tensor_core].element_bits if tensor_core in FORMATS else 64.0


def _first(candidates, available: Collection[str], default: str) -> str:
    return next((c for c in candidates if c in available), default)


def gemm_compute_dtype(weight_dtype: str, activation_dtype: str, available: Collection[str], *,
                       weights: Weights) -> str:
    """THE tensor-core precision (a catalog peak key) a GEMM of `weight_dtype` weights and
    `activation_dtype` activations runs at on a part whose peaks are `available` (module docstring):

    1. requested = the wider of the two operands' tensor-core types (int4 weights: the activation's);
       two types of one width that neither converts to (fp8 x int8, bf16 x fp16): the activation's
       when it is 16-bit or wider, else 16-bit;
    2. native when the part has `requested` and, where an operand in a block-scaled format stays at
       `requested`, block-scaled tensor cores (block_scaled_mma);
    3. otherwise Weights.STORED: fp6 / fp4 operands at the fp8 rate on a part with block-scaled tensor
       cores but no peak of their own (PTX kind::mxf8f6f4 takes E2M1 / E2M3 / E3M2 inputs beside
       E4M3 / E5M2), else the weights dequantised to 16-bit activations (UNQUANTISED);
       Weights.CAST: the first of RECIPE_FALLBACK[requested] the part has (block scales without
       hardware support become per-tensor / blockwise scaling at the same precision).

    The requested precision itself when the part has none of the fallbacks. Raises KeyError for a
    name that is neither a format nor a catalog key (callers validate at the boundary)."""
    weights = Weights(weights)
    w_key, a_key = (str(getattr(x, "value", x)) for x in (weight_dtype, activation_dtype))
    w_tc, a_tc = _tensor_core(w_key), _tensor_core(a_key)
    if w_tc is None:  # weight-only format: dequantised to the activation's type
        w_tc = a_tc if a_tc is not None else "bf16"
    if a_tc is None:
        a_tc = w_tc
    if w_tc == a_tc:
        requested = w_tc
    elif _bits(w_tc) != _bits(a_tc):
        requested = w_tc if _bits(w_tc) > _bits(a_tc) else a_tc
    else:
        requested = a_tc if _bits(a_tc) >= 16 else "bf16"
    block = any(key in FORMATS and FORMATS[key].block_scaled and FORMATS[key].tensor_core == requested
                for key in (w_key, a_key))
    if requested in available and (not block or block_scaled_mma(available) or weights is Weights.CAST):
        return requested
    if weights is Weights.STORED and _bits(requested) <= 16:
        f8f6f4 = ("fp8",) if requested in ("fp4", "fp6") and block_scaled_mma(available) else ()
        return _first(f8f6f4 + UNQUANTISED, available, requested)
    return _first(RECIPE_FALLBACK.get(requested, ()), available, requested)


__all__ = ["FORMATS", "NumberFormat", "RECIPE_FALLBACK", "StoredFormat", "UNQUANTISED", "Weights",
           "block_scaled_mma", "bytes_per_element", "gemm_compute_dtype", "number_format", "parse_stored_format"]
