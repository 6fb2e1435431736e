"""Data parallelism (DP, ZeRO / FSDP sharding): the exposed gradient reduction and parameter
gathers per step, and the parameters one GPU holds.

- DP: gradients reduced over dp x cp ranks. No sharding: all-reduce; ZeRO-1/2: reduce-scatter +
  all-gather of bf16 parameters; ZeRO-3/FSDP: per micro-batch all-gather forward, all-gather
  backward, reduce-scatter. Overlap by framework (`Framework`): Megatron-core and FSDP bucket the
  reduce and overlap it with the backward pass (window = backward of the last micro-batch, and the
  parameter all-gather with the first forward); FSDP overlaps each micro-batch's gathers with its
  compute; DeepSpeed's ZeRO-0/1 engine (Megatron-DeepSpeed) reduces after the backward pass.
  DeepSpeed ZeRO-3 depends on the release (`StepContext.deepspeed_release`): the current engine
  (v0.6.0 on) gathers in coalesced calls and reduce-scatters, not overlapped; the 2021 engine
  (v0.3.13 .. v0.5.10, `deepspeed_zero3`) gathers each weight matrix on its own, hides only the
  prefetched gathers behind compute, re-gathers for the recomputed forward and all-reduces the
  fp16 gradients, exposed. FSDP1 over a PEFT model with each adapter its own unit
  (`fsdp_adapter_units`: HF stacks) runs both all-gather passes in series with the compute.
  While an overlapped NCCL collective runs, its thread blocks (one per channel: 16 for a ring over
  8 NICs per node, 32 inside an H100 node) hold that many SMs, so the compute it hides behind runs
  channels / SMs slower: that share of the overlapped time is added (NCCL launches one CTA per
  channel; Calculon models the same effect as `processor_usage`).
  Gradients are reduced in fp32 with bf16 (Megatron forces accumulate_allreduce_grads_in_fp32 for
  bf16), in fp16 with fp16, and in the parameter dtype under ZeRO-3/FSDP (fp32 under
  `Framework.TORCHTITAN`, whose FSDP2 default reduce dtype is float32). Parameters are gathered
  in bf16, except under `Framework.FSDP` (Composer's 2023 DEFAULT mixed precision gathers fp32:
  COMPOSER_GATHER_BYTES). FSDP2 (`Framework.TORCHTITAN`) also copies the gathered parameters out
  and the gradients in on the GPU each micro-batch (FSDP2_COPY_BYTES_PER_PARAM, memory-bound; counted
  with the exposed DP time, as they exist only because of the sharding).
- ZeRO-3/FSDP collectives come in many calls, one per gather unit, each paying the collective's
  latency (`zero3_collective_calls`): a ring's latency grows with the ranks, so at a thousand
  GPUs a per-layer gather costs milliseconds even when its bytes take microseconds.
"""

from __future__ import annotations

import numpy as np

from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.parallel_groups import collective_seconds_array, collective_sm_fraction, group_per_node
from gpuplan.specs import Precision
from gpuplan.specs.execution import DeepSpeedRelease, Framework
from gpuplan.specs.plan import expert_data_parallel_size
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step import deepspeed_zero3, fsdp_adapter_units
from gpuplan.workloads.training.step.compute import StageCompute
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext
from gpuplan.workloads.training.step.overlap import exposed_behind

