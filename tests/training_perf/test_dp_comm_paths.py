"""`dp_comm_seconds` evaluates each sharding on its own slice of the sharding axis when the grid
keeps the sharding on an axis of its own (the plan search's grid), and every term over the whole
grid otherwise (plans given as flat arrays). Both must give the same bits: the same floating-point
operations per element, only the layout of the arrays differs."""

from __future__ import annotations

import numpy as np
import pytest

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.specs import Precision
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.plan_codes import ShardingCode
from gpuplan.workloads.training.step.assembly import step_time_arrays
from gpuplan.workloads.training.step.inputs import StepContext


def _axes():
    """A small grid with one axis per plan dimension, as the plan search lays it out (tp, pp, dp, cp,
    ep, vpp, micro-batch, micro-batches, recompute, sequence parallelism, sharding, etp)."""
    values = [(1, 2, 8), (1, 4), (2, 16, 128), (1, 2), (1, 8), (1,), (1, 2), (4,), (0, 1, 2), (False, True),
              tuple(int(c) for c in ShardingCode), (1, 2)]
    n = len(values)
    grid = [np.asarray(v).reshape((1,) * i + (len(v),) + (1,) * (n - 1 - i)) for i, v in enumerate(values)]
    grid[7] = grid[6] * grid[2] * 0 + 8  # micro-batches per step: on the (dp, micro-batch) axes, as in the search
    return grid


@pytest.mark.parametrize("framework", [Framework.MEGATRON, Framework.DEEPSPEED, Framework.FSDP, Framework.TORCHTITAN])
@pytest.mark.parametrize("precision", [Precision.BF16, Precision.FP16])
def test_sharding_axis_and_flat_plans_agree_bit_for_bit(framework, precision):
    catalog = load_catalog()
    system = catalog.system("dgx-h100")
    ctx = StepContext.build(load_model("mixtral-8x7b"), system, catalog.gpu(system.gpu), 4096, precision, framework)
    grid = _axes()
    shape = np.broadcast_shapes(*(a.shape for a in grid))
    tp, pp, dp, cp, ep, vpp, mb, m, rc, sp, sh, etp = grid
    on_axes = step_time_arrays(ctx, tp, pp, dp, cp, ep, vpp, mb, m, rc, sp, sh, etp=etp).dp_comm_s
    flat = [np.broadcast_to(a, shape).ravel() for a in grid]  # the sharding now varies with every other axis
    tp, pp, dp, cp, ep, vpp, mb, m, rc, sp, sh, etp = flat
    whole = step_time_arrays(ctx, tp, pp, dp, cp, ep, vpp, mb, m, rc, sp, sh, etp=etp).dp_comm_s
    assert np.broadcast_to(on_axes, shape).ravel().tobytes() == whole.tobytes()
    # one plan at a time (the sharding a single value): the same bits again, at a sample of points
    for i in range(0, whole.size, 97):
        one = step_time_arrays(ctx, *(a[i] for a in flat[:11]), etp=flat[11][i]).dp_comm_s
        assert np.float64(one).tobytes() == whole[i].tobytes()
    # the grid covers every sharding, and each gives a different time somewhere (the branches are exercised)
    by_sharding = np.moveaxis(np.broadcast_to(on_axes, shape), 10, 0).reshape(len(ShardingCode), -1)
    assert len({row.tobytes() for row in by_sharding}) == len(ShardingCode)
