"""MX dot products and matmul error (OCP MX v1.0 section 6; formats.md section 2.5).

Dot(A, B) = sum over blocks b of X_b(A) X_b(B) sum_{i in b} P_i(A) P_i(B): each block product of
elements is formed exactly (float64: products of <= 8-bit elements are exact and 32 of them sum
without loss in practice), scaled by the two block scales, rounded to FP32, and the block
results are accumulated in FP32 (the spec leaves the order implementation-defined; numpy's
pairwise sum is used). A is blocked along its rows (axis -1), B along its columns (axis 0),
as PTX tcgen05.mma block scaling does. This never dequantises to FP32 first, which can overflow
(formats.md 7.3 #39; pytorch #193369).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.formats.block import QuantizedTensor, quantize
from gpuplan.formats.scale import ScaleRule


def _elements_and_scales(q: QuantizedTensor, reduce_axis: int) -> tuple[np.ndarray, np.ndarray]:
    vals = q.fmt.element.values[q.codes.astype(np.intp)].astype(np.float64)
    scales = q.block_scales()
    k = q.layout.tile[0]
    if reduce_axis == 1:  # A (M, Kp) -> (M, nb, k); scales (M, nb)
        return vals.reshape(vals.shape[0], -1, k), scales
    return vals.reshape(-1, k, vals.shape[1]), scales  # B (Kp, N) -> (nb, k, N); scales (nb, N)


def mx_matmul(a, b, fmt: str = "mxfp8_e4m3", scale_rule: ScaleRule | str = ScaleRule.FLOOR) -> np.ndarray:
    """float32 (M, N) product of A (M, K) and B (K, N), both quantised to `fmt`, per the MX dot."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise InputError(f"need A (M, K) and B (K, N) with matching K; got {a.shape} and {b.shape}", field="shape")
    qa = quantize(a, fmt, axis=1, scale_rule=scale_rule)
    qb = quantize(b, fmt, axis=0, scale_rule=scale_rule)
    pa, sa = _elements_and_scales(qa, 1)
    pb, sb = _elements_and_scales(qb, 0)
    partial = np.einsum("mbk,bkn->bmn", pa, pb)  # exact block dot products of elements
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = (partial * sa.T[:, :, None] * sb[:, None, :]).astype(np.float32)
        return np.sum(scaled, axis=0, dtype=np.float32)


@dataclass(frozen=True)
class MatmulError:
    format: str
    m: int
    k: int
    n: int
    relative_frobenius_error: float
    snr_db: float
    max_abs_error: float


def matmul_error(a, b, fmt: str, scale_rule: ScaleRule | str = ScaleRule.FLOOR) -> MatmulError:
    """Error of the MX matmul against the float64 product of the unquantised operands."""
    ref = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    got = mx_matmul(a, b, fmt, scale_rule).astype(np.float64)
    err = got - ref
    num = float(np.sum(err**2))
    den = float(np.sum(ref**2))
    rel = float(np.sqrt(num / den)) if den > 0 else float("nan")
    snr = float("inf") if num == 0 else 10 * np.log10(den / num)
    return MatmulError(fmt, ref.shape[0], np.asarray(a).shape[1], ref.shape[1], rel, float(snr), float(np.max(np.abs(err))))
