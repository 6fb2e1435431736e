"""Mixture-of-experts training cost terms: the expert all-to-all (how many bytes, over which links)
and what of it a training step exposes. `step.assembly` calls `ep_comm_seconds` here.

Symbols, per GPU and micro-batch: t_local tokens the rank holds before dispatch (its sequence shard
with sequence parallelism), k = top_k routed experts per token, E routed experts, h hidden, b bytes
per element of the dispatched activations (bf16: 2), ep the expert-parallel group, D its scale-up
(NVLink) domain: ep_d = the group's ranks inside one domain, ep / ep_d the domains it spans.

Volume (Megatron-core token dispatcher, megatron/core/transformer/moe/token_dispatcher.py: dispatch
= permute + all-to-all of the routed copies, combine = the reverse all-to-all + unpermute; each is
run again, transposed, in backward):

    routed bytes per all-to-all        R = t_local x k x h x b
    all-to-alls per MoE layer          4 (dispatch, combine; forward and backward)
    bytes per MoE layer and GPU        4 R            (`a2a_bytes_per_layer`)
    tokens per expert (balanced)       ep x t_expert x k / E per local expert (`tokens_per_expert`)

Where it runs (uniform, balanced routing, the footnote of the Megatron-Bridge MoE tables: "force-
balanced router"): a routed copy lands on any of the ep ranks with probability 1 / ep, so a share
(ep_d - 1) / ep of R crosses NVLink and 1 - ep_d / ep (`cross_domain_fraction`) leaves the domain
over the NICs. Inside one NVL8 node or one GB200 NVL72 rack (ep <= D) nothing crosses the network.
DeepEP's normal kernels and Megatron's HybridEP (the flex dispatcher of the published DeepSeek-V3,
Qwen3 and gpt-oss recipes: Megatron-Bridge scripts/performance/configs/*_workload_base_configs.py,
`moe_flex_dispatcher_backend`) send a token ONCE to each destination domain over RDMA and fan it out
over NVLink there (DeepEP README: "kernels optimized for the asymmetric-domain bandwidth forwarding,
such as forwarding data from NVLink domain to RDMA domain"); NCCL's all-to-all sends every routed
copy. Network bytes per GPU and all-to-all:

    one copy per routed expert (NCCL)  R x (1 - ep_d / ep)
    one copy per domain (DeepEP)       t_local x h x b x (n - 1) (1 - (1 - 1/n)^k),  n = ep / ep_d
                                       (expected distinct other domains among k uniform draws;
                                       under node-limited routing, fewer: `expert_routing`)

`training.moe_dispatch_dedup` blends the two (1 = DeepEP / HybridEP). The NVLink and the network
legs run concurrently (DeepEP pipelines them): one all-to-all takes the longer of the two, each from
`primitives.collectives` (all_to_all inside the domain, a send over the GPU's NIC share across).

What overlaps (`overlap_window`): Megatron-core's batch-level EP overlap (`--overlap-moe-expert-parallel-comm`, MCore
v0.14; `moe_a2a_overlap` in the Megatron-Bridge recipes) runs the all-to-all of one micro-batch
while another micro-batch's attention / expert compute of the same layer runs (1F1B: the forward
of micro-batch i+1 beside the backward of micro-batch i); DeepSeek's DualPipe does the same
(DeepSeek-V3 report sec. 3.2.1: "both all-to-all and PP communication can be fully hidden"). In
Megatron-core the combined forward-backward step exists for pp = 1 (two micro-batches or more) and
for the interleaved pipeline (vpp > 1), not for plain 1F1B with pp > 1 (schedules.py), and
`--moe-shared-expert-overlap` hides part of it behind the shared expert. Frameworks without
batch-level overlap (torchtitan's DeepEP MoE and NeMo AutoModel overlap the shared experts only;
DeepSpeed-MoE; `other`, unless it states DualPipe) hide it behind the shared experts' compute alone. Per MoE layer and micro-batch, with c the
layer's all-to-all time and w the window (the other micro-batch's forward + backward of the layer,
or the shared experts'):

    exposed = max(0, c - a w) + s min(c, a w) + o

a = `training.moe_a2a_overlap` (the share of the window the framework uses; fitted: recipes turn the
overlap on or off, the rows do not say which), s = EP_COMM_SMS / SMs (the communication kernels hold
those SMs while the compute they hide behind runs: DeepSeek-V3 report sec. 3.2.2, 20 of 132 SMs),
o = `fixed_seconds_per_layer` (removed by a full-iteration CUDA graph only: `step.cuda_graphs`): the
latency-bound part of a MoE layer that no size term covers and
nothing hides: a fixed o per layer (router softmax / top-k, token counting, and the dispatcher's
device-to-host copy of the per-expert token counts, after which the host must launch the grouped
GEMM: `MoEAlltoAllTokenDispatcher` `tokens_per_expert`; the CUDA-graph scopes "moe_router" /
"moe_preprocess" capture the router launches but not that sync, a full-iteration graph removes it all:
`step.cuda_graphs`) plus o_e per local expert where the framework issues the expert
GEMMs one by one (`per_expert_launches`: TransformerEngine's GroupedLinear runs one GEMM, and in
FP8 one quantize, per local expert in BF16 / FP8 per-tensor recipes; its block-scaled MXFP8 / NVFP4
recipes run one grouped quantize and one grouped GEMM for all local experts, TE v2.13 #2586 and
v2.14 #2748, GROUPED_KERNEL_PRECISIONS). Both fitted. With a single
micro-batch and no pipeline there is no other micro-batch to hide behind (w = 0).

Charged elsewhere: the experts' GEMMs at their real per-expert shapes (`step.compute.layer_gemm_calls`:
E / ep local experts of `tokens_per_expert` rows each, so a small-M grouped GEMM pays the GEMM
efficiency model's wave and memory-bound penalties), the permute / unpermute copies and the FP8 /
MXFP8 casts of the experts' inputs (`step.compute.elementwise_seconds`, `expert_cast_elements`), the
MLA projections and core (the inventory). Not charged: DeepSeek-V3's MTP module; the published
layouts give it (with the loss) a short last virtual stage (Megatron-Bridge `pp_layout`
"...tmL"), so it does not load the busiest stage the step time follows.
"""

