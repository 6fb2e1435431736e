"""Unstated configuration of validation rows (tuned Megatron-core recipes; the legacy fp16 stack
only before Hopper) and the TE userbuffers overlap terms of the step-time model."""

from __future__ import annotations

import pytest

from gpuplan import knobs
from gpuplan.interfaces.validation.training import attention_kernel_from_row, plan_from_row, predict_row
from gpuplan.specs import Precision, Recompute
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.workloads.training.step.tensor import (
    userbuffers_bulk_exposed, userbuffers_pipeline_exposed, userbuffers_ring_exposed,
)


def _row(**cells):
    row = dict(id="x-1", source="test", confidence="high", notes="", model="GPT 32B", layers="48", hidden="7168",
               heads="56", kv_heads="", ffn="28672", vocab="131072", seq_len="4096", ffn_kind="gelu", hf_config="",
               moe_experts="", moe_topk="", moe_ffn="", moe_shared_experts="", moe_dense_layers="",
               system="dgx-h100", num_gpus="384", tp="8", pp="1", dp="48", cp="1", ep="1", vpp="", micro_batch="",
               global_batch="192", recompute="", sequence_parallel="", precision="bf16", sharding="zero1",
               framework="megatron", metric="tflops_per_gpu_model", value="459.6")
    row.update(cells)
    return row


def test_tuned_megatron_core_bf16_row_runs_sp_with_tp_overlap_and_says_so():
    # Megatron-LM README (2024 weak scaling): --tp-comm-overlap, which needs --sequence-parallel
    plan, notes = plan_from_row(_row(), "Hopper GH100")
    assert plan.sequence_parallel and plan.tp_comm_overlap
    assert any("tuned Megatron-core recipe" in n for n in notes)
    assert "tp_comm_overlap" in predict_row(_row()).notes


@pytest.mark.parametrize("cells", [
    dict(micro_batch="2"),            # a complete launch configuration: an absent --sequence-parallel is off
    dict(sequence_parallel="false"),  # stated off
    dict(tp="1", dp="384"),           # no tensor parallelism to overlap
    dict(framework="torchtitan"),     # not Megatron
])
def test_the_megatron_core_default_stays_off_where_the_row_says_otherwise(cells):
    plan, notes = plan_from_row(_row(**cells), "Hopper GH100")
    assert not plan.tp_comm_overlap
    assert not any("tuned Megatron-core" in n for n in notes)


def test_empty_precision_is_the_legacy_fp16_stack_only_before_hopper():
    row = _row(precision="")
    # A100: the pre-FlashAttention Megatron recipe (fp16, unfused attention, full recompute)
    plan_a, _ = plan_from_row(dict(row, system="dgx-a100-80gb"), "Ampere GA100")
    assert plan_a.precision is Precision.FP16
    assert attention_kernel_from_row(row, Framework.MEGATRON, "Ampere GA100") is AttentionKernel.UNFUSED
    # H100: TransformerEngine era, bf16 with FlashAttention, no implied recompute
    plan_h, _ = plan_from_row(row, "Hopper GH100")
    assert plan_h.precision is Precision.BF16 and plan_h.recompute is Recompute.NONE
    assert attention_kernel_from_row(row, Framework.MEGATRON, "Hopper GH100") is AttentionKernel.FLASH
    assert "recompute=full" not in predict_row(row).notes


def test_ring_exchange_exposes_one_chunk_and_the_copy_engine_contention():
    # c = 1 ms all-gather, g = 3 ms GEMM, tp 8: max(0, 1 - 3) + 1/8 + 0.05 x 1 = 0.175 ms
    assert float(userbuffers_ring_exposed(1e-3, 3e-3, 8)) == pytest.approx(0.175e-3)
    with knobs.overridden({"training.overlap_contention": 0.0}):
        assert float(userbuffers_ring_exposed(1e-3, 3e-3, 8)) == pytest.approx(0.125e-3)
    # a collective longer than the GEMM: 5 - 3 = 2 exposed + 3/8 + 0.05 x 3 = 2.525 ms
    assert float(userbuffers_ring_exposed(5e-3, 3e-3, 8)) == pytest.approx(2.525e-3)


def test_pipeline_reduce_scatter_slows_the_gemm_by_its_sms_and_exposes_the_last_split():
    # NeMo proj_fprop: 24 SMs of 132 for the reduction, GEMM on 108: 3 ms -> 3 x 132/108 = 3.6667 ms
    # c = 1 ms: slowdown 0.6667 + max(0, 1 - 3.6667) + 1/4 (last of 4 splits) = 0.91667 ms
    assert float(userbuffers_pipeline_exposed(1e-3, 3e-3, 24.0, 132.0)) == pytest.approx(0.916667e-3, rel=1e-5)
    # c = 5 ms: 0.6667 + (5 - 3.6667) + 3.6667/4 = 2.91667 ms
    assert float(userbuffers_pipeline_exposed(5e-3, 3e-3, 24.0, 132.0)) == pytest.approx(2.916667e-3, rel=1e-5)


