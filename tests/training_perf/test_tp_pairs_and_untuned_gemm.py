"""Sequence-parallel TP pairs timed as their own collectives, torchtitan's selective AC re-issuing the
TP all-gathers, and CDNA3 training GEMMs at the untuned hipBLASLt rate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.op_cost import gemm_time_array
from gpuplan.primitives.parallel_groups import collective_seconds_array, group_per_node
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step.assembly import step_time_arrays
from gpuplan.workloads.training.step.compute import gemm_seconds, untuned_gemm_ratio
from gpuplan.workloads.training.step.inputs import StepContext


@pytest.fixture(scope="module")
def hgx96():
    c = load_catalog()
    system = c.system("hgx-h100-96gb")
    return system, c.gpu(system.gpu)


def _collective(kind, system, gpu, size, tp=8):
    return float(collective_seconds_array(kind, np.array([size]), np.array([tp]),
                                          group_per_node(np.array([tp]), 1, system.gpus_per_node), system, gpu=gpu)[0])


def _tp_seconds(model, system, gpu, fw, rc, sp, seq=8192, tp=8):
    ctx = StepContext.build(model, system, gpu, seq, framework=fw)
    return float(step_time_arrays(ctx, tp, 1, 1, 1, 1, 1, 1, 1, rc, sp, ShardingCode.NONE).tp_comm_s)


def test_sequence_parallel_pair_is_all_gather_plus_reduce_scatter(hgx96):
    # Llama 3 8B (32 layers, hidden 4096), tp 8, one sequence of 8192 tokens, no recompute, torchtitan
    # (no backward overlap): per layer 2 forward + 2 backward collective units (Korthikanti et al. 2022
    # sec. 4.2.2). Without SP each unit is an all-reduce of t x h x 2 = 8192 x 4096 x 2 B; with SP it is
    # an all-gather + a reduce-scatter of that tensor, each timed as itself (NCCL reduces an all-reduce
    # in the NVSwitch but rings the pair), so the SP total is 32 x 4 x (AG + RS).
    system, gpu = hgx96
    model = load_model("llama-3-8b")
    size = 8192 * 4096 * 2.0
    ar = _collective(Collective.ALL_REDUCE, system, gpu, size)
    pair = _collective(Collective.ALL_GATHER, system, gpu, size) + _collective(Collective.REDUCE_SCATTER, system, gpu, size)
    # torchtitan (no backward overlap); its sequence-dim copies are tested below, so they are set aside
    ctx = StepContext.build(model, system, gpu, 8192, framework=Framework.TORCHTITAN)
    copies = 32 * 8 * 2 * size / ctx.hbm_bytes_s
    no_sp = _tp_seconds(model, system, gpu, Framework.TORCHTITAN, RecomputeCode.NONE, False)
    with_sp = _tp_seconds(model, system, gpu, Framework.TORCHTITAN, RecomputeCode.NONE, True) - copies
    assert no_sp == pytest.approx(32 * 4 * ar, rel=1e-12)
    assert with_sp == pytest.approx(32 * 4 * pair, rel=1e-12)
    # NVLS all-reduce on an HGX H100: the ring pair takes longer than the in-switch all-reduce
    assert pair > ar


def test_torchtitan_selective_recompute_regathers_two_per_layer(hgx96):
    # torchtitan per-op SAC saves mm / SDPA / reduce_scatter_tensor outputs only (_save_list), so the
    # recomputed forward re-issues the two sequence-parallel all-gathers of every layer: selective -
    # none = 32 layers x 2 all-gathers. Megatron's selective recompute (attention core) re-issues none.
    system, gpu = hgx96
    model = load_model("llama-3-8b")
    ag = _collective(Collective.ALL_GATHER, system, gpu, 8192 * 4096 * 2.0)
    tt = {rc: _tp_seconds(model, system, gpu, Framework.TORCHTITAN, rc, True)
          for rc in (RecomputeCode.NONE, RecomputeCode.SELECTIVE)}
    # (+ the two re-gathers' sequence-dim copies, read + write of 8192 x 4096 x 2 B each)
    ctx = StepContext.build(model, system, gpu, 8192, framework=Framework.TORCHTITAN)
    copies = 32 * 2 * 2 * 8192 * 4096 * 2.0 / ctx.hbm_bytes_s
    assert tt[RecomputeCode.SELECTIVE] - tt[RecomputeCode.NONE] == pytest.approx(32 * 2 * ag + copies, rel=1e-9)
    mg = {rc: _tp_seconds(model, system, gpu, Framework.MEGATRON, rc, True)
          for rc in (RecomputeCode.NONE, RecomputeCode.SELECTIVE)}
    assert mg[RecomputeCode.SELECTIVE] == mg[RecomputeCode.NONE]
    assert Framework.TORCHTITAN.selective_recompute_regathers_tp
    assert not Framework.MEGATRON.selective_recompute_regathers_tp


def test_tp_one_moves_nothing(hgx96):
    system, gpu = hgx96
    model = load_model("llama-3-8b")
    for rc in RecomputeCode:
        assert _tp_seconds(model, system, gpu, Framework.TORCHTITAN, rc, True, tp=1) == 0.0


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([2, 4, 8]), seq=st.sampled_from([1024, 4096, 8192]),
       rc=st.sampled_from(list(RecomputeCode)), fw=st.sampled_from([Framework.TORCHTITAN, Framework.MEGATRON]))
def test_tp_time_grows_with_recompute(tp, seq, rc, fw):
    # more recompute never moves fewer TP bytes: none <= selective <= full
    c = load_catalog()
    system = c.system("hgx-h100-96gb")
    gpu = c.gpu(system.gpu)
    model = load_model("llama-3-8b")
    t = [_tp_seconds(model, system, gpu, fw, r, True, seq=seq, tp=tp) for r in RecomputeCode]
    assert t[0] <= t[1] <= t[2]
    assert all(np.isfinite(t)) and t[0] > 0


def test_cdna3_untuned_gemm_ratio():
    # 548.09 TFLOP/s untuned torch.mm 4096^3 (PyTorch 2.8.0+rocm6.4) over the TunableOp-on mamf ceiling
    # 668.4 carried to k = 4096 by k_pipeline k / (k + 64): 668.4 x (4096 / 4160) / (8192 / 8256)
    # = 668.4 x 0.984615 / 0.992248 = 663.26 -> 548.09 / 663.26 = 0.82636
    c = load_catalog()
    mi300x, h100 = c.gpu("mi300x"), c.gpu("h100-sxm5-80gb")
    assert knobs.value("training.untuned_gemm_ratio.cdna3") == pytest.approx(0.82636, abs=2e-5)
    assert untuned_gemm_ratio(mi300x) == pytest.approx(0.82636, abs=2e-5)
    assert untuned_gemm_ratio(h100) == 1.0


def test_cdna3_training_gemm_is_slower_by_the_ratio():
    # a training GEMM = the tuned roofline time / (sustained fraction x clock ratio x untuned ratio); on
    # MI300X (no Hopper / Blackwell clock knob, no power cap) the untuned ratio alone separates the
    # training GEMM from the roofline beyond the sustained fraction
    c = load_catalog()
    system = c.system("mi300x-platform")
    gpu = c.gpu(system.gpu)
    ctx = StepContext.build(load_model("llama-3-8b"), system, gpu, 8192, framework=Framework.TORCHTITAN)
    tuned = float(gemm_time_array(gpu, 8192, 4096, 4096, "bf16"))
    frac = knobs.value("training.sustained_gemm_fraction")
    assert float(gemm_seconds(ctx, 8192, 4096, 4096, "bf16")) == pytest.approx(tuned / (frac * 0.82636), rel=1e-4)
    with knobs.overridden({"training.untuned_gemm_ratio.cdna3": 1.0}):
        assert float(gemm_seconds(ctx, 8192, 4096, 4096, "bf16")) == pytest.approx(tuned / frac, rel=1e-12)


def test_torchtitan_sequence_dim_copies(hgx96):
    # torchtitan's DTensor gathers / scatters the sequence dim (Shard(1) of [b, s, h]) with a torch.cat
    # per collective. Llama 3 8B, tp 8, one 8192-token sequence, no recompute: per layer 2 AG + 2 RS
    # forward and their 4 transposes backward = 8 copies of 8192 x 4096 x 2 B, each read + written:
    # 32 layers x 8 x 2 x 67,108,864 B / HBM rate. Megatron (dim-0 gathers) copies nothing.
    system, gpu = hgx96
    model = load_model("llama-3-8b")
    ctx = StepContext.build(model, system, gpu, 8192, framework=Framework.TORCHTITAN)
    copies = 32 * 8 * 2 * 8192 * 4096 * 2.0 / ctx.hbm_bytes_s
    pair = (_collective(Collective.ALL_GATHER, system, gpu, 8192 * 4096 * 2.0)
            + _collective(Collective.REDUCE_SCATTER, system, gpu, 8192 * 4096 * 2.0))
    tt = _tp_seconds(model, system, gpu, Framework.TORCHTITAN, RecomputeCode.NONE, True)
    assert tt == pytest.approx(32 * 4 * pair + copies, rel=1e-9)
    # full recompute re-runs the forward's 2 AG + 2 RS: 12 copies per layer
    full = _tp_seconds(model, system, gpu, Framework.TORCHTITAN, RecomputeCode.FULL, True)
    assert full == pytest.approx(32 * 6 * pair + copies * 12 / 8, rel=1e-9)
    assert Framework.TORCHTITAN.tp_collectives_copy_sequence_dim
    assert not Framework.MEGATRON.tp_collectives_copy_sequence_dim


def test_torchtitan_float8_all_gathers_move_one_byte(hgx96):
    # torchtitan float8 tensorwise + TP: Float8ColwiseParallel / PrepareFloat8ModuleInput cast the input
    # before the all-gather -> 1 B per element; bf16 runs and Megatron (TE casts after the gather) 2 B
    from gpuplan.specs import Precision
    from gpuplan.workloads.training.step.tensor import tp_gather_bytes_per_element

    system, gpu = hgx96
    model = load_model("llama-3-8b")
    fp8 = StepContext.build(model, system, gpu, 8192, Precision.FP8, framework=Framework.TORCHTITAN)
    bf16 = StepContext.build(model, system, gpu, 8192, framework=Framework.TORCHTITAN)
    meg = StepContext.build(model, system, gpu, 8192, Precision.FP8, framework=Framework.MEGATRON)
    assert tp_gather_bytes_per_element(fp8) == 1.0
    assert tp_gather_bytes_per_element(bf16) == 2.0
    assert tp_gather_bytes_per_element(meg) == 2.0
    # fp8 moves fewer TP bytes than bf16 on the same plan
    t8 = float(step_time_arrays(fp8, 8, 1, 1, 1, 1, 1, 1, 1, RecomputeCode.SELECTIVE, True, ShardingCode.NONE).tp_comm_s)
    t16 = float(step_time_arrays(bf16, 8, 1, 1, 1, 1, 1, 1, 1, RecomputeCode.SELECTIVE, True, ShardingCode.NONE).tp_comm_s)
    assert 0.0 < t8 < t16
