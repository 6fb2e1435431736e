"""NCCL's tuning constants and the fitted efficiencies of the collective model, each with its source
(NCCL src/graph/tuning.cc, src/include/collectives.h, the env docs; nccl-tests measurements). Read by
primitives.collectives, which documents how each enters a collective's time."""

from __future__ import annotations

from gpuplan import knobs


# ----------------------------------------------------------------------------- constants (sourced)
#: Achievable fraction of NVLink/NVSwitch line rate for NCCL's Simple protocol. nccl-tests ring
#: all_reduce busbw on 8-GPU NVSwitch nodes: H100 about 370 of 450 GB/s (JAX scaling book: "it is
#: difficult in practice to exceed 370 GB/s"), A100 235 of 300 (ml-engineering table): ~0.8.
NVLINK_EFFICIENCY = knobs.register(
    "collectives.nvlink_efficiency", unit="fraction of line rate", default=0.80, low=0.3, high=1.0,
    source="nccl-tests ring all_reduce busbw on 8-GPU NVSwitch nodes: H100 about 370 of 450 GB/s (JAX scaling book), A100 235 of 300 (ml-engineering)",
    scales="every scale-up (NVLink / NVSwitch / xGMI) link's achievable rate: ring, tree, NVLS and p2p",
    fitted_on=("sbook", "mleng"))
#: Achievable fraction of NIC line rate (RDMA, large messages). InfiniBand/RoCE: NDR 400G carries
#: 50 GB/s of line rate; nccl-tests multi-node busbw reaches about 93-95% of it with 8 NICs per node
#: (assumption, in line with the EFA figure). EFA: ml-engineering P6-B200 4 nodes, 382 GB/s busbw at
#: 16 GiB over 8x400 Gb/s = 400 GB/s per node: 0.955; p5en ring 4 GiB 365/400 = 0.91; mean 0.93.
#: TCP (GPUDirect-TCPXO): no published busbw read; 0.7 assumed. Omni-Path: 0.85 assumed.
NIC_EFFICIENCY = {
    kind: knobs.register(
        f"collectives.nic_efficiency.{kind}", unit="fraction of line rate", default=v, low=0.2, high=1.0, source=src,
        scales=f"scale-out bandwidth of {kind if kind != 'default' else 'other'} NICs (every collective that crosses"
               " scale-up domains)", fitted_on=fitted)
    for kind, v, src, fitted in (
        ("infiniband", 0.93, "assumption: NDR nccl-tests multi-node busbw about 93-95% of line rate with 8 NICs per node, in line with the EFA figure", ()),
        ("roce", 0.93, "assumption: as InfiniBand", ()),
        ("efa", 0.93, "ml-engineering P6-B200 4 nodes 382 GB/s busbw at 16 GiB over 400 GB/s per node (0.955); p5en ring 4 GiB 365/400 (0.91); mean", ("mleng",)),
        ("omnipath", 0.85, "assumption", ()),
        ("tcp", 0.70, "assumption (GPUDirect-TCPXO: no published busbw read)", ()),
        ("default", 0.90, "assumption for NIC kinds without their own knob", ()),
    )
}
NIC_EFFICIENCY["none"] = 0.0  # no NICs: nothing to scale (not a knob)

#: NCCL tuning.cc nvlsEfficiency: NVLS reduction throughput relative to the link, per architecture.
NVLS_EFFICIENCY = {
    family: knobs.register(
        f"collectives.nvls_efficiency.{family}", unit="fraction of NVLink rate", default=v, low=0.2, high=1.0,
        source=f"NCCL src/graph/tuning.cc nvlsEfficiency ({family})",
        scales=f"NVLink SHARP (NVLS) all_reduce reduction throughput on {family} (and other families: blackwell)")
    for family, v in (("hopper", 0.85), ("blackwell", 0.74))
}

