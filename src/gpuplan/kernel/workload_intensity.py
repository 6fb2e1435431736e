"""FLOPs and bytes moved of the kernels placed on a roofline, and so their arithmetic intensity.

Each function returns the minimum DRAM traffic (every operand read once, every result written
once: the traffic of a kernel whose tiles stay on chip) and the FLOPs (a multiply-add = 2 FLOPs):

- GEMM C[M,N] = A[M,K] B[K,N]:  flops = 2 M N K;  bytes = (M K + K N + M N) x dtype_bytes.
- elementwise over n elements with `inputs` operands and `outputs` results:
  flops = n x flops_per_element;  bytes = n x (inputs + outputs) x dtype_bytes.
- attention (FlashAttention forward, Dao et al. 2022, algorithm 1; Q/O of `heads`, K/V of `kv_heads`):
  flops = 4 B H Lq Lk d (QK^T and PV, 2 each; x 1/2 when causal with Lq = Lk);
  bytes = (2 B H Lq d + 2 B Hkv Lk d) x dtype_bytes  (Q read, O written, K and V read once: the
  IO of a fused kernel whose K/V re-reads hit L2; the paper's HBM count is higher for small SRAM).
- a model step (e.g. one decode step): flops and bytes given directly (weights + KV-cache bytes
  per step, 2 x parameters x tokens FLOPs); kept generic so any model layer can supply them.

intensity = flops / bytes  (FLOP/byte).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.layers.operators import attention_flops
from gpuplan.specs.dtypes import FORMATS

#: Bytes per element of each dtype: the one table, specs.dtypes.FORMATS (IEEE 754 sizes; OCP OFP8 /
#: MX v1.0 with their block scales; tf32 stored as fp32), and the catalog's fp64_tensor (fp64 data).
DTYPE_BYTES: dict[str, float] = {
    **{name: f.bytes_per_element for name, f in FORMATS.items()}, "fp64_tensor": FORMATS["fp64"].bytes_per_element,
}


def dtype_bytes(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise InputError(f"dtype: unknown '{dtype}'; allowed: {', '.join(DTYPE_BYTES)}", field="dtype") from None


@dataclass(frozen=True)
class KernelWork:
    """What one kernel does: FLOPs and bytes of DRAM traffic."""

    name: str
    flops: float
    bytes: float

    @property
    def intensity_flop_per_byte(self) -> float:
        return self.flops / self.bytes


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise InputError(f"{name}: must be > 0, got {value}", field=name)


def gemm_work(m: int, n: int, k: int, dtype: str = "bf16") -> KernelWork:
    """flops = 2 M N K; bytes = (M K + K N + M N) x dtype bytes."""
    _positive(m=m, n=n, k=k)
    b = dtype_bytes(dtype)
    return KernelWork(f"gemm {m}x{n}x{k} {dtype}", 2.0 * m * n * k, (m * k + k * n + m * n) * b)


def elementwise_work(n_elements: float, dtype: str = "bf16", inputs: int = 2, outputs: int = 1,
                     flops_per_element: float = 1.0) -> KernelWork:
    """flops = n x flops_per_element; bytes = n x (inputs + outputs) x dtype bytes."""
    _positive(n_elements=n_elements)
    if inputs < 0 or outputs < 0 or inputs + outputs == 0:
        raise InputError("inputs/outputs: must be >= 0 and not both 0", field="inputs")
    return KernelWork(f"elementwise {int(n_elements)} {dtype}", n_elements * flops_per_element,
                      n_elements * (inputs + outputs) * dtype_bytes(dtype))


def attention_work(batch: int, heads: int, q_len: int, kv_len: int, head_dim: int, dtype: str = "bf16",
                   kv_heads: int | None = None, causal: bool = False) -> KernelWork:
    """flops = 4 B H Lq Lk d (/2 if causal and Lq = Lk); bytes = 2 B d (H Lq + Hkv Lk) x dtype bytes."""
    kv_heads = heads if kv_heads is None else kv_heads
    _positive(batch=batch, heads=heads, q_len=q_len, kv_len=kv_len, head_dim=head_dim, kv_heads=kv_heads)
    flops = attention_flops(batch, heads, head_dim, head_dim, q_len * kv_len)
    if causal and q_len == kv_len:
        flops /= 2
    traffic = 2.0 * batch * head_dim * (heads * q_len + kv_heads * kv_len) * dtype_bytes(dtype)
    return KernelWork(f"attention b{batch} h{heads}/{kv_heads} q{q_len} kv{kv_len} d{head_dim} {dtype}", flops, traffic)


def step_work(flops: float, bytes_moved: float, name: str = "model step") -> KernelWork:
    """A step given by its FLOPs and bytes (e.g. decode: 2 x params x batch FLOPs, weights + KV bytes)."""
    _positive(flops=flops, bytes=bytes_moved)
    return KernelWork(name, float(flops), float(bytes_moved))
