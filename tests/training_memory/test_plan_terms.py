"""The shortcuts `training_memory` takes for speed (memory._PlanTerms and friends) against the plain
per-layer / per-array computations they replace: equal, not approximately equal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.plan import Recompute, TrainPlan, default_expert_tp
from gpuplan.workloads.training.memory import _PlanTerms, chunks_in_flight, layer_activation_bytes_per_token
from gpuplan.workloads.training.plan_search import _value_at

PLANS = [
    # deepseek-v3: 3 dense layers then MoE layers (two layer kinds), MLA, MTP on the last stage
    ("deepseek-v3", dict(tp=2, pp=4, dp=16, ep=8, micro_batch=1, global_batch=256, seq_len=4096,
                         sequence_parallel=True, recompute=Recompute.SELECTIVE)),
    # gemma-2-9b: sliding-window and global attention layers alternate
    ("gemma-2-9b", dict(tp=2, pp=3, vpp=2, dp=2, micro_batch=2, global_batch=48, seq_len=4096,
                        recompute=Recompute.FULL)),
    # llama-3-8b under torchtitan's per-op SAC
    ("llama-3-8b", dict(tp=2, pp=2, dp=2, micro_batch=1, global_batch=16, seq_len=2048,
                        recompute=Recompute.SELECTIVE, framework=Framework.TORCHTITAN)),
    # LoRA on q and v: the adapters' delta reads each layer's projections (memoised per layer)
    ("llama-3-8b", dict(tp=1, pp=2, dp=4, micro_batch=1, global_batch=16, seq_len=2048,
                        fine_tuning=FineTuning(method="lora", lora_targets="qv"))),
]


@pytest.mark.parametrize("name, axes", PLANS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(PLANS)])
def test_layer_bytes_per_kind_equal_layer_by_layer(name, axes):
    model = load_model(name)
    plan = TrainPlan(**axes)
    terms = _PlanTerms(model, plan)
    for layer in range(model.layers):
        for stored in (True, False):
            assert terms.layer_bytes(layer, stored) == layer_activation_bytes_per_token(model, plan, layer, stored)
    # each rank's chunks in flight from the one array call, as chunks_in_flight gives them one by one
    assert [float(x) for x in terms.in_flight] == [chunks_in_flight(plan, r) for r in range(plan.pp)]


@settings(max_examples=200, deadline=None)
@given(tp=st.integers(1, 64), dp=st.integers(1, 4096), cp=st.integers(1, 16), ep=st.integers(1, 256))
def test_default_expert_tp_ints_equal_arrays(tp, dp, cp, ep):
    # the int path (a plan's property) and the numpy path (the search grid) are one rule
    assert default_expert_tp(tp, dp, cp, ep) == int(default_expert_tp(np.array([tp]), dp, cp, ep)[0])


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_value_at_equals_broadcast_view(data):
    ndim = data.draw(st.integers(1, 5))
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    # an array broadcastable to `shape`: some axes of length 1, possibly fewer leading axes
    lead = data.draw(st.integers(0, ndim))
    own = tuple(1 if data.draw(st.booleans()) else n for n in shape[lead:])
    array = np.arange(int(np.prod(own)), dtype=float).reshape(own) * 0.5 + 1.0
    where = tuple(data.draw(st.integers(0, n - 1)) for n in shape)
    assert _value_at(array, where) == float(np.broadcast_to(array, shape)[where])
    assert _value_at(2.5, where) == 2.5
