"""Time of one collective on a group of GPUs laid out on a system: alpha-beta over real fabrics.

Definitions (nccl-tests PERFORMANCE.md, ../shared/reference/hardware.md section 3.1):
- size S is what nccl-tests counts: the per-rank buffer for all_reduce / broadcast / send_recv,
  the whole gathered (or scattered) array count x typesize x nranks for all_gather,
  reduce_scatter and all_to_all.
- algbw = S / t; busbw = algbw x factor with factor 2(n-1)/n (all_reduce), (n-1)/n (all_gather,
  reduce_scatter, all_to_all), 1 (broadcast, send_recv). "bus bytes" = S x factor is what crosses
  the bottleneck link of each rank in a bandwidth-optimal algorithm.

Time of one algorithm with one protocol (NCCL's cost model, NVIDIA/nccl src/graph/tuning.cc
ncclTopoTuneModel / ncclTopoGetAlgoTime, as summarised in hardware.md section 3.2):

    t = alpha + (bus_bytes + fill_bytes) / busbw_limit

- alpha: NCCL's latency model, base + per-step hardware latency x steps (tuning.cc baseLat and
  hwLat, constants below, in us).
- busbw_limit: the bottleneck of the layout (see `_ring_time`), each link at its achievable
  fraction of line rate (NVLINK_EFFICIENCY, NIC_EFFICIENCY), capped per protocol as NCCL does
  (LL: half the bandwidth and at most LL_MAX_BUSBW; LL128: 0.92 of it (0.7 with one rank per
  domain), at most nChannels x the per-channel LL128 cap; Simple: full).
- the three protocols NCCL runs (tuning.cc): LL (8-byte lines with a 4-byte flag; small messages),
  LL128 (128-byte lines with an 8-byte flag: 120/128 of the bandwidth at a latency between LL's and
  Simple's; what NCCL picks for mid-size messages on NVLink: on by default only where NVLink
  carries the ring (Volta to Hopper, and Blackwell in NCCL >= 2.24) and not over AWS EFA, whose
  plugin disables it: aws-ofi-nccl src/platform-aws.c, sendrecv/write_support_ll128 false), and
  Simple (the bulk protocol).
- fill (Simple only): the Simple protocol streams each channel through a NCCL_BUFFSIZE staging
  buffer (4 MiB default, NCCL env docs) handed over in NCCL_STEPS = 8 steps of 512 KiB: the
  sender publishes its step counter after each slice and the receiver spins until the counter
  covers its own slice (src/device/prims_simple.h waitPeer: `connStepCache + (isSendNotRecv ?
  NCCL_STEPS : 0) < step + StepPerSlice`; a slice is 1-2 steps), not the whole buffer, while the
  sender may run up to NCCL_STEPS steps ahead. The ring therefore streams once the first step of
  every channel is in flight: fill = nChannels x NCCL_BUFFSIZE / NCCL_STEPS bus bytes (one step;
  the measured intercept below, 34 us ~ 12 MB on 32 channels, is closer to one step than to a
  two-step slice), streamed at the achieved rate (Hockney's n_1/2: achieved busbw = limit x bus /
  (bus + n_1/2)). nChannels (`nccl_channels`): inside a scale-up domain the link rate /
  DOMAIN_CHANNEL_GBPS (32 on NVSwitch H100, 21 on A100, at most NCCL's MAXCHANNELS 32), and
  across domains NCCL_NCHANNELS_PER_NET_PEER = 2 channels per NIC the group uses in a node (NCCL
  env docs; one ring per NIC), at most 32. H100: 32 x 512 KiB = 16.8 MB, 47 us at 360 GB/s.
  Measured: nccl-tests all_reduce_perf on 8 NVLink4 GPUs (kvcache-ai/Mooncake PR #3484, 8 x H20,
  NCCL 2.30): 181 / 242 / 300 / 335 / 344 / 352 / 358 GB/s busbw at 8 / 16 / 32 / 128 / 256 /
  512 / 1024 MiB; a line through the 0.5 and 1 GiB times is 90 us + bus / 364 GB/s (the Simple
  alpha of 56 us + a fill of 34 us), and through 32-128 MiB 27 us + bus / 349 GB/s (LL128);
  vLLM's pynccl on SM90 (vllm-project/vllm PR #42324): 76 / 121 / 195 us at 8 / 16 / 32 MiB on
  8 GPUs, 57 / 86 us at 16 / 32 MiB on 2. (Before 2026-11-24 the fill was the whole buffer per
  channel, 134 MB on H100, fitted to a JAX scaling-book text figure of 150 GB/s at 58 MB, row
  sbook-2: 1.5-2.9x slower than these nccl-tests and pynccl measurements at 8-64 MB.)
- The protocol with the lower time wins (LL for latency-bound small messages, LL128 for mid-size
  messages where it is enabled, Simple for large).

Layouts: the group has `gpus_per_domain` ranks in each scale-up (NVLink/NVSwitch/xGMI) domain
(default: packed, min(n, domain)) and spans `domains` = n / gpus_per_domain of them over the NICs.
Algorithms: ring (every op), tree (all_reduce; NCCL's double binary tree across domains),
nvls (all_reduce with NVLink SHARP; NVLSTree across domains), hierarchical (all_reduce as
reduce-scatter in the domain, all-reduce across domains on 1/gpus_per_domain of the data,
all-gather in the domain, one after the other), auto (the fastest of those NCCL would choose
among: ring, tree, nvls where the fabric has it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

import numpy as np

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.primitives.full_mesh import mesh_ring_links
from gpuplan.primitives.host_memory import (SHM_HOST_ACCESSES_PER_BYTE, host_memory_bytes_s, staged_card_to_card_bytes_s,
                                           staged_through_host)
from gpuplan.primitives.nccl_tuning import (  # noqa: F401  (also read as collectives.<NAME>)
    NVLINK_EFFICIENCY, NIC_EFFICIENCY, NVLS_EFFICIENCY, LL_MAX_BUSBW, LL_BANDWIDTH_FRACTION, TREE_BANDWIDTH_FRACTION, LL128_BANDWIDTH_FRACTION, LL128_ONE_RANK_PER_DOMAIN_FRACTION, LL128_MAX_BUSBW_PER_CHANNEL, LL128_FAMILIES, LL128_OFF_NICS, BASE_LATENCY_US, NVLINK_STEP_US, NET_STEP_US, P2P_PER_PEER_US, MULTI_NODE_RING_SIMPLE_LATENCY_FACTOR, NCCL_BUFFSIZE_BYTES, NCCL_STEPS, NCCL_CHANNELS, DOMAIN_CHANNEL_GBPS, NET_FILL_STEPS, NVLS_FILL_STEPS, P2P_FILL_STEPS, NCCL_CHANNELS_PER_NIC,
)
from gpuplan.primitives.torus_collectives import torus_collective
from gpuplan.specs import Gpu, System


class Collective(str, Enum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"
    SEND_RECV = "send_recv"
    #: Alias of SEND_RECV (same member): the point-to-point send between two pipeline stages.
    P2P = "send_recv"

    @classmethod
    def _missing_(cls, value):
        """Aliases: "p2p" / "sendrecv" -> send_recv, "allreduce" style names without underscore."""
        aliases = {"p2p": "send_recv", "sendrecv": "send_recv", "allreduce": "all_reduce", "allgather": "all_gather",
                   "reducescatter": "reduce_scatter", "alltoall": "all_to_all"}
        text = str(value).lower().replace("-", "_")
        target = aliases.get(text.replace("_", ""), text)
        for member in cls:
            if member.value == target:
                return member
        return None


class Algorithm(str, Enum):
    AUTO = "auto"
    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"
    HIERARCHICAL = "hierarchical"


class Protocol(str, Enum):
    LL = "LL"
    LL128 = "LL128"
    SIMPLE = "Simple"


def _nic_efficiency(nic_kind: str) -> float:
    """Knob `collectives.nic_efficiency.<kind>` (`.default` for other kinds; 0 without NICs)."""
    if nic_kind == "none":
        return 0.0
    return knobs.value(f"collectives.nic_efficiency.{nic_kind if nic_kind in NIC_EFFICIENCY else 'default'}")


def knob_state() -> tuple:
    """The overridden `collectives.*` knobs in effect, as a hashable key for caches of collective
    times (empty when none is overridden): an override of a knob that cannot change a collective
    (e.g. a GEMM efficiency) keeps those caches valid."""
    return knobs.overrides_key("collectives.")


@dataclass(frozen=True)
class CollectiveResult:
    """One collective: time, nccl-tests algbw/busbw (GB/s, decimal), the algorithm and protocol
    chosen, the layout, and the time split into latency (alpha) and bandwidth terms."""

    collective: Collective
    algorithm: Algorithm
    protocol: Protocol
    size_bytes: float
    num_gpus: int
    gpus_per_domain: int
    domains: int
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    latency_s: float
    bandwidth_s: float


def busbw_factor(collective: Collective | str, n):
    """nccl-tests bus-bandwidth factor: 2(n-1)/n all_reduce; (n-1)/n all_gather, reduce_scatter,
    all_to_all; 1 broadcast and send_recv (hardware.md section 3.1). numpy-broadcasting in n."""
    op = Collective(collective)
    n = np.asarray(n, dtype=np.float64)
    if op is Collective.ALL_REDUCE:
        return 2.0 * (n - 1.0) / n
    if op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
        return (n - 1.0) / n
    return np.ones_like(n)


# ----------------------------------------------------------------------------- the fabric
@dataclass(frozen=True)
class _Fabric:
    """Per-GPU achievable bandwidths of a system, GB/s per direction."""

    family: str  # "ampere" / "hopper" / "blackwell" / ... (NCCL constant tables)
    domain_gpus: int
    scaleup_gbps: float  # line rate per GPU
    switched: bool
    nvls: bool
    nic_gbps_per_gpu: float  # line rate per GPU
    nic_efficiency: float
    sharp: bool  # in-network reduction on the scale-out fabric
    nics_per_gpu: float = 1.0  # NICs per GPU of a node (channel count across domains)
    nic_kind: str = "none"
    nvidia: bool = True  # NCCL (LL128 where enabled); False: RCCL and others (LL and Simple)
    host_memory_gbps: float | None = None  # set where the box stages GPU traffic through host memory (no P2P)
    staged_gbps: float | None = None  # per-rank card-to-card rate through the host bridge (no P2P), per direction


def _family(gpu: Gpu | None) -> str:
    """The family whose NCCL constant tables apply: Gpu.family where the tables have it, else Hopper's
    (AMD/other: Hopper-era NCCL/RCCL constants assumed)."""
    family = gpu.family if gpu else None
    return family if family in LL_MAX_BUSBW else "hopper"


def _fabric(system: System, gpu: Gpu | None) -> _Fabric:
    scaleup = system.scaleup_bandwidth_gbps or (gpu.scaleup_bandwidth_gbps if gpu else None) or 0.0
    return _Fabric(
        family=_family(gpu),
        domain_gpus=system.scaleup_domain_gpus,
        scaleup_gbps=float(scaleup),
        switched=system.scaleup_switched,
        nvls=system.nvls,
        nic_gbps_per_gpu=system.scaleout_gbps_per_gpu,
        nic_efficiency=_nic_efficiency(system.nic_kind),
        sharp=system.sharp,
        nics_per_gpu=(system.nics_per_node or 0) / max(1, system.gpus_per_node),
        nic_kind=system.nic_kind,
        nvidia=(gpu.vendor.lower() == "nvidia") if gpu else True,
        host_memory_gbps=host_memory_bytes_s(system) / 1e9 if staged_through_host(system, gpu) else None,
        staged_gbps=staged_card_to_card_bytes_s() / 1e9 if staged_through_host(system, gpu) else None,
    )


def _intra_limit_gbps(f: _Fabric, ranks_in_domain):
    """Achievable per-rank ring bandwidth inside the scale-up domain, GB/s.

    Switched (NVSwitch, a PCIe switch / root complex): every GPU reaches any other at its full link
    rate: B x NVLINK_EFFICIENCY. Point-to-point full mesh (xGMI): a GPU's links are split evenly
    over the domain - 1 peers (B / (domain - 1) per peer, per direction), of which rings over r ranks
    keep `mesh_ring_links` busy: B x links / (domain - 1) x NVLINK_EFFICIENCY. GPUs without P2P
    (GeForce): at most host memory / (2 r) and the measured staged card-to-card rate per direction
    as well (primitives.host_memory, NCCL's SHM transport).
    """
    r = np.asarray(ranks_in_domain, dtype=np.float64)
    if f.host_memory_gbps is not None:  # no P2P: NCCL's SHM transport through host memory
        link = f.scaleup_gbps * knobs.value("collectives.nvlink_efficiency")
        if f.staged_gbps is not None:
            link = min(link, f.staged_gbps)
        return np.minimum(link, f.host_memory_gbps / (SHM_HOST_ACCESSES_PER_BYTE * np.maximum(1.0, r)))
    if f.switched or f.domain_gpus <= 1:
        return np.full_like(r, f.scaleup_gbps * knobs.value("collectives.nvlink_efficiency"))
    return f.scaleup_gbps * mesh_ring_links(r, f.domain_gpus) / (f.domain_gpus - 1) * knobs.value(
        "collectives.nvlink_efficiency")


def _intra_all_to_all_gbps(f: _Fabric, ranks_in_domain):
    """Achievable per-rank bandwidth of an all-to-all inside the scale-up domain, GB/s: each rank
    sends to its r - 1 peers at once. Switched: the GPU's link rate, as `_intra_limit_gbps`. Full
    mesh: one direct link per peer, so r - 1 of the domain - 1 links carry it:
    B x (r - 1) / (domain - 1) x NVLINK_EFFICIENCY (all 7 links of an 8-GPU xGMI mesh)."""
    r = np.asarray(ranks_in_domain, dtype=np.float64)
    if f.switched or f.domain_gpus <= 1:
        return _intra_limit_gbps(f, r)
    peers = np.clip(r - 1.0, 1.0, f.domain_gpus - 1.0)
    return f.scaleup_gbps * peers / (f.domain_gpus - 1) * knobs.value("collectives.nvlink_efficiency")


def _node_egress_gbps(f: _Fabric, ranks_in_domain):
    """Achievable NIC bandwidth out of one domain for this group: ranks x per-GPU NIC x efficiency."""
    return np.asarray(ranks_in_domain, dtype=np.float64) * f.nic_gbps_per_gpu * f.nic_efficiency


def domain_channels_for_link(scaleup_gbps: float) -> float:
    """Channels NCCL runs inside one scale-up domain whose GPUs have `scaleup_gbps` of link rate:
    the link rate / DOMAIN_CHANNEL_GBPS, between 1 and NCCL_CHANNELS (H100 NVLink4 450 GB/s: 32;
    A100 NVLink3 300 GB/s: 21; B200 NVLink5 900 GB/s: capped at 32)."""
    return float(min(NCCL_CHANNELS, max(1.0, round(scaleup_gbps / knobs.value("collectives.domain_channel_gbps")))))


def domain_channels(f: _Fabric) -> float:
    """Channels NCCL runs inside one scale-up domain of the fabric (`domain_channels_for_link`)."""
    return domain_channels_for_link(f.scaleup_gbps)


def nccl_channels(f: _Fabric, ranks_in_domain, domains):
    """Channels NCCL runs a ring on: `domain_channels` inside one domain; across domains
    NCCL_CHANNELS_PER_NIC x the NICs the group's ranks in a domain own (at least 1 NIC), capped at
    NCCL_CHANNELS (module docstring, fill)."""
    nics = np.maximum(1.0, np.asarray(ranks_in_domain, dtype=np.float64) * f.nics_per_gpu)
    across = np.minimum(NCCL_CHANNELS, NCCL_CHANNELS_PER_NIC * nics)
    return np.where(np.asarray(domains) > 1, across, domain_channels(f))


def group_channels(system: System, gpu: Gpu | None, ranks_in_domain, domains):
    """NCCL channels of a ring over `domains` domains with `ranks_in_domain` ranks in each, on `system`."""
    return nccl_channels(_fabric(system, gpu), ranks_in_domain, domains)


#: Bytes of one Simple-protocol step per channel: NCCL_BUFFSIZE / NCCL_STEPS = 512 KiB.
NCCL_STEP_BYTES = NCCL_BUFFSIZE_BYTES // NCCL_STEPS


def fill_bytes(f: _Fabric, ranks_in_domain, domains):
    """Hockney n_1/2 of the Simple protocol, bus bytes (module docstring, fill): nccl_channels x
    NCCL_BUFFSIZE / NCCL_STEPS x the steps in flight before steady state, 1 inside a domain and
    `collectives.net_fill_steps` on rings that cross domains."""
    steps = np.where(np.asarray(domains) > 1, knobs.value("collectives.net_fill_steps"), 1.0)
    return nccl_channels(f, ranks_in_domain, domains) * NCCL_STEP_BYTES * steps


def domain_fill_bytes(f: _Fabric) -> float:
    """`fill_bytes` of a ring inside one domain: domain_channels x NCCL_BUFFSIZE / NCCL_STEPS."""
    return domain_channels(f) * NCCL_STEP_BYTES


def ll128_enabled(f: _Fabric, domains):
    """Whether NCCL runs LL128 on each layout (module docstring; numpy-broadcasting in `domains`):
    an NVIDIA GPU of LL128_FAMILIES on an NVLink scale-up domain, and, across domains, NICs other
    than LL128_OFF_NICS."""
    d = np.asarray(domains)
    if f.family not in LL128_FAMILIES or not f.nvidia or f.scaleup_gbps <= 0:
        return np.zeros(d.shape, dtype=bool)
    return (d <= 1) | (f.nic_kind not in LL128_OFF_NICS)


def _ll_cap(f: _Fabric, domains):
    caps = LL_MAX_BUSBW.get(f.family, LL_MAX_BUSBW["hopper"])
    d = np.asarray(domains)
    return np.where(d <= 1, caps[0], np.where(d == 2, caps[1], caps[2]))


# ----------------------------------------------------------------------------- algorithms (vectorised)
def _ring_time(op: Collective, f: _Fabric, size, n, ppd, domains, protocol: Protocol):
    """Ring (and ring-like p2p patterns) time, seconds.

    Bus bytes per rank cross each rank's scale-up link, and (across domains) each domain's NIC
    egress, once (NCCL builds one ring per NIC, each entering and leaving every domain once):
    t_bw = bus / min(intra, egress). all_to_all instead sends S (ppd-1)/n over NVLink and
    S (n-ppd)/n per rank over its NIC share, concurrently. Steps: 2(n-1) all_reduce, n-1 others,
    1 send_recv; of those, 2(domains-1) resp. domains-1 cross the network (all_to_all: concurrent
    sends, see P2P_PER_PEER_US).
    """
    bus = size * busbw_factor(op, n)
    intra = _intra_limit_gbps(f, ppd) * 1e9
    multi = domains > 1
    egress = np.where(multi, _node_egress_gbps(f, ppd), np.inf) * 1e9
    if op is Collective.ALL_TO_ALL:
        per_gpu_nic = egress / ppd
        intra_a2a = _intra_all_to_all_gbps(f, ppd) * 1e9
        bw_s = np.maximum(size * (ppd - 1) / n / intra_a2a, np.where(multi, size * (n - ppd) / n / per_gpu_nic, 0.0))
    elif op is Collective.SEND_RECV:
        bw_s = size / np.where(multi, np.minimum(intra, egress / ppd), intra)
    else:
        bw_s = bus / np.minimum(intra, egress)
    if op is Collective.ALL_REDUCE:
        steps, net_steps = 2.0 * (n - 1), 2.0 * (domains - 1)
    elif op is Collective.SEND_RECV:
        steps, net_steps = np.ones_like(n), np.where(multi, 1.0, 0.0)
    else:
        steps, net_steps = n - 1.0, domains - 1.0
    key = ("ring", protocol.value)
    alpha_us = BASE_LATENCY_US[key] + (steps - net_steps) * NVLINK_STEP_US[key] + net_steps * NET_STEP_US[key]
    if op is Collective.ALL_TO_ALL:  # concurrent p2p: see P2P_PER_PEER_US
        alpha_us = (BASE_LATENCY_US[key] + NVLINK_STEP_US[key] + np.where(multi, NET_STEP_US[key], 0.0)
                    + (n - 1) * knobs.value("collectives.p2p_per_peer_us"))
    if protocol is Protocol.SIMPLE and op is Collective.ALL_REDUCE:
        alpha_us = np.where(multi, alpha_us * MULTI_NODE_RING_SIMPLE_LATENCY_FACTOR, alpha_us)
    fill = fill_bytes(f, ppd, domains)
    if op in (Collective.ALL_TO_ALL, Collective.SEND_RECV):  # point-to-point: see P2P_FILL_STEPS
        fill = nccl_channels(f, ppd, domains) * NCCL_STEP_BYTES * P2P_FILL_STEPS
    bw = _apply_protocol(f, bw_s, bus, np.minimum(intra, egress), ppd, domains, protocol, fill)
    return bw, alpha_us * 1e-6


def _apply_protocol(f: _Fabric, bw_s, bus, limit_bytes_s, ppd, domains, protocol: Protocol, fill):
    """Bandwidth term per protocol. Simple: t_bw x (1 + fill / bus) (Hockney: the fill is streamed
    at the same achieved rate bus / t_bw). LL: bus / min(0.5 limit, llMaxBw) (or t_bw / 0.5 when
    the op's bottleneck is not the bus formula, whichever is larger). LL128: bus / min(0.92 limit
    (0.7 with one rank per domain), nChannels x LL128_MAX_BUSBW_PER_CHANNEL) (or t_bw / that
    fraction), infinite where NCCL does not enable it (`ll128_enabled`)."""
    if protocol is Protocol.SIMPLE:
        return bw_s * (1.0 + fill / bus)
    if protocol is Protocol.LL128:
        fraction = np.where(np.asarray(ppd) < 2, LL128_ONE_RANK_PER_DOMAIN_FRACTION, LL128_BANDWIDTH_FRACTION)
        cap = nccl_channels(f, ppd, domains) * LL128_MAX_BUSBW_PER_CHANNEL.get(f.family, 0.0) * 1e9
        t = np.maximum(bus / np.minimum(fraction * limit_bytes_s, cap), bw_s / fraction)
        return np.where(ll128_enabled(f, domains), t, np.inf)
    ll_fraction = knobs.value("collectives.ll_bandwidth_fraction")
    ll_bw = np.minimum(ll_fraction * limit_bytes_s, _ll_cap(f, domains) * 1e9)
    return np.maximum(bus / ll_bw, bw_s / ll_fraction)


def _tree_time(f: _Fabric, size, n, ppd, domains, protocol: Protocol):
    """NCCL Tree all_reduce: a chain inside each domain, a double binary tree across domains.
    Bandwidth: 0.92 x the ring limit (a double binary tree sends about 2S out of each domain, like
    the ring). Latency: base + 2 ((ppd-1) intra + log2(domains) net) (tuning.cc)."""
    bus = size * busbw_factor(Collective.ALL_REDUCE, n)
    intra = _intra_limit_gbps(f, ppd) * 1e9
    egress = np.where(domains > 1, _node_egress_gbps(f, ppd), np.inf) * 1e9
    limit = knobs.value("collectives.tree_bandwidth_fraction") * np.minimum(intra, egress)
    key = ("tree", protocol.value)
    alpha_us = BASE_LATENCY_US[key] + 2.0 * ((ppd - 1) * NVLINK_STEP_US[key] + np.log2(domains) * NET_STEP_US[key])
    return _apply_protocol(f, bus / limit, bus, limit, ppd, domains, protocol, fill_bytes(f, ppd, domains)), alpha_us * 1e-6


def _nvls_time(f: _Fabric, size, n, ppd, domains):
    """NVLink SHARP all_reduce (NCCL NVLS; NVLSTree across domains), Simple protocol only.

    In the domain each GPU sends its S through the switch to be reduced (multimem ld_reduce) and
    receives the reduced S (multimem st): S (ppd+1)/ppd crosses each GPU's link per direction, at
    B x NVLINK_EFFICIENCY x nvlsEfficiency (NCCL: Hopper 0.85, Blackwell 0.74). Across domains a
    tree of domains: each domain's NICs carry S (2 domains: one exchange) or 2S (more); with
    SHARP on the scale-out fabric (NCCL NVLS + CollNet/SHARP) the switches reduce, and each domain
    sends its partial S once and receives the result once: S.
    Latency: 25 us NVLS + 2 log2(domains) x 20.9 us (tuning.cc NVLS/NVLSTree).
    """
    eff = knobs.value(f"collectives.nvls_efficiency.{f.family if f.family in NVLS_EFFICIENCY else 'blackwell'}")
    nvls_bw = f.scaleup_gbps * knobs.value("collectives.nvlink_efficiency") * eff * 1e9
    intra_s = size * (ppd + 1.0) / ppd / nvls_bw
    egress = _node_egress_gbps(f, ppd) * 1e9
    net_bytes = np.where((domains == 2) | f.sharp, size, 2.0 * size)
    inter_s = np.where(domains > 1, net_bytes / np.where(domains > 1, egress, 1.0), 0.0)
    bw_s = np.maximum(intra_s, inter_s)
    # fill: the whole staging buffer of every channel (NVLS_FILL_STEPS), at the achieved rate
    rate = size / bw_s
    fill = domain_fill_bytes(f) * NVLS_FILL_STEPS
    bw_s = bw_s + fill / (rate * busbw_factor(Collective.ALL_REDUCE, n) + 1e-30)
    alpha_us = NVLINK_STEP_US[("nvls", "Simple")] + 2.0 * np.log2(domains) * NET_STEP_US[("nvls", "Simple")]
    return bw_s, alpha_us * 1e-6


def _hierarchical_time(f: _Fabric, size, n, ppd, domains):
    """2-D all_reduce: ring reduce-scatter in the domain (bus S (ppd-1)/ppd over NVLink), ring
    all_reduce across domains of S/ppd per GPU on its NIC share (bus 2 (d-1)/d S/ppd), ring
    all-gather in the domain; sequential phases, each with its Simple alpha and fill."""
    intra = _intra_limit_gbps(f, ppd) * 1e9
    nic = np.maximum(_node_egress_gbps(f, ppd) / ppd * 1e9, 1e-30)
    intra_bus = size * (ppd - 1.0) / ppd
    inter_bus = 2.0 * (domains - 1.0) / domains * size / ppd
    key = ("ring", "Simple")
    a_intra = (BASE_LATENCY_US[key] + (ppd - 1) * NVLINK_STEP_US[key]) * 1e-6
    a_inter = (BASE_LATENCY_US[key] + 2 * (domains - 1) * NET_STEP_US[key]) * 1e-6
    fill_intra = np.where(ppd > 1, domain_fill_bytes(f) / intra, 0.0)
    fill_inter = np.where(domains > 1, fill_bytes(f, 1.0, domains) / nic, 0.0)  # one rank per domain per ring
    bw_s = 2 * (intra_bus / intra + fill_intra) + inter_bus / nic + fill_inter
    alpha = np.where(ppd > 1, 2 * a_intra, 0.0) + np.where(domains > 1, a_inter, 0.0)
    return bw_s, alpha


# ----------------------------------------------------------------------------- public API
def _check(op: Collective, algorithm: Algorithm, f: _Fabric, n_max: int, ppd_min: int, domains_max: int, system: System):
    if algorithm is Algorithm.TREE and op is not Collective.ALL_REDUCE:
        raise InputError(f"algorithm: tree supports all_reduce only, not {op.value}; use ring or auto", field="algorithm")
    if algorithm in (Algorithm.NVLS, Algorithm.HIERARCHICAL) and op is not Collective.ALL_REDUCE:
        raise InputError(f"algorithm: {algorithm.value} supports all_reduce only, not {op.value}", field="algorithm")
    if algorithm is Algorithm.NVLS and not f.nvls:
        raise InputError(f"algorithm: {system.id} has no NVLink SHARP (nvls); use ring, tree or auto", field="algorithm")
    if f.scaleup_gbps <= 0 and ppd_min > 1:
        raise InputError(f"system: {system.id} has no scale-up bandwidth in the catalog", field="system")
    if domains_max > 1 and f.nic_gbps_per_gpu <= 0:
        raise InputError(
            f"num_gpus: {n_max} GPUs span {domains_max} scale-up domains but {system.id} has no NICs in the catalog;"
            f" at most {system.scaleup_domain_gpus} GPUs", field="num_gpus")


def _layout(system: System, num_gpus, gpus_per_domain):
    n = np.asarray(num_gpus, dtype=np.float64)
    if np.any(n < 1):
        raise InputError("num_gpus: must be >= 1", field="num_gpus")
    if gpus_per_domain is None:
        ppd = np.minimum(n, system.scaleup_domain_gpus)
    else:
        ppd = np.minimum(np.asarray(gpus_per_domain, dtype=np.float64), n)
        if np.any(ppd < 1) or np.any(ppd > system.scaleup_domain_gpus):
            raise InputError(
                f"gpus_per_domain: must be 1..{system.scaleup_domain_gpus} on {system.id}", field="gpus_per_domain")
    domains = np.ceil(n / ppd)
    return n, ppd, domains


def collective_time_array(
    collective: Collective | str,
    size_bytes,
    system: System,
    num_gpus,
    algorithm: Algorithm | str = Algorithm.AUTO,
    gpu: Gpu | None = None,
    gpus_per_domain=None,
):
    """Vectorised collective time, seconds, over numpy arrays (broadcast) of sizes, group sizes and
    ranks per scale-up domain (default packed). Same formulas as `collective_time`; for `auto` the
    minimum over the algorithms and protocols available. Groups of 1 GPU take 0 s."""
    op, algo = Collective(collective), Algorithm(algorithm)
    if system.ici_torus_axes is not None:  # TPU slices: one `_torus_result` per element
        size_b, n_b = np.broadcast_arrays(np.asarray(size_bytes, dtype=np.float64), np.asarray(num_gpus))
        out = np.zeros(size_b.shape)
        for idx in np.ndindex(size_b.shape):
            if n_b[idx] > 1 and size_b[idx] > 0:
                out[idx] = _torus_result(op, float(size_b[idx]), system, int(n_b[idx])).time_s
        return out
    if gpu is None:
        from gpuplan.catalog import get_gpu  # noqa: PLC0415 - convenience for callers without a Gpu spec
        gpu = get_gpu(system.gpu)
    f = _fabric(system, gpu)
    size = np.asarray(size_bytes, dtype=np.float64)
    n, ppd, domains = _layout(system, num_gpus, gpus_per_domain)
    _check(op, algo, f, int(np.max(n)), int(np.min(ppd)), int(np.max(domains)), system)
    times = _candidates(op, algo, f, size, n, ppd, domains)
    best = np.min(np.stack([t for _, _, t, _ in times]), axis=0)
    return np.where(n > 1, best, 0.0)


def _ring_protocols(op: Collective) -> tuple[Protocol, ...]:
    """Protocols of NCCL's ring for `op`: LL, LL128, Simple; point-to-point patterns (send_recv,
    all_to_all) LL and Simple only (NCCL runs p2p with LL below NCCL_P2P_LL_THRESHOLD, else Simple)."""
    if op in (Collective.SEND_RECV, Collective.ALL_TO_ALL):
        return (Protocol.LL, Protocol.SIMPLE)
    return (Protocol.LL, Protocol.LL128, Protocol.SIMPLE)


def _candidates(op, algo, f, size, n, ppd, domains):
    """[(algorithm, protocol, total time, latency)] for every candidate the request allows."""
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        ring_like = algo in (Algorithm.RING, Algorithm.AUTO)
        if ring_like:
            for proto in _ring_protocols(op):
                bw, a = _ring_time(op, f, size, n, ppd, domains, proto)
                out.append((Algorithm.RING, proto, bw + a, a))
        if op is Collective.ALL_REDUCE and algo in (Algorithm.TREE, Algorithm.AUTO):
            for proto in (Protocol.LL, Protocol.SIMPLE):
                bw, a = _tree_time(f, size, n, ppd, domains, proto)
                out.append((Algorithm.TREE, proto, bw + a, a))
        if op is Collective.ALL_REDUCE and f.nvls and algo in (Algorithm.NVLS, Algorithm.AUTO):
            bw, a = _nvls_time(f, size, n, ppd, domains)
            out.append((Algorithm.NVLS, Protocol.SIMPLE, bw + a, a))
        if op is Collective.ALL_REDUCE and algo is Algorithm.HIERARCHICAL:
            bw, a = _hierarchical_time(f, size, n, ppd, domains)
            out.append((Algorithm.HIERARCHICAL, Protocol.SIMPLE, bw + a, a))
    return out


@lru_cache(maxsize=1 << 16)
def _best(op: Collective, algo: Algorithm, f: _Fabric, size: float, n: float, ppd: float, domains: float,
          knob_key: tuple = ()):
    """(algorithm, protocol, time_s, latency_s) of the fastest candidate; memoised on the (hashable,
    frozen) fabric and layout and on `knob_key` (= `knob_state()`, the collective knobs in effect),
    so repeated scalar queries cost a dictionary lookup."""
    cands = _candidates(op, algo, f, np.float64(size), np.float64(n), np.float64(ppd), np.float64(domains))
    best_algo, best_proto, best_t, best_a = min(cands, key=lambda c: float(c[2]))
    return best_algo, best_proto, float(best_t), float(best_a)


def collective_time(
    collective: Collective | str,
    size_bytes: float,
    system: System,
    num_gpus: int,
    algorithm: Algorithm | str = Algorithm.AUTO,
    gpu: Gpu | None = None,
    gpus_per_domain: int | None = None,
) -> CollectiveResult:
    """Time of one `collective` of `size_bytes` (nccl-tests convention) on `num_gpus` GPUs of
    `system`; see the module docstring for the model. `gpu` defaults to the system's GPU."""
    try:
        op = Collective(collective)
    except ValueError:
        raise InputError(f"collective: unknown '{collective}'; allowed: {', '.join(c.value for c in Collective)}",
                         field="collective") from None
    try:
        algo = Algorithm(algorithm)
    except ValueError:
        raise InputError(f"algorithm: unknown '{algorithm}'; allowed: {', '.join(a.value for a in Algorithm)}",
                         field="algorithm") from None
    if not size_bytes > 0:
        raise InputError(f"size: must be > 0 bytes, got {size_bytes}", field="size")
    if num_gpus < 2:
        raise InputError(f"num_gpus: a collective needs at least 2 GPUs, got {num_gpus}", field="num_gpus")
    if system.ici_torus_axes is not None:
        return _torus_result(op, float(size_bytes), system, int(num_gpus))
    if gpu is None:
        from gpuplan.catalog import get_gpu  # noqa: PLC0415
        gpu = get_gpu(system.gpu)
    f = _fabric(system, gpu)
    n, ppd, domains = _layout(system, num_gpus, gpus_per_domain)
    _check(op, algo, f, num_gpus, int(ppd), int(domains), system)
    best_algo, best_proto, t, latency = _best(op, algo, f, float(size_bytes), float(n), float(ppd), float(domains),
                                              knob_state())
    algbw = size_bytes / t / 1e9
    return CollectiveResult(
        collective=op, algorithm=best_algo, protocol=best_proto, size_bytes=float(size_bytes), num_gpus=int(num_gpus),
        gpus_per_domain=int(ppd), domains=int(domains), time_s=t, algbw_gbps=algbw,
        busbw_gbps=algbw * float(busbw_factor(op, num_gpus)), latency_s=latency, bandwidth_s=t - latency,
    )