def test_bulk_overlap_costs_its_sms_while_both_run():
    # qkv_wgrad: 24 SMs beside a 3 ms GEMM, c = 1 ms: 0 + 24/132 x 1 = 0.181818 ms
    assert float(userbuffers_bulk_exposed(1e-3, 3e-3, 24.0, 132.0)) == pytest.approx(0.181818e-3, rel=1e-5)
    # fc1_wgrad: 4 SMs, c = 4 ms > g = 3 ms: 1 + 4/132 x 3 = 1.090909 ms
    assert float(userbuffers_bulk_exposed(4e-3, 3e-3, 4.0, 132.0)) == pytest.approx(1.090909e-3, rel=1e-5)


def test_plan_search_leaves_the_caching_allocator_its_slack():
    from types import SimpleNamespace

    from gpuplan.catalog import load_catalog
    from gpuplan.workloads.training.plan_search import runs_within_memory

    gpu = load_catalog().gpu("h100-sxm5-80gb")  # 80 GiB
    gib = 2**30
    # allocated 77 GiB -> reserved 77 x 1.05 = 80.85 GiB, + 1 GiB outside the allocator = 81.85 > 80
    # (even with the headroom check passed: `fits`)
    edge = SimpleNamespace(per_gpu_bytes={"total": 78 * gib}, allocated_bytes=77 * gib, reserved_bytes=80.85 * gib,
                           fits=True)
    assert not runs_within_memory(edge, gpu)
    # allocated 63 GiB -> 66.15 + 1 = 67.15 <= 80, and the total 64 GiB is within the usable 72 GiB
    roomy = SimpleNamespace(per_gpu_bytes={"total": 64 * gib}, allocated_bytes=63 * gib, reserved_bytes=66.15 * gib,
                            fits=True)
    assert runs_within_memory(roomy, gpu)
    # a total past the memory headroom (memory.fits False) does not run either
    assert not runs_within_memory(SimpleNamespace(**{**roomy.__dict__, "fits": False}), gpu)


def test_gpt3_175b_on_256_h100_picks_plans_whose_reserved_peak_fits():
    # the seed question: every confirmed plan keeps PyTorch-reserved + outside-allocator memory
    # within the 80 GiB (the allocated peak alone once let a 76.5 GiB plan through, whose reserved
    # peak is 80.3 GiB)
    from gpuplan.catalog import load_catalog
    from gpuplan.models import load_model
    from gpuplan.workloads.training.memory import training_memory
    from gpuplan.workloads.training.plan_search import SearchSpace, search_plans

    c = load_catalog()
    system = c.system("dgx-h100")
    gpu = c.gpu(system.gpu)
    model = load_model("gpt3-175b")
    result = search_plans(model, system, gpu, 256, SearchSpace(seq_len=2048), top=3)
    assert result.best
    for ranked in result.best:
        mem = training_memory(model, ranked.plan, gpu)
        outside = mem.per_gpu_bytes["total"] - mem.allocated_bytes
        assert mem.reserved_bytes + outside <= gpu.memory_bytes


@pytest.mark.parametrize("stage_layers, expected", [
    (12, 6),   # 96 layers on pp 8 (NeMo GPT-3 175B: vp 6) -> 2 layers per virtual stage
    (16, 8),   # 2 layers each
    (21, 7),   # 3 x 7: the most chunks of >= 2 layers are 7 chunks of 3
    (23, 23),  # prime: 1 layer per chunk
    (4, 2),
])
def test_interleaved_virtual_stages_of_a_tuned_megatron_core_run(stage_layers, expected):
    from gpuplan.interfaces.validation.training import interleaved_virtual_stages

    assert interleaved_virtual_stages(stage_layers * 4, 4) == expected


def test_unstated_vpp_of_a_tuned_megatron_core_pipeline_is_interleaved():
    # GPT 177B on 2304 H100: 96 layers, pp 6 -> 16 layers per stage -> vpp 8 (2 layers each);
    # m = 1152 / 48 = 24 micro-batches, divisible by pp 6
    row = _row(layers="96", hidden="12288", heads="96", ffn="49152", num_gpus="2304", pp="6", dp="48",
               global_batch="1152")
    plan, notes = plan_from_row(row, "Hopper GH100")
    assert plan.vpp == 8 and any("interleaved schedule" in n for n in notes)
    # a stated vpp, a stated micro-batch or m not divisible by pp keep 1F1B
    assert plan_from_row(dict(row, vpp="1"), "Hopper GH100")[0].vpp == 1
    assert plan_from_row(dict(row, micro_batch="1"), "Hopper GH100")[0].vpp == 1
    assert plan_from_row(dict(row, global_batch="1200"), "Hopper GH100")[0].vpp == 1  # m = 25


