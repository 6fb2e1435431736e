"""`gpuplan bench`: measure this machine (GEMM, memory bandwidth, attention, host-device copies) and
turn the GEMM sweep into matmul rows (interfaces/validation_matmul.py) that `calibrate fit` reads.

`run_bench(device, quick, progress)`:
1. picks the backend (backend.py: torch when installed, numpy otherwise; cpu / cuda / rocm / mps);
2. runs the measurements (measurements.py has each formula) over a sweep sized by `quick`;
3. finds the device in the catalog (a GPU by its name; a CPU never: the catalog holds accelerators)
   and compares the best GEMM figure with the catalog's dense peak for that dtype;
4. returns a `BenchReport`: figures, rows, and, for a catalog GPU, a fitted calibration (its
   matmul ceilings) that `write_profile` saves.

5. with torch, the collectives over the local devices (collectives.py: all_reduce, all_gather,
   all_to_all with torch.distributed, algbw and busbw as nccl-tests defines them; gloo with 2
   spawned ranks on a CPU, nccl over the visible GPUs) as collectives rows; on a CPU not in
   `--quick` (starting the ranks costs more than the rest of the quick bench).
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass, field
from typing import Callable

from gpuplan.interfaces.calibration.bench.backend import Backend, select_backend
from gpuplan.interfaces.calibration.bench.collectives import CollectivePoint, collective_rows, run_collectives
from gpuplan.interfaces.calibration.bench.measurements import GemmPoint, attention, gemm, host_to_device, stream

Progress = Callable[[str, int, int], None]

#: Square GEMM sizes n (m = n = k) per mode and kind of device.
GEMM_SIZES = {("quick", "cpu"): (256, 512, 1024), ("full", "cpu"): (256, 512, 1024, 2048),
              ("quick", "gpu"): (1024, 2048, 4096), ("full", "gpu"): (1024, 2048, 4096, 8192)}
#: fp32 elements per STREAM array (3 arrays): 64 MB quick, 256 MB full (beyond any last-level cache).
STREAM_ELEMENTS = {"quick": 16 * 2**20, "full": 64 * 2**20}
REPEATS = {"quick": 10, "full": 20}  # best-of-N: the most repeats the time budget (best_time) allows


@dataclass
class BenchReport:
    device: str
    device_name: str
    backend: str
    quick: bool
    gemm: list[GemmPoint]
    memory: dict
    attention: dict | None
    host_device: dict | None
    catalog_gpu: str | None
    seconds: float
    skipped: dict = field(default_factory=dict)
    calibration: object = None  # interfaces.calibration.fit.CalibrationResult for a catalog GPU
    collectives: list[CollectivePoint] = field(default_factory=list)
    collectives_system: str = ""

    def best_gemm(self, dtype: str | None = None) -> GemmPoint:
        pts = [p for p in self.gemm if dtype is None or p.dtype == dtype]
        return max(pts, key=lambda p: p.gflops)

    def primary_dtype(self) -> str:
        return "fp32" if self.device == "cpu" else "bf16"

    def catalog_peak_tflops(self) -> float | None:
        if self.catalog_gpu is None:
            return None
        from gpuplan.catalog import load_catalog

        gpu = load_catalog().gpu(self.catalog_gpu)
        try:
            return float(gpu.matmul_peak_tflops(self.primary_dtype()))
        except Exception:  # noqa: BLE001 - no peak for the dtype
            return None

    def rows(self) -> list[dict[str, str]]:
        """The GEMM rows, then the collectives rows."""
        return self.gemm_rows() + self.collective_rows()

    def collective_rows(self) -> list[dict[str, str]]:
        """One collectives row per measured point (collectives.py); system = a catalog system of
        the GPU (`local_system`), else `local-<device>` (not in the catalog: `calibrate fit` skips
        it with the reason)."""
        system = self.collectives_system or f"local-{self.device}"
        return collective_rows(self.collectives, system, f"gpuplan bench on {self.device_name} ({self.backend})",
                               f"bench-coll-{system}")

    def gemm_rows(self) -> list[dict[str, str]]:
        """One matmul row per GEMM point (validation_matmul.py); system = the catalog GPU, else the device."""
        system = self.catalog_gpu or self.device
        out = []
        for i, p in enumerate(self.gemm, start=1):
            out.append({"id": f"bench-{system}-{i}", "source": f"gpuplan bench on {self.device_name} ({self.backend})",
                        "confidence": "high", "notes": f"best of repeats; {p.seconds:.6g} s", "system": system,
                        "m": str(p.m), "n": str(p.n), "k": str(p.k), "dtype": p.dtype, "metric": "matmul_tflops",
                        "value": repr(p.gflops / 1e3)})
        return out

    def to_dict(self) -> dict:
        best = self.best_gemm(self.primary_dtype())
        peak = self.catalog_peak_tflops()
        if self.catalog_gpu is None:
            comparison = (f"no catalog entry for this device ({self.device_name}): the catalog holds accelerators, "
                          "not CPUs; no peak to compare" if self.device == "cpu"
                          else f"'{self.device_name}' matches no catalog GPU: no peak to compare")
        elif peak is None:
            comparison = f"catalog GPU {self.catalog_gpu} has no {self.primary_dtype()} peak"
        else:
            comparison = (f"{best.gflops / 1e3:.1f} of {peak:.1f} TFLOP/s dense {self.primary_dtype()} peak "
                          f"({best.gflops / 1e3 / peak * 100:.1f}%)")
        hbm_fraction = None
        if self.catalog_gpu is not None:
            from gpuplan.catalog import load_catalog

            hbm_fraction = self.memory["triad_gbps"] / load_catalog().gpu(self.catalog_gpu).memory_bandwidth_gbps
        return {
            "device": self.device, "device_name": self.device_name, "backend": self.backend, "quick": self.quick,
            "gemm_best_gflops": best.gflops, "gemm_best_tflops": best.gflops / 1e3, "gemm_best_dtype": best.dtype,
            "gemm_best_shape": f"{best.m}x{best.n}x{best.k}",
            "gemm_best_by_dtype": {d: self.best_gemm(d).to_dict() for d in dict.fromkeys(p.dtype for p in self.gemm)},
            "gemm": [p.to_dict() for p in self.gemm],
            "catalog_gpu": self.catalog_gpu, "catalog_peak_tflops": peak,
            "gemm_fraction_of_peak": None if peak is None else best.gflops / 1e3 / peak,
            "peak_comparison": comparison,
            "memory": self.memory, "hbm_fraction_of_peak": hbm_fraction,
            "attention": self.attention, "host_device": self.host_device,
            "collectives": [p.to_dict() for p in self.collectives], "skipped": self.skipped,
            "rows": self.rows(), "run_time_s": self.seconds,
            "profile_knobs": None if self.calibration is None else self.calibration.values,
        }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def match_catalog_gpu(device_name: str) -> str | None:
    """The catalog GPU whose name best matches a device name such as 'NVIDIA H100 80GB HBM3': every
    token of the catalog name's model part (e.g. 'H100', '80GB') found in the device name; the
    longest such name wins. None when nothing matches."""
    from gpuplan.catalog import load_catalog

    dev = device_name.upper().replace("-", " ")
    best, score = None, 0
    for gpu in load_catalog().gpus.values():
        tokens = [t for t in gpu.name.upper().replace("(", " ").replace(")", " ").replace(",", " ").split()
                  if t not in ("NVIDIA", "AMD", "INSTINCT", "GEFORCE") and len(t) > 1]
        model = tokens[:1]
        if not model or model[0] not in dev.split():
            continue
        hits = sum(t in dev for t in tokens)
        if hits > score:
            best, score = gpu.id, hits
    return best


def local_system(catalog_gpu: str | None, ranks: int) -> str:
    """The catalog system a local box of `ranks` GPUs of `catalog_gpu` is taken to be: the smallest
    scale-up domain of that GPU holding `ranks` GPUs (ties: the first in catalog order, the vendor's
    reference box before cloud variants), else the widest; '' for no catalog GPU."""
    if catalog_gpu is None:
        return ""
    from gpuplan.catalog import load_catalog

    cat = load_catalog()
    systems = [s for s in cat.systems.values() if s.gpu == catalog_gpu]
    fits = [(s.scaleup_domain_gpus, i, s.id) for i, s in enumerate(systems) if s.scaleup_domain_gpus >= ranks]
    if fits:
        return min(fits)[2]
    return cat.widest_system_for(catalog_gpu).id if systems else ""


def _device_name(backend: Backend) -> str:
    if backend.device == "cpu":
        return _cpu_name()
    if backend.device in ("cuda", "rocm"):
        return str(backend.torch.cuda.get_device_name(0))
    return "Apple GPU (mps)"


def run_bench(device: str | None = None, quick: bool = False, progress: Progress | None = None,
              fit_profile: bool = True) -> BenchReport:
    """Measure this machine (module docstring)."""
    t0 = time.perf_counter()
    backend = select_backend(device)
    mode = "quick" if quick else "full"
    kind = "cpu" if backend.device == "cpu" else "gpu"
    sizes = GEMM_SIZES[(mode, kind)]
    repeats = REPEATS[mode]
    dtypes = backend.dtypes()
    has_torch = backend.name == "torch"
    with_collectives = has_torch and not (quick and kind == "cpu")
    steps = len(sizes) * len(dtypes) + 1 + int(has_torch) + int(with_collectives) + int(kind == "gpu")
    done = 0

    def tick(label: str) -> None:
        nonlocal done
        if progress:
            progress(label, done, steps)
        done += 1

    name = _device_name(backend)
    points = []
    for dtype in dtypes:
        for n in sizes:
            tick(f"GEMM {dtype} {n}x{n}x{n}")
            points.append(gemm(backend, dtype, n, n, n, repeats))
    tick("memory bandwidth (copy, triad)")
    memory = stream(backend, STREAM_ELEMENTS[mode], repeats)
    skipped = {}
    attn = None
    if has_torch:
        tick("attention (SDPA prefill, decode)")
        # a GPU gets a Llama-class layer (32 heads of 128: Llama-3-8B's config.json) so the kernel fills the SMs;
        # 8 heads of 64 at 4,096 tokens measured 212 TFLOP/s on an H200, a shape no LLM runs
        shape = {} if kind == "cpu" else {"heads": 32, "kv_heads": 32, "head_dim": 128}
        attn = attention(backend, 512 if kind == "cpu" else 4096, 2048 if kind == "cpu" else 32768, repeats, **shape)
    else:
        skipped["attention"] = "needs torch (pip install 'gpuplan[bench]')"
    h2d = None
    if kind == "gpu" and backend.device != "mps":
        tick("host <-> device copies")
        h2d = host_to_device(backend, 256 * 2**20, repeats)
    else:
        skipped["host_device"] = "no GPU" if kind == "cpu" else "not measured on mps"
    coll: list[CollectivePoint] = []
    if has_torch and quick and kind == "cpu":
        skipped["collectives"] = ("left out of --quick on a CPU (each of the 2 gloo ranks starts a Python that "
                                  "imports torch); run without --quick")
    elif has_torch:
        tick("collectives (torch.distributed)")
        gpus = backend.torch.cuda.device_count() if kind == "gpu" and backend.device != "mps" else 0
        coll, why = run_collectives(backend.device, quick, gpus)
        if why:
            skipped["collectives"] = why
    else:
        skipped["collectives"] = "needs torch (pip install 'gpuplan[bench]')"
    if progress:
        progress("done", steps, steps)
    catalog_gpu = None if kind == "cpu" else match_catalog_gpu(name)
    report = BenchReport(backend.device, name, backend.name, quick, points, memory, attn, h2d, catalog_gpu,
                         time.perf_counter() - t0, skipped, collectives=coll,
                         collectives_system=local_system(catalog_gpu, coll[0].ranks if coll else 1))
    if catalog_gpu is not None and fit_profile:
        from gpuplan.interfaces.calibration.fit import calibrate_rows

        report.calibration = calibrate_rows(report.rows())
    return report


__all__ = ["BenchReport", "local_system", "match_catalog_gpu", "run_bench"]