from __future__ import annotations

import numpy as np

from gpuplan import knobs
from gpuplan.layers.inventory import local_gemm_shape
from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.parallel_groups import collective_seconds_array, group_per_node
from gpuplan.specs.execution import Framework
from gpuplan.specs.plan import Precision
from gpuplan.workloads.training.step.cuda_graphs import moe_fixed_time_captured
from gpuplan.workloads.training.step.expert_routing import distinct_domains_hit, reachable_domains, round_robin_domains_hit
from gpuplan.workloads.training.step.overlap import exposed_behind

#: Frameworks with batch-level EP overlap (another micro-batch's compute hides the all-to-all):
#: Megatron-core `--overlap-moe-expert-parallel-comm` (MCore v0.14; its combined 1F1B schedules,
#: schedules.py). DeepSeek's DualPipe is a schedule, not a stack: a plan that states
#: `PipelineSchedule.DUALPIPE` gets its overlapped F&B chunks on any stack (`overlap_window`).
#: Everything else hides the all-to-all behind the layer's shared experts only: torchtitan's DeepEP MoE
#: (torchtitan/distributed/deepep, `DeepEPMoE.forward`); the `other` stacks of the public rows, NeMo
#: AutoModel (NVIDIA-NeMo/Automodel@89e3a9fdd604 nemo_automodel/components/moe/layers.py `MoE.forward`:
#: "Execute shared experts in a separate stream to overlap compute with the communication for grouped
#: experts"; its pipeline is torch.distributed.pipelining, without a combined forward-backward step) and
#: DeepSeek-V2's HAI-LLM (arXiv 2405.04434 sec. 3.1.3: "we also overlap the computation of shared
#: experts with the expert parallel all-to-all communication"); DeepSpeed-MoE's all-to-all is
#: synchronous; Composer FSDP has no EP.
BATCH_OVERLAP_FRAMEWORKS = (Framework.MEGATRON, Framework.MAXTEXT, Framework.TRANSFORMERS)
#: Frameworks whose expert GEMMs are issued expert by expert: TransformerEngine's GroupedLinear
#: (Megatron-core `--moe-grouped-gemm`: `general_grouped_gemm` takes one GEMM per local expert, with
#: a quantize each in FP8 / MXFP8) and DeepSpeed-MoE (a Python loop over its local expert modules).
#: torchtitan runs all local experts in one `torch._grouped_mm` kernel (GroupedExperts,
#: use_grouped_mm), DeepSeek's stack in DeepGEMM's grouped kernels, Composer in MegaBlocks' grouped
#: kernels: no per-expert launches.
PER_EXPERT_LAUNCH_FRAMEWORKS = (Framework.MEGATRON, Framework.DEEPSPEED)
#: Block-scaled recipes whose expert GEMMs TransformerEngine runs as ONE grouped kernel, not one GEMM
#: and one quantize per local expert: TE v2.13 "Added MXFP8 quantization kernels for grouped tensors
#: used in MoE" (NVIDIA/TransformerEngine#2586, NVFP4 #2655) and v2.14 "Added BF16 and MXFP8 grouped
#: GEMM support with on-device group sizes" (#2748; release notes). FP8 per-tensor scaling (Hopper)
#: and BF16 keep GroupedLinear's loop of per-expert GEMMs on side streams (general_grouped_gemm).
GROUPED_KERNEL_PRECISIONS = (Precision.MXFP8, Precision.NVFP4)

