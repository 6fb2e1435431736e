"""Bytes of a frozen base weight in its storage dtype, and of dequantising it for a matmul.

bitsandbytes 4-bit (NF4 / FP4; Dettmers et al. 2023, "QLoRA", sec. 3; bitsandbytes
`functional.quantize_4bit` and the CUDA `quantize_4bit` kernel registration, backends/cuda/ops.py),
for a weight of n elements in blocks of B = 64:
- codes: two 4-bit codes per byte, ceil(n / 2) bytes (`out = torch.empty(((n + 1) // 2, 1), uint8)`;
  `quant_storage=bf16` packs the same bytes into bf16 words);
- block scales: one fp32 absmax per block, 4 ceil(n / B) bytes;
- double quantisation (`compress_statistics=True`; QLoRA sec. 3 "Double Quantization"): the absmax
  values, less their mean (`offset`, one fp32), are quantised blockwise to 8 bits in blocks of 256
  (`quantize_blockwise(absmax - offset, blocksize=256)`): 1 byte per 64-block + one fp32 absmax per
  256 such bytes + the 4-byte offset. The 16-entry NF4 code and the 256-entry 8-bit map are shared
  lookup tables (bitsandbytes caches `name2qmap["dynamic"]`), not counted per tensor.
  4096 x 4096: 8,388,608 + 4 x 262,144 = 9,437,184 B plain; 8,388,608 + 262,144 + 4 x 1,024 + 4 =
  8,654,852 B double-quantised (tests derive both).
- torchao's NF4Tensor (torchtune QLoRA) stores the same: 64-element blocks, int8 scalers in blocks
  of 256 with an fp32 factor each (torchao/dtypes/nf4tensor.py).

bitsandbytes int8 (LLM.int8, Dettmers et al. 2022; `Int8Params`: `CB` int8 out x in and `SCB` one fp32
scale per output row): out x in + 4 out bytes.

Dequantisation (`dequantize_4bit` before the GEMM in bitsandbytes' `MatMul4Bit` forward and in its
backward for the input gradient; int8 likewise to fp16/bf16 for the input gradient): a memory-bound
kernel reading the stored bytes and writing the weight in the activation dtype (b bytes per element).
"""

from __future__ import annotations

import math

from gpuplan.specs.finetune import BaseDtype

#: bitsandbytes 4-bit block size (`quantize_4bit(blocksize=64)` default; QLoRA sec. 3: "blocksize of 64").
FOUR_BIT_BLOCK = 64
#: Block of the second-level (8-bit) quantisation of the 4-bit absmax values (`blocksize=256`).
DOUBLE_QUANT_BLOCK = 256
FP32_BYTES = 4
#: Bytes per element of the unquantised storage dtypes.
FLOAT_BYTES = {BaseDtype.BF16: 2, BaseDtype.FP16: 2, BaseDtype.FP32: 4}


def four_bit_bytes(elements: float, double_quant: bool = True) -> float:
    """Stored bytes of a 4-bit (NF4 / FP4) weight of `elements` values (module docstring)."""
    n = int(math.ceil(elements))
    blocks = -(-n // FOUR_BIT_BLOCK)
    codes = -(-n // 2)
    if not double_quant:
        return float(codes + FP32_BYTES * blocks)
    second = -(-blocks // DOUBLE_QUANT_BLOCK)
    return float(codes + blocks + FP32_BYTES * second + FP32_BYTES)


def int8_bytes(in_features: float, out_features: float) -> float:
    """Stored bytes of an LLM.int8 weight: int8 codes + one fp32 scale per output row."""
    return float(in_features * out_features + FP32_BYTES * out_features)


def linear_storage_bytes(in_features: float, out_features: float, dtype: BaseDtype, double_quant: bool = True) -> float:
    """Stored bytes of one frozen linear weight (in x out) in `dtype`."""
    if dtype.four_bit:
        return four_bit_bytes(in_features * out_features, double_quant)
    if dtype is BaseDtype.INT8:
        return int8_bytes(in_features, out_features)
    return float(FLOAT_BYTES[dtype] * in_features * out_features)


def dequantize_bytes(in_features: float, out_features: float, dtype: BaseDtype, act_bytes: float,
                     double_quant: bool = True) -> float:
    """HBM bytes of dequantising one weight for a matmul: read its stored bytes, write in x out
    elements of the activation dtype. 0 for a float base (the GEMM reads it directly)."""
    if not dtype.quantized:
        return 0.0
    return linear_storage_bytes(in_features, out_features, dtype, double_quant) + act_bytes * in_features * out_features


def float_bytes(dtype: BaseDtype, act_bytes: float) -> float:
    """Bytes per element of the base's unquantised tensors (embeddings, norms, biases, a kept head):
    fp32 with an fp32 base, else the activation dtype (frameworks keep them in bf16 / fp16 beside a
    quantised base: transformers' `get_keys_to_not_convert` keeps the output layer, fsdp_qlora skips
    lm_head, torchtune's QLoRA leaves `output` and `tok_embeddings` in bf16)."""
    return 4.0 if dtype is BaseDtype.FP32 else act_bytes


__all__ = ["DOUBLE_QUANT_BLOCK", "FOUR_BIT_BLOCK", "dequantize_bytes", "float_bytes", "four_bit_bytes", "int8_bytes",
           "linear_storage_bytes"]
