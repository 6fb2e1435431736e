"""Plan search streamed in blocks: the blocks tile the grid exactly in flat order, and the search's
answer (best plans, counts, rejections, explanations) does not depend on the block size."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.workloads.training.plan_search import SearchSpace, grid_blocks, search_plans


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=5), target=st.integers(1, 400))
def test_blocks_tile_the_grid_in_flat_order(sizes, target):
    # Concatenating the flat indices of every block, block after block, must give 0 .. N-1 once
    # each and in order (so "first in flat order" ties break as in one whole-grid argsort).
    sizes = tuple(sizes)
    index = np.arange(int(np.prod(sizes))).reshape(sizes)
    seen = []
    for offset, slices in grid_blocks(sizes, target):
        block = index[slices].ravel()
        assert block[0] == offset
        seen.append(block)
    assert np.array_equal(np.concatenate(seen), index.ravel())


def _summary(result):
    return (result.plans_evaluated, result.plans_valid, result.plans_fitting, result.rejected, result.why_others_lose,
            result.notes, [(r.plan, r.step.step_time_s, r.step.breakdown_s, r.memory_gib) for r in result.best])


@pytest.mark.parametrize("model,num_gpus,space", [
    ("llama-3-8b", 32, SearchSpace(seq_len=4096, global_batch=256)),
    ("mixtral-8x7b", 64, SearchSpace(seq_len=4096)),  # MoE: the ep and etp axes are searched too
    # default batch per plan (48 GPUs: dp 48 -> 1008, dp 24 -> 1032, dp 16 -> 1024 sequences): ranked by time per token
    ("llama-3-8b", 48, SearchSpace(seq_len=4096)),
])
def test_streamed_search_equals_one_block(model, num_gpus, space):
    # One block as large as the grid is the unstreamed search (the whole grid scored at once); 997
    # points per block cuts every search into hundreds of blocks along different axes. The best
    # plans (to the bit), the counts, rejections and explanations must be identical.
    c = load_catalog()
    system = c.system("dgx-h100")
    gpu = c.gpu(system.gpu)
    spec = load_model(model)
    whole = search_plans(spec, system, gpu, num_gpus, space, top=5, chunk_points=10**12)
    streamed = search_plans(spec, system, gpu, num_gpus, space, top=5, chunk_points=997)
    assert whole.plans_evaluated > 30 * 997  # the grid really is cut into many blocks
    assert _summary(streamed) == _summary(whole)


@pytest.mark.parametrize("model,num_gpus,space", [
    ("gpt3-175b", 192, SearchSpace(seq_len=2048)),  # one of `gpuplan plan`'s bisection counts on defaults
    ("mixtral-8x7b", 64, SearchSpace(seq_len=4096)),
    ("llama-3-8b", 32, SearchSpace(seq_len=4096, global_batch=256)),
])
def test_the_best_plan_does_not_depend_on_top(model, num_gpus, space):
    # `gpuplan plan` asks each search of its bisection for the best plan only (top=1): the screened
    # plans kept for the exact memory check (plan_search.MIN_LEADERS, 250) are the same for top 1 and
    # 5, so the best plan, its step time and memory are the top=5 search's first, to the bit, and so
    # are the counts and explanations; only the list of best plans is shorter
    c = load_catalog()
    system = c.system("dgx-h100")
    gpu = c.gpu(system.gpu)
    spec = load_model(model)
    one = search_plans(spec, system, gpu, num_gpus, space, top=1)
    five = search_plans(spec, system, gpu, num_gpus, space, top=5)
    assert len(one.best) == 1 and len(five.best) == 5
    assert _summary(one)[-1] == _summary(five)[-1][:1]
    assert (one.plans_valid, one.plans_fitting, one.rejected, one.why_others_lose, one.global_batch) == (
        five.plans_valid, five.plans_fitting, five.rejected, five.why_others_lose, five.global_batch)