#: Bytes per parameter of the ZeRO-3 / FSDP all-gathers under `Framework.FSDP` (Composer /
#: llm-foundry): Composer's `mixed_precision: DEFAULT` of 2023 (the MPT benchmark tables) set
#: MixedPrecision(param_dtype=float32, reduce_dtype=<autocast dtype>, buffer_dtype=float32), so
#: parameters are gathered in fp32 and cast by autocast at each matmul; gradients are reduced in
#: bf16. (Later Composer releases gather in the autocast dtype and reduce in fp32.)
COMPOSER_GATHER_BYTES = 4.0
#: Bytes per gradient element of torchtitan's FSDP2 reduce-scatter: its JobConfig default
#: `mixed_precision_reduce = "float32"` (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)),
#: so gradients are reduced in fp32 while parameters are gathered in bf16.
TORCHTITAN_REDUCE_BYTES = 4.0
#: FSDP2 (torchtitan) copies per unsharded parameter and micro-batch, on the GPU: all-gather
#: copy-out (`split_with_sizes_copy` of the gathered buffer into the parameters, read 2 + write 2)
#: in forward and again in backward (reshard_after_forward), and the reduce-scatter copy-in
#: (`chunk_cat` of the bf16 gradients into the fp32 reduce buffer, read 2 + write 4):
#: 4 + 4 + 6 = 14 B, memory-bound. FSDP1 (Composer) gathers into its flat parameter in place.
FSDP2_COPY_BYTES_PER_PARAM = 14.0


#: Bytes per gradient element those stacks reduce-scatter: fp32 (torchtitan `mixed_precision_reduce =
#: "float32"`; NeMo AutoModel `apply_fsdp`: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=float32)).
FSDP2_PIPELINE_REDUCE_BYTES = 4.0


def fsdp2_pipeline_syncs(flushes):
    """(parameter all-gathers, gradient reduce-scatters) per optimizer step of FSDP2 under a pipeline
    schedule run `flushes` times per step (`TrainPlan.pipeline_flushes`; the stacks:
    `Framework.pipelines_fsdp2`): one of each per run.

    Under PP the stacks keep the parameters unsharded through the run (`reshard_after_forward=False`:
    torchtitan's default policy with PP, NeMo AutoModel `reshard_after_forward=not pp_enabled`), so
    they are gathered once, at the run's first forward. torch.distributed.pipelining's stage
    (torch/distributed/pipelining/stage.py `backward_maybe_with_nosync`) runs every backward with
    `set_requires_gradient_sync(False)` / `set_reshard_after_backward(False)` and, after the run's last
    backward, sets both True and calls FSDP's `post_backward` itself: the gradients are reduce-scattered
    and the parameters resharded once per run, and `_root_post_backward_final_callback` makes the
    compute stream wait on the reduce-scatter (exposed). Gradient accumulation outside the schedule
    (AutoModel's and torchtitan's train loops call `schedule.step()` once per local batch; AutoModel
    builds torch `PipelineStage`s and `get_schedule_class(pp_schedule)` schedules,
    nemo_automodel/components/distributed/pipelining/functional.py @89e3a9fdd604) repeats both: a run
    of 8 micro-batches at GA 4 reduce-scatters and re-gathers 4 times per step."""
    flushes = np.asarray(flushes, dtype=np.float64)
    return flushes, flushes


#: DeepSpeed ZeRO-3 defaults of the current engine (v0.6.0 on; deepspeed/runtime/zero/config.py,
#: DeepSpeedZeroConfig): `stage3_prefetch_bucket_size` 5e7 elements (the coordinator gathers the
#: next parameters in one `all_gather_coalesced` call up to this many elements:
#: partitioned_param_coordinator.py `fetch_sub_module`). Parameters under
#: `stage3_param_persistence_threshold` (1e5: biases, norms) stay whole and are never gathered.
DEEPSPEED_PREFETCH_BUCKET_ELEMENTS = 5e7
#: DeepSpeed `reduce_bucket_size` default, 5e8 elements (deepspeed/runtime/zero/constants.py,
#: v0.3.13 .. today): ZeRO-3 reduces the gradients bucket by bucket (stage3.py
#: `reduce_independent_p_g_buckets_and_remove_grads`: a bucket is flushed when the next gradient
#: would overflow it; the bucket counts whole, unpartitioned gradients).
DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 5e8


