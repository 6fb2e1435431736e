"""The array library a bench runs on: torch (the optional `bench` extra, `torch==2.13.0`) when it is
installed, numpy otherwise (CPU only). `Backend` hides the difference behind the few operations
the benches need: allocate, matmul, copy, triad, synchronise, and a wall-clock timer that waits
for the device.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from gpuplan.errors import InputError

DEVICES = ("cpu", "cuda", "rocm", "mps")


def torch_or_none():
    try:
        import torch  # noqa: F401 - optional extra
    except Exception:  # noqa: BLE001 - ImportError, or a broken install: fall back to numpy
        return None
    return torch


@dataclass
class Backend:
    """One device through one library. `name`: 'numpy' or 'torch'; `device`: cpu / cuda / rocm / mps."""

    name: str
    device: str
    torch: object = None

    @property
    def torch_device(self) -> str:
        return "cuda" if self.device in ("cuda", "rocm") else self.device

    def dtypes(self) -> list[str]:
        """The GEMM dtypes worth sweeping here (gpuplan names)."""
        if self.name == "numpy":
            return ["fp32", "fp64"]
        if self.device == "cpu":
            return ["fp32", "bf16"]
        return ["bf16", "fp16", "fp32"]

    def _torch_dtype(self, dtype: str):
        t = self.torch
        return {"fp32": t.float32, "fp64": t.float64, "bf16": t.bfloat16, "fp16": t.float16}[dtype]

    def empty(self, shape, dtype: str = "fp32"):
        if self.name == "numpy":
            return np.ones(shape, dtype={"fp32": np.float32, "fp64": np.float64}[dtype])
        return self.torch.ones(shape, dtype=self._torch_dtype(dtype), device=self.torch_device)

    def random(self, shape, dtype: str = "fp32", seed: int = 0):
        """Standard-normal values (seeded): the operands a GEMM benchmark must use. Tensor cores draw less
        power on constant or zero operands, so the clock stays higher and the product runs faster than
        on real weights and activations: on an H200 (gpuplan's device check, torch 2.11, 2026-11-28) an
        8192^3 bf16 product of all-ones matrices ran at 867 TFLOP/s, where random operands give
        769-798 (device KINDS notes) and mamf-finder, which uses torch.randn, reports 794.5 for H100/H200
        (ml-engineering, compute/accelerator/benchmarks: maximum achievable matmul FLOPS)."""
        if self.name == "numpy":
            rng = np.random.default_rng(seed)
            return rng.standard_normal(shape, dtype={"fp32": np.float32, "fp64": np.float64}[dtype])
        t = self.torch
        gen = t.Generator(device=self.torch_device).manual_seed(seed)
        return t.randn(shape, generator=gen, dtype=t.float32, device=self.torch_device).to(self._torch_dtype(dtype))

    def matmul(self, a, b, out=None):
        if self.name == "numpy":
            return np.matmul(a, b, out=out)
        return self.torch.matmul(a, b, out=out)

    def copy(self, dst, src) -> None:
        if self.name == "numpy":
            np.copyto(dst, src)
        else:
            dst.copy_(src)

    def triad(self, a, b, c, scalar: float) -> None:
        """a = b + scalar c (STREAM triad). numpy makes two passes (a = scalar c; a += b); torch one."""
        if self.name == "numpy":
            np.multiply(c, scalar, out=a)
            np.add(a, b, out=a)
        else:
            self.torch.add(b, c, alpha=scalar, out=a)

    def synchronize(self) -> None:
        if self.name == "torch":
            if self.torch_device == "cuda":
                self.torch.cuda.synchronize()
            elif self.torch_device == "mps":
                self.torch.mps.synchronize()

    @property
    def uses_events(self) -> bool:
        """True where calls are timed with device events (cuda and rocm: torch.cuda.Event)."""
        return self.name == "torch" and self.device in ("cuda", "rocm")

    def timed_call(self, fn: Callable[[], object]) -> float:
        """Seconds one call of `fn` takes on the device. cuda / rocm: two torch.cuda.Event(enable_timing=True)
        recorded around the call on the current stream, `elapsed_time` (ms) after the end event has
        completed (CUDA Runtime API, cudaEventElapsedTime: the GPU time between the events, free of
        host launch jitter); elsewhere wall time around the call and a synchronisation."""
        if self.uses_events:
            cuda = self.torch.cuda
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1e3
        t0 = time.perf_counter()
        fn()
        self.synchronize()
        return time.perf_counter() - t0

    def best_time(self, fn: Callable[[], object], repeats: int, warmup: int = 1, budget_s: float = 2.0,
                  min_time_s: float = 0.25) -> float:
        """The shortest of the timed calls (after `warmup` untimed ones): at least `repeats` calls
        and at least `min_time_s` of them (short calls are repeated over a window long enough to
        catch a moment without other load), stopping once `budget_s` of timed calls have run.
        Best-of-N is the figure least disturbed by other processes."""
        for _ in range(warmup):
            fn()
        self.synchronize()
        best = float("inf")
        spent = 0.0
        calls = 0
        while calls < max(1, repeats) or spent < min_time_s:
            dt = self.timed_call(fn)
            best = min(best, dt)
            spent += dt
            calls += 1
            if spent > budget_s:
                break
        return best


def select_backend(device: str | None) -> Backend:
    """The backend for `device` (None: the best one present: cuda/rocm, mps, else cpu). InputError
    when the device is unknown or not present (a GPU needs torch)."""
    torch = torch_or_none()
    if device is not None and device not in DEVICES:
        raise InputError(f"--device: '{device}' is not one of {', '.join(DEVICES)}", field="device")
    if device is None:
        if torch is not None and torch.cuda.is_available():
            device = "rocm" if getattr(torch.version, "hip", None) else "cuda"
        elif torch is not None and getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            device = "mps"
        else:
            device = "cpu"
    if device == "cpu":
        return Backend("torch", "cpu", torch) if torch is not None else Backend("numpy", "cpu")
    if torch is None:
        raise InputError(f"--device {device}: needs torch (pip install 'gpuplan[bench]', i.e. torch==2.13.0)",
                         field="device")
    present = torch.cuda.is_available() if device in ("cuda", "rocm") else (
        getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available())
    if not present:
        raise InputError(f"--device {device}: no such device on this machine (torch sees none)", field="device")
    return Backend("torch", device, torch)
