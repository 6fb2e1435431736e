"""The tensor-parallel all-reduce of a serving engine: which algorithm the engine runs for a message
of S bytes on n GPUs, and its time.

Serving engines sum the row-parallel GEMM outputs (attention out-projection, FFN down-projection)
with their own peer-to-peer kernels for small messages and call NCCL for large ones:

- one-shot: every rank copies its S bytes into a buffer its peers can read (CUDA IPC), a barrier,
  then every rank reads the n - 1 peers' whole buffers over NVLink and reduces them locally. Each
  GPU's NVLink ingress carries (n - 1) S bytes; one barrier:

      t_oneshot = latency(n) + (n - 1) S / B

- two-shot: a reduce-scatter (each rank reads its 1/n slice from the n - 1 peers and reduces it),
  a barrier, an all-gather (each rank reads the n - 1 reduced slices of the others). Each GPU's
  ingress carries 2 (n - 1) S / n bytes (a ring's bus bytes); two barriers:

      t_twoshot = 2 latency(n) + 2 (n - 1) / n x S / B_2

  at B_2 = line rate x `serving.custom_allreduce_twoshot_efficiency` (below the one-shot's: the
  slices are 1/n as long and the two phases do not overlap).

- NCCL (`nccl_seconds`): `primitives.collectives.collective_time_array`, the NCCL cost model of
  the training step (LL / LL128 / Simple ring, tree, NVLS, the fastest), which matches measured
  NCCL all-reduces in serving engines' message range: vLLM's pynccl on SM90 (vllm-project/vllm
  PR #42324 benchmark tables) 76 / 121 / 195 us at 8 / 16 / 32 MiB on 8 GPUs, nccl-tests
  all_reduce_perf on 8 NVLink4 GPUs (kvcache-ai/Mooncake PR #3484, 8 x H20) 181 / 242 / 300 GB/s
  busbw at 8 / 16 / 32 MiB (tests/inference/test_tp_allreduce.py).

B = the GPU's scale-up (NVLink) line rate per direction x `serving.custom_allreduce_efficiency`
(on a switched domain the GPU reaches its peers at its full rate; on a point-to-point full mesh,
such as MI300X's Infinity Fabric, one link of rate / (domain - 1) per peer, so n - 1 peers read
concurrently give rate x (n - 1) / (domain - 1)). latency(n) = CUSTOM_ALLREDUCE_BASE_LATENCY_S +
CUSTOM_ALLREDUCE_PER_PEER_LATENCY_S x (n - 1): the launch, flag writes and spin-wait of one barrier
over n - 1 peers (measured on H100; x CUSTOM_ALLREDUCE_LATENCY_SCALE on AMD's GPUs, measured on MI300X).

Which algorithm runs (`TpAllReduce`, the engine's selection):

- TensorRT-LLM, PyTorch backend (`tensorrt-llm`, v1.x): its custom kernels only within the IPC
  workspace, `getMaxRequiredWorkspaceSize` = 16 MB (10^6 bytes) for TP <= 2 and 8 MB above
  (cpp/tensorrt_llm/common/customAllReduceUtils.h); larger messages fall back to NCCL
  (`ifFallbackToNCCL` in cpp/tensorrt_llm/thop/allreduceOp.cpp). Within the workspace
  AllReduceStrategy AUTO picks from a table of benchmarked best strategies per (SM, TP, hidden,
  tokens) (`selectStrategyLookUpTable`, entries ONESHOT / TWOSHOT / NCCL): modelled as the fastest
  of one-shot, two-shot and NCCL. A hidden size outside the table (128 to 8192) gets its fallback,
  NCCL (NCCL_SYMMETRIC).
- TensorRT-LLM, TensorRT engines (`tensorrt-llm-plugin`, v0.x, the AllReduce plugin):
  `AllreducePlugin::selectImplementation` (cpp/tensorrt_llm/plugins/ncclPlugin/allreducePlugin.cpp)
  with AUTO, within the same workspace: one-shot on 2 GPUs; one-shot below 1 MB on <= 4 GPUs and
  below 500 KB above, else NCCL (two-shot disabled: "In some instances, the two-shot strategy has
  exhibited significant performance issues"); NCCL above the workspace.
- vLLM (`vllm`; SGLang ports the same kernels): custom all-reduce below `max_size` = 8 MiB
  (vllm/distributed/device_communicators/custom_all_reduce.py), with world size 2 or a full
  NVLink domain; one-shot (`cross_device_reduce_1stage`) for world size 2, for < 512 KiB on <= 4
  GPUs and < 256 KiB on <= 8 GPUs, else two-shot (`cross_device_reduce_2stage`)
  (csrc/custom_all_reduce.cuh); NCCL (pynccl) above.
- `nccl`: NCCL for every size (engines without custom kernels, or with them disabled).

Both engines need every pair of the group on a direct scale-up link (TensorRT-LLM
`mIsNVLINKSupported`, vLLM `full_nvlink` or world size 2): any group inside one switched or
full-mesh scale-up domain; groups that leave the domain, and systems without a scale-up link, use NCCL.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.primitives.collectives import Collective, collective_time_array
from gpuplan.specs import Gpu, System


class TpAllReduce(str, Enum):
    """The all-reduce selection of a serving engine (module docstring)."""

    TENSORRT_LLM = "tensorrt-llm"
    TENSORRT_LLM_PLUGIN = "tensorrt-llm-plugin"
    VLLM = "vllm"
    NCCL = "nccl"


def parse_tp_allreduce(value) -> TpAllReduce:
    """A TpAllReduce from its name; InputError naming the field and the allowed names otherwise."""
    try:
        return TpAllReduce(value)
    except ValueError:
        allowed = ", ".join(a.value for a in TpAllReduce)
        raise InputError(f"tp_allreduce: unknown '{value}'; allowed: {allowed}", field="tp_allreduce") from None


#: TensorRT-LLM IPC workspace per rank, bytes: customAllReduceUtils.h getMaxRequiredWorkspaceSize
#: (16 * 1000 * 1000 for world size <= 2, 8 * 1000 * 1000 above).
TRTLLM_WORKSPACE_BYTES_TP2 = 16 * 1000 * 1000
TRTLLM_WORKSPACE_BYTES = 8 * 1000 * 1000
#: vLLM custom all-reduce size limit, bytes: CustomAllreduce(max_size=8192 * 1024).
VLLM_CUSTOM_MAX_BYTES = 8192 * 1024
#: vLLM one-shot limits on a full NVLink domain (custom_all_reduce.cuh): < 512 KiB on <= 4 GPUs,
#: < 256 KiB on <= 8 GPUs (world size 2: always one-shot).
VLLM_ONESHOT_BYTES_4 = 512 * 1024
VLLM_ONESHOT_BYTES_8 = 256 * 1024

#: One barrier of a custom all-reduce kernel, s: base + per peer. Least-squares line through the
#: latency of a 512-element all-reduce with SGLang's custom kernels (a port of TensorRT-LLM's) on
#: H100, 3.7 / 4.8 / 5.9 us on 2 / 4 / 8 GPUs (sgl-project/sglang PR #2904, "unit test performance
#: in H100"): 3.5 us + 0.35 us per peer.
CUSTOM_ALLREDUCE_BASE_LATENCY_S = knobs.register(
    "serving.custom_allreduce_base_latency_s", unit="s", default=3.5e-6, low=0.0, high=1e-4,
    source="SGLang PR #2904 custom all-reduce on H100, 512 elements: 3.7 / 4.8 / 5.9 us on 2 / 4 / 8 GPUs "
           "(least-squares line: 3.5 us + 0.35 us per peer)",
    scales="latency of each barrier of a serving engine's custom (one-shot / two-shot) all-reduce")
CUSTOM_ALLREDUCE_PER_PEER_LATENCY_S = 0.35e-6
#: The barrier latency of the custom all-reduce on a vendor's GPUs against the H100 line above.
#: AMD: the same kernels (vLLM's custom all-reduce, ported to HIP IPC over Infinity Fabric) on
#: MI300X take 7.18 us for a 2 KB all-reduce on 4 GPUs (sgl-project/sglang PR #6619, kernel test
#: table "TP=4 (latency us)", column "baseline": the custom all-reduce below 8 MB) against 4.8 us
#: on 4 H100 (PR #2904): 7.18 / 4.8 = 1.50. MI355X (the same xGMI peer-to-peer design, no
#: published figure) takes the MI300X ratio. Other vendors: 1.
CUSTOM_ALLREDUCE_LATENCY_SCALE = {"amd": 7.18 / 4.8}
#: Achievable fraction of the NVLink line rate of the custom kernels' peer reads. vLLM's one-shot
#: kernel on H100 at 4 MB (vllm-project/vllm PR #24532, TP 4: 38 us; PR #24111, TP 6: 70 us) moves
#: (n - 1) x 4.19 MB in 38 - 4.6 and 70 - 5.3 us: 376 and 324 GB/s, 0.84 and 0.72 of 450 GB/s.
#: The default is their mean.
CUSTOM_ALLREDUCE_EFFICIENCY = knobs.register(
    "serving.custom_allreduce_efficiency", unit="fraction of line rate", default=0.78, low=0.2, high=1.0,
    source="vLLM one-shot custom all-reduce on H100 at 4 MB: 0.84 (TP 4, PR #24532) and 0.72 (TP 6, PR #24111) "
           "of the 450 GB/s NVLink4 rate",
    scales="NVLink bandwidth of a serving engine's custom (one-shot / two-shot) all-reduce")


#: Achievable fraction of the NVLink line rate of the two-shot kernel's peer reads. vLLM's
#: `cross_device_reduce_2stage` on H100 (vllm-project/vllm PR #24532, TP 4: 26 us at 2 MB, 42 us
#: at 4 MB; PR #24111, TP 6: 37 us at 4 MB) moves 2 (n - 1) / n x S in the time less two
#: barriers: 186, 191 and 264 GB/s, 0.41, 0.42 and 0.59 of 450 GB/s. The default is their mean.
CUSTOM_ALLREDUCE_TWOSHOT_EFFICIENCY = knobs.register(
    "serving.custom_allreduce_twoshot_efficiency", unit="fraction of line rate", default=0.47, low=0.1, high=1.0,
    source="vLLM two-shot custom all-reduce on H100: 0.41 (TP 4, 2 MB), 0.42 (TP 4, 4 MB; PR #24532), 0.59 "
           "(TP 6, 4 MB; PR #24111) of the 450 GB/s NVLink4 rate",
    scales="NVLink bandwidth of a serving engine's two-shot custom all-reduce")


def barrier_latency_s(n, gpu: Gpu | None = None) -> np.ndarray:
    """latency(n) of the module docstring: base knob + CUSTOM_ALLREDUCE_PER_PEER_LATENCY_S x (n - 1),
    x CUSTOM_ALLREDUCE_LATENCY_SCALE of the GPU's vendor (1 when none is listed or no GPU is given)."""
    scale = CUSTOM_ALLREDUCE_LATENCY_SCALE.get(str(gpu.vendor).lower(), 1.0) if gpu is not None else 1.0
    return scale * (knobs.value("serving.custom_allreduce_base_latency_s")
                    + CUSTOM_ALLREDUCE_PER_PEER_LATENCY_S * (np.asarray(n, dtype=float) - 1.0))


