"""THE dtype table: storage bits per element (block scales included) and the tensor-core precision
each number format's GEMMs run at, with the fallback on parts that lack it.

    bits_per_element = element_bits + scale_bits / block_size

- OCP Microscaling (MX) v1.0, table 1: MXFP8 (E4M3/E5M2), MXFP6, MXFP4 (E2M1) with one E8M0
  (8-bit) scale per 32 elements: 8.25, 6.25, 4.25 bits.
- NVFP4 (NVIDIA "Introducing NVFP4", 2025): E2M1 with one FP8 E4M3 scale per 16 elements (the
  per-tensor fp32 scale is negligible): 4.5 bits.
- int4 weight-only group quantisation as AWQ/GPTQ ship it: one fp16 scale per 128 (AWQ, Lin et al.
  2023 sec. 4): 4.125 bits. int8 and OFP8 fp8: per-tensor or per-channel scales, 8 bits.
- Raw tensor-core element types (`fp4`, `fp6`) without scales: 4 and 6 bits.

Tensor-core precision: a format's GEMMs run at `tensor_core` (the catalog's peak key); a part without
it falls back along MATMUL_FALLBACK (fp4 -> fp6 -> fp8 -> bf16 -> fp16: narrower formats are then
dequantised in the kernel, so the bytes saved are real but the math runs at the wider rate, e.g.
MXFP4 weights on Hopper run at fp8 or bf16).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NumberFormat:
    name: str
    element_bits: float
    tensor_core: str  # catalog peak key its GEMMs run at where the part has it
    block_size: int = 0  # elements per shared scale (0: none, or per-tensor / per-channel)
    scale_bits: float = 0.0

    @property
    def bits_per_element(self) -> float:
        return self.element_bits + (self.scale_bits / self.block_size if self.block_size else 0.0)

    @property
    def bytes_per_element(self) -> float:
        return self.bits_per_element / 8.0


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
    NumberFormat("int4", 4, "bf16", 128, 16),  # weight-only: dequantised to the activation format
)}

#: Tensor-core precision -> the precisions tried in order on a part (first one it has a peak for).
MATMUL_FALLBACK: dict[str, tuple[str, ...]] = {
    "fp4": ("fp4", "fp6", "fp8", "bf16", "fp16"),
    "fp6": ("fp6", "fp8", "bf16", "fp16"),
    "fp8": ("fp8", "bf16", "fp16"),
    "int8": ("int8", "fp8", "bf16", "fp16"),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
    "tf32": ("tf32", "fp32"),
    "fp32": ("fp32",),
    "fp64": ("fp64", "fp32"),
}


def number_format(name: str) -> NumberFormat:
    """The NumberFormat of `name` (KeyError if unknown; callers at the boundary turn it into InputError)."""
    return FORMATS[name]


def bytes_per_element(name: str) -> float:
    """Storage bytes per element including block scales (module docstring)."""
    return FORMATS[name].bytes_per_element


def tensor_core_precision(name: str, available) -> str:
    """The tensor-core precision a GEMM in format `name` runs at on a part whose peaks are `available`
    (a set of catalog keys): the first of MATMUL_FALLBACK[tensor_core] it has; the format's own
    precision when it has none of them."""
    tc = FORMATS[name].tensor_core if name in FORMATS else name
    for candidate in MATMUL_FALLBACK.get(tc, (tc,)):
        if candidate in available:
            return candidate
    return tc


__all__ = ["FORMATS", "MATMUL_FALLBACK", "NumberFormat", "bytes_per_element", "number_format", "tensor_core_precision"]
