"""The plan search's shortcuts give the values of the expressions they replace, bit for bit (issue 32).

`step.overlap.exposed_behind` (in place), `assembly._sum_in_order` (partial sums on the shape of the
parts so far, scalar zeros skipped), `PlanAxes.one_run` / `any_dualpipe` (decided once per call) and
`collective_seconds_array`'s memo tables (one per collective and specs) are brute-force checked
against the plain numpy expressions, as STYLE.md asks of a fast path.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.primitives import parallel_groups
from gpuplan.primitives.collectives import Collective
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step.assembly import _sum_in_order, step_time_arrays
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext
from gpuplan.workloads.training.step.overlap import exposed_behind

# values with ties, zeros, signed zeros and magnitudes apart: where max / min / + could differ by order
_VALUES = st.sampled_from([0.0, -0.0, 1e-9, 0.25, 0.5, 1.0, 3.0, 1e3, 7.5e6])


def _array(draw, shape):
    return np.array([draw(_VALUES) for _ in range(int(np.prod(shape)))]).reshape(shape)


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_exposed_behind_is_the_expression_bit_for_bit(data):
    # busy on axes (a, 1), window on (1, b) or a scalar, contention a scalar, on (a, 1), or on a leading axis (c, 1, 1) that the temporaries do not hold
    a, b, c = (data.draw(st.integers(1, 4)) for _ in range(3))
    busy = _array(data.draw, (a, 1))
    window = data.draw(st.sampled_from([_array(data.draw, (1, b)), data.draw(_VALUES)]))
    contention = data.draw(st.sampled_from([data.draw(_VALUES), _array(data.draw, (a, 1)), _array(data.draw, (c, 1, 1))]))
    expected = np.maximum(0.0, busy - window) + contention * np.minimum(busy, window)
    got = exposed_behind(busy, window, contention)
    assert np.shape(got) == np.shape(expected)
    assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()  # signed zeros included


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_sum_in_order_is_sums_order_over_full_arrays(data):
    # parts on random subsets of 3 axes (some scalar zeros): sum() of the full-size arrays, bit for bit
    dims = (2, 3, 4)
    parts = []
    for _ in range(data.draw(st.integers(1, 6))):
        if data.draw(st.booleans()):
            parts.append(np.asarray(0.0))
            continue
        shape = tuple(n if data.draw(st.booleans()) else 1 for n in dims)
        parts.append(_array(data.draw, shape))
    shape = np.broadcast_shapes(*(p.shape for p in parts))
    if not shape:
        return  # step_time_arrays sums 0-d parts with sum() itself
    expected = sum(np.broadcast_to(p, shape) for p in parts)
    got = _sum_in_order(parts, shape)
    assert got.shape == shape and got.tobytes() == np.asarray(expected, dtype=np.float64).tobytes()


def _ctx():
    cat = load_catalog()
    system = cat.system("dgx-h100")
    return StepContext.build(load_model("llama-3-8b"), system, cat.gpu(system.gpu), 4096, "bf16", Framework.MEGATRON,
                             AttentionKernel.FLASH, False)


def test_plan_axes_decide_schedule_runs_and_dualpipe_once():
    ctx = _ctx()
    args = (1, 4, 2, 1, 1, 1, 1, 8, RecomputeCode.NONE, False, ShardingCode.NONE)
    assert PlanAxes.build(ctx, *args).one_run and not PlanAxes.build(ctx, *args).any_dualpipe
    g = PlanAxes.build(ctx, *args, pipeline_flushes=np.array([1, 1]), dualpipe=np.array([False, True]))
    assert g.one_run and g.any_dualpipe
    assert not PlanAxes.build(ctx, *args, pipeline_flushes=np.array([1, 4])).one_run
    # one schedule run given as an array of ones: the same step as the scalar default, bit for bit
    tp, pp = np.array([1, 2, 4]).reshape(3, 1), np.array([1, 2, 4, 8]).reshape(1, 4)
    grid = (tp, pp, 8, 1, 1, 1, 1, 8, RecomputeCode.SELECTIVE, True, ShardingCode.ZERO1)
    plain = step_time_arrays(ctx, *grid)
    ones = step_time_arrays(ctx, *grid, pipeline_flushes=np.ones((1, 4)))
    assert plain.step_s.tobytes() == ones.step_s.tobytes()
    for name, value in plain.parts().items():
        assert value.tobytes() == ones.parts()[name].tobytes(), name


def test_collective_memo_tables_give_the_scalar_path_and_stay_bounded(monkeypatch):
    # a cold and a warm array call and the scalar path agree; past the limit every table is emptied
    monkeypatch.setattr(parallel_groups, "_GROUP_CACHE", {})
    monkeypatch.setattr(parallel_groups, "_GROUP_CACHE_LIMIT", 8)
    system = load_catalog().system("dgx-h100")
    sizes = np.array([1e3, 4e6, 2.5e8, 0.0, 3e9]).reshape(5, 1)
    ns = np.array([1, 2, 8, 64, 512]).reshape(1, 5)
    cold = parallel_groups.collective_seconds_array(Collective.ALL_GATHER, sizes, ns, 8, system)
    one_call = sizes.size * ns.size  # the memo holds at most the limit, or one call's groups after emptying
    assert sum(map(len, parallel_groups._GROUP_CACHE.values())) <= one_call
    warm = parallel_groups.collective_seconds_array(Collective.ALL_GATHER, sizes, ns, 8, system)
    scalar = [[parallel_groups.collective_seconds(Collective.ALL_GATHER, float(s), int(n), min(int(n), 8), system)
               for n in ns.ravel()] for s in sizes.ravel()]
    per_node = np.minimum(ns, 8)
    exact = parallel_groups.collective_seconds_array(Collective.ALL_GATHER, sizes, ns, per_node, system)
    assert cold.tolist() == warm.tolist()
    assert exact.tolist() == scalar
    assert exact[:, 0].tolist() == [0.0] * 5 and exact[3].tolist() == [0.0] * 5  # one GPU, or no bytes
    assert sum(map(len, parallel_groups._GROUP_CACHE.values())) <= one_call  # emptied before the last call's groups
