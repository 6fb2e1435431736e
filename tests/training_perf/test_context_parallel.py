"""Context parallelism: per-rank causal work with and without load balance, the K,V bytes each
implementation moves, PyTorch's ring-step eager traffic, and the Blackwell attention rate.
Every expected number is derived by hand in the comment beside it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.parallel_groups import collective_seconds_array
from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s
from gpuplan.specs import Precision
from gpuplan.specs.execution import ContextParallelMethod, Framework
from gpuplan.workloads.training.step import context as cpm
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext
from gpuplan.workloads.training.step.compute import attention_core_seconds, training_attention_ceiling
from gpuplan.workloads.training.step.assembly import step_time_arrays


@pytest.fixture(scope="module")
def titan_node():
    c = load_catalog()
    system = c.system("hgx-h100-96gb")
    return system, c.gpu(system.gpu)


@pytest.fixture(scope="module")
def llama8b():
    return load_model("llama-3-8b")


def test_framework_decides_the_cp_method():
    # torchtitan runs torch's context_parallel; Megatron-core (and stacks modelled like it) TE's p2p ring
    assert Framework.TORCHTITAN.context_parallel_method is ContextParallelMethod.TORCH_ALLGATHER
    for fw in (Framework.MEGATRON, Framework.OTHER, Framework.DEEPSPEED, Framework.FSDP):
        assert fw.context_parallel_method is ContextParallelMethod.P2P_RING


def test_causal_pairs_per_rank_with_and_without_load_balance():
    # s = 131072 tokens, cp = 4. Balanced (2 cp chunks): s (s + 1) / (2 cp) = 131072 x 131073 / 8
    # = 2,147,500,032 pairs on every rank. Contiguous chunks of c = 32768: the last rank sees 3 full
    # chunks and its own causal one: 3 x 32768^2 + 32768 x 32769 / 2 = 3,221,225,472 + 536,887,296
    # = 3,758,112,768 pairs: 1.75 = (2 x 4 - 1) / 4 times the mean.
    assert float(cpm.causal_pairs_per_rank(131072, 4)) == 2_147_500_032
    assert float(cpm.causal_pairs_per_rank(131072, 4, load_balance=False)) == 3_758_112_768
    assert float(cpm.causal_imbalance(4, load_balance=False)) == 1.75
    assert float(cpm.causal_imbalance(4)) == 1.0


def test_attention_flops_per_rank_llama_8b_cp4_128k(titan_node, llama8b):
    # Llama 3.1 8B: 32 heads x 128, causal forward FLOPs per layer = 2 (d_qk + d_v) x heads x pairs
    # = 2 x 256 x 32 x pairs. Balanced at cp 4 and 128k: 16384 x 2,147,500,032 = 3.5185e13 FLOP per
    # layer per rank; without the balance the busiest rank would do 16384 x 3,758,112,768 = 6.1573e13.
    # The step-time model charges the balanced figure: its forward time at the Hopper ceiling
    # (335/989 of the catalog's dense bf16 peak, 989.4 TFLOP/s, SM fill 1) is
    # 3.5185e13 / (989.4e12 x 335/989) = 0.10499 s at the forward + backward rate, so forward +
    # backward = 3.5 x 0.10499 = 0.36745 s, at a sustained clock ratio of 1 (the Hopper ratio, a fitted
    # knob, and this 500 W part's power-limit clock ratio divide it; both fixed at 1 here: the power-limit
    # exponent 0). FlashAttention-2's forward runs rho = 301.285 / 241.328 = 1.24845 times its backward's
    # rate (H200, sdpa_hd.json): the forward takes 1 / (1 + 2.5 x 1.24845) = 0.242651 of that, 0.089163 s,
    # the backward the other 0.757349, 0.278289 s.
    system, gpu = titan_node
    balanced = 2 * 256 * 32 * float(cpm.causal_pairs_per_rank(131072, 4))
    assert balanced == pytest.approx(3.51846e13, rel=1e-5)
    assert 2 * 256 * 32 * float(cpm.causal_pairs_per_rank(131072, 4, load_balance=False)) == pytest.approx(
        6.15728e13, rel=1e-5)
    ctx = StepContext.build(llama8b, system, gpu, 131072, Precision.FP8, Framework.TORCHTITAN)
    g = PlanAxes.build(ctx, 1, 1, 2, 4, 1, 1, 1, 1, 2, False, 3)
    with knobs.overridden({"training.sustained_gemm_ratio.hopper": 1.0, "training.power_limit_clock_exponent": 0.0,
                           "efficiency.sustained_gemm.family.hopper": knobs.value("efficiency.sustained_gemm.reference")}):
        fwd, bwd = attention_core_seconds(ctx, g)
    assert gpu.matmul_peak_tflops("bf16") == 989.4
    rate = 989.4e12 * 335.0 / 989.0
    assert float(fwd + bwd) == pytest.approx(3.5 * balanced / rate, rel=1e-6)
    assert float(fwd) == pytest.approx(0.089163, rel=1e-4)
    assert float(bwd) == pytest.approx(0.278289, rel=1e-4)


def test_kv_bytes_exchanged_per_layer_llama_8b_cp4_128k():
    # t = 131072 / 4 = 32768 tokens per rank, tp 1. torchtitan expands GQA (repeat_kv) before SDPA,
    # so K,V are 32 x 128 = 4096 wide: the all-gather output on each rank is cp x t x 2 x 4096 x 2 B
    # = 4 x 32768 x 16384 = 2,147,483,648 B (2 GiB), of which 3/4 (1.5 GiB) arrives from the others.
    # TransformerEngine moves the 8 kv heads (1024 wide): one hop = 32768 x 2 x 1024 x 2 = 128 MiB,
    # 3 hops forward = 384 MiB.
    width = cpm.kv_width(Framework.TORCHTITAN, 4096, 1024)
    assert width == 4096
    assert float(cpm.torch_allgather_kv_bytes(32768, width, 1, 4)) == 2_147_483_648
    assert cpm.kv_width(Framework.MEGATRON, 4096, 1024) == 1024
    assert float(cpm.kv_block_bytes(32768, 1024, 1)) == 128 * 2**20
    # PyTorch's backward ring passes dK,dV in fp32: 32768 x 2 x 4096 x 4 B = 1 GiB per transfer
    assert float(cpm.kv_block_bytes(32768, 4096, 1, 4.0)) == 2**30


def test_p2p_ring_exposes_what_attention_does_not_hide(titan_node):
    # TransformerEngine's ring: cp - 1 hops of the K,V block forward per pass, 2 (cp - 1) backward
    # (K,V and dK,dV), each hidden behind the attention core; with no attention to hide behind, the
    # whole ring is exposed: layers x (passes x (cp-1) hop + 2 (cp-1) hop); behind a long attention
    # nothing is.
    system, gpu = titan_node
    t, cp = 16384.0, 4.0
    hop = float(collective_seconds_array(Collective.P2P, t * 2 * 1024 * 2.0, 2, 2, system, gpu=gpu))
    kw = dict(t=t, tp=1.0, cp=cp, q_dim=4096, kv_dim=1024, fwd_passes=1.0, layers=32.0, hbm_bytes_s=1.92e12)
    bare = float(cpm.cp_exposed_seconds(Framework.MEGATRON, system, gpu, attn_fwd=0.0, attn_bwd=0.0, **kw))
    assert bare == pytest.approx(32 * (3 * hop + 6 * hop), rel=1e-12)
    assert float(cpm.cp_exposed_seconds(Framework.MEGATRON, system, gpu, attn_fwd=1.0, attn_bwd=2.5, **kw)) == 0.0


def test_torch_ring_exposed_time_llama_8b_cp8_256k(titan_node):
    # Llama 3.1 8B at 256k on cp 8 (ttbench-7 shape), full recompute (2 forward passes), 32 layers.
    # With attention long enough to hide every transfer, what is exposed per layer is the eager
    # ring-step traffic plus the last fp32 dK,dV transfer (waited after the loop):
    # q-sized elements t x q = 32768 x 4096 = 134,217,728; bytes per element, counted from
    # torch's _templated_ring_attention(_backward): forward step = K,V cat 8 + the mean of a full
    # merge (to-fp32 6 + 32) and a partial one (19 + fp32 re-cat 8) = 40.5; backward step = K,V cat 8
    # + dQ 11.5 + dK,dV 23 + fp32 dK,dV cat 16 = 58.5; per backward pass fp32 zeros and casts 30:
    # 2 passes x 7 steps x 40.5 + 7 x 58.5 + 30 = 567 + 409.5 + 30 = 1006.5
    # -> 1.35090e11 B per layer at 0.8 x 2.4 TB/s (H100 96GB HBM2e) = 1.92e12 B/s: 70.36 ms.
    system, gpu = titan_node
    t, huge = 32768.0, 1e6
    dkv = float(collective_seconds_array(Collective.P2P, t * 2 * 4096 * 4.0, 2, 2, system, gpu=gpu))
    hbm = memory_bandwidth_bytes_s(gpu)
    assert hbm == pytest.approx(0.8 * 2.4e12, rel=1e-9)
    with knobs.overridden({"training.torch_cp_attention_slowdown": 1.0}):
        exposed = float(cpm.cp_exposed_seconds(
            Framework.TORCHTITAN, system, gpu, t=t, tp=1.0, cp=8.0, q_dim=4096, kv_dim=1024,
            attn_fwd=huge, attn_bwd=huge, fwd_passes=2.0, layers=32.0, hbm_bytes_s=hbm))
    eager = 134_217_728 * 1006.5 / 1.92e12
    assert eager == pytest.approx(0.070363, rel=1e-4)
    assert exposed == pytest.approx(32 * (eager + dkv), rel=1e-9)


def test_torch_ring_exposes_the_gather_beyond_the_first_step(titan_node):
    # The all-gather is waited at ring step 1: it hides behind the first step only (a / cp). With no
    # attention at all the whole gather is exposed in each of the 2 forward passes and the backward.
    system, gpu = titan_node
    t, cp = 32768.0, 4.0
    gather = float(collective_seconds_array(Collective.ALL_GATHER, cp * t * 2 * 4096 * 2.0, 4, 4, system, gpu=gpu))
    dkv = float(collective_seconds_array(Collective.P2P, t * 2 * 4096 * 4.0, 2, 2, system, gpu=gpu))
    kw = dict(t=t, tp=1.0, cp=cp, q_dim=4096, kv_dim=1024, fwd_passes=2.0, layers=1.0, hbm_bytes_s=1e30)
    with knobs.overridden({"training.torch_cp_attention_slowdown": 1.0}):
        none = float(cpm.cp_exposed_seconds(Framework.TORCHTITAN, system, gpu, attn_fwd=0.0, attn_bwd=0.0, **kw))
    # 2 forward gathers + backward gather + cp dK,dV transfers (eager traffic ~0 at infinite bandwidth)
    assert none == pytest.approx(3 * gather + cp * dkv, rel=1e-9)


def test_slowdown_knob_touches_only_torch_ring_steps(titan_node, llama8b):
    # the fitted factor scales the off-diagonal ring steps ((cp - 1) / cp of the attention) of
    # PyTorch's context_parallel; Megatron's ring and cp = 1 runs do not read it
    system, gpu = titan_node
    args = dict(tp=1, pp=1, dp=1, ep=1, vpp=1, micro_batch=1, num_micro_batches=1, recompute=2,
                sequence_parallel=False, sharding=3)

    def run(fw, cp, slowdown):
        ctx = StepContext.build(llama8b, system, gpu, 65536, Precision.FP8, fw)
        with knobs.overridden({"training.torch_cp_attention_slowdown": slowdown}):
            return step_time_arrays(ctx, cp=cp, **args)

    a, b = run(Framework.TORCHTITAN, 2, 1.0), run(Framework.TORCHTITAN, 2, 2.0)
    ctx = StepContext.build(llama8b, system, gpu, 65536, Precision.FP8, Framework.TORCHTITAN)
    g = PlanAxes.build(ctx, 1, 1, 1, 2, 1, 1, 1, 1, 2, False, 3)
    fwd, bwd = attention_core_seconds(ctx, g)
    # + (2 - 1) x (cp - 1) / cp x 32 layers x (2 forward passes x a_f + a_b)
    assert float(b.cp_comm_s - a.cp_comm_s) == pytest.approx(0.5 * 32 * (2 * float(fwd) + float(bwd)), rel=1e-9)
    for fw, cp in ((Framework.MEGATRON, 2), (Framework.TORCHTITAN, 1)):
        assert float(run(fw, cp, 1.0).step_s) == float(run(fw, cp, 2.0).step_s)


@settings(max_examples=60, deadline=None)
@given(cp=st.sampled_from([1, 2, 4, 8, 16]), t=st.floats(1024, 262144), attn=st.floats(0.0, 10.0),
       fw=st.sampled_from([Framework.TORCHTITAN, Framework.MEGATRON]), passes=st.sampled_from([1.0, 1.5, 2.0]))
def test_exposed_cp_time_is_nonnegative_and_zero_without_cp(titan_node, cp, t, attn, fw, passes):
    system, gpu = titan_node
    v = float(cpm.cp_exposed_seconds(fw, system, gpu, t=t, tp=1.0, cp=float(cp), q_dim=4096, kv_dim=1024,
                                     attn_fwd=attn, attn_bwd=2.5 * attn, fwd_passes=passes, layers=32.0,
                                     hbm_bytes_s=1.92e12))
    assert np.isfinite(v) and v >= 0.0
    if cp == 1:
        assert v == 0.0


@settings(max_examples=60, deadline=None)
@given(s=st.integers(2, 1 << 21), cp=st.integers(1, 64))
def test_balanced_pairs_sum_to_the_causal_total_and_never_exceed_the_busiest(s, cp):
    # cp balanced ranks together compute s (s + 1) / 2 pairs; contiguous chunks load the last rank more
    total = s * (s + 1) / 2
    assert float(cpm.causal_pairs_per_rank(s, cp)) * cp == pytest.approx(total, rel=1e-12)
    assert float(cpm.causal_pairs_per_rank(s, cp, load_balance=False)) >= float(cpm.causal_pairs_per_rank(s, cp)) * (1 - 1e-12)


def test_blackwell_training_attention_rate_is_sourced():
    # cuDNN 9.13 on one B200, causal, head_dim 128, GQA 128/8 (NVIDIA/cudnn-frontend sdpa_benchmark_training
    # B200 artifact, TFLOP/s forward / backward): 16k 1332.415 / 1074.776, 32k 1419.000 / 1108.688,
    # 64k 1382.330 / 1073.059, 128k 1355.418 / 1047.843. Forward + backward 3.5 / (1/f + 2.5/b):
    # 16k 3.5 / (7.5052e-4 + 2.32607e-3) = 1137.6; 32k 3.5 / (7.0472e-4 + 2.25493e-3) = 1182.6;
    # 64k 3.5 / (7.2342e-4 + 2.32978e-3) = 1146.3; 128k 3.5 / (7.3778e-4 + 2.38585e-3) = 1120.5;
    # mean 1146.7 of 2250 = 0.5097 (the fraction applies to GB200's 2500 peak alike: one kernel, one
    # generation).
    c = load_catalog()
    for gpu_id, peak in (("b200", 2250.0), ("gb200", 2500.0)):
        gpu = c.gpu(gpu_id)
        assert training_attention_ceiling(gpu) == pytest.approx(0.5097, abs=2e-4)
        assert gpu.matmul_peak_tflops("bf16") == peak


def test_the_sustained_clock_ratio_scales_attention_and_gemms_alike():
    # the generation's sustained tensor-core rate (on Blackwell the measured sustained GEMM share over the
    # A100's, `efficiency.sustained_gemm.family.blackwell` / `.reference`) divides the attention core as it
    # divides every GEMM: a B200 run at ratio 0.5 takes exactly twice the attention seconds of one at
    # ratio 1; an A100 has no ratio (1)
    from gpuplan import knobs
    from gpuplan.workloads.training.step.compute import sustained_clock_ratio, sustained_gemm_fraction

    c = load_catalog()
    b200, a100 = c.gpu("b200"), c.gpu("a100-sxm4-80gb")
    ref = knobs.value("efficiency.sustained_gemm.reference")
    half, whole = {"efficiency.sustained_gemm.family.blackwell": 0.5 * ref}, {"efficiency.sustained_gemm.family.blackwell": ref}
    with knobs.overridden({"training.sustained_gemm_fraction": 0.8, **half}):
        assert sustained_clock_ratio(b200) == pytest.approx(0.5) and sustained_clock_ratio(a100) == 1.0
        assert sustained_gemm_fraction(b200) == pytest.approx(0.4)  # 0.8 x 0.5
        assert sustained_gemm_fraction(a100) == pytest.approx(0.8)
    system = c.system("dgx-b200")
    ctx = StepContext.build(load_model("llama-3-8b"), system, b200, 8192, Precision.BF16)
    g = PlanAxes.build(ctx, 1, 1, 8, 1, 1, 1, 2, 8, 0, False, 1)
    with knobs.overridden(whole):
        full = [float(x) for x in attention_core_seconds(ctx, g)]
    with knobs.overridden(half):
        halved = [float(x) for x in attention_core_seconds(ctx, g)]
    assert halved == pytest.approx([2.0 * t for t in full], rel=1e-12)


def test_attention_and_head_stay_bf16_in_mx_runs():
    # MXFP8 / FP8 convert the layers' linears only: the attention core runs at the bf16 rate
    c = load_catalog()
    system = c.system("dgx-b200")
    gpu = c.gpu(system.gpu)
    model = load_model("llama-3-8b")
    times = {}
    for precision in (Precision.BF16, Precision.MXFP8, Precision.FP8):
        ctx = StepContext.build(model, system, gpu, 8192, precision)
        g = PlanAxes.build(ctx, 1, 1, 8, 1, 1, 1, 2, 8, 0, False, 1)
        times[precision] = tuple(float(x) for x in attention_core_seconds(ctx, g))
    assert times[Precision.MXFP8] == times[Precision.BF16] == times[Precision.FP8]
