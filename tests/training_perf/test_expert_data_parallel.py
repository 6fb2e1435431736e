"""specs.plan.expert_data_parallel_size: the one home of the expert data-parallel group size (used by
TrainPlan.expert_dp, the plan search's memory screen and the step time's DP and optimizer terms)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from gpuplan.specs import TrainPlan
from gpuplan.specs.plan import expert_data_parallel_size


def test_megatron_example():
    # Megatron-core parallel_state: expert DP = world / (etp x ep x pp). 16 GPUs, tp 4, ep 8, etp 1,
    # pp 1: dense DP 16 / 4 = 4, expert DP 16 / (1 x 8) = 2
    assert expert_data_parallel_size(4, 1, 4, 8, 1) == 2
    assert TrainPlan(tp=4, dp=4, ep=8, etp=1).expert_dp == 2
    # etp = tp (Megatron's default where ep divides dp x cp): 64 GPUs tp 8 dp 8 ep 8 -> 64 / 64 = 1
    assert TrainPlan(tp=8, dp=8, ep=8).expert_dp == 1


@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2]), st.sampled_from([1, 2, 4, 8, 16]),
       st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]))
def test_arrays_agree_with_the_plan(tp, cp, dp, ep, etp):
    if (tp * cp * dp) % (ep * etp):
        return  # not a valid layout (memory.check_plan refuses it)
    plan = TrainPlan(tp=tp, cp=cp, dp=dp, ep=ep, etp=etp)
    arr = expert_data_parallel_size(np.array([tp]), np.array([cp]), np.array([dp]), np.array([ep]), np.array([etp]))
    assert arr[0] == plan.expert_dp == max(1, tp * cp * dp // (ep * etp))