def test_cross_entropy_bytes_per_logit_by_framework():
    from gpuplan.workloads.training.step.compute import loss_bytes_per_logit

    # Megatron-core vocab-parallel CE, op by op: float() 2+4, max 4, sub 4+4, exp 4+4, sum 4,
    # div 4+4 = 38 forward; mul_ 4+4, cast back 4+2 = 14 backward -> 52
    assert loss_bytes_per_logit(Framework.MEGATRON) == 38 + 14
    # flash-attn fused CE (llm-foundry's default loss): read 2 forward, read 2 + write 2 backward
    assert loss_bytes_per_logit(Framework.FSDP) == 2 + 2 + 2


def test_zero2_reduce_scatters_every_micro_batch():
    # ZeRO-2 partitions gradients, so each micro-batch's gradients are reduce-scattered after its
    # backward (deepspeedai/DeepSpeed#2252); ZeRO-1 reduces once per step. DeepSpeed's engine does not
    # overlap them: ZeRO-2 - ZeRO-1 = (m - 1) x one reduce-scatter of the local fp32 gradients.
    from gpuplan.catalog import load_catalog
    from gpuplan.models import load_model
    from gpuplan.primitives.collectives import Collective
    from gpuplan.primitives.parallel_groups import collective_seconds
    from gpuplan.workloads.training.step.inputs import StepContext
    from gpuplan.workloads.training.step.assembly import step_time_arrays

    c = load_catalog()
    system = c.system("dgx-a100-80gb")
    gpu = c.gpu(system.gpu)
    model = load_model("gpt3-175b").model_copy(update={"layers": 2, "name": "tiny"})
    ctx = StepContext.build(model, system, gpu, 2048, framework=Framework.DEEPSPEED)
    m, dp = 4, 8
    dp_s = {}
    for code in (1, 2):  # ShardingCode.ZERO1, ZERO2
        arrays = step_time_arrays(ctx, 1, 1, dp, 1, 1, 1, 1, m, 0, False, code)
        dp_s[code] = float(arrays.dp_comm_s)
    params = ctx.body_params + ctx.input_embedding_params + ctx.output_head_params  # tp = pp = 1
    rs = collective_seconds(Collective.REDUCE_SCATTER, params * 4.0, dp, 8, system, gpu)  # fp32 grads, 8 per node
    assert dp_s[2] - dp_s[1] == pytest.approx((m - 1) * rs, rel=1e-9)
    # Megatron-style overlap: still never cheaper than ZeRO-1
    ctx_m = StepContext.build(model, system, gpu, 2048)
    z1, z2 = (float(step_time_arrays(ctx_m, 1, 1, dp, 1, 1, 1, 1, m, 0, False, code).dp_comm_s) for code in (1, 2))
    assert z2 >= z1


def test_a_torchtitan_pipeline_row_without_a_micro_batch_runs_pp_micro_batches():
    # torchtitan before 2025-04-07 (config_manager.py `pipeline_parallel_microbatches`: "The default
    # value will be the number of pipeline stages"): 256 sequences over dp 8 is 32 per rank, split
    # into pp = 8 micro-batches of 32 / 8 = 4 sequences
    row = _row(framework="torchtitan", num_gpus="512", tp="8", pp="8", dp="8", global_batch="256",
               sharding="fsdp", recompute="full")
    plan, notes = plan_from_row(row, "Hopper GH100")
    assert plan.micro_batch == 4 and plan.global_batch == 256
    assert "micro_batch=4 (torchtitan: pp micro-batches per step, its default then)" in notes


@pytest.mark.parametrize("cells", [
    dict(pp="1", dp="64"),          # no pipeline: one sequence per micro-batch, as before
    dict(micro_batch="2"),          # stated
    dict(framework="megatron"),     # not torchtitan
    dict(global_batch="260"),       # 260 / (8 x 8) is no whole micro-batch
])
def test_the_torchtitan_pipeline_default_applies_only_where_it_can(cells):
    row = _row(**{**dict(framework="torchtitan", num_gpus="512", tp="8", pp="8", dp="8", global_batch="256",
                         sharding="fsdp", recompute="full"), **cells})
    plan, _ = plan_from_row(row, "Hopper GH100")
    assert plan.micro_batch == int(cells.get("micro_batch", "1"))