#: SMs the dispatch / combine kernels hold while they overlap compute: DeepSeek-V3 technical report
#: (arXiv 2412.19437) sec. 3.2.2, "only 20 SMs are sufficient to fully utilize the bandwidths of IB
#: and NVLink" (of 132 on H800); DeepEP's normal kernels default to the same 20 (24 in later tests).
EP_COMM_SMS = 20.0
#: Bytes per dispatched element: bf16 activations (Megatron dispatches in the activation dtype; FP8
#: dispatch is DeepSeek's own, not the Megatron default).
DISPATCH_BYTES = 2.0

MOE_A2A_OVERLAP = knobs.register(
    "training.moe_a2a_overlap", unit="fraction", default=1.0, low=0.0, high=1.0,
    source="fitted: Megatron-core batch-level EP overlap (--overlap-moe-expert-parallel-comm) / DualPipe hide the "
           "expert all-to-all behind another micro-batch's compute of the layer; the share used depends on the recipe",
    scales="expert all-to-all time hidden behind the other micro-batch's layer compute",
    fitted_on=("mbr-moe", "dsv3", "mbridge", "megpr6429", "megft"))
MOE_LAYER_OVERHEAD_S = knobs.register(
    "training.moe_layer_overhead_s", unit="s", default=0.0015, low=0.0, high=0.01,
    source="fitted: fixed time per MoE layer and micro-batch (forward + backward): router / top-k / token-count "
           "kernels and the token dispatcher's device-to-host copy of tokens_per_expert before the grouped GEMM; "
           "0 under a full-iteration CUDA graph (step.cuda_graphs), which the fit sees on the Megatron-Bridge rows "
           "whose recipe ran one",
    scales="exposed fixed time per MoE layer and micro-batch",
    fitted_on=("mbr-moe", "dsv3", "mbridge", "megpr6429", "megft"))
