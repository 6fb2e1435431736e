"""Tensor parallelism (TP): the exposed time of its collectives per micro-batch.

Communication times come from `primitives.collectives`.

- TP: 2 all-reduces of t x h x 2 bytes per layer forward and 2 backward (+2 in a full-recompute
  forward); with sequence parallelism the same count of all-gather + reduce-scatter pairs, which
  move the same bytes (Korthikanti et al. 2022 sec. 4.2.2), each timed as its own collective
  (`tp_collective_seconds`: NCCL's NVLS all-reduce is faster than the ring pair). torchtitan adds its
  selective AC's re-issued all-gathers, a sequence-dim `torch.cat` per collective and fp8 forward
  all-gathers under float8 tensorwise (`sequence_dim_copy_seconds`, `tp_gather_bytes_per_element`). Backward TP collectives overlap the
  weight-gradient GEMM for TP_BACKWARD_OVERLAP of their time (Megatron's async TP all-reduce,
  Narayanan et al. 2021 / Megatron-LM `--async-tensor-model-parallel-allreduce`).
  With `tp_comm_overlap` and sequence parallelism (TransformerEngine userbuffers; Wang et al. 2023,
  "Overlap Communication with Dependent Computation via Decomposition", ASPLOS; NeMo
  `tp_comm_overlap`), each all-gather / reduce-scatter (half the pair's time, c) overlaps a
  GEMM by the method NeMo's tuned configs give it (UB_* constants): the all-gathers before QKV and
  FC1 (and the backward all-gathers of the row-parallel dgrads) by ring exchange in tp chunks,
  max(0, c - g) + min(c, g) / tp exposed + OVERLAP_CONTENTION x min(c, g); the reduce-scatters
  after the output projection and FC2 by `pipeline` (4 splits, the GEMM on the SMs the reduction
  leaves: slowed by SMs / (SMs - n_sm)), the last split exposed; in backward the re-gather of the
  input beside the QKV / FC1 dgrad and the reduce-scatter of the input gradient beside their wgrad
  by `bulk` (n_sm SMs lost while both run).
"""

from __future__ import annotations

import numpy as np

from gpuplan import knobs
from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.parallel_groups import collective_seconds_array, group_per_node
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.plan_codes import RecomputeCode
from gpuplan.workloads.training.step.compute import LayerCompute, StageCompute
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

#: Fraction of backward TP collective time hidden behind weight-gradient GEMMs (Megatron async TP
#: all-reduce overlaps the input-gradient all-reduce with the weight-gradient GEMM: about half the
#: backward collectives; modelling assumption).
TP_BACKWARD_OVERLAP = knobs.register(
    "training.tp_backward_overlap", unit="fraction", default=0.5, low=0.0, high=1.0,
    source="modelling assumption: Megatron's async TP all-reduce overlaps the input-gradient all-reduce with the weight-gradient GEMM (about half the backward collectives)",
    scales="exposed backward tensor-parallel collectives (without TE userbuffers)")
#: Compute slowdown while TransformerEngine userbuffers or pipeline sends run alongside: those
#: move data with a few SMs or the copy engines, so 5% of the overlapped time (assumption; Calculon's
#: `processor_usage` is 15% on NVLink, 2% on InfiniBand). Data-parallel NCCL collectives instead
#: occupy one SM per channel: their slowdown is channels / SMs (`primitives.parallel_groups.collective_sm_fraction`).
OVERLAP_CONTENTION = knobs.register(
    "training.overlap_contention", unit="fraction", default=0.05, low=0.0, high=0.5,
    source="assumption; Calculon processor_usage is 0.15 on NVLink, 0.02 on InfiniBand",
    scales="compute slowdown while TE userbuffers or pipeline sends overlap it")
#: TransformerEngine userbuffers TP-overlap methods and SM budgets per GEMM (NeMo's tuned H100
#: configs, nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py,
#: `userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192`, the same in its fp8 twin): the forward
#: all-gathers before QKV and FC1 and the backward all-gathers of the row-parallel dgrads use
#: `ring_exchange` (point-to-point, copy engines); the forward reduce-scatters after the output
#: projection and FC2 use `pipeline` with num_splits 4 on 24 and 16 SMs (set_sm_margin: the GEMM
#: runs on the rest); backward `bulk` overlaps run the re-gather of the input beside the QKV / FC1
#: dgrad GEMMs on 4 / 2 SMs and the reduce-scatter of the input gradient beside the QKV / FC1 wgrad
#: GEMMs on 24 / 4 SMs. TE's `comm_gemm_overlap` implements the three methods (ring exchange =
#: SPLIT_PIPELINED_AG_P2P, pipeline = SPLIT_PIPELINED_RS, bulk = BULK_OVERLAP_AG / _RS).
UB_PIPELINE_SPLITS = 4.0
UB_PROJ_FPROP_SMS = 24.0
UB_FC2_FPROP_SMS = 16.0
UB_QKV_DGRAD_SMS = 4.0
UB_QKV_WGRAD_SMS = 24.0
UB_FC1_DGRAD_SMS = 2.0
UB_FC1_WGRAD_SMS = 4.0


