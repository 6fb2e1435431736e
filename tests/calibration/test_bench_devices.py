"""The GPU code paths of `gpuplan bench` (cuda / rocm / mps) without a GPU: device discovery,
catalog matching by name, dtype choice per device and event timing, on a stand-in `torch` module
that records what the bench asks of it. What this does not verify (real kernels, real events,
NCCL) is listed in docs/calibration.md."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import gpuplan.interfaces.calibration.bench.backend as backend_mod
from gpuplan.errors import InputError
from gpuplan.interfaces.calibration.bench import BenchReport, _device_name, match_catalog_gpu
from gpuplan.interfaces.calibration.bench.backend import Backend, select_backend
from gpuplan.interfaces.calibration.bench.measurements import GemmPoint


class FakeEvent:
    log: list = []

    def __init__(self, enable_timing=False):
        assert enable_timing  # elapsed_time needs timing events
        self.t = None

    def record(self):
        FakeEvent.log.append("record")
        self.t = len(FakeEvent.log)

    def synchronize(self):
        FakeEvent.log.append("sync")

    def elapsed_time(self, end):
        return 2.5  # ms, as torch.cuda.Event.elapsed_time reports


def fake_torch(cuda=False, hip=None, mps=False, name="NVIDIA H100 80GB HBM3", count=8):
    cuda_ns = SimpleNamespace(is_available=lambda: cuda, get_device_name=lambda i=0: name, device_count=lambda: count,
                              Event=FakeEvent, synchronize=lambda: FakeEvent.log.append("device-sync"))
    return SimpleNamespace(cuda=cuda_ns, version=SimpleNamespace(hip=hip),
                           backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: mps)),
                           mps=SimpleNamespace(synchronize=lambda: None))


@pytest.mark.parametrize("torch, asked, device", [
    (fake_torch(cuda=True), None, "cuda"),
    (fake_torch(cuda=True, hip="6.2"), None, "rocm"),  # ROCm builds of torch answer through torch.cuda
    (fake_torch(mps=True), None, "mps"),
    (fake_torch(), None, "cpu"),
    (fake_torch(cuda=True), "cpu", "cpu"),
    (fake_torch(cuda=True, hip="6.2"), "rocm", "rocm"),
])
def test_device_discovery(monkeypatch, torch, asked, device):
    monkeypatch.setattr(backend_mod, "torch_or_none", lambda: torch)
    b = select_backend(asked)
    assert (b.name, b.device) == ("torch", device)
    assert b.torch_device == {"cuda": "cuda", "rocm": "cuda", "mps": "mps", "cpu": "cpu"}[device]


@pytest.mark.parametrize("torch, asked, message", [
    (None, "cuda", "needs torch"), (fake_torch(), "cuda", "no such device"), (fake_torch(), "mps", "no such device"),
    (fake_torch(), "tpu", "not one of"),
])
def test_device_not_present_is_one_input_error(monkeypatch, torch, asked, message):
    monkeypatch.setattr(backend_mod, "torch_or_none", lambda: torch)
    with pytest.raises(InputError, match=message):
        select_backend(asked)


@pytest.mark.parametrize("name, device, dtypes", [
    ("numpy", "cpu", ["fp32", "fp64"]), ("torch", "cpu", ["fp32", "bf16"]),
    ("torch", "cuda", ["bf16", "fp16", "fp32"]), ("torch", "rocm", ["bf16", "fp16", "fp32"]),
    ("torch", "mps", ["bf16", "fp16", "fp32"]),
])
def test_dtypes_per_device(name, device, dtypes):
    assert Backend(name, device).dtypes() == dtypes


def test_gpu_calls_are_timed_with_events():
    FakeEvent.log = []
    b = Backend("torch", "cuda", fake_torch(cuda=True))
    assert b.uses_events
    seconds = b.timed_call(lambda: FakeEvent.log.append("kernel"))
    # record(start), the call, record(end), wait for end: 2.5 ms of GPU time -> 0.0025 s
    assert FakeEvent.log == ["record", "kernel", "record", "sync"]
    assert seconds == pytest.approx(0.0025)
    assert not Backend("torch", "mps", fake_torch(mps=True)).uses_events
    assert not Backend("numpy", "cpu").uses_events


def test_best_time_on_gpu_is_the_event_time():
    FakeEvent.log = []
    b = Backend("torch", "rocm", fake_torch(cuda=True, hip="6.2"))
    assert b.best_time(lambda: None, repeats=3, warmup=1, min_time_s=0.0) == pytest.approx(0.0025)


def test_device_name_and_catalog_match_through_torch():
    b = Backend("torch", "cuda", fake_torch(cuda=True, name="NVIDIA H100 80GB HBM3"))
    name = _device_name(b)
    assert name == "NVIDIA H100 80GB HBM3" and match_catalog_gpu(name) == "h100-sxm5-80gb"
    assert _device_name(Backend("torch", "mps", fake_torch(mps=True))) == "Apple GPU (mps)"
    assert match_catalog_gpu("Apple GPU (mps)") is None


def test_gpu_report_compares_with_the_catalog_peak():
    # 800 TFLOP/s measured bf16 (a 8192^3 GEMM in 2 * 8192^3 / 800e12 s) on an H100 SXM, whose
    # catalog dense bf16 peak is 989.4 TFLOP/s (NVIDIA H100 datasheet, 1979 with sparsity / 2):
    # fraction 800 / 989.4 = 0.8086
    n = 8192
    p = GemmPoint("bf16", n, n, n, 2.0 * n**3 / 800e12)
    r = BenchReport("cuda", "NVIDIA H100 80GB HBM3", "torch", True, [p], {"copy_gbps": 2000.0, "triad_gbps": 2680.0},
                    None, None, "h100-sxm5-80gb", 1.0)
    d = r.to_dict()
    assert d["catalog_peak_tflops"] == pytest.approx(989.4)
    assert d["gemm_fraction_of_peak"] == pytest.approx(800 / 989.4)
    assert "80.9%" in d["peak_comparison"]
    assert d["hbm_fraction_of_peak"] == pytest.approx(2680.0 / 3350.0)  # H100 SXM HBM3: 3.35 TB/s
    assert d["rows"][0]["system"] == "h100-sxm5-80gb" and d["rows"][0]["metric"] == "matmul_tflops"


@pytest.mark.skipif(backend_mod.torch_or_none() is None, reason="torch not installed (pip install 'gpuplan[bench]')")
def test_attention_prefill_and_decode_on_cpu_torch():
    # Real torch SDPA on the CPU: the figures are FLOPs / time and bytes / time as the docstring of
    # measurements.py counts them: causal prefill 4 B H S^2 D / 2, decode K and V read 2 B H L D s
    from gpuplan.interfaces.calibration.bench.measurements import attention

    b = select_backend("cpu")
    a = attention(b, seq=128, kv_len=256, repeats=2, heads=2, kv_heads=2, head_dim=32)
    assert a["dtype"] == "float32"
    assert a["prefill_tflops"] * 1e12 * a["prefill_time_s"] == pytest.approx(4 * 1 * 2 * 128**2 * 32 / 2)
    assert a["decode_kv_gbps"] * 1e9 * a["decode_time_s"] == pytest.approx(2 * 1 * 2 * 256 * 32 * 4)
    assert a["prefill_time_s"] > 0 and a["decode_time_s"] > 0