MOE_EXPERT_LAUNCH_S = knobs.register(
    "training.moe_expert_launch_s", unit="s", default=0.0003, low=0.0, high=0.001,
    source="fitted: fixed time per local expert, MoE layer and micro-batch (forward + backward): TransformerEngine's "
           "GroupedLinear issues one GEMM (and, in FP8 / MXFP8, one quantize) per local expert (general_grouped_gemm "
           "loops over the experts), so launches grow with E / ep",
    scales="exposed fixed time per local expert, MoE layer and micro-batch",
    fitted_on=("mbr-moe", "dsv3", "mbridge", "megpr6429", "megft"))
MOE_DISPATCH_DEDUP = knobs.register(
    "training.moe_dispatch_dedup", unit="fraction", default=1.0, low=0.0, high=1.0,
    source="fitted (between two sourced regimes): DeepEP README (normal kernels: NVLink-to-RDMA forwarding) and "
           "Megatron HybridEP send one network copy per destination domain (1; the flex dispatcher of most "
           "Megatron-Bridge MoE recipes); NCCL all-to-all (alltoall dispatcher) sends every routed copy (0)",
    scales="network bytes of the expert all-to-all across scale-up domains",
    fitted_on=("mbr-moe", "dsv3", "mbridge", "megpr6429", "megft"))


def expert_cast_elements(g, moe, hidden: int):
    """GEMM-input elements of one MoE layer that a low-precision (FP8 / MXFP8 / NVFP4) recipe
    quantizes per micro-batch on one GPU, forward: the routed copies into the experts' up projection
    (t_expert k h) and into their down projection (t_expert k f_e / etp), and the shared experts'
    inputs (t h and t n_s f_s / tp), the same per-element cast + transpose TransformerEngine does for
    every linear (`step.compute.FP8_CAST_BYTES`)."""
    h, k, fe = float(hidden), float(moe.top_k), float(moe.expert_ffn)
    shared_ffn = float(moe.shared_experts * (moe.shared_expert_ffn or moe.expert_ffn))
    routed = g.t_expert * k * (h + fe / g.etp)
    shared = g.t * (h + shared_ffn / g.tp) if moe.shared_experts else 0.0
    return routed + shared


def tokens_per_expert(tokens, top_k, experts):
    """Tokens each routed expert receives under balanced routing: tokens x top_k / experts
    (`tokens` = all tokens routed over the experts in question, e.g. ep x t_expert for the E
    experts of one EP group)."""
    return np.asarray(tokens, dtype=np.float64) * float(top_k) / float(experts)


def routed_bytes(t_local, top_k, hidden, bytes_per_element=DISPATCH_BYTES):
    """R = t_local x k x h x b: one all-to-all's send buffer on one GPU (every routed copy)."""
    return np.asarray(t_local, dtype=np.float64) * float(top_k) * float(hidden) * float(bytes_per_element)


def a2a_bytes_per_layer(t_local, top_k, hidden, bytes_per_element=DISPATCH_BYTES):
    """Bytes one GPU sends in one MoE layer and micro-batch: 4 R (dispatch + combine, forward + backward)."""
    return 4.0 * routed_bytes(t_local, top_k, hidden, bytes_per_element)


def ep_ranks_per_domain(ep, etp, domain_gpus: int):
    """EP ranks in one scale-up domain: the group's ranks are etp apart (Megatron's expert rank
    order puts expert-TP innermost), so min(ep, max(1, D // etp))."""
    return group_per_node(ep, etp, domain_gpus)


def cross_domain_fraction(ep, ep_in_domain):
    """Share of the routed copies that leave the domain under uniform routing: 1 - ep_d / ep."""
    ep = np.asarray(ep, dtype=np.float64)
    return 1.0 - np.asarray(ep_in_domain, dtype=np.float64) / ep


