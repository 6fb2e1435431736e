"""flash-attn FlashAttention-2's deterministic backward grid (workloads.training.step.flash2_deterministic)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import model_from_arch_row
from gpuplan.specs import TrainPlan
from gpuplan.specs.execution import AttentionKernel
from gpuplan.workloads.training.step import flash2_deterministic as fd
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.compute import attention_core_seconds
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

#: a 4-layer GPT-7B-shaped model (the megft rows' layer: GQA 32 / 8, head_dim 128, 4h GeLU MLP)
ROW = {"id": "x-1", "model": "m", "layers": "4", "hidden": "4096", "heads": "32", "kv_heads": "8", "ffn": "16384",
       "ffn_kind": "gelu", "vocab": "32000", "seq_len": "8192", "system": "dgx-a100-80gb", "num_gpus": "8",
       "tp": "4", "pp": "1", "dp": "2", "micro_batch": "2", "global_batch": "8", "recompute": "none",
       "precision": "bf16", "framework": "megatron", "metric": "iteration_time_s", "notes": ""}


def _oracle_makespan(works, sms):
    """Event-driven transcription of the hardware's dispatch: at each finish time every idle SM takes the
    next CTA in launch order; the clock jumps to the next finish."""
    queue, running, clock = list(works), [], 0.0  # running: finish times, one per busy SM
    while queue or running:
        while queue and len(running) < sms:
            running.append(clock + queue.pop(0))
        clock = min(running)
        running = [t for t in running if t > clock]
    return clock


def test_causal_key_blocks_walk_the_query_blocks_below_the_diagonal():
    # head_dim 128: kBlockM 64, kBlockN 128 (flash_bwd_launch_template.h run_mha_bwd_hdim128, >= 144 KiB smem);
    # s = 8192: 128 query blocks, 64 key blocks; key block n starts at query block floor(128 n / 64) = 2n
    work = fd.key_block_work(8192, *fd.backward_tile(128))
    assert fd.backward_tile(128) == (64, 128)
    assert len(work) == 64
    assert (work[0], work[1], work[63]) == (128, 126, 2)
    assert sum(work) == 64 * 128 - 2 * (63 * 64 // 2)  # sum of 128 - 2n over n < 64 = 4160
    assert set(fd.key_block_work(8192, 64, 128, causal=False)) == {128}
    assert fd.backward_tile(64) == (128, 128) and fd.backward_tile(96) == (64, 128) and fd.backward_tile(192) == (64, 64)
    with pytest.raises(ValueError, match="256"):
        fd.backward_tile(320)


def test_splits_are_flash_apis_nsplits():
    # flash_api.cpp: nsplits = (num_sm + b h - 1) / (b h)
    assert fd.splits(2, 8, 108) == 7  # ceil(108 / 16)
    assert fd.splits(1, 32, 148) == 5  # ceil(148 / 32)
    assert fd.splits(4, 64, 132) == 1  # b h >= SMs: one CTA per (b, h)


def test_makespan_of_a_small_list():
    # two SMs, CTAs 3, 3, 2 in order: the third starts when the first frees at 3 and ends at 5
    assert fd.makespan([3, 3, 2], 2) == 5
    assert fd.makespan([], 4) == 0


def test_a100_tp4_factor_by_hand():
    # A100 (108 SMs), b = 2, h = 32 / 4 = 8, s = 8192, head_dim 128. Deterministic grid: nsplits 7,
    # 112 CTAs; split x walks key blocks x, x+7, ...: sums of 128 - 2n = 650, 630, 612, 594, 576, 558, 540.
    # The first 108 CTAs are 15 whole (b, h) groups and x = 0, 1, 2 of the 16th; the remaining 594, 576,
    # 558, 540 start when the fifteen 540s finish, at 540: the last ends at 540 + 594 = 1134.
    work = fd.key_block_work(8192, 64, 128)
    per_split = [sum(work[x::7]) for x in range(7)]
    assert per_split == [650, 630, 612, 594, 576, 558, 540]
    assert fd.makespan(per_split * 16, 108) == 1134
    default = _oracle_makespan(list(work) * 16, 108)
    # Graham's bound for list scheduling: total / SMs <= makespan <= total / SMs + longest CTA
    assert 16 * 4160 / 108 <= default <= 16 * 4160 / 108 + 128
    assert fd.backward_time_factor(2, 8, 8192, 128, 108) == pytest.approx(1134 / default, rel=1e-12)


def test_extra_accumulator_bytes_by_hand():
    # 2 (nsplits - 1) b s h d 4 B = 2 x 6 x (2 x 8192 x 8 x 128 x 4 = 67,108,864) = 805,306,368 B
    assert fd.extra_accumulator_bytes(2, 8, 8192, 128, 108) == pytest.approx(805_306_368.0)
    # one split (b h >= SMs): no extra slices
    assert fd.extra_accumulator_bytes(4, 64, 8192, 128, 132) == 0.0


@pytest.mark.parametrize(("gpu_id", "kernel", "deterministic", "expected"), [
    ("a100-sxm4-80gb", AttentionKernel.FLASH, True, True),  # sm80: TE turns cuDNN off under determinism
    ("h100-sxm5-80gb", AttentionKernel.FLASH, True, False),  # sm90: TE keeps cuDNN (deterministic)
    ("b200", AttentionKernel.FLASH, True, False),  # cuDNN on Blackwell
    ("b200", AttentionKernel.FLASH2, True, True),  # flash-attn itself
    ("h100-sxm5-80gb", AttentionKernel.FLASH2, True, True),
    ("a100-sxm4-80gb", AttentionKernel.FLASH, False, False),  # not deterministic
    ("a100-sxm4-80gb", AttentionKernel.UNFUSED, True, False),
    ("mi300x", AttentionKernel.FLASH, True, False),  # not TE's CUDA filter
])
def test_which_runs_take_the_deterministic_grid(gpu_id, kernel, deterministic, expected):
    assert fd.applies(load_catalog().gpu(gpu_id), kernel, deterministic) is expected


def test_the_step_adds_the_extra_backward_per_layer_and_micro_batch():
    # deterministic A100 tp4 mb2 (the megft tp4 layout, 4 layers, 2 micro-batches): compute = 1.04 x
    # the plain step's (the op catalog's dense figure) + 2 micro-batches x 4 layers x (attention backward
    # x (factor - 1) + extra accumulator bytes / HBM bandwidth)
    cat = load_catalog()
    model = model_from_arch_row(ROW)
    system = cat.system("dgx-a100-80gb")
    gpu = cat.gpu(system.gpu)
    base = dict(tp=4, pp=1, dp=2, micro_batch=2, global_batch=8, seq_len=8192, sharding="zero1",
                sequence_parallel=False, framework="megatron")
    plain = estimate_step_time(model, system, TrainPlan(**base), gpu)
    det = estimate_step_time(model, system, TrainPlan(**base, deterministic=True), gpu)
    ctx = StepContext.build(model, system, gpu, 8192, "bf16", "megatron", AttentionKernel.FLASH, False,
                            deterministic=True)
    g = PlanAxes.build(ctx, 4, 1, 2, 1, 1, 1, 2, 2, 0, False, 0)
    _, attn_bwd = attention_core_seconds(ctx, g)
    extra = float(attn_bwd) * (fd.backward_time_factor(2, 8, 8192, 128, 108) - 1.0) + 805_306_368.0 / ctx.hbm_bytes_s
    assert det.breakdown_s["compute_s"] == pytest.approx(1.04 * plain.breakdown_s["compute_s"] + 2 * 4 * extra,
                                                         rel=1e-9)
    # on H100 (cuDNN) only the catalog's 4%
    h100 = cat.system("dgx-h100")
    plain_h = estimate_step_time(model, h100, TrainPlan(**base), cat.gpu(h100.gpu))
    det_h = estimate_step_time(model, h100, TrainPlan(**base, deterministic=True), cat.gpu(h100.gpu))
    assert det_h.breakdown_s["compute_s"] == pytest.approx(1.04 * plain_h.breakdown_s["compute_s"], rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(works=st.lists(st.integers(1, 200), min_size=1, max_size=300), sms=st.integers(1, 160))
def test_makespan_is_the_dispatch_and_within_grahams_bound(works, sms):
    got = fd.makespan(works, sms)
    assert got == _oracle_makespan(works, sms)
    total = sum(works)
    assert max(total / sms, max(works)) <= got + 1e-9
    assert got <= total / sms + max(works) + 1e-9


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 8), heads=st.sampled_from([1, 2, 4, 8, 16, 32, 64]),
       seq=st.sampled_from([512, 1000, 2048, 4096, 8192]), head_dim=st.sampled_from([64, 96, 128, 192]),
       sms=st.sampled_from([108, 132, 148]))
def test_a_single_split_is_as_balanced_as_its_work_allows(batch, heads, seq, head_dim, sms):
    # nsplits = 1 when b h >= SMs: every CTA walks all key blocks, equal work, makespan = ceil(b h / SMs) x
    # the (b, h) total; the factor is finite and positive everywhere
    factor = fd.backward_time_factor(batch, heads, seq, head_dim, sms)
    assert 0.0 < factor < math.inf
    if batch * heads >= sms:
        total = sum(fd.key_block_work(seq, *fd.backward_tile(head_dim)))
        waves = math.ceil(batch * heads / sms)
        default = fd.makespan([w for _ in range(batch * heads) for w in fd.key_block_work(seq, *fd.backward_tile(head_dim))], sms)
        assert factor == pytest.approx(waves * total / default, rel=1e-12)
        assert fd.extra_accumulator_bytes(batch, heads, seq, head_dim, sms) == 0.0


def test_tile_shared_memory_is_kernel_traits_size():
    # kSmemSize1colblock = Q,dO 3 x kBlockM x d + K,V 2 x kBlockN x d + dS,P 2 x kBlockM x kBlockN, x 2 B:
    # head_dim 128 (64, 128): (3 x 64 x 128 + 2 x 128 x 128 + 2 x 64 x 128) x 2 = 147,456 (the launch
    # template's ">= 144 KB" branch); 96 (64, 128): (18,432 + 24,576 + 16,384) x 2 = 118,784 ("116 KB");
    # 32 (128, 128): (12,288 + 8,192 + 32,768) x 2 = 106,496 ("104 KB"); 256 (64, 64): 180,224 ("176 KB")
    assert fd.tile_shared_memory_bytes(128) == 147_456
    assert fd.tile_shared_memory_bytes(96) == 118_784
    assert fd.tile_shared_memory_bytes(32) == 106_496
    assert fd.tile_shared_memory_bytes(256) == 180_224
    # 228 KiB (233,472 B) per SM on H100 / B200: one 144 KiB CTA, two 104 KiB ones; A100's 164 KiB: one
    assert fd.ctas_per_sm(128, 233_472) == 1 and fd.ctas_per_sm(32, 233_472) == 2
    assert fd.ctas_per_sm(32, 167_936) == 1 and fd.ctas_per_sm(128, None) == 1


def test_accumulator_head_dim_rounding():
    # head_size_rounded: 96 -> 96, 100 -> 128, 224 -> 256 (above 192); b = h = 1, s = 128, 2 splits on 2 SMs:
    # 2 x 1 x 128 x d x 4 B
    assert fd.extra_accumulator_bytes(1, 1, 128, 96, 2) == 2 * 128 * 96 * 4
    assert fd.extra_accumulator_bytes(1, 1, 128, 100, 2) == 2 * 128 * 128 * 4
    assert fd.extra_accumulator_bytes(1, 1, 128, 224, 2) == 2 * 128 * 256 * 4