def tp_comm_seconds(ctx: StepContext, g: PlanAxes, lc: LayerCompute, sc: StageCompute):
    """Exposed tensor-parallel communication per micro-batch: 2 all-reduces of t x h x 2 bytes per
    layer forward (+2 in a full-recompute forward) and 2 backward, of which `training.tp_backward_overlap`
    hides behind the weight-gradient GEMMs (Megatron's async TP all-reduce; none under torchtitan's
    vanilla TP: `Framework.overlaps_tp_backward`); with sequence
    parallelism the same count of all-gather + reduce-scatter pairs, which move the same bytes
    (Korthikanti et al. 2022 sec. 4.2.2), timed as the pair (`tp_collective_seconds`), + torchtitan's
    re-issued all-gathers under selective AC and its sequence-dim copies (`sequence_dim_copy_seconds`).
    With TE userbuffers (`tp_comm_overlap` + SP; Wang et al.
    2023 ASPLOS), each AG / RS (c = half an all-reduce) overlaps a GEMM by NeMo's method for it:
    forward AG ring exchange (`userbuffers_ring_exposed`), forward RS pipeline
    (`userbuffers_pipeline_exposed`, 24 / 16 SMs), backward AG of the row-parallel dgrads ring
    exchange, and the column-parallel layers' re-gather and input-gradient RS bulk
    (`userbuffers_bulk_exposed`, beside their dgrad / wgrad GEMMs)."""
    ar, gather, fwd_pair, fwd_gather = tp_collective_seconds(ctx, g, tp_gather_bytes_per_element(ctx))
    fwd_collectives = np.where(g.rc == RecomputeCode.FULL, 4.0, 2.0)
    backward_overlap = knobs.value("training.tp_backward_overlap") if ctx.framework.overlaps_tp_backward else 0.0
    # (a stack that re-issues no gathers adds a scalar 0, decided once: x + 0.0 is x)
    recomputed_gathers = (np.where(g.rc == RecomputeCode.SELECTIVE, 2.0 * fwd_gather, 0.0)
                          if ctx.framework.selective_recompute_regathers_tp else 0.0)
    tp_mb = sc.layers_per_stage * (fwd_pair * fwd_collectives + ar * 2.0 * (1.0 - backward_overlap) + recomputed_gathers
                                   + sequence_dim_copy_seconds(ctx, g))
    if not ctx.tp_comm_overlap:
        return tp_mb
    c = 0.5 * ar
    mlp_half = lc.moe_frac * lc.moe_mlp / 2.0
    qkv, out = lc.qkv, lc.out
    up, down = lc.dense_frac * lc.dense_up + mlp_half, lc.dense_frac * lc.dense_down + mlp_half
    sms = float(ctx.gpu.sm_count_or_default)
    ring = lambda gemm: userbuffers_ring_exposed(c, gemm, g.tp)  # noqa: E731
    fwd_exp = (ring(qkv) + userbuffers_pipeline_exposed(c, out, UB_PROJ_FPROP_SMS, sms)
               + ring(up) + userbuffers_pipeline_exposed(c, down, UB_FC2_FPROP_SMS, sms))
    # backward: the row-parallel dgrads all-gather their input gradient (ring exchange); the
    # column-parallel layers re-gather their input for the weight gradient (bulk, beside the dgrad
    # GEMM) and reduce-scatter the input gradient (bulk, beside the wgrad GEMM)
    bwd_exp = (ring(out) + ring(down)
               + userbuffers_bulk_exposed(c, qkv, UB_QKV_DGRAD_SMS, sms) + userbuffers_bulk_exposed(c, qkv, UB_QKV_WGRAD_SMS, sms)
               + userbuffers_bulk_exposed(c, up, UB_FC1_DGRAD_SMS, sms) + userbuffers_bulk_exposed(c, up, UB_FC1_WGRAD_SMS, sms))
    overlapped = sc.layers_per_stage * (np.where(g.rc == RecomputeCode.FULL, 2.0, 1.0) * fwd_exp + bwd_exp)
    return np.where(g.sp & (g.tp > 1), overlapped, tp_mb)


def tp_gather_bytes_per_element(ctx: StepContext) -> float:
    """Bytes per activation element of the forward sequence-parallel all-gathers: 1 where torchtitan
    runs float8 tensorwise with TP (`apply_tp` swaps in torchao's `Float8ColwiseParallel` /
    `PrepareFloat8ModuleInput`, which cast the input to float8 before the all-gather: float8 all-gather),
    else the activation's 2. The reduce-scatters and the backward collectives stay bf16."""
    if ctx.framework is Framework.TORCHTITAN and ctx.gemm_dtype == "fp8":
        return 1.0
    return 2.0