def remote_domains_per_token(ep, ep_in_domain, top_k, groups=None, groups_per_token=None, round_robin_experts=None):
    """Expected distinct OTHER domains a token's k routed copies reach over n = ep / ep_d domains:
    (n - 1) (1 - (1 - 1/n)^k) for k uniform draws; under node-limited routing (`groups` experts groups,
    `groups_per_token` of them per token) D (n - 1) / n with D the distinct domains hit among the
    reachable ones (`expert_routing`); under round-robin routing over `round_robin_experts` = E experts
    (a benchmark gate, `MoeSpec.round_robin_routing`) D of a run of k consecutive experts
    (`expert_routing.round_robin_domains_hit`); 0 inside one domain."""
    n = np.asarray(ep, dtype=np.float64) / np.asarray(ep_in_domain, dtype=np.float64)
    if round_robin_experts is not None:
        return round_robin_domains_hit(round_robin_experts, top_k, n) * (n - 1.0) / n
    if groups is None:
        return (n - 1.0) * (1.0 - (1.0 - 1.0 / n) ** float(top_k))
    hit = distinct_domains_hit(reachable_domains(n, groups, groups_per_token), top_k)
    return hit * (n - 1.0) / n


def network_bytes(t_local, top_k, hidden, ep, ep_in_domain, dedup, bytes_per_element=DISPATCH_BYTES,
                  groups=None, groups_per_token=None, round_robin_experts=None):
    """Bytes one GPU sends over its NIC share in one all-to-all: every routed copy that leaves the
    domain (dedup 0, NCCL) or one copy per destination domain (dedup 1, DeepEP / HybridEP, fewer under
    node-limited or round-robin routing: `remote_domains_per_token`), blended."""
    per_copy = routed_bytes(t_local, top_k, hidden, bytes_per_element) * cross_domain_fraction(ep, ep_in_domain)
    per_domain = (np.asarray(t_local, dtype=np.float64) * float(hidden) * float(bytes_per_element)
                  * remote_domains_per_token(ep, ep_in_domain, top_k, groups, groups_per_token, round_robin_experts))
    return (1.0 - dedup) * per_copy + dedup * per_domain


def a2a_seconds(t_local, top_k, hidden, ep, etp, system, gpu, dedup=None, groups=None, groups_per_token=None,
                round_robin_experts=None):
    """One expert all-to-all (dispatch or combine) on one GPU: the NVLink leg (an all_to_all among
    the ep_d ranks of the domain on their share ep_d / ep of R) and the network leg (`network_bytes`,
    with the model's node-limited routing `groups` / `groups_per_token` where it has one, or its
    round-robin gate over `round_robin_experts`) over the GPU's NIC run concurrently: the longer of the two."""
    dedup = knobs.value("training.moe_dispatch_dedup") if dedup is None else dedup
    ep_d = ep_ranks_per_domain(ep, etp, system.scaleup_domain_gpus)
    r = routed_bytes(t_local, top_k, hidden)
    intra = collective_seconds_array(Collective.ALL_TO_ALL, r * ep_d / ep, ep_d, ep_d, system, gpu=gpu)
    net = network_bytes(t_local, top_k, hidden, ep, ep_d, dedup, groups=groups, groups_per_token=groups_per_token,
                        round_robin_experts=round_robin_experts)
    crosses = np.asarray(ep) > ep_d
    inter = collective_seconds_array(Collective.SEND_RECV, np.where(crosses, net, 1.0), np.where(crosses, 2, 1), 1,
                                     system, gpu=gpu)
    return np.maximum(intra, np.where(crosses, inter, 0.0))


def per_expert_launches(framework: Framework, precision: Precision, low_precision: bool) -> bool:
    """Whether the framework issues the expert GEMMs (and their quantizes) expert by expert
    (PER_EXPERT_LAUNCH_FRAMEWORKS), so that `training.moe_expert_launch_s` is paid per local expert:
    not where TransformerEngine runs a block-scaled recipe (GROUPED_KERNEL_PRECISIONS, on a part that
    runs it: `low_precision`) as one grouped quantize + one grouped GEMM."""
    if framework not in PER_EXPERT_LAUNCH_FRAMEWORKS:
        return False
    return not (framework is Framework.MEGATRON and low_precision and precision in GROUPED_KERNEL_PRECISIONS)