def zero3_collective_calls(ctx: StepContext, sc: StageCompute, local_dense, local_experts):
    """(all-gather calls per pass, gradient-reduction calls per micro-batch) of ZeRO-3 / FSDP on the
    busiest stage.

    FSDP (torch FSDP1 as Composer and Megatron-FSDP wrap it, FSDP2 `fully_shard` as torchtitan
    applies it): one unit per transformer block plus the root (embedding, head), so L_stage + 1
    all-gathers per pass and L_stage + 1 reduce-scatters. DeepSpeed ZeRO-3, current engine (v0.6.0
    on): one `all_gather_coalesced` per fetch, which takes a submodule's weights and prefetches the
    next up to `stage3_prefetch_bucket_size` elements, so a layer costs clip(layer weights / bucket,
    1, weight matrices in the layer) calls (a matrix larger than the bucket is fetched alone). The
    2021 engine (v0.3.13 .. v0.5.10, `deepspeed_zero3`): one `all_gather` per weight matrix
    (`_allgather_param`; biases and norms under the 1e5-element persistence threshold are never
    gathered), so L_stage x matrices per layer + 1 (the embedding) calls per pass. Both reduce the
    gradients per `reduce_bucket_size`: ceil(local parameters / 5e8) calls. Each call pays the
    collective's latency once (NCCL ring latency grows with the ranks)."""
    layers = np.asarray(sc.layers_per_stage, dtype=np.float64)
    if ctx.framework is not Framework.DEEPSPEED:
        return layers + 1.0, layers + 1.0
    matrices = sum(len(lo.linears) for lo in ctx.ops.layers) / max(len(ctx.ops.layers), 1)
    reduce_calls = np.maximum(1.0, np.ceil((local_dense + local_experts) / DEEPSPEED_REDUCE_BUCKET_ELEMENTS))
    if ctx.deepspeed_release is DeepSpeedRelease.V0_5:
        return layers * max(matrices, 1.0) + 1.0, reduce_calls
    per_layer_params = ctx.body_params / max(ctx.layers, 1)
    units = float(np.clip(per_layer_params / DEEPSPEED_PREFETCH_BUCKET_ELEMENTS, 1.0, max(matrices, 1.0)))
    return layers * units + 1.0, reduce_calls


def local_params(ctx: StepContext, g: PlanAxes, sc: StageCompute):
    """(dense, expert) parameters one GPU of the busiest stage holds: the stage's share of the body
    (+ the embedding table on the first / the head on the last stage: the larger when pp > 1) over tp;
    its share of the routed experts over ep x etp."""
    dense_body = ctx.body_params - ctx.expert_params
    embed_stage = np.where(g.pp > 1, max(ctx.input_embedding_params, ctx.output_head_params),
                           ctx.input_embedding_params + ctx.output_head_params)
    return ((dense_body * sc.stage_share + embed_stage) / g.tp,
            ctx.expert_params * sc.stage_share / (g.ep * g.etp))