def tp_collective_seconds(ctx: StepContext, g: PlanAxes, forward_gather_bytes_per_element: float = 2.0):
    """(unit, all-gather, forward unit, forward all-gather) seconds for a layer's t x h activation over
    the tp group. Without sequence parallelism a unit is the all-reduce of the t x h x 2-byte tensor and
    an all-gather half of it; with SP (tp > 1) the unit is the all-gather + reduce-scatter pair that
    replaces the all-reduce (Korthikanti et al. 2022 sec. 4.2.2: the same bytes), each timed as its own
    collective: NCCL reduces an all-reduce in the NVSwitch (NVLS) but moves an all-gather or
    reduce-scatter by ring, so the pair is not the all-reduce's time (`primitives.collectives`). The
    forward unit's all-gather moves `forward_gather_bytes_per_element` per element
    (`tp_gather_bytes_per_element`); the all-gather alone is what a recomputed forward re-issues
    (`Framework.selective_recompute_regathers_tp`)."""
    gpn = ctx.system.gpus_per_node
    size, group = g.t * float(ctx.hidden) * 2.0, group_per_node(g.tp, 1, gpn)
    seconds = lambda kind, nbytes: collective_seconds_array(kind, nbytes, g.tp, group, ctx.system, gpu=ctx.gpu)  # noqa: E731
    ar = seconds(Collective.ALL_REDUCE, size)
    ag = seconds(Collective.ALL_GATHER, size)
    rs = seconds(Collective.REDUCE_SCATTER, size)
    ag_fwd = ag if forward_gather_bytes_per_element == 2.0 else \
        seconds(Collective.ALL_GATHER, size * forward_gather_bytes_per_element / 2.0)
    sp = np.asarray(g.sp, dtype=bool) & (np.asarray(g.tp) > 1)
    return (np.where(sp, ag + rs, ar), np.where(sp, ag, 0.5 * ar),
            np.where(sp, ag_fwd + rs, ar), np.where(sp, ag_fwd, 0.5 * ar))


def sequence_dim_copy_seconds(ctx: StepContext, g: PlanAxes):
    """HBM copies a layer's sequence-parallel collectives add per micro-batch where the stack gathers
    along the sequence dim (`Framework.tp_collectives_copy_sequence_dim`: torchtitan's DTensor): one
    `torch.cat` of the t x h x 2-byte activation (read + write, 2 x t x h x 2 bytes at the HBM rate) per
    all-gather and per reduce-scatter. Per layer 2 of each forward, their 4 transposes in backward
    (an all-gather's gradient is a reduce-scatter and back), and the recomputed forward's: 4 under full
    recompute, the 2 re-issued all-gathers under torchtitan's selective AC. Sequential with the compute
    stream (vanilla TP waits on each collective): exposed. 0 without SP or at tp 1."""
    if not ctx.framework.tp_collectives_copy_sequence_dim:
        return 0.0
    gathered = tp_gather_bytes_per_element(ctx) / 2.0  # forward all-gathers' bytes over bf16's
    recomputed = np.where(g.rc == RecomputeCode.FULL, 2.0 * gathered + 2.0,
                          np.where((g.rc == RecomputeCode.SELECTIVE) & ctx.framework.selective_recompute_regathers_tp,
                                   2.0 * gathered, 0.0))
    copies = np.where(np.asarray(g.sp, dtype=bool) & (np.asarray(g.tp) > 1), 2.0 * gathered + 6.0 + recomputed, 0.0)
    return copies * 2.0 * g.t * float(ctx.hidden) * 2.0 / ctx.hbm_bytes_s


def userbuffers_ring_exposed(c, gemm, tp):
    """Exposed time of a TE userbuffers `ring_exchange` overlap (an all-gather of c seconds pipelined
    in tp point-to-point steps with the GEMM of `gemm` seconds it feeds, copy engines moving the
    data): max(0, c - g) + min(c, g) / tp (the first chunk cannot overlap) + the copy engines'
    contention `training.overlap_contention` x min(c, g)."""
    overlapped = np.minimum(c, gemm)
    return np.maximum(0.0, c - gemm) + overlapped / tp + knobs.value("training.overlap_contention") * overlapped


def userbuffers_pipeline_exposed(c, gemm, comm_sms, sms):
    """Exposed time of a TE userbuffers `pipeline` overlap (a GEMM of `gemm` seconds split in
    UB_PIPELINE_SPLITS chunks, each chunk's output reduce-scattered while the next computes, the
    reduction kernel on `comm_sms` SMs and the GEMM launched on the others, `set_sm_margin`): the GEMM
    slows to g' = g x SMs / (SMs - comm_sms); max(0, c - g') + min(c, g') / splits of the reduce-scatter
    (c seconds) stays exposed (the last chunk's) + the slowdown g' - g."""
    slowed = gemm * sms / (sms - comm_sms)
    return (slowed - gemm) + np.maximum(0.0, c - slowed) + np.minimum(c, slowed) / UB_PIPELINE_SPLITS


def userbuffers_bulk_exposed(c, gemm, comm_sms, sms):
    """Exposed time of a TE userbuffers `bulk` overlap (a collective of c seconds run on `comm_sms` SMs
    beside an independent GEMM of `gemm` seconds on all SMs): the excess max(0, c - g) + the GEMM's
    loss of those SMs while both run, comm_sms / SMs x min(c, g)."""
    return np.maximum(0.0, c - gemm) + comm_sms / sms * np.minimum(c, gemm)
