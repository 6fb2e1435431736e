"""Pipeline parallelism (PP): the exposed point-to-point sends and the pipeline bubble.

- PP: one send of the boundary activation (t x h x 2 / tp bytes: Megatron's scatter-gather)
  forward and one backward per micro-batch and virtual stage. The interleaved schedule (vpp > 1)
  overlaps these sends with the next virtual stage's compute in Megatron-core (`overlap_p2p_comm`,
  on by default; `--no-overlap-p2p-communication` turns it off): only the excess of a transfer
  over half a virtual stage's forward + backward is exposed. The 1F1B schedule (vpp = 1), the
  2021-22 Megatron stack (`AttentionKernel.UNFUSED`: Narayanan et al. 2021 and Korthikanti et al.
  2022 predate the option) and other frameworks block on them.
- Pipeline bubble: (pp-1)/vpp micro-batch times (1F1B, Narayanan et al. 2021 sec. 2.2; interleaved
  schedule divides by the virtual stages per GPU). The fill runs the forward passes of stages
  0..pp-2 and the drain their backward passes, so the micro-batch time in the bubble is the last
  stage's minus the output head: 1F1B's critical path is sum_{i<pp-1}(f_i + b_i) + m (f_last + b_last).
- DualPipe (`PipelineSchedule.DUALPIPE`, DeepSeek-V3 report arXiv 2412.19437 sec. 3.2.1, Table 2;
  deepseek-ai/DualPipe README): bubble (pp/2 - 1)(F&B + B - 3W) per schedule run, against 1F1B's
  (pp - 1)(F + B); F&B = two mutually overlapped forward and backward chunks, B = a full backward
  chunk, W = its weight-gradient part (`dualpipe_bubble_seconds`).
- Schedule runs per step (`TrainPlan.pipeline_flushes`): stacks that call the schedule once per
  local batch (torch.distributed.pipelining under torchtitan / NeMo AutoModel, gradient accumulation
  outside the schedule) fill and drain the pipeline on every run: the bubble is paid that many times.
"""

from __future__ import annotations

import numpy as np

from gpuplan import knobs
from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.parallel_groups import collective_seconds_array
from gpuplan.workloads.training.step.compute import StageCompute
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext
from gpuplan.workloads.training.step.overlap import exposed_behind
from gpuplan.workloads.training.step.tensor import OVERLAP_CONTENTION  # noqa: F401 - registers the knob read here


def pp_comm_seconds(ctx: StepContext, g: PlanAxes, sc: StageCompute):
    """Exposed pipeline point-to-point time per micro-batch: one send of the boundary activation
    (t x h x 2 / tp bytes, Megatron's scatter-gather) forward and one backward per virtual stage.
    Megatron-core's interleaved schedule (vpp > 1, `overlap_p2p_comm`) hides a send behind half a
    virtual stage's forward + backward (the excess is exposed, the overlap costs
    `training.overlap_contention`); 1F1B and other stacks block on them."""
    gpn = ctx.system.gpus_per_node
    crosses = g.tp * g.cp * g.dp >= gpn
    p2p = collective_seconds_array(Collective.P2P, g.t * float(ctx.hidden) * 2.0 / g.tp, np.where(g.pp > 1, 2, 1),
                                   np.where(crosses, 1, 2), ctx.system, gpu=ctx.gpu)
    if ctx.p2p_overlap:
        half_chunk = (sc.compute_mb + sc.recompute_mb) / g.vpp / 2.0
        hidden_send = exposed_behind(p2p, half_chunk, knobs.value("training.overlap_contention"))
        per_transfer = np.where(g.vpp > 1, hidden_send, p2p)
    else:
        per_transfer = p2p
    return np.where(g.pp > 1, 2.0 * g.vpp * per_transfer, 0.0)


def dualpipe_bubble_seconds(pp, overlapped_pair, full_backward, weight_backward):
    """DualPipe's bubble per schedule run: (pp/2 - 1)(F&B + B - 3W) (DeepSeek-V3 report, arXiv
    2412.19437, Table 2; deepseek-ai/DualPipe README "Pipeline Bubbles and Memory Usage Comparison"),
    with F&B the time of two mutually overlapped forward and backward chunks (`overlapped_pair`), B a
    full backward chunk (`full_backward`) and W its "backward for weights" part (`weight_backward`);
    never below 0."""
    pp = np.asarray(pp, dtype=np.float64)
    return np.maximum(0.0, (pp / 2.0 - 1.0) * (overlapped_pair + full_backward - 3.0 * weight_backward))


def bubble_seconds(g: PlanAxes, micro_batch_s, head, sc: StageCompute | None = None, weight_backward=0.0):
    """Pipeline fill and drain per step, x `g.flushes` schedule runs. 1F1B: (pp - 1) / vpp micro-batch
    times per run (Narayanan et al. 2021 sec. 2.2; the interleaved schedule divides by vpp). The fill
    runs stages 0..pp-2's forward passes and the drain their backward passes, so the micro-batch time
    in the bubble excludes the output head. DualPipe (`g.dualpipe`, needs `sc`): `dualpipe_bubble_seconds`
    with F&B = the stage's micro-batch time without the head (its forward and backward, their
    communication overlapped as the steady state models it), B = the stage's backward (+ recompute)
    and W = `weight_backward`, the stage's weight-gradient GEMMs (a callable: evaluated only where a
    plan runs DualPipe). Where every plan runs its schedule once (`g.one_run`) the x 1 is skipped (exact)."""
    pair = micro_batch_s - head
    per_run = (g.pp - 1.0) / g.vpp * pair
    if sc is not None and g.any_dualpipe:
        w = weight_backward() if callable(weight_backward) else weight_backward
        dual = dualpipe_bubble_seconds(g.pp, pair, sc.stage_bwd + sc.recompute_mb, w)
        per_run = np.where(g.dualpipe, dual, per_run)
    return per_run if g.one_run else g.flushes * per_run