def oneshot_ingress_bytes(size_bytes, n) -> np.ndarray:
    """NVLink bytes into each GPU of a one-shot all-reduce: the n - 1 peers' whole buffers, (n - 1) S."""
    return (np.asarray(n, dtype=float) - 1.0) * np.asarray(size_bytes, dtype=float)


def twoshot_ingress_bytes(size_bytes, n) -> np.ndarray:
    """NVLink bytes into each GPU of a two-shot all-reduce: (n - 1) slices of S / n in the reduce-scatter
    and again in the all-gather, 2 (n - 1) / n x S."""
    n = np.asarray(n, dtype=float)
    return 2.0 * (n - 1.0) / n * np.asarray(size_bytes, dtype=float)


def custom_link_bytes_s(system: System, gpu: Gpu | None, n: int,
                        knob: str = "serving.custom_allreduce_efficiency") -> float:
    """B of the module docstring for a group of n GPUs, bytes/s: the scale-up line rate per GPU and
    direction (the system's, else the GPU's) x the efficiency knob `knob` (the one-shot's by
    default); on a point-to-point full mesh the n - 1 peers' links only, rate x (n - 1) / (domain - 1)."""
    rate = system.scaleup_bandwidth_gbps or (gpu.scaleup_bandwidth_gbps if gpu else None) or 0.0
    if not system.scaleup_switched and system.scaleup_domain_gpus > 2:
        rate = rate * min(1.0, (n - 1) / (system.scaleup_domain_gpus - 1))
    return float(rate) * 1e9 * knobs.value(knob)


