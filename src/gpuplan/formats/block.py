"""Block-scaled formats: MXFP8 (E4M3/E5M2), MXFP6 (E3M2/E2M3), MXFP4, MXINT8 and NVFP4.

MX (OCP MX v1.0; formats.md section 2): blocks of k = 32 elements share one E8M0 scale
X = 2^(code - 127); element i is P_i = quantize_elem(V_i / X) (round to nearest even,
normal numbers clamped to the element's max), value X * P_i. Special values (section 2.4):
a NaN or Inf in a block gives scale 0xFF and the whole block dequantises to NaN; an all-zero
block gets 0x00; shared exponents clamp to [-127, 127]; -0 keeps its sign in FP elements.
The division V_i / X is exact: it subtracts X's exponent before the single rounding
(`element.encode_minifloat(exp_offset=...)`), so FP32 subnormal inputs are not flushed.

NVFP4 (NVIDIA; Transformer Engine nvfp4.rst, torchao `nvfp4_quantize`; formats.md section
3.1): blocks of 16 E2M1 elements, block scale in E4M3 and (two-level, the default) an FP32
per-tensor scale s_global = amax / (448 * 6). In float32, in this order (torchao):
  s_block = E4M3_RNE(clamp((block_amax / 6) / s_global, 2^-6, 448))
  P_i = E2M1_RNE(clamp(V_i * (1 / s_global) / s_block, -6, 6)),  value = P_i * (s_global * s_block).
The operation order matters: it decides ties (formats.md 7.4: -3.5 -> -3 two-level, -4 single).
An all-zero tensor uses s_global = 1 (torchao would divide by 0 and give NaN, section 7.4).

Blocks run along any `axis` (1-D, k consecutive elements) or tile the last two axes with
`block_shape=(rows, cols)` (DeepSeek-V3 128x128 weights, NVFP4 16x16 weights). Ragged edges
are zero-padded before the scale is computed (DeepSeek README_WEIGHTS.md); codes keep the
padded shape, `dequantize()` crops back to the input shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpuplan.errors import InputError
from gpuplan.formats.block_format import BlockFormat, ScaleKind, block_format
from gpuplan.formats.element import ELEMENTS, IntElement, as_float32, encode_int8, encode_minifloat
from gpuplan.formats.scale import E8M0_BIAS, E8M0_NAN, ScaleRule, e8m0_from_amax
from gpuplan.formats.scale import scale_rule as parse_scale_rule

E4M3 = ELEMENTS["e4m3"]
E2M1 = ELEMENTS["e2m1"]
NVFP4_SCALE_MIN = np.float32(2.0**-6)  # smallest normal E4M3, torchao's clamp floor
NVFP4_SCALE_MAX = np.float32(448.0)


# ---------------------------------------------------------------------------------------------
# layout: any axis / 2-D tiles <-> a (n_blocks, block_elems) matrix


@dataclass(frozen=True)
class BlockLayout:
    """How an array of `shape` is cut into blocks: tiles of `tile` over `axes` (1 or 2 axes)."""

    shape: tuple[int, ...]
    axes: tuple[int, ...]
    tile: tuple[int, ...]

    @property
    def padded_shape(self) -> tuple[int, ...]:
        out = list(self.shape)
        for ax, t in zip(self.axes, self.tile):
            out[ax] = -(-out[ax] // t) * t
        return tuple(out)

    @property
    def scales_shape(self) -> tuple[int, ...]:
        out = list(self.shape)
        for ax, t in zip(self.axes, self.tile):
            out[ax] = -(-out[ax] // t)
        return tuple(out)

    def _moved(self, ndim: int) -> tuple[list[int], list[int]]:
        rest = [a for a in range(ndim) if a not in self.axes]
        return rest, list(self.axes)

    def to_blocks(self, x: np.ndarray) -> np.ndarray:
        """(n_blocks, block_elems) view/copy of `x` (shape == self.shape), zero-padded."""
        pad = [(0, p - s) for s, p in zip(self.shape, self.padded_shape)]
        if any(p for _, p in pad):
            x = np.pad(x, pad)
        rest, axes = self._moved(x.ndim)
        x = np.transpose(x, rest + axes)  # (..., A0[, A1])
        lead = x.shape[: len(rest)]
        split = []
        for n, t in zip(x.shape[len(rest):], self.tile):
            split += [n // t, t]
        x = x.reshape(*lead, *split)
        nb_axes = [len(rest) + 2 * i for i in range(len(axes))]
        in_axes = [len(rest) + 2 * i + 1 for i in range(len(axes))]
        x = np.transpose(x, list(range(len(rest))) + nb_axes + in_axes)
        return x.reshape(-1, int(np.prod(self.tile)))

    def from_blocks(self, blocks: np.ndarray) -> np.ndarray:
        """Inverse of to_blocks: array of padded_shape."""
        ndim = len(self.shape)
        rest, axes = self._moved(ndim)
        padded = self.padded_shape
        lead = [padded[a] for a in rest]
        nbs = [padded[a] // t for a, t in zip(axes, self.tile)]
        x = blocks.reshape(*lead, *nbs, *self.tile)
        order = list(range(len(rest)))
        for i in range(len(axes)):
            order += [len(rest) + i, len(rest) + len(axes) + i]
        x = np.transpose(x, order).reshape(*lead, *[padded[a] for a in axes])
        inverse = np.argsort(rest + axes)
        return np.transpose(x, inverse)

    def scales_from_blocks(self, per_block: np.ndarray) -> np.ndarray:
        rest, axes = self._moved(len(self.shape))
        sshape = self.scales_shape
        x = per_block.reshape(*[sshape[a] for a in rest], *[sshape[a] for a in axes])
        return np.transpose(x, np.argsort(rest + axes))

    def scales_to_blocks(self, scales: np.ndarray) -> np.ndarray:
        rest, axes = self._moved(len(self.shape))
        return np.transpose(scales, rest + axes).reshape(-1)

    def crop(self, x: np.ndarray) -> np.ndarray:
        return x[tuple(slice(0, s) for s in self.shape)]


def make_layout(shape: tuple[int, ...], block_size: int, axis: int, block_shape: tuple[int, int] | None) -> BlockLayout:
    ndim = len(shape)
    if block_shape is not None:
        if ndim < 2 or len(block_shape) != 2 or min(block_shape) < 1:
            raise InputError("block_shape needs a 2-D (rows, cols) tile and an input of >= 2 dimensions", field="block_shape")
        return BlockLayout(tuple(shape), (ndim - 2, ndim - 1), tuple(int(b) for b in block_shape))
    if ndim == 0:
        shape, ndim = (1,), 1
    if not -ndim <= axis < ndim:
        raise InputError(f"axis {axis} is out of range for an input of {ndim} dimensions", field="axis")
    return BlockLayout(tuple(shape), (axis % ndim,), (block_size,))


# ---------------------------------------------------------------------------------------------
# result


@dataclass(frozen=True, eq=False)
class QuantizedTensor:
    """A block-quantised tensor.

    codes:  uint8 element codes, one per element, in the input's layout with blocked axes
            zero-padded to a multiple of the block (pack with `gpuplan.formats.pack`).
    scales: uint8 block scales, the input's shape with each blocked axis replaced by its
            number of blocks: E8M0 codes for MX, E4M3 codes for NVFP4.
    tensor_scale: NVFP4's FP32 per-tensor scale (1.0 for MX, and for single-level NVFP4).
    """

    fmt: BlockFormat
    codes: np.ndarray
    scales: np.ndarray
    shape: tuple[int, ...]
    layout: BlockLayout
    scale_rule: ScaleRule
    tensor_scale: float = 1.0
    input_ndim: int = field(default=-1)

    @property
    def format_name(self) -> str:
        return self.fmt.name

    def block_scales(self) -> np.ndarray:
        """float64 scale of each block (per `scales` position); NaN for a NaN block."""
        if self.fmt.scale_kind is ScaleKind.E8M0:
            s = np.ldexp(1.0, self.scales.astype(np.int64) - E8M0_BIAS)
            return np.where(self.scales == E8M0_NAN, np.nan, s)
        return E4M3.values[self.scales].astype(np.float64) * self.tensor_scale

    def dequantize(self, out: np.ndarray | None = None) -> np.ndarray:
        """float32 array of the input's shape: element value x block scale (NaN blocks -> NaN).

        MX: P_i * 2^(E8M0 - 127) computed exactly, rounded once to float32 (may overflow to
        Inf, formats.md 7.3 #39). NVFP4: P_i * float32(s_global * s_block).
        out: a writeable float32 array of the input's shape to write into (and return), as numpy's
        `out=`: the compiled kernels write straight into it when it is C-contiguous and the last axis
        holds whole blocks, which saves the fresh array's page faults (most of a large dequantize).
        """
        lay = self.layout
        target = direct_target(out, self.shape, lay.padded_shape)
        if (self.fmt.scale_kind is ScaleKind.E8M0 and len(lay.axes) == 1 and lay.axes[0] == len(lay.shape) - 1
                and lay.tile[0] == self.fmt.block_size and self.codes.size >= FAST_PATH_MIN_ELEMENTS):
            from gpuplan.formats import kernels

            flat = kernels.dequantize_mx_rows(self.codes, self.scales, self.fmt, out=target)
            return deliver(np.ascontiguousarray(lay.crop(flat.reshape(lay.padded_shape)).reshape(self.shape)), out)
        if (self.fmt.scale_kind is ScaleKind.E4M3 and len(lay.axes) == 1 and lay.axes[0] == len(lay.shape) - 1
                and self.codes.size >= FAST_PATH_MIN_ELEMENTS):
            from gpuplan.formats import nvfp4_kernels

            flat = nvfp4_kernels.dequantize_nvfp4_rows(self.codes, self.scales, lay.tile[0], self.tensor_scale, out=target)
            return deliver(np.ascontiguousarray(lay.crop(flat.reshape(lay.padded_shape)).reshape(self.shape)), out)
        elem_vals = self.fmt.element.values[self.codes.astype(np.intp)]
        blocks = _padded_to_blocks(lay, elem_vals)
        sc = lay.scales_to_blocks(self.scales)
        if self.fmt.scale_kind is ScaleKind.E8M0:
            with np.errstate(over="ignore"):
                res = np.ldexp(blocks.astype(np.float64), (sc.astype(np.int64) - E8M0_BIAS)[:, None]).astype(np.float32)
            res[sc == E8M0_NAN] = np.nan
        else:
            total = (np.float32(self.tensor_scale) * E4M3.values[sc]).astype(np.float32)
            res = (blocks * total[:, None]).astype(np.float32)
            res[np.isnan(total)] = np.nan
        full = lay.crop(lay.from_blocks(res))
        return deliver(np.ascontiguousarray(full.reshape(self.shape)), out)

    @property
    def num_elements(self) -> int:
        return int(np.prod(self.shape))

    @property
    def storage_bytes(self) -> int:
        """Bytes when packed: ceil(padded elements x element bits / 8) + one byte per scale (+4 for NVFP4's FP32)."""
        elems = int(np.prod(self.codes.shape))
        extra = 4 if self.fmt.scale_kind is ScaleKind.E4M3 else 0
        return -(-elems * self.fmt.element_bits // 8) + int(self.scales.size) + extra


def direct_target(out: np.ndarray | None, shape: tuple[int, ...], padded_shape: tuple[int, ...]) -> np.ndarray | None:
    """The flat float32 memory of `out` (dequantize's `out=`) when a kernel can write the padded rows
    straight into it (C-contiguous, no padding), else None; a bad `out` raises InputError."""
    if out is None:
        return None
    if (not isinstance(out, np.ndarray) or out.dtype != np.float32 or tuple(out.shape) != tuple(shape)
            or not out.flags.writeable):
        got = f"{out.dtype} array of shape {tuple(out.shape)}" if isinstance(out, np.ndarray) else type(out).__name__
        raise InputError(f"out must be a writeable float32 array of shape {tuple(shape)}, got {got}", field="out")
    return out.reshape(-1) if out.flags.c_contiguous and tuple(padded_shape) == tuple(shape) else None


def deliver(result: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """`result`, or `out` holding it (no copy when the kernel already wrote into `out`)."""
    if out is None:
        return result
    if not np.may_share_memory(result, out):  # the kernel wrote into out: result is a view of it
        np.copyto(out, result)
    return out


def _padded_to_blocks(lay: BlockLayout, padded: np.ndarray) -> np.ndarray:
    unpadded_layout = BlockLayout(lay.padded_shape, lay.axes, lay.tile)
    return unpadded_layout.to_blocks(padded)


# ---------------------------------------------------------------------------------------------
# quantisation (vectorised numpy reference path)


def _encode_elements(blocks: np.ndarray, fmt: BlockFormat, shared_exp: np.ndarray) -> np.ndarray:
    if isinstance(fmt.element, IntElement):
        return encode_int8(blocks, exp_offset=shared_exp[:, None])
    return encode_minifloat(blocks, fmt.element, saturate=True, exp_offset=shared_exp[:, None])


def quantize_mx_blocks(blocks: np.ndarray, fmt: BlockFormat, rule: ScaleRule) -> tuple[np.ndarray, np.ndarray]:
    """(codes, E8M0 scales) of float32 `blocks` (n_blocks, k): OCP MX section 6.3 with `rule`."""
    with np.errstate(invalid="ignore"):
        amax = np.max(np.abs(blocks), axis=1) if blocks.shape[1] else np.zeros(blocks.shape[0], np.float32)
    elem = fmt.element
    scales = e8m0_from_amax(amax, emax=elem.emax, max_value=elem.max_value, mbits=elem.mbits, rule=rule)
    shared_exp = scales.astype(np.int64) - E8M0_BIAS
    codes = _encode_elements(blocks, fmt, np.where(scales == E8M0_NAN, 0, shared_exp))
    nan_blocks = scales == E8M0_NAN
    if nan_blocks.any():
        nan_code = getattr(elem, "nan_code", None)
        codes[nan_blocks] = nan_code if nan_code is not None else 0
    return codes, scales


def nvfp4_tensor_scale(x32: np.ndarray) -> np.float32:
    """s_global = amax / (448 * 6) in float32 (TE nvfp4.rst; torchao per_tensor_amax_to_scale).
    1.0 for an all-zero tensor (guards torchao's 0 -> NaN), NaN if the tensor holds NaN/Inf."""
    if x32.size >= FAST_PATH_MIN_ELEMENTS:  # one read, no |x| copy (the same value: max is exact)
        from gpuplan.formats.nvfp4_kernels import tensor_amax

        amax = tensor_amax(x32)
    else:
        amax = np.float32(np.max(np.abs(x32))) if x32.size else np.float32(0)
    if amax == 0:
        return np.float32(1.0)
    if not np.isfinite(amax):
        return np.float32(np.nan)
    return np.float32(amax / np.float32(448.0 * 6.0))


def quantize_nvfp4_blocks(blocks: np.ndarray, tensor_scale: np.float32 | None) -> tuple[np.ndarray, np.ndarray]:
    """(E2M1 codes, E4M3 scale codes) of float32 `blocks` (n_blocks, 16), torchao operation order."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        amax = np.max(np.abs(blocks), axis=1).astype(np.float32)
        block_scale = (amax / np.float32(6.0)).astype(np.float32)
        if tensor_scale is not None:
            block_scale = (block_scale / np.float32(tensor_scale)).astype(np.float32)
        nonfinite = ~np.isfinite(block_scale)
        clamped = np.clip(block_scale, NVFP4_SCALE_MIN, NVFP4_SCALE_MAX).astype(np.float32)
        scale_codes = encode_minifloat(clamped, E4M3, saturate=True)
        scale_codes[nonfinite] = E4M3.nan_code
        scale_fp32 = E4M3.values[scale_codes]
        if tensor_scale is None:
            scaled = (blocks / scale_fp32[:, None]).astype(np.float32)
        else:  # torchao order: x * (1 / s_global) / s_block, each step rounded to float32
            inv_global = np.float32(np.float32(1.0) / np.float32(tensor_scale))
            scaled = ((blocks * inv_global).astype(np.float32) / scale_fp32[:, None]).astype(np.float32)
        scaled = np.clip(scaled, np.float32(-6.0), np.float32(6.0))
    codes = encode_minifloat(scaled, E2M1, saturate=True)
    codes[nonfinite] = 0
    return codes, scale_codes


def quantize(
    x,
    fmt: str,
    axis: int = -1,
    scale_rule: ScaleRule | str = ScaleRule.FLOOR,
    *,
    block_shape: tuple[int, int] | None = None,
    block_size: int | None = None,
    two_level: bool = True,
) -> QuantizedTensor:
    """Block-quantise `x` (cast to float32) into `fmt`.

    fmt: "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8", "nvfp4".
    axis: the axis blocks run along (default the last); block_shape=(r, c) tiles the last two
      axes instead (e.g. (128, 128) DeepSeek-style, (16, 16) NVFP4 weights).
    scale_rule: MX shared-scale rule: "floor" (OCP MX v1.0, default), "rceil", "ceil", "even".
      Ignored by NVFP4, whose E4M3 block scale is rounded to nearest even.
    block_size: override k (default 32 for MX, 16 for NVFP4), e.g. 128 for 1x128 activations.
    two_level: NVFP4 only: use the FP32 per-tensor scale (default) or the E4M3 block scale alone.
    """
    bf = block_format(fmt)
    rule = parse_scale_rule(scale_rule)
    x32 = as_float32(x)
    shape = tuple(x32.shape)
    k = int(block_size) if block_size is not None else bf.block_size
    if k < 1:
        raise InputError("block_size must be a positive integer", field="block_size")
    work = x32.reshape(1) if x32.ndim == 0 else x32
    lay = make_layout(work.shape, k, axis, block_shape)
    fast = _try_fast_path(work, bf, rule, lay)
    tensor_scale = 1.0
    if bf.scale_kind is ScaleKind.E4M3 and two_level:
        tensor_scale = float(nvfp4_tensor_scale(work))
    if fast is None and bf.scale_kind is ScaleKind.E4M3:
        fast = _try_nvfp4_fast_path(work, lay, np.float32(tensor_scale) if two_level else None)
    if fast is not None:
        codes_blocks, scales_flat = fast
    else:
        blocks = lay.to_blocks(work)
        if bf.scale_kind is ScaleKind.E8M0:
            codes_blocks, scales_flat = quantize_mx_blocks(blocks, bf, rule)
        else:
            ts = np.float32(tensor_scale) if two_level else None
            codes_blocks, scales_flat = quantize_nvfp4_blocks(blocks, ts)
    padded_layout = BlockLayout(lay.padded_shape, lay.axes, lay.tile)
    codes = padded_layout.from_blocks(codes_blocks)
    scales = lay.scales_from_blocks(scales_flat)
    return QuantizedTensor(
        fmt=bf, codes=np.ascontiguousarray(codes), scales=np.ascontiguousarray(scales), shape=shape,
        layout=lay, scale_rule=rule, tensor_scale=tensor_scale, input_ndim=x32.ndim,
    )


FAST_PATH_MIN_ELEMENTS = 1 << 16


def _last_axis_blocks(x32: np.ndarray, lay: BlockLayout) -> bool:
    """Large enough for a compiled kernel, blocked along the last axis in whole blocks."""
    return (x32.size >= FAST_PATH_MIN_ELEMENTS and len(lay.axes) == 1 and lay.axes[0] == x32.ndim - 1
            and x32.shape[-1] % lay.tile[0] == 0)


def _try_nvfp4_fast_path(x32: np.ndarray, lay: BlockLayout, tensor_scale: np.float32 | None):
    """Compiled single-pass NVFP4 kernel (formats.nvfp4_kernels) for large inputs blocked along the
    last axis."""
    if not _last_axis_blocks(x32, lay):
        return None
    from gpuplan.formats import nvfp4_kernels

    return nvfp4_kernels.quantize_nvfp4_rows(x32.reshape(-1, lay.tile[0]), tensor_scale)


def _try_fast_path(x32: np.ndarray, bf: BlockFormat, rule: ScaleRule, lay: BlockLayout):
    """Compiled single-pass kernel for large MX inputs blocked along the last axis."""
    if (
        bf.scale_kind is not ScaleKind.E8M0
        or x32.size < FAST_PATH_MIN_ELEMENTS
        or len(lay.axes) != 1
        or lay.axes[0] != x32.ndim - 1
        or x32.shape[-1] % lay.tile[0] != 0
    ):
        return None
    from gpuplan.formats import kernels

    rows = x32.reshape(-1, lay.tile[0])
    return kernels.quantize_mx_rows(rows, bf, rule)
