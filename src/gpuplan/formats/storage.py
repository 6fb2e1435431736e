"""Packed storage of MX tensors as gpt-oss checkpoints hold them, and its safetensors I/O.

gpt-oss (openai/gpt-oss `gpt_oss/torch/weights.py`; HF `*_blocks` / `*_scales` tensors):
`blocks` uint8 of shape (..., n_blocks, 16) = 32 FP4 codes per block, low nibble first;
`scales` uint8 of shape (..., n_blocks), E8M0 (exponent = scale - 127, applied with ldexp).
The same layout generalises to MXFP6 (24 bytes per block) and MXFP8 / MXINT8 (32 bytes).
Blocks run along the last axis. gpuplan adds one metadata entry per tensor recording the
format and the unpadded shape; without it, a file is read as MXFP4 with n_blocks * 32 columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuplan.errors import InputError
from gpuplan.formats.block import BlockLayout, QuantizedTensor, deliver, direct_target, quantize
from gpuplan.formats.block_format import ScaleKind, block_format
from gpuplan.formats.element import as_float32
from gpuplan.formats.packing import pack, unpack
from gpuplan.formats.scale import ScaleRule
from gpuplan.formats.scale import scale_rule as parse_scale_rule
from gpuplan.formats.tensorfile import read_header, read_safetensors, write_safetensors
from gpuplan.validation_rules import load_json_text

META_PREFIX = "gpuplan.formats:"


@dataclass(frozen=True, eq=False)
class PackedTensor:
    """MX tensor in storage form: `blocks` (..., n_blocks, k * bits / 8) uint8, `scales` (..., n_blocks) uint8."""

    format_name: str
    blocks: np.ndarray
    scales: np.ndarray
    shape: tuple[int, ...]
    scale_rule: ScaleRule = ScaleRule.FLOOR

    @property
    def nbytes(self) -> int:
        return int(self.blocks.nbytes + self.scales.nbytes)

    def to_quantized(self) -> QuantizedTensor:
        bf = block_format(self.format_name)
        k = bf.block_size
        codes = unpack(self.blocks, bf.element_bits).reshape(*self.blocks.shape[:-2], -1)
        lay = BlockLayout(tuple(self.shape), (len(self.shape) - 1,), (k,))
        if tuple(codes.shape) != lay.padded_shape:
            raise InputError(f"blocks of shape {self.blocks.shape} do not hold a tensor of shape {self.shape}", field="blocks")
        return QuantizedTensor(fmt=bf, codes=codes, scales=np.asarray(self.scales, np.uint8), shape=tuple(self.shape),
                               layout=lay, scale_rule=self.scale_rule, input_ndim=len(self.shape))

    def dequantize(self, out: np.ndarray | None = None) -> np.ndarray:
        """float32 values of the input's shape (single pass straight from packed MXFP4 bytes); `out` as
        in `QuantizedTensor.dequantize` (written into and returned)."""
        if self.format_name == "mxfp4" and self.blocks.size >= 1 << 14:
            from gpuplan.formats import kernels

            bf = block_format(self.format_name)
            lay = BlockLayout(tuple(self.shape), (len(self.shape) - 1,), (bf.block_size,))
            target = direct_target(out, tuple(self.shape), lay.padded_shape)
            flat = kernels.dequantize_mx_rows(self.blocks, self.scales, bf, packed4=True, out=target)
            return deliver(np.ascontiguousarray(lay.crop(flat.reshape(lay.padded_shape))), out)
        return self.to_quantized().dequantize(out=out)


def pack_quantized(q: QuantizedTensor) -> PackedTensor:
    """Storage form of a QuantizedTensor blocked along its last axis with 1-D blocks."""
    lay = q.layout
    if q.fmt.scale_kind is not ScaleKind.E8M0 or len(lay.axes) != 1 or lay.axes[0] != len(q.shape) - 1:
        raise InputError("packed storage needs an MX format blocked along the last axis", field="fmt")
    k = lay.tile[0]
    blocks = pack(q.codes.reshape(*q.codes.shape[:-1], -1, k), q.fmt.element_bits)
    return PackedTensor(q.fmt.name, blocks, q.scales, tuple(q.shape), q.scale_rule)


def quantize_packed(x, fmt: str = "mxfp4", scale_rule: ScaleRule | str = ScaleRule.FLOOR) -> PackedTensor:
    """Quantise `x` along its last axis straight to packed storage (single pass for MXFP4)."""
    bf = block_format(fmt)
    rule = parse_scale_rule(scale_rule)
    x32 = as_float32(x)
    if x32.ndim == 0:
        x32 = x32.reshape(1)
    k = bf.block_size
    if bf.name == "mxfp4" and x32.shape[-1] % k == 0 and x32.size:
        from gpuplan.formats import kernels

        blocks, scales = kernels.quantize_mx_rows(x32.reshape(-1, k), bf, rule, pack4=True)
        lead = x32.shape[:-1]
        nb = x32.shape[-1] // k
        return PackedTensor(bf.name, blocks.reshape(*lead, nb, k // 2), scales.reshape(*lead, nb), tuple(x32.shape), rule)
    return pack_quantized(quantize(x32, bf.name, axis=-1, scale_rule=rule))


def _names(base: str, header: dict) -> tuple[str, str]:
    for sep in ("_", "."):
        if f"{base}{sep}blocks" in header and f"{base}{sep}scales" in header:
            return f"{base}{sep}blocks", f"{base}{sep}scales"
    raise InputError(f"no '{base}_blocks' / '{base}_scales' tensors in the file", field="tensor")


def write_mx_tensors(path: str | Path, tensors: dict[str, PackedTensor | QuantizedTensor], extra: dict[str, np.ndarray] | None = None) -> None:
    """Write `{base: tensor}` as `{base}_blocks` / `{base}_scales` (+ `extra` plain tensors)."""
    out: dict[str, np.ndarray] = dict(extra or {})
    meta = {}
    for base, t in tensors.items():
        p = pack_quantized(t) if isinstance(t, QuantizedTensor) else t
        out[f"{base}_blocks"] = p.blocks
        out[f"{base}_scales"] = p.scales
        meta[META_PREFIX + base] = json.dumps({"format": p.format_name, "shape": list(p.shape), "scale_rule": p.scale_rule.value})
    write_safetensors(path, out, metadata=meta)


def read_mx_tensor(path: str | Path, base: str, fmt: str | None = None) -> PackedTensor:
    """Read `{base}_blocks` / `{base}_scales` (or `.blocks` / `.scales`) from a safetensors file."""
    header, _ = read_header(path)
    bname, sname = _names(base, header)
    arrays = read_safetensors(path, [bname, sname])
    blocks, scales = arrays[bname], arrays[sname]
    if blocks.dtype != np.uint8 or scales.dtype != np.uint8 or blocks.ndim < 2 or blocks.shape[:-1] != scales.shape:
        raise InputError(f"'{bname}' must be uint8 (..., n_blocks, bytes) and '{sname}' uint8 (..., n_blocks)", field="tensor")
    raw_meta = header.get("__metadata__", {})
    text = raw_meta.get(META_PREFIX + base, "{}") if isinstance(raw_meta, dict) else "{}"
    meta = load_json_text(text if isinstance(text, str) and text else "{}", f"{path}: metadata of '{base}'", "file")
    if not isinstance(meta, dict):
        raise InputError(f"{path}: metadata of '{base}' must be a JSON object", field="file")
    name = fmt or meta.get("format", "mxfp4")
    bf = block_format(name)
    shape = tuple(meta.get("shape") or (*blocks.shape[:-2], blocks.shape[-2] * bf.block_size))
    rule = ScaleRule(meta.get("scale_rule", "floor"))
    return PackedTensor(bf.name, blocks, scales, shape, rule)