def fixed_seconds_per_layer(local_experts, captured: bool = False):
    """Fixed (size-independent) time of one MoE layer per micro-batch, forward + backward: o + o_e x
    E / ep (`training.moe_layer_overhead_s`: router, top-k, token counting, the dispatcher's
    device-to-host sync; `training.moe_expert_launch_s`: the per-expert GEMM and quantize kernels);
    0 where a CUDA graph captures them all (`captured`: `step.cuda_graphs.moe_fixed_time_captured`)."""
    if captured:
        return np.zeros_like(np.asarray(local_experts, dtype=np.float64))
    return (knobs.value("training.moe_layer_overhead_s")
            + knobs.value("training.moe_expert_launch_s") * np.asarray(local_experts, dtype=np.float64))


def exposed_ep_seconds(comm, window, sms: float, has_other_microbatch, local_experts=0.0, captured: bool = False):
    """Exposed time one MoE layer adds per micro-batch beyond its compute `window` (forward +
    backward): the EP communication `comm` not hidden, max(0, c - a w) + s min(c, a w) (w = 0 where
    no other micro-batch is in flight), plus the layer's fixed per-launch time
    (`fixed_seconds_per_layer`; 0 where a CUDA graph `captured` it), which no other work hides."""
    share = knobs.value("training.moe_a2a_overlap")
    hide = share * window if has_other_microbatch is True else share * np.where(has_other_microbatch, window, 0.0)
    comm_exposed = exposed_behind(comm, hide, min(1.0, EP_COMM_SMS / float(sms)))
    return comm_exposed + fixed_seconds_per_layer(local_experts, captured)


def ep_regime(ep: int, etp: int, domain_gpus: int) -> str:
    """Where a plan's expert all-to-all runs, in words: no EP, EP inside one scale-up (NVLink)
    domain, or EP across domains with the share of routed copies that leaves the domain."""
    if ep <= 1:
        return "no expert parallelism (experts local)"
    ep_d = int(ep_ranks_per_domain(ep, etp, domain_gpus))
    if ep_d >= ep:
        return f"EP {ep} within one NVLink domain ({domain_gpus} GPUs): all-to-all over NVLink only"
    frac = float(cross_domain_fraction(ep, ep_d))
    return (f"EP {ep} across {ep // ep_d} NVLink domains ({ep_d} ranks per domain): "
            f"{frac:.0%} of routed copies cross the network")


def shared_expert_seconds(ctx, g, gemm_seconds):
    """Forward + backward GEMM seconds of the MoE layer's shared experts on one GPU and micro-batch
    (3 x forward: input- and weight-gradient GEMMs of the same shapes); 0 without shared experts."""
    total = 0.0
    for op in ctx.ops.moe_layer.linears:
        if op.name.startswith("shared"):
            n, k = local_gemm_shape(op, g.tp, g.etp)
            total = total + 3.0 * gemm_seconds(ctx, g.t, n, k)
    return total


def overlap_window(ctx, g, lc, gemm_seconds):
    """The compute one MoE layer's all-to-alls can hide behind, per micro-batch, and whether it
    needs another micro-batch in flight: with batch-level EP overlap (BATCH_OVERLAP_FRAMEWORKS) the
    other micro-batch's forward + backward of the layer, and the same under DualPipe (`g.dualpipe`,
    its overlapped F&B chunks) on any stack; otherwise the layer's own shared-expert compute (which
    runs beside dispatch / combine in the same micro-batch)."""
    if ctx.framework is Framework.MEGATRON:
        # Megatron-core schedules.py: combined_1f1b_schedule_for_no_pipelining (pp 1, two micro-batches
        # or more) or combined_1f1b_schedule_for_interleaving (interleaved pipeline, vpp > 1); the
        # plain 1F1B pipeline schedule (pp > 1, vpp 1) has no combined forward-backward step
        return lc.layer_fwd + lc.layer_bwd, np.where(g.pp > 1, (g.vpp > 1) | g.dualpipe, g.m > 1)
    if ctx.framework in BATCH_OVERLAP_FRAMEWORKS:
        return lc.layer_fwd + lc.layer_bwd, (g.m > 1) | (g.pp > 1)
    if np.any(g.dualpipe):  # DualPipe's F&B chunks: another micro-batch's compute, whatever the stack
        return np.where(g.dualpipe, lc.layer_fwd + lc.layer_bwd, shared_expert_seconds(ctx, g, gemm_seconds)), True
    return shared_expert_seconds(ctx, g, gemm_seconds), True