#: NCCL tuning.cc llMaxBws (GB/s busbw cap of the LL protocol) [1 node, 2 nodes, >= 4 nodes].
LL_MAX_BUSBW = {
    "volta": (39.0, 39.0, 20.4), "ampere": (87.7, 22.5, 19.0),
    "hopper": (141.0, 45.0, 35.0), "blackwell": (282.0, 90.0, 70.0),
}
#: LL moves 8-byte lines carrying 4 bytes of data: half the bandwidth (NCCL: min(llMaxBw, 0.5 busBw)).
LL_BANDWIDTH_FRACTION = knobs.register(
    "collectives.ll_bandwidth_fraction", unit="fraction", default=0.5, low=0.05, high=0.5,
    source="NCCL LL protocol: 8-byte lines carry 4 bytes of data (tuning.cc min(llMaxBw, 0.5 busBw))",
    scales="bandwidth of the LL protocol (small messages)")
#: NCCL tuning.cc: Tree all_reduce bandwidth is min(0.92 x busBw, ...).
TREE_BANDWIDTH_FRACTION = knobs.register(
    "collectives.tree_bandwidth_fraction", unit="fraction", default=0.92, low=0.3, high=1.0,
    source="NCCL src/graph/tuning.cc: Tree all_reduce bandwidth min(0.92 x busBw, ...)",
    scales="bandwidth of NCCL Tree all_reduce")

#: LL128 moves 128-byte lines carrying 120 bytes of data: NCCL tuning.cc ring LL128 busBw =
#: min(busBw x 0.92 (0.7 when ppn < 2: one rank per node sends and receives through its NIC),
#: nChannels x perChMaxRingLL128Bw).
LL128_BANDWIDTH_FRACTION = 0.92
LL128_ONE_RANK_PER_DOMAIN_FRACTION = 0.7
#: NCCL tuning.cc perChMaxRingLL128Bws, GB/s per channel (Volta, Ampere 20.0; Hopper 36.7; Blackwell:
#: Hopper's value assumed).
LL128_MAX_BUSBW_PER_CHANNEL = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 36.7}
#: GPU families on which NCCL enables LL128 by default over NVLink (tuning.cc: compute capability 7.0,
#: 8.0, 9.0; 10.0 from NCCL 2.24).
LL128_FAMILIES = frozenset(LL128_MAX_BUSBW_PER_CHANNEL)
#: NIC kinds over which LL128 is off: AWS EFA (aws-ofi-nccl src/platform-aws.c: LL128 unsupported,
#: sendrecv/write_support_ll128 false) and TCP (NCCL enables LL128 only with the NIC on the GPU's
#: PCIe switch, GPUDirect RDMA: tuning.cc typeInter <= PATH_PXB / PATH_PXN).
LL128_OFF_NICS = frozenset({"efa", "tcp", "none"})

#: NCCL latencies, microseconds (tuning.cc): base per algorithm/protocol, hardware per step.
BASE_LATENCY_US = {("ring", "LL"): 6.6, ("ring", "LL128"): 14.0, ("ring", "Simple"): 8.4, ("tree", "LL"): 6.8, ("tree", "Simple"): 8.4,
                   ("nvls", "Simple"): 0.0}
NVLINK_STEP_US = {("ring", "LL"): 0.6, ("ring", "LL128"): 1.9, ("ring", "Simple"): 3.4, ("tree", "LL"): 0.6, ("tree", "Simple"): 4.0,
                  ("nvls", "Simple"): 25.0}
NET_STEP_US = {("ring", "LL"): 2.7, ("ring", "LL128"): 4.0, ("ring", "Simple"): 14.0, ("tree", "LL"): 5.0, ("tree", "Simple"): 14.0,
               ("nvls", "Simple"): 20.9}
#: all_to_all is a group of point-to-point sends that NCCL posts to all peers at once (ncclGroupStart/End),
#: so their latencies overlap: alpha = base + one NVLink step (+ one network step across domains) + a
#: per-peer issue cost. The per-peer cost (0.5 us) is a modelling assumption, not an NCCL constant.
P2P_PER_PEER_US = knobs.register(
    "collectives.p2p_per_peer_us", unit="us", default=0.5, low=0.0, high=20.0,
    source="modelling assumption (not an NCCL constant)",
    scales="latency of all_to_all: per-peer issue cost of the grouped point-to-point sends")
