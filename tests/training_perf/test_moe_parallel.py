"""MoE parallelism: expert tensor parallel size (Megatron-core parallel folding), all-to-all payload,
expert data-parallel reduce. Expected values are derived in the comments from the formulas in
`workloads/training/step/` and Megatron-core's dispatcher."""

from __future__ import annotations

import pytest

from gpuplan import knobs
from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.specs import Precision, Sharding, TrainPlan
from gpuplan.primitives.collectives import Collective
from gpuplan.primitives.parallel_groups import collective_seconds_array, group_per_node
from gpuplan.workloads.training.memory import training_memory
from gpuplan.workloads.training.step.assembly import estimate_step_time


@pytest.fixture(scope="module")
def mixtral():
    return load_model("mixtral-8x7b")


def test_expert_tp_defaults_to_tp_where_ep_fits_in_data_parallel():
    # Megatron-core: expert_tensor_parallel_size defaults to tp; ep x etp must divide tp x cp x dp.
    assert TrainPlan(tp=2, dp=8, ep=8).expert_tp == 2  # ep 8 divides dp 8: Megatron's default
    assert TrainPlan(tp=2, dp=16, ep=32).expert_tp == 1  # ep 32 > dp 16: only the folded layout fits
    assert TrainPlan(tp=2, dp=16, ep=32).expert_dp == 1  # 2 x 16 ranks / (32 x 1)
    assert TrainPlan(tp=4, dp=8, ep=4).expert_dp == 2  # 4 x 8 / (4 x 4)
    assert TrainPlan(tp=4, dp=8, ep=4, etp=1).expert_dp == 8  # 4 x 8 / (4 x 1)


def test_folded_plan_is_accepted_and_impossible_folding_rejected(h100, mixtral):
    system, gpu = h100
    # 32 ranks per stage (tp 2 x dp 16), 8 experts: ep 8 x etp 4 = 32 divides 32 -> valid
    ok = TrainPlan(tp=2, dp=16, ep=8, etp=4, global_batch=64, seq_len=4096, sequence_parallel=True)
    assert estimate_step_time(mixtral, system, ok, gpu).step_time_s > 0
    bad = ok.model_copy(update={"etp": 8})  # 8 x 8 = 64 does not divide 32
    with pytest.raises(InputError, match="ep x etp"):
        estimate_step_time(mixtral, system, bad, gpu)
    with pytest.raises(InputError, match="ep x etp"):
        training_memory(mixtral, bad, gpu)


def test_expert_weights_divide_by_ep_times_etp(mixtral):
    # Routed-expert weights per GPU = experts x ffn params / (ep x etp); the rest is unchanged, so
    # going from etp = tp = 2 to etp = 1 doubles the expert part. Mixtral: 32 layers x 8 experts x
    # 3 x 4096 x 14336 = 45.1e9 routed params (swiglu: gate, up, down).
    routed = 32 * 8 * 3 * 4096 * 14336
    base = dict(tp=2, dp=8, ep=8, global_batch=64, seq_len=4096, sequence_parallel=True, precision=Precision.BF16,
                sharding=Sharding.NONE)
    from gpuplan.workloads.training.memory import _layer_split, rank_params

    layers = _layer_split(mixtral, TrainPlan(**base))[0]
    _, experts_tp2 = rank_params(mixtral, TrainPlan(**base), layers, True, True)
    _, experts_tp1 = rank_params(mixtral, TrainPlan(**base, etp=1), layers, True, True)
    assert experts_tp2 == pytest.approx(routed / 16, rel=1e-12)
    assert experts_tp1 == pytest.approx(routed / 8, rel=1e-12)


def test_all_to_all_carries_each_ranks_sequence_shard(h100, mixtral):
    # With sequence parallelism each rank routes its t / tp tokens; the dispatcher's all-to-all over
    # EP carries t/tp x top_k x h x 2 bytes, 4 times per MoE layer (dispatch + combine, fwd + bwd);
    # with etp = 1 there is no expert-TP all-gather. Mixtral: every one of its 32 layers is MoE.
    # One micro-batch and no pipeline: no other micro-batch to hide behind (step.expert), and the fixed
    # per-layer / per-expert times are zeroed so that only the bytes are checked.
    system, gpu = h100
    plan = TrainPlan(tp=2, dp=16, ep=8, etp=1, micro_batch=1, global_batch=16, seq_len=4096, sequence_parallel=True)
    with knobs.overridden({"training.moe_layer_overhead_s": 0.0, "training.moe_expert_launch_s": 0.0}):
        st_ = estimate_step_time(mixtral, system, plan, gpu)
    t_local = 4096 / 2
    payload = t_local * 2 * 4096 * 2  # tokens x top_k x hidden x bf16
    per_node = group_per_node(8, 1, system.gpus_per_node)  # EP ranks consecutive when etp = 1
    a2a = float(collective_seconds_array(Collective.ALL_TO_ALL, payload, 8, per_node, system))
    m = 16 // (1 * 16)
    assert st_.breakdown_s["ep_comm_s"] == pytest.approx(m * 32 * 4 * a2a, rel=1e-12)