def custom_kernels_usable(system: System, gpu: Gpu | None, n: int) -> bool:
    """Whether an engine's peer-to-peer kernels can run on a group of n GPUs: 2 <= n <= the scale-up
    domain (switched, or a full mesh: every pair linked) and the domain has a line rate."""
    rate = system.scaleup_bandwidth_gbps or (gpu.scaleup_bandwidth_gbps if gpu else None) or 0.0
    return 2 <= n <= system.scaleup_domain_gpus and rate > 0


def oneshot_seconds(size_bytes, n: int, system: System, gpu: Gpu | None) -> np.ndarray:
    """t_oneshot of the module docstring, s (array over sizes)."""
    return barrier_latency_s(n, gpu) + oneshot_ingress_bytes(size_bytes, n) / custom_link_bytes_s(system, gpu, n)


def twoshot_seconds(size_bytes, n: int, system: System, gpu: Gpu | None) -> np.ndarray:
    """t_twoshot of the module docstring, s (array over sizes)."""
    link = custom_link_bytes_s(system, gpu, n, "serving.custom_allreduce_twoshot_efficiency")
    return 2.0 * barrier_latency_s(n, gpu) + twoshot_ingress_bytes(size_bytes, n) / link


def trtllm_workspace_bytes(n: int) -> int:
    """TensorRT-LLM's custom all-reduce workspace, bytes: 16 MB for n <= 2, else 8 MB."""
    return TRTLLM_WORKSPACE_BYTES_TP2 if n <= 2 else TRTLLM_WORKSPACE_BYTES


