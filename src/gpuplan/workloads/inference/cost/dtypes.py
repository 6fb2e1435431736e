"""Number formats of served weights, KV cache and activations: storage bytes per element.

Weight, KV-cache and activation formats are chosen independently (a common deployment is int4 or
mxfp4 weights, fp8 KV cache, bf16 activations). Storage cost includes the block-scale overhead of
block-scaled formats:

    bits_per_element = element_bits + scale_bits / block_size

- mxfp4: E2M1 elements, one E8M0 (8-bit) scale per 32 elements (OCP Microscaling Formats (MX)
  v1.0 spec, table 1): 4 + 8/32 = 4.25 bits.
- nvfp4: E2M1 elements, one FP8 E4M3 scale per 16 elements (NVIDIA Blackwell NVFP4, "Introducing
  NVFP4" NVIDIA technical blog, 2025; the per-tensor fp32 scale is negligible): 4 + 8/16 = 4.5 bits.
- int4: weight-only group quantisation as AWQ/GPTQ ship it, one fp16 scale per group of 128
  (AWQ paper, Lin et al. 2023, sec. 4 "group size 128"): 4 + 16/128 = 4.125 bits.
- int8: per-channel scales (SmoothQuant / W8A8), negligible per element: 8 bits.
- fp8: per-tensor (or per-channel) scale, negligible per element: 8 bits.
"""

from __future__ import annotations

from enum import Enum

from gpuplan.errors import InputError
from gpuplan.specs.dtypes import FORMATS


class ServingDtype(str, Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    MXFP4 = "mxfp4"
    NVFP4 = "nvfp4"


#: storage bits per element including block-scale overhead (module docstring gives each source)
BITS_PER_ELEMENT: dict[ServingDtype, float] = {d: FORMATS[d.value].bits_per_element for d in ServingDtype}


def parse_dtype(value: "str | ServingDtype", field: str = "dtype") -> ServingDtype:
    """A ServingDtype from its name; InputError naming `field` and the allowed values otherwise."""
    if isinstance(value, ServingDtype):
        return value
    try:
        return ServingDtype(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(d.value for d in ServingDtype)
        raise InputError(f"{field}: unknown format '{value}'; allowed: {allowed}", field=field) from None


def bytes_per_element(dtype: "str | ServingDtype") -> float:
    """Storage bytes per element = BITS_PER_ELEMENT / 8 (e.g. mxfp4: 4.25 / 8 = 0.53125 B)."""
    return BITS_PER_ELEMENT[parse_dtype(dtype)] / 8.0


def matmul_precision(weight: ServingDtype, activation: ServingDtype, gpu_dtypes: "set[str] | frozenset[str]") -> str:
    """The tensor-core precision a weight x activation GEMM runs at on a GPU.

    Both operands must share a tensor-core format. Weight-only formats (int4; fp4 formats on parts
    without fp4 tensor cores) are dequantised to the activation format inside the kernel, so the
    GEMM runs at the activation's rate (the weight bytes still shrink). fp8 x fp8 runs at fp8 where
    the part has fp8 (Hopper, Ada, Blackwell, MI300), else at the 16-bit rate. fp4 x fp4 runs at
    fp4 where the part has fp4 (Blackwell).

    gpt-oss MXFP4 experts on Hopper: TensorRT-LLM's Hopper default is W4A16_MXFP4 (TRITON MoE
    backend, perf-overview.md llm_options "Hopper: use TRITON"); NVIDIA aiconfigurator's MoE quant
    table lists it as `w4a16_mxfp4 = QuantMapping(0.5, 1, ...)`, 0.5 B per weight moved and the
    16-bit compute rate (`nvfp4` on Blackwell: 0.5 B and 4x) -- what this rule gives (4.25-bit
    storage, bf16 math). On Blackwell TensorRT-LLM runs the same checkpoint as W4A8_MXFP4_MXFP8
    (fp8-rate math); with the default bf16 activation this function keeps the 16-bit rate there.
    """
    act = activation.value if activation not in (ServingDtype.INT4, ServingDtype.MXFP4, ServingDtype.NVFP4) else "bf16"
    if weight in (ServingDtype.MXFP4, ServingDtype.NVFP4) and activation in (ServingDtype.MXFP4, ServingDtype.NVFP4):
        return "fp4" if "fp4" in gpu_dtypes else "bf16"
    if weight == ServingDtype.FP8 and activation == ServingDtype.FP8:
        return "fp8" if "fp8" in gpu_dtypes else "bf16"
    if weight == ServingDtype.INT8 and activation == ServingDtype.INT8:
        return "int8" if "int8" in gpu_dtypes else "bf16"
    if act in ("fp8", "int8"):  # activations quantised but weights wider: runs at the wider format
        act = "bf16"
    return act if act in gpu_dtypes or act == "fp32" else "bf16"
