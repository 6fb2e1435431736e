"""Typed, validated spec objects built from the catalog (DESIGN.md "specs" layer).

Units live in field names: *_bytes, *_gbps (gigaBYTES/s, decimal), *_gbit_s (network line
rate, gigabits/s), *_tflops (1e12 FLOP/s), *_w (watts), *_mhz.
"""

from gpuplan.specs.gpu import DTYPES, Gpu, PeakTflops
from gpuplan.specs.interconnect import Interconnect
from gpuplan.specs.system import System
from gpuplan.specs.host import HostCpu
from gpuplan.specs.cloud import CloudPrice
from gpuplan.specs.model import FfnKind, MlaSpec, ModelSpec, MoeSpec
from gpuplan.specs.mixers import FfnSlot, GatedDeltaNetSpec, Mamba2Spec, MixerKind, RgLruSpec, ShortConvSpec
from gpuplan.specs.execution import AttentionKernel, Execution, Framework
from gpuplan.specs.plan import Precision, Recompute, Sharding, TrainPlan

__all__ = [
    "DTYPES", "Gpu", "PeakTflops", "Interconnect", "System", "HostCpu", "CloudPrice",
    "FfnKind", "MlaSpec", "ModelSpec", "MoeSpec", "FfnSlot", "GatedDeltaNetSpec", "Mamba2Spec", "MixerKind",
    "RgLruSpec", "ShortConvSpec", "Precision", "Recompute", "Sharding", "TrainPlan",
    "AttentionKernel", "Execution", "Framework",
]
