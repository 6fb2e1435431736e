"""Device memory NCCL holds per GPU for its communicators' connection buffers.

For every connection (one peer on one channel) NCCL allocates one staging buffer per protocol:
src/transport/p2p.cc p2pRecvSetup adds `comm->buffSizes[p]` for each protocol p to the receiver's
allocation (the Simple one moves to the sender, p2pSendSetup, under P2P read; the net transport,
src/transport/net.cc, maps one buffer per protocol likewise). The sizes are src/init.cc
computeBuffSizes' defaults (NCCL 2.30.7; constants in src/include/device.h):

    LL      NCCL_LL_LINES_PER_THREAD 8 x NCCL_LL_MAX_NTHREADS 512 x NCCL_STEPS 8 x 16 B  =   524,288 B
    LL128   NCCL_LL128_ELEMS_PER_THREAD 120 x NCCL_LL128_MAX_NTHREADS 640 x NCCL_STEPS 8 x 8 B
                                                                                       = 4,915,200 B
    Simple  NCCL_BUFFSIZE default 1 << 22 (NCCL env docs: 4 MiB)                        = 4,194,304 B

A ring receives from one peer per channel, so one communicator holds

    channels x (LL + LL128 + Simple) = channels x 9,633,792 B per GPU

with channels the collective model's ring channel count inside a scale-up domain
(collectives.domain_channels_for_link: 32 on NVSwitch H100, 21 on NVLink3 A100; NCCL_CHANNELS = 32
where the fabric is not known, as in training memory, which is given no system):
32 x 9,633,792 B = 308 MB (294 MiB). Not counted: tree, NVLS and point-to-point connections, which
NCCL (>= 2.22, NCCL_RUNTIME_CONNECT=1 by default) connects only when a collective first runs that
algorithm. For comparison, NVIDIA aiconfigurator's h100_sxm system YAML records `nccl_mem` of
342 MiB (tp 2) and 392 MiB (tp 4, 8) as an observed correction. AMD parts (RCCL, NCCL's fork) are
given NCCL's sizes.

Training memory counts one communicator per parallel group of more than one GPU
(workloads.training.memory.nccl_communicators); serving memory one per replica of more than one
GPU (workloads.inference.cost.memory.memory_plan). These replace two estimates, 512 MiB for any
multi-GPU training job and 400 MB for any multi-GPU serving replica (neither was fitted).
"""

from __future__ import annotations

import numpy as np

from gpuplan.primitives.collectives import NCCL_BUFFSIZE_BYTES, NCCL_CHANNELS, NCCL_STEPS, domain_channels_for_link
from gpuplan.specs import Gpu, System

#: LL protocol buffer per connection: NCCL_LL_LINES_PER_THREAD (8) x NCCL_LL_MAX_NTHREADS (512) x
#: NCCL_STEPS x sizeof(union ncclLLFifoLine) (16 B) (NCCL src/init.cc DEFAULT_LL_BUFFSIZE).
NCCL_LL_BUFFSIZE_BYTES = 8 * 512 * NCCL_STEPS * 16
#: LL128 protocol buffer per connection: NCCL_LL128_ELEMS_PER_THREAD (120) x NCCL_LL128_MAX_NTHREADS
#: (640) x NCCL_STEPS x sizeof(uint64_t) (NCCL src/init.cc DEFAULT_LL128_BUFFSIZE).
NCCL_LL128_BUFFSIZE_BYTES = 120 * 640 * NCCL_STEPS * 8
#: Buffers of one connection, every protocol: LL + LL128 + Simple (module docstring).
CONNECTION_BUFFER_BYTES = NCCL_LL_BUFFSIZE_BYTES + NCCL_LL128_BUFFSIZE_BYTES + NCCL_BUFFSIZE_BYTES


def ring_channels(system: System, gpu: Gpu | None = None) -> float:
    """Ring channels of a communicator inside one scale-up domain of `system`: the collective
    model's `domain_channels_for_link` of its link rate (the GPU's where the system gives none)."""
    link = system.scaleup_bandwidth_gbps or (gpu.scaleup_bandwidth_gbps if gpu else None) or 0.0
    return domain_channels_for_link(float(link))


def nccl_buffer_bytes(communicators, channels: float = NCCL_CHANNELS):
    """Per-GPU bytes of NCCL connection buffers: communicators x channels x one ring connection's
    buffers of every protocol (CONNECTION_BUFFER_BYTES; module docstring). Works on numpy arrays of
    communicator counts."""
    return np.asarray(communicators, dtype=float) * channels * CONNECTION_BUFFER_BYTES


__all__ = ["CONNECTION_BUFFER_BYTES", "NCCL_LL128_BUFFSIZE_BYTES", "NCCL_LL_BUFFSIZE_BYTES", "nccl_buffer_bytes",
           "ring_channels"]