def dp_comm_seconds(ctx: StepContext, g: PlanAxes, sc: StageCompute, local_dense, local_experts,
                    reduced=None, gathered_bytes=None):
    """Exposed data-parallel communication per step. Gradients reduce over dp x cp ranks (experts
    over their expert-DP group tp x cp x dp / (ep x etp)). No sharding: all-reduce; ZeRO-1:
    reduce-scatter + all-gather of the parameters once per step; ZeRO-2: the reduce-scatter after
    every micro-batch (gradients are partitioned, so a rank keeps only its shard and cannot wait for
    the accumulation boundary: DeepSpeed engine "ZeRO stage >= 2 communicates during non gradient
    accumulation boundaries as well", deepspeedai/DeepSpeed#2252), each behind that micro-batch's
    backward, the gather once per step (every micro-batch under FSDP's SHARD_GRAD_OP, which frees
    the parameters after each backward); ZeRO-3/FSDP: per micro-batch two all-gathers and a
    reduce-scatter. Megatron-core and FSDP overlap them (the reduce with the last backward, the
    gather with the first forward; ZeRO-3 per micro-batch with its compute), DeepSpeed's ZeRO-0/1
    engine does not, nor does DeepSpeed's current ZeRO-3 engine; its 2021 engine
    (`ctx.deepspeed_release` V0_5) hides only its prefetched gathers and all-reduces the gradients
    (`deepspeed_zero3`). An overlapped NCCL collective holds one SM per channel, slowing the compute it
    hides behind by channels / SMs (`collective_sm_fraction`; Calculon's processor_usage). Gradient
    bytes: fp32 (bf16 runs), fp16 (fp16 runs), the compute dtype under ZeRO-3 (fp32 under
    torchtitan: COMPOSER / TORCHTITAN constants); FSDP2 adds its copy-in / copy-out kernels.
    Fine-tuning (`finetune_time`): `reduced` = the (dense, expert) trainable parameters whose
    gradients are reduced, `gathered_bytes` = the (dense, expert) bytes gathered (a quantised frozen
    base in its storage bytes); default every local parameter, at the gather dtype."""
    gpn = ctx.system.gpus_per_node
    dp_group = g.dp * g.cp
    expert_dp = expert_data_parallel_size(g.tp, g.cp, g.dp, g.ep, g.etp)
    zero3_grad_bytes = TORCHTITAN_REDUCE_BYTES if ctx.framework is Framework.TORCHTITAN else 2.0
    other_grad_bytes = 2.0 if ctx.precision is Precision.FP16 else 4.0
    gather_bytes = COMPOSER_GATHER_BYTES if ctx.framework is Framework.FSDP else 2.0
    deepspeed = ctx.framework is Framework.DEEPSPEED
    legacy_deepspeed = deepspeed and ctx.deepspeed_release is DeepSpeedRelease.V0_5  # the 2021 ZeRO-3 engine

    reduced = (local_dense, local_experts) if reduced is None else reduced
    gathered_bytes = (local_dense * gather_bytes, local_experts * gather_bytes) if gathered_bytes is None else gathered_bytes
    shard = np.asarray(g.shard)

    def collective(kind, nbytes, group, stride, calls=1.0):
        """calls x the time of one `kind` of nbytes / calls over the group (0 for a group of one)."""
        pn = group_per_node(group, stride, gpn)
        return np.where(group > 1, calls * collective_seconds_array(kind, nbytes / calls, group, pn, ctx.system,
                                                                    gpu=ctx.gpu), 0.0)

    # (parameters reduced, bytes gathered, group, rank stride): the dense body over dp x cp, the
    # routed experts over their expert-DP group
    groups = [(reduced[0], gathered_bytes[0], dp_group, g.tp)]
    if ctx.expert_params:
        groups.append((reduced[1], gathered_bytes[1], expert_dp, g.ep * g.etp))
    # ZeRO-3 / FSDP: the same bytes in many calls, each with the collective's latency (only where a
    # plan shards that way: the search evaluates every sharding at once)
    any_zero3 = bool(np.any(shard == ShardingCode.ZERO3))
    gather_calls, reduce_calls = zero3_collective_calls(ctx, sc, reduced[0], reduced[1]) if any_zero3 else (1.0, 1.0)

    # Each term is computed once, on the axes it depends on; the gradient bytes (the only input that
    # depends on the sharding) is a scalar per sharding where the sharding varies along one axis alone
    memo: dict = {}

    def once(name, grad, fn):
        key = (name, float(grad) if np.ndim(grad) == 0 else "grid")
        if key not in memo:
            memo[key] = fn()
        return memo[key]

    def contention():
        return once("contention", 0.0, lambda: collective_sm_fraction(
            dp_group, group_per_node(dp_group, g.tp, gpn), ctx.system, ctx.gpu))

    def overlapped(busy, window):
        """The exposed part of a collective of `busy` seconds hidden behind `window` of compute, plus
        the compute slowed by the SMs it holds: max(0, busy - window) + contention x min(busy, window)."""
        return exposed_behind(busy, window, contention())

    def reduce_all(grad):
        return once("reduce_all", grad, lambda: sum(
            collective(Collective.ALL_REDUCE, p * grad, grp, st) for p, _, grp, st in groups))

    def reduce_scatter(grad):
        return once("reduce_scatter", grad, lambda: sum(
            collective(Collective.REDUCE_SCATTER, p * grad, grp, st) for p, _, grp, st in groups))

    def gather():
        return once("gather", 0.0, lambda: sum(collective(Collective.ALL_GATHER, gb, grp, st) for _, gb, grp, st in groups))

    def last_bwd():
        return once("last_bwd", 0.0, lambda: sc.stage_bwd + sc.recompute_mb)

    def reduce_mb(grad):
        return once("reduce_mb", grad, lambda: overlapped(reduce_scatter(grad), last_bwd()))

    def gather_mb():
        return once("gather_mb", 0.0, lambda: overlapped(gather(), sc.stage_fwd))

    def z3_gather_pass():
        """One all-gather of every local weight, in `gather_calls` calls."""
        return once("z3_gather", 0.0, lambda: sum(
            collective(Collective.ALL_GATHER, gb, grp, st, gather_calls) for _, gb, grp, st in groups))

    def z3_reduce_scatter(grad):
        """The gradient reduce-scatter of ZeRO-3 / FSDP per micro-batch, in `reduce_calls` calls."""
        return sum(collective(Collective.REDUCE_SCATTER, p * grad, grp, st, reduce_calls) for p, _, grp, st in groups)

    def z3_per_mb(grad):
        """Two all-gathers and a reduce-scatter of ZeRO-3 / FSDP per micro-batch (0 where no plan
        shards so), to be overlapped with the micro-batch's compute."""
        if not any_zero3:
            return 0.0
        return 2.0 * z3_gather_pass() + z3_reduce_scatter(grad)

    def z3_deepspeed_per_mb(grad):
        """DeepSpeed ZeRO-3 <= v0.5 per micro-batch (`deepspeed_zero3`): the gathers fetched after a
        device synchronize and the gradient all-reduce exposed, the prefetched gathers hidden behind
        the micro-batch's compute (forward, backward, recompute); each gather call also runs
        PyTorch's per-rank copy-out of its list output (`list_copy_seconds`) and, with the zero
        fill of the full parameter, 3 x the gathered bytes of HBM traffic."""
        exposed, prefetched = deepspeed_zero3.gather_passes(ctx, g.tp, g.rc == RecomputeCode.FULL)
        gather_pass = z3_gather_pass() + sum(
            deepspeed_zero3.list_copy_seconds(gather_calls, grp)
            + np.where(grp > 1, deepspeed_zero3.GATHER_HBM_BYTES_PER_BYTE * gb / ctx.hbm_bytes_s, 0.0)
            for _, gb, grp, _ in groups)
        z3_all_reduce = sum(collective(Collective.ALL_REDUCE, p * grad, grp, st, reduce_calls)
                            for p, _, grp, st in groups)
        return (exposed * gather_pass + z3_all_reduce
                + overlapped(prefetched * gather_pass, sc.compute_mb + sc.recompute_mb))

    def unsharded(grad):
        return reduce_all(grad) if deepspeed else overlapped(reduce_all(grad), last_bwd())

    def zero12(grad):
        return once("zero12", grad, lambda: reduce_scatter(grad) + gather() if deepspeed
                    else reduce_mb(grad) + gather_mb())

    def zero2(grad):
        # ZeRO-2: each micro-batch's gradients are reduce-scattered behind its own backward; FSDP's
        # SHARD_GRAD_OP also re-gathers the parameters it frees after each backward
        if deepspeed:
            return g.m * reduce_scatter(grad) + gather()
        return g.m * reduce_mb(grad) + (g.m * gather_mb() if ctx.framework is Framework.FSDP else gather_mb())

    def zero3(grad):
        if legacy_deepspeed:
            zero3 = g.m * z3_deepspeed_per_mb(grad)
        elif deepspeed:
            zero3 = g.m * z3_per_mb(grad)
        elif any_zero3 and fsdp_adapter_units.applies(ctx):  # FSDP1 + PEFT units: gathers in series
            zero3 = g.m * (fsdp_adapter_units.SERIAL_GATHER_PASSES * z3_gather_pass()
                           + overlapped(z3_reduce_scatter(grad), last_bwd()))
        else:
            zero3 = g.m * overlapped(z3_per_mb(grad), sc.compute_mb + sc.recompute_mb)
        if ctx.framework is Framework.TORCHTITAN:  # FSDP2 copy-in / copy-out kernels on the gathered parameters
            zero3 = zero3 + g.m * (local_dense + local_experts) * FSDP2_COPY_BYTES_PER_PARAM / ctx.hbm_bytes_s
        if ctx.framework.pipelines_fsdp2:  # FSDP2 composed with torch.distributed.pipelining
            zero3 = np.where(g.pp > 1, fsdp2_pipeline(), zero3)
        return zero3

    def fsdp2_pipeline():
        """FSDP2 under torch.distributed.pipelining (`fsdp2_pipeline_syncs`): per schedule run one
        all-gather of the stage's parameters behind the run's first forward, one reduce-scatter of
        fp32 gradients after its last backward (exposed), one copy-out (4 B) and one copy-in (6 B)."""
        gathers, reduces = fsdp2_pipeline_syncs(g.flushes)
        reduce = sum(collective(Collective.REDUCE_SCATTER, p * FSDP2_PIPELINE_REDUCE_BYTES, grp, st, reduce_calls)
                     for p, _, grp, st in groups)
        gather_pass = sum(collective(Collective.ALL_GATHER, gb, grp, st, gather_calls) for _, gb, grp, st in groups)
        copies = (local_dense + local_experts) * (4.0 + 6.0) / ctx.hbm_bytes_s
        return gathers * (overlapped(gather_pass, sc.stage_fwd) + copies) + reduces * reduce

    # every input the terms read: the result has their broadcast shape
    inputs = [shard, g.m, *(x for grp in groups for x in grp)]
    if any_zero3:
        inputs += [gather_calls, reduce_calls]
    if not deepspeed or (legacy_deepspeed and any_zero3):
        inputs += [sc.stage_bwd, sc.recompute_mb, sc.stage_fwd, sc.compute_mb]
    if legacy_deepspeed and any_zero3:
        inputs += [g.tp, g.rc]
    if ctx.framework is Framework.TORCHTITAN or ctx.framework.pipelines_fsdp2:
        inputs += [local_dense, local_experts, g.pp, g.flushes]
    shape = np.broadcast_shapes(*(np.shape(x) for x in inputs))
    axis = _sharding_axis(shard, inputs[1:], len(shape))
    branches = {ShardingCode.ZERO3: zero3, ShardingCode.NONE: unsharded, ShardingCode.ZERO2: zero2}
    if axis is None:  # the sharding varies with other inputs: every term over the whole grid
        grad_bytes = np.where(shard == ShardingCode.ZERO3, zero3_grad_bytes, other_grad_bytes)
        return np.where(shard == ShardingCode.ZERO3, zero3(grad_bytes), np.where(
            shard == ShardingCode.NONE, unsharded(grad_bytes),
            np.where(shard == ShardingCode.ZERO2, zero2(grad_bytes), zero12(grad_bytes))))
    out = np.empty(shape)
    codes = shard.ravel()
    lead = (slice(None),) * (len(shape) - 1 - axis) if axis >= 0 else ()
    for code in sorted(set(codes.tolist())):  # np.unique's values; np.unique imports numpy.ma (~30 ms at start)
        grad = zero3_grad_bytes if code == ShardingCode.ZERO3 else other_grad_bytes
        term = branches.get(code, zero12)(grad)
        where = np.flatnonzero(codes == code)
        if axis < 0:
            out[...] = term
        else:
            pick = slice(int(where[0]), int(where[-1]) + 1) if where[-1] - where[0] + 1 == where.size else where
            out[lead + (pick,)] = term
    return out


def _sharding_axis(shard, others, ndim: int):
    """The axis (counted from the last, 0 = last) along which the sharding codes vary, where every
    other input is constant along it; -1 where the sharding is one value; None otherwise."""
    shape = np.shape(shard)
    varying = [i for i, n in enumerate(reversed(shape)) if n > 1]
    if not varying:
        return -1
    if len(varying) > 1:
        return None
    axis = varying[0]
    for x in others:
        xs = np.shape(x)
        if axis < len(xs) and xs[len(xs) - 1 - axis] > 1:
            return None
    return axis