def collectives_per_layer(full_recompute):
    """Expert all-to-alls (or etp gathers) per MoE layer and micro-batch: dispatch and combine in
    forward and again, transposed, in backward (4); a fully recomputed layer runs its forward, token
    dispatcher included, once more before its backward (Megatron-core `CheckpointFunction` re-executes
    the whole layer forward; Korthikanti et al. 2022 sec. 4): 6."""
    return np.where(full_recompute, 6.0, 4.0)


def ep_comm_seconds(ctx, g, lc, sc, gemm_seconds, full_recompute=False):
    """Exposed expert-parallel time per micro-batch on the busiest stage: per MoE layer
    `collectives_per_layer` all-to-alls (`a2a_seconds`) plus, with expert TP and sequence
    parallelism, the all-gather / reduce-scatter of the routed tokens over etp, exposed as
    `exposed_ep_seconds` against the framework's overlap window (`overlap_window`).
    `gemm_seconds(ctx, m, n, k)` is the step-time model's GEMM time; `full_recompute` marks plans
    that recompute every layer. 0 for a dense model."""
    if not ctx.moe_layers:
        return 0.0
    gpn, h, moe = ctx.system.gpus_per_node, float(ctx.hidden), ctx.model.moe
    k = moe.top_k
    a2a = a2a_seconds(g.t_local, k, h, g.ep, g.etp, ctx.system, ctx.gpu, groups=moe.expert_groups,
                      groups_per_token=moe.groups_per_token,
                      round_robin_experts=moe.num_experts if moe.round_robin_routing else None)
    etp_gather = collective_seconds_array(Collective.ALL_GATHER, g.t_local * g.etp * k * h * DISPATCH_BYTES, g.etp,
                                          group_per_node(g.etp, 1, gpn), ctx.system, gpu=ctx.gpu)
    comm = collectives_per_layer(full_recompute) * (np.where(g.ep > 1, a2a, 0.0)
                                                    + np.where(g.sp & (g.etp > 1), etp_gather, 0.0))
    window, other = overlap_window(ctx, g, lc, gemm_seconds)
    local_experts = ctx.model.moe.num_experts / g.ep if per_expert_launches(ctx.framework, ctx.precision, ctx.low_precision) else 0.0
    exposed = exposed_ep_seconds(comm, window, ctx.gpu.sm_count_or_default, other, local_experts,
                                 moe_fixed_time_captured(ctx.cuda_graph_scope))
    return sc.layers_per_stage * lc.moe_frac * exposed


__all__ = [
    "BATCH_OVERLAP_FRAMEWORKS", "GROUPED_KERNEL_PRECISIONS", "PER_EXPERT_LAUNCH_FRAMEWORKS", "per_expert_launches", "DISPATCH_BYTES", "EP_COMM_SMS", "expert_cast_elements", "overlap_window", "shared_expert_seconds", "a2a_bytes_per_layer", "a2a_seconds", "cross_domain_fraction",
    "collectives_per_layer", "ep_comm_seconds", "ep_ranks_per_domain", "ep_regime", "fixed_seconds_per_layer", "exposed_ep_seconds", "network_bytes", "remote_domains_per_token",
    "routed_bytes", "tokens_per_expert",
]
