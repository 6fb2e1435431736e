"""Step-time model: hand-derived figures, bubble formula, MFU definition, breakdown sums, monotonicity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.step.inputs import StepContext
from gpuplan.workloads.training.step.assembly import estimate_step_time, step_time_arrays


@pytest.fixture(scope="module")
def dgx():
    c = load_catalog()
    system = c.system("dgx-a100-80gb")
    return system, c.gpu(system.gpu)


@pytest.fixture(scope="module")
def gpt175():
    return load_model("gpt3-175b")


def test_model_flops_match_megatron_formula(dgx, gpt175):
    # Narayanan et al. 2021 eq. 3 without the recompute pass: F/token = 72 l h^2 (1 + s/6h + V/12lh)
    system, gpu = dgx
    plan = TrainPlan(tp=8, pp=8, dp=1, micro_batch=1, global_batch=64, seq_len=2048, sequence_parallel=True)
    st_ = estimate_step_time(gpt175, system, plan, gpu)
    l, h, s, V = gpt175.layers, gpt175.hidden, 2048, gpt175.vocab
    megatron = 72 * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))
    # gpt3-175b has learned positions and biases; only matmuls count, so the match is to <0.1%
    assert st_.model_flops_per_token == pytest.approx(megatron, rel=1e-3)
    # MFU = model TFLOP/s per GPU / 312 dense bf16 (A100 datasheet)
    assert st_.mfu_pct == pytest.approx(100 * st_.tflops_per_gpu_model / 312.0, rel=1e-9)


def test_breakdown_sums_to_step_time(dgx, gpt175):
    system, gpu = dgx
    plan = TrainPlan(tp=8, pp=8, dp=2, vpp=3, micro_batch=1, global_batch=128, recompute=Recompute.SELECTIVE,
                     sequence_parallel=True, sharding=Sharding.ZERO1)
    st_ = estimate_step_time(gpt175, system, plan, gpu)
    assert sum(st_.breakdown_s.values()) == pytest.approx(st_.step_time_s, rel=1e-12)
    assert st_.tokens_per_s == pytest.approx(128 * 2048 / st_.step_time_s)


def test_bubble_is_pp_minus_1_over_vpp_microbatch_times_without_the_head(dgx, gpt175):
    # 1F1B: bubble = (pp - 1) x t_mb; interleaved: / vpp (Narayanan et al. 2021 sec. 2.2). The fill
    # and drain run through the pp - 1 stages that do not hold the output head, so their micro-batch
    # time is the last stage's minus the head (3 GEMMs t x V/tp x h plus the loss traffic).
    from gpuplan.primitives.op_cost import gemm_time_array
    from gpuplan.workloads.training.step import compute as stm

    system, gpu = dgx
    ctx = StepContext.build(gpt175, system, gpu, 2048)
    tp, t, V, h = 8, 2048.0, gpt175.vocab, gpt175.hidden
    head = (3 * float(gemm_time_array(gpu, t, V / tp, h, "bf16")) / stm.SUSTAINED_GEMM_FRACTION
            + t * V / tp * stm.LOSS_BYTES_PER_LOGIT / ctx.hbm_bytes_s)
    args = dict(tp=tp, dp=1, cp=1, ep=1, micro_batch=1, num_micro_batches=64, recompute=0, sequence_parallel=True, sharding=0)
    for pp, vpp in ((8, 1), (8, 3), (4, 2)):
        a = step_time_arrays(ctx, pp=pp, vpp=vpp, **args)
        steady = a.compute_s + a.recompute_s + a.tp_comm_s + a.cp_comm_s + a.ep_comm_s + a.pp_comm_s
        per_mb = float(steady) / 64
        assert float(a.bubble_s) == pytest.approx((pp - 1) / vpp * (per_mb - head), rel=1e-9)


def test_bubble_does_not_depend_on_the_vocabulary(dgx, gpt175):
    # Only the last stage holds the output head, and it is not in the fill / drain.
    system, gpu = dgx
    args = dict(tp=8, pp=8, vpp=1, dp=1, cp=1, ep=1, micro_batch=1, num_micro_batches=64, recompute=0,
                sequence_parallel=True, sharding=0)
    small = step_time_arrays(StepContext.build(gpt175, system, gpu, 2048), **args)
    big = step_time_arrays(StepContext.build(gpt175.model_copy(update={"vocab": 4 * gpt175.vocab}), system, gpu, 2048), **args)
    assert float(big.compute_s) > float(small.compute_s)
    assert float(big.bubble_s) == pytest.approx(float(small.bubble_s), rel=1e-12)


def test_fp8_runs_keep_the_output_head_in_bf16():
    # FP8 recipes convert the transformer layers' linears only (Megatron-core's output layer is a
    # plain ColumnParallelLinear; torchtitan's float8 converter skips `output`), so the head's
    # time is the bf16 head's: growing the vocabulary adds 3 bf16 GEMMs t x dV x h plus the loss
    # traffic, the same in an FP8 and a BF16 run.
    from gpuplan.primitives.op_cost import gemm_time_array, memory_bandwidth_bytes_s
    from gpuplan.specs import Precision
    from gpuplan.workloads.training.step import compute as stm

    c = load_catalog()
    system = c.system("dgx-h100")
    gpu = c.gpu(system.gpu)
    model = load_model("llama-3-8b")
    args = (1, 1, 1, 1, 1, 1, 1, 1, 0, False, 0)
    deltas = {}
    for precision in (Precision.BF16, Precision.FP8):
        small = step_time_arrays(StepContext.build(model, system, gpu, 8192, precision), *args)
        big = step_time_arrays(StepContext.build(model.model_copy(update={"vocab": 2 * model.vocab}), system, gpu,
                                                 8192, precision), *args)
        deltas[precision] = float(big.compute_s) - float(small.compute_s)
    t, V, h = 8192.0, model.vocab, model.hidden
    # H100: the sustained fraction x the Hopper ratio x the measured sustained share over the A100's
    # (Azure cuBLASLt after 10,000 warm-ups / mamf-finder: H100 1382.2 / 1402.6 over A100 256.5 / 271.2
    # = 1.04193; step.compute.sustained_gemm_fraction)
    sustained = stm.SUSTAINED_GEMM_FRACTION * stm.SUSTAINED_GEMM_RATIO_HOPPER * (1382.2 / 1402.6) / (256.5 / 271.2)
    head = lambda v: 3 * float(gemm_time_array(gpu, t, v, h, "bf16")) / sustained  # noqa: E731
    expected = head(2 * V) - head(V) + t * V * stm.LOSS_BYTES_PER_LOGIT / memory_bandwidth_bytes_s(gpu)
    assert deltas[Precision.FP8] == pytest.approx(expected, rel=1e-9)
    assert deltas[Precision.FP8] == pytest.approx(deltas[Precision.BF16], rel=1e-9)


def test_torchtitan_eager_elementwise_bytes_counted_by_operator():
    # Llama 3 8B (h 4096, q 4096, kv 1024, f 14336), tp 1, one micro-batch of t = 8192 tokens.
    # torchtitan forward bytes per token and layer: 2 fp32 RMSNorms x 36 h + 2 residuals x 6 h
    # = 84 h; rotary 20 x (q + kv); attention-output copy 4 q; repeat_kv 2 x (2 kv + 2 q);
    # SwiGLU 10 f: 344064 + 102400 + 16384 + 20480 + 143360 = 626688 B.
    # Megatron's fused kernels (the inventory's operators): 2 RMSNorms read + write 2 x 4 h, 2
    # residual adds read 2 write 1 (no dropout in Llama) 2 x 6 h = 20 h; SwiGLU reads gate and up and
    # writes 6 f: 81920 + 86016 = 167936 B.
    # Backward moves twice the forward: the compute difference is 3 x 32 layers x t x 458752 B.
    from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s
    from gpuplan.specs.execution import Framework

    c = load_catalog()
    system = c.system("dgx-a100-80gb")
    gpu = c.gpu(system.gpu)
    model = load_model("llama-3-8b")
    args = (1, 1, 1, 1, 1, 1, 1, 1, 0, False, 0)
    titan = step_time_arrays(StepContext.build(model, system, gpu, 8192, framework=Framework.TORCHTITAN), *args)
    megatron = step_time_arrays(StepContext.build(model, system, gpu, 8192, framework=Framework.MEGATRON), *args)
    expected = 3 * 32 * 8192 * (626688 - 167936) / memory_bandwidth_bytes_s(gpu)
    assert float(titan.compute_s) - float(megatron.compute_s) == pytest.approx(expected, rel=1e-9)


def test_fsdp2_copies_are_14_bytes_per_gathered_parameter_per_micro_batch():
    # One FSDP rank (no collective), 3 micro-batches: the exposed DP time is only FSDP2's copy-out
    # (forward + backward, 2 x 4 B) and reduce-scatter copy-in (6 B) over every parameter.
    from gpuplan.layers.params import parameter_counts
    from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s
    from gpuplan.specs.execution import Framework
    from gpuplan.workloads.training.plan_codes import ShardingCode

    c = load_catalog()
    system = c.system("dgx-a100-80gb")
    gpu = c.gpu(system.gpu)
    model = load_model("llama-3-8b")
    ctx = StepContext.build(model, system, gpu, 8192, framework=Framework.TORCHTITAN)
    a = step_time_arrays(ctx, 1, 1, 1, 1, 1, 1, 1, 3, 0, False, ShardingCode.ZERO3)
    total = parameter_counts(model).total
    assert float(a.dp_comm_s) == pytest.approx(3 * total * 14 / memory_bandwidth_bytes_s(gpu), rel=1e-9)


def test_hand_derived_gemm_time_single_gpu():
    # One GPU, tiny model: compute is the sum of rooflines; check the GEMM part against a hand count.
    c = load_catalog()
    system = c.system("h100-sxm5-80gb")
    gpu = c.gpu(system.gpu)
    from gpuplan.primitives.op_cost import gemm_time_array
    from gpuplan.workloads.training.step import compute as stm

    model = load_model("gpt3-175b").model_copy(update={"layers": 2, "name": "tiny"})
    ctx = StepContext.build(model, system, gpu, 2048)
    h, f, t, V = model.hidden, model.ffn, 2048.0, model.vocab
    sustained = stm.SUSTAINED_GEMM_FRACTION * stm.SUSTAINED_GEMM_RATIO_HOPPER  # an H100: x the Hopper ratio
    gemm = lambda m, n, k: float(gemm_time_array(gpu, m, n, k, "bf16")) / sustained  # noqa: E731
    per_layer_fwd = gemm(t, 3 * h, h) + gemm(t, h, h) + gemm(t, f, h) + gemm(t, h, f)
    head = 3 * gemm(t, V, h)
    a = step_time_arrays(ctx, 1, 1, 1, 1, 1, 1, 1, 1, 0, False, 0)
    # compute = 2 layers x (fwd + 2x bwd GEMMs + attention + elementwise) + head: the GEMM share is
    # 3 x per_layer_fwd per layer; the rest (attention, elementwise, loss) is positive
    gemm_total = 2 * 3 * per_layer_fwd + head
    assert float(a.compute_s) > gemm_total
    assert float(a.compute_s) < 1.6 * gemm_total  # non-GEMM work of a 12288-wide layer at s=2048 is < 60%


def test_more_gpus_of_data_parallel_is_faster_per_token_but_not_superlinear(dgx, gpt175):
    system, gpu = dgx
    small = TrainPlan(tp=8, pp=8, dp=1, micro_batch=1, global_batch=256, sequence_parallel=True)
    big = TrainPlan(tp=8, pp=8, dp=4, micro_batch=1, global_batch=256, sequence_parallel=True)
    a = estimate_step_time(gpt175, system, small, gpu)
    b = estimate_step_time(gpt175, system, big, gpu)
    assert b.step_time_s < a.step_time_s
    assert b.tokens_per_s <= 4 * a.tokens_per_s * 1.0001


@settings(max_examples=25, deadline=None)
@given(mb=st.sampled_from([1, 2, 4]), m=st.integers(1, 32), rc=st.sampled_from([0, 1, 2]), sh=st.sampled_from([0, 1, 2, 3]))
def test_properties(mb, m, rc, sh):
    c = load_catalog()
    system = c.system("dgx-h100")
    gpu = c.gpu(system.gpu)
    model = load_model("gpt3-175b")
    ctx = StepContext.build(model, system, gpu, 2048)
    a = step_time_arrays(ctx, 8, 4, 2, 1, 1, 1, mb, m, rc, True, sh)
    parts = a.parts()
    assert all(float(v) >= 0 for v in parts.values())
    assert float(sum(parts.values())) == pytest.approx(float(a.step_s))
    # more micro-batches -> longer step; recompute never speeds up a step
    b = step_time_arrays(ctx, 8, 4, 2, 1, 1, 1, mb, m + 1, rc, True, sh)
    assert float(b.step_s) > float(a.step_s)
    none = step_time_arrays(ctx, 8, 4, 2, 1, 1, 1, mb, m, 0, True, sh)
    assert float(a.step_s) >= float(none.step_s) - 1e-12
    assert np.isfinite(float(a.step_s))


def test_torchtitan_selective_recomputes_half_the_forward(dgx, gpt175):
    # torchtitan selective AC (every 2nd block / every other matmul) re-runs half of each layer's
    # forward, full AC all of it: recompute_s(selective) / recompute_s(full) = 0.5 by definition.
    from gpuplan.specs.execution import Framework

    system, gpu = dgx
    times = {}
    for rc in (Recompute.SELECTIVE, Recompute.FULL):
        plan = TrainPlan(tp=8, pp=8, dp=2, micro_batch=1, global_batch=16, seq_len=2048, recompute=rc)
        times[rc] = estimate_step_time(gpt175, system, plan, gpu, framework=Framework.TORCHTITAN).breakdown_s["recompute_s"]
    assert times[Recompute.SELECTIVE] == pytest.approx(0.5 * times[Recompute.FULL], rel=1e-12)


def test_flash_v1_attention_takes_twice_flash2(dgx, gpt175):
    # Megatron selective recompute re-runs the attention core forward only; FlashAttention v1 runs its
    # forward + backward at FLASH_V1_OVER_V2 = 0.5 of FlashAttention-2's rate (Dao 2023) -> twice the
    # time, of which each kernel's forward takes its own share (step.attention_passes): v1 3 / 13 =
    # 0.230769 (forward / backward rate 4 / 3), FlashAttention-2 0.242653 (rate ratio 1.248444):
    # 2 x 0.230769 / 0.242653 = 1.902051 times FlashAttention-2's recompute.
    from gpuplan.specs.execution import AttentionKernel

    system, gpu = dgx
    plan = TrainPlan(tp=8, pp=8, dp=2, micro_batch=1, global_batch=16, seq_len=2048, recompute=Recompute.SELECTIVE)
    v2 = estimate_step_time(gpt175, system, plan, gpu, attention_kernel=AttentionKernel.FLASH).breakdown_s["recompute_s"]
    v1 = estimate_step_time(gpt175, system, plan, gpu, attention_kernel=AttentionKernel.FLASH_V1).breakdown_s["recompute_s"]
    assert v1 == pytest.approx(1.902051 * v2, rel=1e-5)


def test_tp_comm_overlap_bounds(dgx, gpt175):
    # TE userbuffers overlap each AG/RS (c = half an all-reduce) with a GEMM: ring exchange in tp
    # chunks, pipeline in 4 splits, bulk beside an independent GEMM (step_time docstring and
    # test_unstated_config_and_ub_overlap.py for the hand-derived terms). Bounds that hold whatever
    # c and g are: (1) the overlapped TP time is below the blocking model's and at least 4 ring
    # pairs x c / tp per layer, and (2) the option has no effect without sequence parallelism.
    system, gpu = dgx
    base = dict(tp=8, pp=8, dp=2, vpp=1, micro_batch=1, global_batch=32, seq_len=2048)
    sp_blocking = estimate_step_time(gpt175, system, TrainPlan(**base, sequence_parallel=True), gpu)
    sp_overlap = estimate_step_time(gpt175, system, TrainPlan(**base, sequence_parallel=True, tp_comm_overlap=True), gpu)
    blocking_tp = sp_blocking.breakdown_s["tp_comm_s"]
    overlap_tp = sp_overlap.breakdown_s["tp_comm_s"]
    # blocking forward + half the backward collectives = 2 + 1 all-reduce equivalents per layer;
    # overlapped: 8 AG/RS (4 fwd, 4 bwd) of c = ar/2 each, at least c/tp exposed: 4 ar / tp
    assert overlap_tp < blocking_tp
    assert overlap_tp >= blocking_tp * (4.0 / 8) / 3.0 - 1e-12
    no_sp = estimate_step_time(gpt175, system, TrainPlan(**base, tp_comm_overlap=True), gpu)
    no_sp_blocking = estimate_step_time(gpt175, system, TrainPlan(**base), gpu)
    assert no_sp.step_time_s == pytest.approx(no_sp_blocking.step_time_s, rel=1e-12)


def test_interleaved_p2p_overlaps_only_in_megatron_core(dgx, gpt175):
    # Megatron-core overlaps interleaved-schedule sends with compute (overlap_p2p_comm); the
    # 2021-22 stack (unfused attention) and the 1F1B schedule block on them.
    from gpuplan.specs.execution import AttentionKernel

    system, gpu = dgx
    inter = TrainPlan(tp=8, pp=8, dp=2, vpp=3, micro_batch=1, global_batch=32, seq_len=2048)
    core = estimate_step_time(gpt175, system, inter, gpu, attention_kernel=AttentionKernel.FLASH)
    legacy = estimate_step_time(gpt175, system, inter, gpu, attention_kernel=AttentionKernel.UNFUSED)
    # a 2 x 2048 x 12288 / 8 B = 6.3 MB send is far below half a virtual stage's compute (4 layers):
    # only the 5% contention share of the transfer remains exposed
    assert core.breakdown_s["pp_comm_s"] == pytest.approx(0.05 * legacy.breakdown_s["pp_comm_s"], rel=1e-9)
    one_f_one_b = inter.model_copy(update={"vpp": 1})
    a = estimate_step_time(gpt175, system, one_f_one_b, gpu, attention_kernel=AttentionKernel.FLASH)
    b = estimate_step_time(gpt175, system, one_f_one_b, gpu, attention_kernel=AttentionKernel.UNFUSED)
    assert a.breakdown_s["pp_comm_s"] == pytest.approx(b.breakdown_s["pp_comm_s"], rel=1e-12)


def test_collective_sm_fraction_is_channels_over_sms():
    # NCCL runs one thread block per channel. dgx-h100 (132 SMs, 1 NIC per GPU): a ring over 8
    # nodes x 8 ranks uses 2 channels per NIC the node's ranks own = 16 -> 16/132; one rank per node
    # (strided group) owns 1 NIC -> 2/132. dgx-a100-80gb inside the node: 300 GB/s / (450/32) = 21
    # channels over 108 SMs. A group of one runs no collective.
    from gpuplan.primitives.parallel_groups import collective_sm_fraction

    c = load_catalog()
    h100, a100 = c.system("dgx-h100"), c.system("dgx-a100-80gb")
    assert float(collective_sm_fraction(64, 8, h100, c.gpu(h100.gpu))) == pytest.approx(16 / 132)
    assert float(collective_sm_fraction(8, 1, h100, c.gpu(h100.gpu))) == pytest.approx(2 / 132)
    assert float(collective_sm_fraction(8, 8, a100, c.gpu(a100.gpu))) == pytest.approx(21 / 108)
    assert float(collective_sm_fraction(1, 1, a100, c.gpu(a100.gpu))) == 0.0


def test_uneven_pipeline_split_models_the_busiest_stage(dgx, gpt175):
    # 61 layers on pp 16 (DeepSeek-V3's layout): Megatron's uneven split puts ceil(61/16) = 4 layers on
    # the busiest stage, the same as 64 layers on pp 16. Per-layer work and per-layer parameters are
    # equal, so every term of the step (compute, comm, bubble, DP reduce of that stage's parameters)
    # matches the 64-layer model's (to 1e-6: the final norm's 2h parameters are spread over 61 vs 64).
    system, gpu = dgx
    plan = TrainPlan(tp=8, pp=16, dp=1, micro_batch=1, global_batch=64, seq_len=2048, sequence_parallel=True)
    odd = estimate_step_time(gpt175.model_copy(update={"layers": 61}), system, plan.model_copy(update={"dp": 2, "global_batch": 128}), gpu)
    even = estimate_step_time(gpt175.model_copy(update={"layers": 64}), system, plan.model_copy(update={"dp": 2, "global_batch": 128}), gpu)
    assert odd.step_time_s == pytest.approx(even.step_time_s, rel=1e-8)
    for key, value in even.breakdown_s.items():
        assert odd.breakdown_s[key] == pytest.approx(value, rel=1e-6, abs=1e-15), key


def test_sustained_gemm_fraction_takes_the_hopper_ratio_on_hopper_only():
    # training GEMMs run at mamf x shape x sustained; on Hopper sustained = base x the Hopper ratio x the
    # measured sustained share over the A100's (both shares set equal here: factor 1)
    from gpuplan import knobs
    from gpuplan.workloads.training.step.compute import sustained_gemm_fraction

    c = load_catalog()
    h100, a100 = c.gpu("h100-sxm5-80gb"), c.gpu("a100-sxm4-80gb")
    with knobs.overridden({"training.sustained_gemm_fraction": 0.8, "training.sustained_gemm_ratio.hopper": 0.9,
                           "efficiency.sustained_gemm.family.hopper": knobs.value("efficiency.sustained_gemm.reference")}):
        assert sustained_gemm_fraction(h100) == pytest.approx(0.72)  # 0.8 x 0.9
        assert sustained_gemm_fraction(a100) == pytest.approx(0.8)


def test_pipeline_deeper_than_the_model_is_rejected(dgx, gpt175):
    from gpuplan.errors import InputError

    system, gpu = dgx
    plan = TrainPlan(tp=1, pp=8, vpp=2, dp=1, micro_batch=1, global_batch=8, seq_len=2048)
    with pytest.raises(InputError, match="exceeds the number of layers"):
        estimate_step_time(gpt175.model_copy(update={"layers": 12}), system, plan, gpu)


def test_zero3_collectives_are_charged_per_gather_unit(dgx, gpt175):
    # DeepSpeed ZeRO-3 fetches per submodule, coalescing up to stage3_prefetch_bucket_size = 5e7
    # elements (deepspeed/runtime/zero/config.py); a GPT-3 175B layer holds 12 h^2 = 1.81e9 weights
    # in 4 matrices (qkv, out, fc1, fc2), each larger than the bucket, so it costs 4 all-gathers:
    # 96 layers x 4 + 1 root = 385 calls per pass. Gradients are reduce-scattered per
    # reduce_bucket_size = 5e8 elements: ceil(174.6e9 / 5e8) = 350 calls per micro-batch.
    # FSDP wraps one unit per block: 96 + 1 all-gathers and reduce-scatters.
    from gpuplan.primitives.collectives import Collective
    from gpuplan.primitives.parallel_groups import collective_seconds_array
    from gpuplan.specs.execution import Framework
    from gpuplan.workloads.training.plan_codes import ShardingCode
    from gpuplan.workloads.training.step.data import zero3_collective_calls

    system, gpu = dgx
    ds = StepContext.build(gpt175, system, gpu, 2048, framework=Framework.DEEPSPEED)
    a = step_time_arrays(ds, 1, 1, 1536, 1, 1, 1, 1, 1, 0, False, ShardingCode.ZERO3)
    total = ds.body_params + ds.input_embedding_params + ds.output_head_params
    sc_layers = type("SC", (), {"layers_per_stage": 96.0})()
    gathers, reduces = zero3_collective_calls(ds, sc_layers, total, 0)
    assert float(gathers) == 385.0
    assert float(reduces) == 350.0  # ceil(174.56e9 / 5e8)
    # DeepSpeed does not overlap: dp = m x (2 x all-gather + reduce-scatter), each as calls x
    # time(bytes / calls) on 1536 ranks of 8 per node; fp16 parameters and gradients (2 B)
    per_node = 8
    ag = 385 * float(collective_seconds_array(Collective.ALL_GATHER, total * 2.0 / 385, 1536, per_node, system, gpu=gpu))
    rs = 350 * float(collective_seconds_array(Collective.REDUCE_SCATTER, total * 2.0 / 350, 1536, per_node, system, gpu=gpu))
    assert float(a.dp_comm_s) == pytest.approx(2 * ag + rs, rel=1e-9)
    # one call of all the bytes would pay the ring latency once: the split costs more
    one_call = float(collective_seconds_array(Collective.ALL_GATHER, total * 2.0, 1536, per_node, system, gpu=gpu))
    assert ag > one_call + 300 * 1e-3  # >= ~1 ms ring latency per extra call over 192 nodes
    fsdp = StepContext.build(gpt175, system, gpu, 2048, framework=Framework.TORCHTITAN)
    assert [float(x) for x in zero3_collective_calls(fsdp, sc_layers, total, 0)] == [97.0, 97.0]


def test_torchtitan_vanilla_tp_hides_no_backward_collective(dgx):
    # Per layer and micro-batch, TP moves 2 all-reduce-sized collectives forward and 2 backward
    # (Korthikanti et al. 2022). Megatron hides training.tp_backward_overlap (0.5) of the backward
    # ones behind the wgrad GEMM (async input-gradient all-reduce): 2 + 2 x 0.5 = 3 all-reduces
    # exposed; torchtitan's vanilla DTensor TP waits on each: 4. Ratio 4 / 3.
    from gpuplan.specs.execution import Framework
    from gpuplan.workloads.training.plan_codes import ShardingCode

    system, gpu = dgx
    model = load_model("llama-3-8b")
    tp_s = {}
    for fw in (Framework.MEGATRON, Framework.TORCHTITAN):
        ctx = StepContext.build(model, system, gpu, 8192, framework=fw)
        a = step_time_arrays(ctx, 8, 1, 1, 1, 1, 1, 1, 1, 0, True, ShardingCode.NONE)
        tp_s[fw] = float(a.tp_comm_s)
    # torchtitan's DTensor also copies each sequence-parallel collective's activation once (torch.cat
    # along the sequence dim): 32 layers x 8 collectives x (read + write) x 8192 x 4096 x 2 B at the HBM rate
    ctx = StepContext.build(model, system, gpu, 8192, framework=Framework.TORCHTITAN)
    copies = 32 * 8 * 2 * 8192 * 4096 * 2.0 / ctx.hbm_bytes_s
    assert tp_s[Framework.TORCHTITAN] == pytest.approx(tp_s[Framework.MEGATRON] * 4.0 / 3.0 + copies, rel=1e-12)
