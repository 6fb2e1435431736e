"""torchtitan rows naming a multi-stage pipeline schedule: 2 virtual stages per rank unless stated
(interfaces.validation.torchtitan_schedule_row; torchtitan pipelining_utils.generate_split_points)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from gpuplan.interfaces.validation.torchtitan_schedule_row import torchtitan_virtual_stages
from gpuplan.interfaces.validation.training import plan_from_row
from gpuplan.specs.execution import Framework

# A 405B-shaped torchtitan 3D row (the shape of torchtitan's Dec 2024 benchmark Table 5): pp 8, tp 8, dp 8,
# local batch 32 per DP rank; micro-batches = pp (torchtitan's default then) -> micro-batch 256 / (8 x 8) = 4.
_ROW = {
    "framework": "torchtitan", "layers": "126", "hidden": "16384", "heads": "128", "kv_heads": "8", "ffn": "53248",
    "vocab": "128256", "seq_len": "8192", "ffn_kind": "swiglu", "system": "hgx-h100-96gb", "num_gpus": "512",
    "tp": "8", "pp": "8", "dp": "8", "cp": "1", "ep": "1", "vpp": "", "micro_batch": "", "global_batch": "256",
    "recompute": "full", "precision": "bf16", "sharding": "fsdp", "metric": "tokens_per_s_per_gpu",
}


def _plan(notes: str, **cells):
    return plan_from_row({**_ROW, "notes": notes, **cells}, "hopper")[0]


def test_interleaved_schedule_runs_two_stages_per_rank():
    # torchtitan generate_split_points: num_stages_per_rank = 2 for a PipelineScheduleMulti schedule
    plan = _plan("3D, Interleaved 1F1B, compile. Local batch 32 per DP rank.")
    assert (plan.vpp, plan.micro_batch) == (2, 4)


@pytest.mark.parametrize("notes", ["Interleaved1F1B", "LoopedBFS schedule", "ZBVZeroBubble", "InterleavedZeroBubble"])
def test_every_multi_stage_schedule_name(notes):
    assert torchtitan_virtual_stages(notes, Framework.TORCHTITAN, 8)[0] == 2


def test_single_stage_schedule_stated_vpp_and_other_stacks_keep_their_rule():
    assert _plan("3D, 1F1B schedule, compile.").vpp == 1  # single-stage schedule: one stage per rank
    # a stated vpp wins: 126 layers on 8 ranks x 3 virtual stages
    assert _plan("3D, Interleaved 1F1B.", vpp="3").vpp == 3
    assert torchtitan_virtual_stages("Interleaved 1F1B", Framework.MEGATRON, 8) == (1, [])  # Megatron: its own rule
    assert torchtitan_virtual_stages("Interleaved 1F1B", Framework.TORCHTITAN, 1) == (1, [])  # no pipeline
    assert torchtitan_virtual_stages("", Framework.TORCHTITAN, 8) == (1, [])


@given(st.text(max_size=200), st.integers(min_value=-4, max_value=64))
def test_rule_is_total_on_any_notes(notes, pp):
    vpp, notes_added = torchtitan_virtual_stages(notes, Framework.TORCHTITAN, pp)
    assert vpp in (1, 2) and len(notes_added) == (vpp == 2)
