"""DeepSpeed ZeRO-3 as v0.3.13 .. v0.5 ran it (`step.deepspeed_zero3`, the plans of
`deepspeed_release` 0.5), against hand derivations from
the source (microsoft/DeepSpeed stage3.py / partition_parameters.py / constants.py at v0.3.16), and
FSDP's treatment beside it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.parallel_groups import collective_seconds_array, collective_sm_fraction
from gpuplan.specs.execution import DeepSpeedRelease, Framework
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step.assembly import step_time_arrays
from gpuplan.workloads.training.step.data import zero3_collective_calls
from gpuplan.workloads.training.step.deepspeed_zero3 import (gather_passes, kept_share, list_copy_seconds,
                                                              prefetched_shares)
from gpuplan.workloads.training.step.inputs import StepContext

LEGACY = DeepSpeedRelease.V0_5  # the 2021 engine this file tests
H175 = 12288  # GPT-3 175B hidden (Brown et al. 2020 Table 2.1)
H530 = 20480  # MT-NLG 530B hidden (Smith et al. 2022)


def gpt_matrices(h: int) -> list[float]:
    """qkv, out, fc1, fc2 weights of a GPT layer with ffn = 4h (biases are below the persistence
    threshold and leave the shares unchanged to 1e-4)."""
    return [3.0 * h * h, 1.0 * h * h, 4.0 * h * h, 4.0 * h * h]


@pytest.fixture(scope="module")
def dgx():
    c = load_catalog()
    system = c.system("dgx-a100-80gb")
    return system, c.gpu(system.gpu)


def test_gpt3_175b_every_gather_is_prefetched_and_fc2_is_kept():
    # 175B: qkv 3h^2 = 4.53e8, out 1.51e8, fc1 = fc2 = 4h^2 = 6.04e8: every matrix < max_live 1e9, so
    # every gather is prefetched behind the matrix before it (forward) / after it (backward): (1, 1).
    assert prefetched_shares(gpt_matrices(H175)) == (1.0, 1.0)
    # kept from the recomputed forward to the backward where 2 x sum(later matrices) < 1e9:
    # fc2 (0) yes; fc1 (2 x 6.04e8 = 1.21e9) no: kept = 4h^2 / 12h^2 = 1/3
    assert kept_share(gpt_matrices(H175)) == pytest.approx(1.0 / 3.0)


def test_mtnlg_530b_matrices_over_max_live_are_fetched_exposed():
    # 530B: qkv 3h^2 = 1.26e9, out h^2 = 4.19e8, fc1 = fc2 = 4h^2 = 1.68e9. Forward: only fc1 follows a
    # matrix under 1e9 (out): s_f = 4/12; backward: only qkv precedes one (out): s_b = 3/12.
    s_f, s_b = prefetched_shares(gpt_matrices(H530))
    assert (s_f, s_b) == (pytest.approx(4.0 / 12.0), pytest.approx(3.0 / 12.0))
    assert kept_share(gpt_matrices(H530)) == pytest.approx(4.0 / 12.0)  # fc2 alone, as for 175B


def test_gather_passes_under_full_recompute_gpt175(dgx):
    # 175B, full recompute: exposed = (1 - 1) x 2 + (1 - 1)(1 - 1/3) = 0;
    # prefetched = 1 x 2 + 1 x (1 - kept), kept = fc2 / layer = (4h^2 + h) / (12h^2 + 9h) (the
    # inventory's matrices carry their biases: qkv 3h, out h, fc1 4h, fc2 h)
    system, gpu = dgx
    ctx = StepContext.build(load_model("gpt3-175b"), system, gpu, 2048, framework=Framework.DEEPSPEED, deepspeed_release=LEGACY)
    h = H175
    kept = (4 * h * h + h) / (12 * h * h + 9 * h)
    exposed, prefetched = gather_passes(ctx, 1, True)
    assert float(exposed) == pytest.approx(0.0, abs=1e-12)
    assert float(prefetched) == pytest.approx(3.0 - kept, rel=1e-12)
    exposed, prefetched = gather_passes(ctx, 1, False)  # no recompute: forward and backward
    assert (float(exposed), float(prefetched)) == (pytest.approx(0.0, abs=1e-12), pytest.approx(2.0))


def test_deepspeed_zero3_calls_one_gather_per_matrix(dgx):
    # one all_gather per weight matrix (_allgather_param): 96 layers x 4 + 1 (embedding) = 385 per
    # pass; gradient buckets of 5e8 elements: ceil(174.56e9 / 5e8) = 350. FSDP: 96 blocks + root.
    system, gpu = dgx
    model = load_model("gpt3-175b")
    ds = StepContext.build(model, system, gpu, 2048, framework=Framework.DEEPSPEED, deepspeed_release=LEGACY)
    total = ds.body_params + ds.input_embedding_params + ds.output_head_params
    layers = type("SC", (), {"layers_per_stage": 96.0})()
    gathers, reduces = zero3_collective_calls(ds, layers, total, 0)
    assert (float(gathers), float(reduces)) == (385.0, float(math.ceil(total / 5e8)))
    assert float(reduces) == 350.0
    fsdp = StepContext.build(model, system, gpu, 2048, framework=Framework.TORCHTITAN)
    assert [float(x) for x in zero3_collective_calls(fsdp, layers, total, 0)] == [97.0, 97.0]


def test_deepspeed_zero3_dp_time_matches_hand_formula(dgx):
    # GPT-3 175B on 1536 A100s (192 DGX nodes), dp 1536, one micro-batch of 1, no recompute:
    # dp = all-reduce of the fp16 gradients in 350 calls (exposed)
    #    + overlapped(2 x (all-gather of the fp16 weights in 385 calls + 385 x 1536 x 3 us of
    #      copy-out kernels + 3 x the gathered bytes over HBM), compute_mb)
    # overlapped(busy, window) = max(0, busy - window) + f x min(busy, window), f the SM share the
    # collective holds (collective_sm_fraction).
    system, gpu = dgx
    model = load_model("gpt3-175b")
    ctx = StepContext.build(model, system, gpu, 2048, framework=Framework.DEEPSPEED, deepspeed_release=LEGACY)
    a = step_time_arrays(ctx, 1, 1, 1536, 1, 1, 1, 1, 1, RecomputeCode.NONE, False, ShardingCode.ZERO3)
    total = ctx.body_params + ctx.input_embedding_params + ctx.output_head_params
    ar = 350 * float(collective_seconds_array(Collective.ALL_REDUCE, total * 2.0 / 350, 1536, 8, system, gpu=gpu))
    ag = 385 * float(collective_seconds_array(Collective.ALL_GATHER, total * 2.0 / 385, 1536, 8, system, gpu=gpu))
    # + PyTorch's copy-out of each list-based all-gather: 1536 copy kernels of 3 us per call
    ag += 385 * 1536 * 3e-6
    # + the zero fill and copy-out of the gathered fp16 weights: 3 x 2 B x params of HBM traffic
    ag += 3.0 * total * 2.0 / ctx.hbm_bytes_s
    window = float(a.compute_s)  # m = 1
    f = float(collective_sm_fraction(1536, 8, system, gpu))
    expected = ar + max(0.0, 2 * ag - window) + f * min(2 * ag, window)
    assert float(a.dp_comm_s) == pytest.approx(expected, rel=1e-9)


def test_fsdp_recompute_adds_no_gather_deepspeed_adds_one(dgx):
    # FSDP checkpoints inside the unit: the recomputed forward runs in the unit's backward, after its
    # pre-backward all-gather (BACKWARD_PRE prefetch), so full recompute adds no gather and only
    # widens the overlap window. On 8 nodes the 175B collectives fit inside the mb-1 compute
    # (exposed = f x busy, f the SM share), so FSDP's exposed time is the same with and without
    # recompute. DeepSpeed <= 0.5 re-gathers for the recomputed forward (pre-forward hooks fire
    # again): 3 - kept passes instead of 2, so its time grows.
    system, gpu = dgx
    model = load_model("gpt3-175b")
    dp = {}
    for fw in (Framework.FSDP, Framework.DEEPSPEED):
        ctx = StepContext.build(model, system, gpu, 2048, framework=fw, deepspeed_release=LEGACY)
        dp[fw] = [float(step_time_arrays(ctx, 1, 1, 64, 1, 1, 1, 1, 1, rc, False, ShardingCode.ZERO3).dp_comm_s)
                  for rc in (RecomputeCode.NONE, RecomputeCode.FULL)]
    assert dp[Framework.FSDP][1] == pytest.approx(dp[Framework.FSDP][0], rel=1e-12)
    assert dp[Framework.DEEPSPEED][1] > dp[Framework.DEEPSPEED][0]


def test_list_copy_seconds():
    # 385 list-based all-gathers over 1536 ranks: 385 x 1536 copy kernels x 3 us = 1.774 s;
    # a group of one gathers nothing
    assert float(list_copy_seconds(385, 1536)) == pytest.approx(385 * 1536 * 3e-6)
    assert float(list_copy_seconds(385, 1)) == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=1e5, max_value=5e9), min_size=1, max_size=8))
def test_gather_passes_conserve_the_passes(matrices):
    # shares lie in [0, 1]; exposed + prefetched = 2 passes without recompute, 3 - kept with it
    s_f, s_b = prefetched_shares(matrices)
    kept = kept_share(matrices)
    assert 0.0 <= s_f <= 1.0 + 1e-12 and 0.0 <= s_b <= 1.0 + 1e-12 and 0.0 <= kept <= 1.0 + 1e-12
    last = matrices[-1]
    assert kept >= last / sum(matrices) - 1e-12  # the layer's last matrix is always kept (distance 0)
    for r in (0.0, 1.0):
        exposed = (1 - s_f) * (1 + r) + (1 - s_b) * (1 - r * kept)
        prefetched = s_f * (1 + r) + s_b * (1 - r * kept)
        assert exposed + prefetched == pytest.approx(2.0 + r * (1.0 - kept))
    assert np.all(np.asarray([s_f, s_b]) == np.asarray(prefetched_shares(matrices, max_live=1e9)))


def test_deepspeed_grid_matches_one_plan_at_a_time(dgx):
    # the plan search times every (tp, recompute, sharding, dp) at once: each element must equal the
    # same plan timed alone (gather_passes varies with tp and recompute)
    system, gpu = dgx
    ctx = StepContext.build(load_model("gpt3-175b"), system, gpu, 2048, framework=Framework.DEEPSPEED, deepspeed_release=LEGACY)
    tp = np.array([1, 2, 8]).reshape(3, 1, 1, 1)
    rc = np.array([RecomputeCode.NONE, RecomputeCode.FULL]).reshape(1, 2, 1, 1)
    sh = np.array([ShardingCode.NONE, ShardingCode.ZERO2, ShardingCode.ZERO3]).reshape(1, 1, 3, 1)
    dp = np.array([64, 192]).reshape(1, 1, 1, 2)
    grid = step_time_arrays(ctx, tp, 1, dp, 1, 1, 1, 1, 4, rc, False, sh).dp_comm_s
    for idx in np.ndindex(grid.shape):
        one = step_time_arrays(ctx, int(tp.ravel()[idx[0]]), 1, int(dp.ravel()[idx[3]]), 1, 1, 1, 1, 4,
                               int(rc.ravel()[idx[1]]), False, int(sh.ravel()[idx[2]])).dp_comm_s
        assert float(one) == pytest.approx(grid[idx], rel=1e-12)
