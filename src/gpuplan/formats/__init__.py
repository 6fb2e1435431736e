"""Bit-exact low-precision number formats (the `formats` primitive of DESIGN.md).

Element formats (encode / decode): OFP8 E4M3 and E5M2 (saturating or not), FNUZ FP8, MX FP6
E3M2 / E2M3, FP4 E2M1, MXINT8's INT8, E8M0, BF16, FP16, TF32 (RNE, or ties-away = PTX cvt.rna).
Block formats (quantize -> QuantizedTensor): MXFP8 (E4M3/E5M2), MXFP6 (E3M2/E2M3), MXFP4,
MXINT8 (k = 32, E8M0 scale, scale rule floor / rceil / ceil / even) and NVFP4 (k = 16, E4M3
scale, FP32 per-tensor scale). Packing (FP4 two per byte, low nibble first; FP6 four in three
bytes), gpt-oss-style safetensors I/O, error analysis and MX dot products.

    from gpuplan import formats
    formats.encode([1.0, 465.0], "e4m3")             # -> uint8 [0x38, 0x7E]
    q = formats.quantize(x, "mxfp4")                  # q.codes, q.scales (E8M0), q.dequantize()

Specifications and test vectors: ../shared/reference/formats.md.
"""

from gpuplan.formats.analysis import ErrorReport, compare, error_report
from gpuplan.formats.block import QuantizedTensor, quantize
from gpuplan.formats.block_format import BLOCK_FORMATS, BlockFormat, ScaleKind, block_format
from gpuplan.formats.codec import CODEC_NAMES, decode, encode, round_trip
from gpuplan.formats.dot import MatmulError, matmul_error, mx_matmul
from gpuplan.formats.element import ELEMENTS, Rounding, element_format
from gpuplan.formats.packing import pack, pack_fp4, pack_fp6, unpack, unpack_fp4, unpack_fp6
from gpuplan.formats.scale import ScaleRule, e8m0_from_amax
from gpuplan.formats.storage import PackedTensor, quantize_packed, read_mx_tensor, write_mx_tensors
from gpuplan.formats.tables import FormatInfo, format_table, value_table
from gpuplan.formats.tensorfile import read_safetensors, read_tensor, write_safetensors

__all__ = [
    "encode", "decode", "round_trip", "quantize", "QuantizedTensor", "BlockFormat", "ScaleKind",
    "ScaleRule", "Rounding", "BLOCK_FORMATS", "ELEMENTS", "CODEC_NAMES", "block_format",
    "element_format", "e8m0_from_amax", "pack", "unpack", "pack_fp4", "unpack_fp4", "pack_fp6",
    "unpack_fp6", "PackedTensor", "quantize_packed", "read_mx_tensor", "write_mx_tensors",
    "read_safetensors", "write_safetensors", "read_tensor", "ErrorReport", "error_report", "compare",
    "MatmulError", "mx_matmul", "matmul_error", "FormatInfo", "format_table", "value_table",
]