#: NCCL tuning.cc: ring Simple all_reduce across nodes pays its latency x 1.4.
MULTI_NODE_RING_SIMPLE_LATENCY_FACTOR = 1.4

#: Simple-protocol staging buffer per channel: NCCL_BUFFSIZE default 4 MiB (NCCL env docs).
NCCL_BUFFSIZE_BYTES = 4 * 1024**2
#: Steps the staging buffer is handed over in (NCCL src/include/device.h NCCL_STEPS = 8): one step,
#: NCCL_BUFFSIZE / NCCL_STEPS = 512 KiB, is the unit a receiver waits for.
NCCL_STEPS = 8
#: NCCL's MAXCHANNELS: the channel count it uses inside NVSwitch H100 domains (and the cap everywhere).
NCCL_CHANNELS = 32
#: Line rate per channel inside a scale-up domain, GB/s: NCCL's graph search sizes the channel
#: count to the GPU's link bandwidth over a per-channel speed (search.cc speed arrays), so the
#: channel count scales with the link rate. 450 GB/s / 32 channels from the H100 calibration
#: (JAX scaling book: 150 GB/s busbw at 58 MB on 8xH100 = 32 channels of 4 MiB).
DOMAIN_CHANNEL_GBPS = knobs.register(
    "collectives.domain_channel_gbps", unit="GB/s per channel", default=450.0 / NCCL_CHANNELS, low=1.0, high=100.0,
    source="32 channels on an 8 x H100 NVSwitch node over 450 GB/s (NCCL MAXCHANNELS 32; first chosen on the JAX scaling-book"
           " 58 MB point; nccl-tests on 8 x H20, Mooncake PR #3484: a Simple fill of ~34 us at 1 GiB ~ 32 x 512 KiB)",
    scales="NCCL channel count inside a scale-up domain (link rate / this), hence the Simple protocol's fill bytes",
    fitted_on=("sbook",))
#: Simple-protocol steps per channel in flight before a ring that crosses domains streams: over a
#: network the receiver's proxy returns each step's credit after a host round trip (NCCL net
#: transport, src/transport/net.cc), so the steady state needs the whole buffer in flight, up to
#: NCCL_STEPS = 8 steps (prior); fitted on the 4 x 8 B200 EFA rows at 16 and 128 MiB.
NET_FILL_STEPS = knobs.register(
    "collectives.net_fill_steps", unit="NCCL steps per channel", default=8.0, low=1.0, high=8.0,
    source="prior: NCCL_STEPS = 8 (the whole NCCL_BUFFSIZE per channel in flight over the network); ml-engineering "
           "4 x 8 B200 over EFA, 64 GB/s at 16 MiB and 198 GB/s at 128 MiB",
    scales="the Simple protocol's fill on rings that cross scale-up domains (mid-size multi-node collectives)",
    fitted_on=("mleng",))
#: NCCL steps per channel of the NVLS fill: the whole buffer (NCCL_STEPS), as the ring's fill was before
#: 2026-11-24. No mid-size NVLS measurement was found to re-derive it; NCCL's author on nccl-tests
#: issue #212 (8 x H100): NVLS reaches its ~480 GB/s busbw peak only above 256 MiB ("256M is too
#: small to reach peak bandwidth"), a large n_1/2 (32 x 4 MiB = 134 MB: 68% of the peak at 256 MiB).
NVLS_FILL_STEPS = NCCL_STEPS
#: NCCL steps per channel of the fill of point-to-point patterns (send_recv, all_to_all: NCCL's p2p
#: transport, its own chunking and channels per peer): the whole buffer (NCCL_STEPS), as before
#: 2026-11-24. The one-step fill is derived from all-reduce measurements (module docstring); no
#: mid-size alltoall_perf / sendrecv_perf measurement was found to re-derive this one.
P2P_FILL_STEPS = NCCL_STEPS
#: NCCL_NCHANNELS_PER_NET_PEER default (NCCL env docs): channels per NIC on rings that leave a node.
NCCL_CHANNELS_PER_NIC = 2