def _torus_result(op: Collective, size_bytes: float, system: System, num_gpus: int) -> CollectiveResult:
    """`collective_time` on an ICI torus (TPU slices): `primitives.torus_collectives.torus_collective`
    (bidirectional rings along the slice's axes, DCN between slices; the scaling book's formulas)."""
    t = torus_collective(op.value, size_bytes, system, num_gpus, _nic_efficiency(system.nic_kind))
    algbw = size_bytes / t.time_s / 1e9
    return CollectiveResult(
        collective=op, algorithm=Algorithm.RING, protocol=Protocol.SIMPLE, size_bytes=size_bytes, num_gpus=num_gpus,
        gpus_per_domain=t.chips_per_slice, domains=t.slices, time_s=t.time_s, algbw_gbps=algbw,
        busbw_gbps=algbw * float(busbw_factor(op, num_gpus)), latency_s=t.latency_s, bandwidth_s=t.bandwidth_s,
    )


def asymptotic_busbw_gbps(collective, system: System, num_gpus: int, algorithm="auto", gpu: Gpu | None = None) -> float:
    """Large-message busbw (size -> infinity), GB/s: the default when a measurement states no size."""
    big = 1e15
    return collective_time(collective, big, system, num_gpus, algorithm, gpu).busbw_gbps

__all__ = [
    "Algorithm", "Collective", "CollectiveResult", "Protocol", "asymptotic_busbw_gbps", "busbw_factor",
    "collective_time", "collective_time_array", "group_channels",
]
_ = math