#: TensorRT-LLM plugin AUTO one-shot limits, bytes (allreducePlugin.cpp selectImplementation):
#: below 1,000,000 on <= 4 GPUs, below 500,000 above (2 GPUs: the whole workspace).
TRTLLM_PLUGIN_ONESHOT_BYTES_4 = 1000 * 1000
TRTLLM_PLUGIN_ONESHOT_BYTES = 500 * 1000


def trtllm_plugin_uses_oneshot(size_bytes, n: int) -> np.ndarray:
    """TensorRT-LLM plugin AUTO's choice of one-shot within the workspace (array over sizes): always
    on 2 GPUs, below 1 MB on <= 4, below 500 KB above; else NCCL."""
    s = np.asarray(size_bytes, dtype=float)
    if n <= 2:
        return np.ones_like(s, dtype=bool)
    return s < (TRTLLM_PLUGIN_ONESHOT_BYTES_4 if n <= 4 else TRTLLM_PLUGIN_ONESHOT_BYTES)


def vllm_uses_oneshot(size_bytes, n: int) -> np.ndarray:
    """vLLM's choice of the one-shot kernel (array over sizes): always on 2 GPUs; below 512 KiB on
    <= 4 GPUs and below 256 KiB on <= 8; else two-shot."""
    s = np.asarray(size_bytes, dtype=float)
    if n <= 2:
        return np.ones_like(s, dtype=bool)
    limit = VLLM_ONESHOT_BYTES_4 if n <= 4 else VLLM_ONESHOT_BYTES_8 if n <= 8 else 0
    return s < limit


def nccl_seconds(size_bytes, n: int, system: System, gpu: Gpu) -> np.ndarray:
    """The engine's NCCL all-reduce of each of `size_bytes` (positive) on n GPUs, s: the collective
    model (module docstring)."""
    return collective_time_array(Collective.ALL_REDUCE, size_bytes, system, n, gpu=gpu)


#: Hidden sizes TensorRT-LLM's AUTO strategy table covers (customAllReduceUtils.h: 128 ... 8192).
TRTLLM_TABLE_HIDDEN = (128, 8192)


def tp_allreduce_seconds(size_bytes, n: int, system: System, gpu: Gpu, impl: TpAllReduce | str,
                         hidden: int | None = None) -> np.ndarray:
    """Time, s, of one tensor-parallel all-reduce of each of `size_bytes` (array; bytes per rank) on
    n GPUs of `system` as the engine `impl` runs it (module docstring); 0 for empty messages or n = 1.
    `hidden` (the model's hidden size) picks TensorRT-LLM's table; None: inside it."""
    impl = TpAllReduce(impl)
    sizes = np.asarray(size_bytes, dtype=float)
    out = np.zeros_like(sizes)
    pos = sizes > 0
    if n <= 1 or not pos.any():
        return out
    s = sizes[pos]
    nccl = nccl_seconds(s, n, system, gpu)
    off_table = (impl is TpAllReduce.TENSORRT_LLM and hidden is not None
                 and not TRTLLM_TABLE_HIDDEN[0] <= hidden <= TRTLLM_TABLE_HIDDEN[1])
    if impl is TpAllReduce.NCCL or off_table or not custom_kernels_usable(system, gpu, n):
        out[pos] = nccl
        return out
    one = oneshot_seconds(s, n, system, gpu)
    two = twoshot_seconds(s, n, system, gpu)
    if impl is TpAllReduce.TENSORRT_LLM:
        custom = np.minimum(np.minimum(one, two), nccl)
        t = np.where(s <= trtllm_workspace_bytes(n), custom, nccl)
    elif impl is TpAllReduce.TENSORRT_LLM_PLUGIN:
        oneshot = (s <= trtllm_workspace_bytes(n)) & trtllm_plugin_uses_oneshot(s, n)
        t = np.where(oneshot, one, nccl)
    else:
        custom = np.where(vllm_uses_oneshot(s, n), one, two)
        t = np.where(s < VLLM_CUSTOM_MAX_BYTES, custom, nccl)
    out[pos] = t
    return out


__all__ = [
    "TpAllReduce", "barrier_latency_s", "custom_kernels_usable", "custom_link_bytes_s", "nccl_seconds",
    "oneshot_ingress_bytes", "oneshot_seconds", "parse_tp_allreduce", "tp_allreduce_seconds",
    "trtllm_plugin_uses_oneshot", "trtllm_workspace_bytes", "twoshot_ingress_bytes", "twoshot_seconds",
    "vllm_uses_oneshot",
]
