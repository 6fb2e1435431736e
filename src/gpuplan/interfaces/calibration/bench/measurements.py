"""The measurements of `gpuplan bench`, one function each; every figure is best-of-N wall time.

- GEMM C[n, n] = A[n, k] B[k, n] over a shape sweep per dtype:
      FLOP/s = 2 m n k / t            (the convention of mamf-finder and nccl-tests' peers)
- memory bandwidth, STREAM convention (McCalpin, STREAM benchmark, "Counting bytes"):
      copy  a = b            bytes = 2 N s      (one read, one write of N elements of s bytes)
      triad a = b + q c      bytes = 3 N s
  (numpy's triad runs as two passes, so its true traffic is higher than the bytes counted: the
  reported figure is what STREAM would report, conservative for numpy);
- attention (torch only): scaled_dot_product_attention, causal prefill of S tokens
      FLOPs = 4 B H S^2 D / 2        (QK^T and PV, half the pairs under a causal mask)
  and decode of one query token over a KV cache of L tokens: bytes = 2 B H_kv L D s (K and V read);
- host-to-device copy (GPU only): bytes / t of a pinned host buffer copied to the device.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.interfaces.calibration.bench.backend import Backend


@dataclass(frozen=True)
class GemmPoint:
    dtype: str
    m: int
    n: int
    k: int
    seconds: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def gflops(self) -> float:
        return self.flops / self.seconds / 1e9

    def to_dict(self) -> dict:
        return {"dtype": self.dtype, "m": self.m, "n": self.n, "k": self.k, "time_s": self.seconds,
                "gflops": self.gflops, "tflops": self.gflops / 1e3}


def gemm(backend: Backend, dtype: str, m: int, n: int, k: int, repeats: int) -> GemmPoint:
    a = backend.random((m, k), dtype, seed=1)  # random operands: Backend.random says why
    b = backend.random((k, n), dtype, seed=2)
    c = backend.empty((m, n), dtype)
    t = backend.best_time(lambda: backend.matmul(a, b, out=c), repeats)
    return GemmPoint(dtype, m, n, k, t)


def stream(backend: Backend, n_elements: int, repeats: int) -> dict:
    """copy and triad in GB/s (decimal) over fp32 arrays of n_elements (module docstring)."""
    a, b, c = (backend.empty((n_elements,), "fp32") for _ in range(3))
    s = 4  # bytes per fp32 element
    t_copy = backend.best_time(lambda: backend.copy(a, b), repeats)
    t_triad = backend.best_time(lambda: backend.triad(a, b, c, 3.0), repeats)
    return {"array_bytes": n_elements * s, "copy_gbps": 2 * n_elements * s / t_copy / 1e9,
            "triad_gbps": 3 * n_elements * s / t_triad / 1e9}


def attention(backend: Backend, seq: int, kv_len: int, repeats: int, heads: int = 8, kv_heads: int = 8,
              head_dim: int = 64, batch: int = 1) -> dict:
    """SDPA prefill TFLOP/s and decode KV-read GB/s (module docstring); torch only."""
    torch = backend.torch
    dtype = torch.float32 if backend.device == "cpu" else torch.bfloat16
    dev = backend.torch_device
    q = torch.randn(batch, heads, seq, head_dim, dtype=dtype, device=dev)
    k = torch.randn(batch, heads, seq, head_dim, dtype=dtype, device=dev)
    v = torch.randn(batch, heads, seq, head_dim, dtype=dtype, device=dev)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    t_prefill = backend.best_time(lambda: sdpa(q, k, v, is_causal=True), repeats)
    prefill_flops = 4.0 * batch * heads * seq * seq * head_dim / 2.0
    qd = torch.randn(batch, heads, 1, head_dim, dtype=dtype, device=dev)
    kd = torch.randn(batch, kv_heads, kv_len, head_dim, dtype=dtype, device=dev)
    vd = torch.randn(batch, kv_heads, kv_len, head_dim, dtype=dtype, device=dev)
    t_decode = backend.best_time(lambda: sdpa(qd, kd, vd), repeats)
    kv_bytes = 2.0 * batch * kv_heads * kv_len * head_dim * qd.element_size()
    return {"dtype": str(dtype).replace("torch.", ""), "prefill_seq": seq, "decode_kv_len": kv_len, "heads": heads,
            "head_dim": head_dim, "prefill_time_s": t_prefill, "prefill_tflops": prefill_flops / t_prefill / 1e12,
            "decode_time_s": t_decode, "decode_kv_gbps": kv_bytes / t_decode / 1e9}


def host_to_device(backend: Backend, n_bytes: int, repeats: int) -> dict:
    """Pinned host -> device copy, GB/s (GPU backends only)."""
    torch = backend.torch
    host = torch.empty(n_bytes, dtype=torch.uint8).pin_memory()
    dev = torch.empty(n_bytes, dtype=torch.uint8, device=backend.torch_device)
    t = backend.best_time(lambda: dev.copy_(host, non_blocking=True), repeats)
    t_back = backend.best_time(lambda: host.copy_(dev, non_blocking=True), repeats)
    return {"bytes": n_bytes, "host_to_device_gbps": n_bytes / t / 1e9, "device_to_host_gbps": n_bytes / t_back / 1e9}
