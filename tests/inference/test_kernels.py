"""workloads.inference.kernels: the one home of the step time, table lookup, paged KV bytes and causal
pairs that every simulator loop and the Python step time use; values derived by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.kernels import (StepCoefficients, causal_pairs_upto, graph_token_table,
                                                 graph_tokens_of_step, paged_kv_bytes, step_seconds, table_lookup)


def test_table_lookup_extends_the_last_slope():
    t = np.array([0.0, 1.0, 3.0])  # last slope 2 per count
    assert table_lookup(t, 1) == 1.0
    assert table_lookup(t, 5) == 3.0 + 2.0 * 3  # 3 counts past the end


def test_paged_kv_bytes_by_hand():
    # 17 tokens in blocks of 16: 2 blocks = 32 token slots; global layers 2 B/token -> 64 B; window
    # layers 1 B/token in at most 2 blocks -> 32 B
    assert paged_kv_bytes(17, 16, 2.0, 1.0, 2) == 96.0
    # 100 tokens: 7 blocks = 112 slots x 2 B = 224 B; window layers capped at 2 blocks -> 32 B
    assert paged_kv_bytes(100, 16, 2.0, 1.0, 2) == 256.0
    assert paged_kv_bytes(0, 16, 2.0, 1.0, 2) == 0.0


def test_memory_plan_sequence_bytes_are_the_kernels():
    cat = load_catalog()
    g = cat.gpu("h100-sxm5-80gb")
    mem = memory_plan(Deployment(load_model("gemma-2-9b"), g, cat.system(g.id)))
    # a fractional context takes the blocks of its ceiling: ceil(16.5 / 16) = ceil(17 / 16) = 2
    assert mem.sequence_kv_bytes(16.5) == mem.sequence_kv_bytes(17)
    assert mem.sequence_kv_bytes(5000) == paged_kv_bytes(5000, mem.block_size, mem.kv_bytes_per_token_per_gpu,
                                                         mem.window_kv_bytes_per_token_per_gpu, mem.window_blocks_cap)
    # gemma-2-9b: window 4096 tokens in blocks of 16 -> at most 4096 / 16 + 1 = 257 blocks
    assert mem.window == 4096 and mem.window_blocks_cap == 4096 // mem.block_size + 1


def test_causal_pairs_by_hand():
    assert causal_pairs_upto(5, 0) == 15.0  # 1 + 2 + 3 + 4 + 5
    assert causal_pairs_upto(5, 2) == 9.0  # 1 + 2 + 2 + 2 + 2
    assert causal_pairs_upto(2, 4) == 3.0  # under the window: 1 + 2


@given(st.lists(st.integers(1, 600), min_size=1, max_size=8), st.integers(0, 700))
def test_graph_padding_is_the_smallest_captured_size_that_holds_the_step(sizes, n):
    table = graph_token_table(sizes)
    bigger = [s for s in sizes if s >= n]
    expected = min(bigger) if bigger else n  # past the largest graph: unpadded
    assert graph_tokens_of_step(table, n, 0) == expected
    assert graph_tokens_of_step(table, n, 5) == n  # a step with prompt tokens is not replayed as a graph
    assert graph_tokens_of_step(graph_token_table(()), n, 0) == n  # no graphs


def test_step_seconds_by_hand():
    c = StepCoefficients(overhead_s=1.0, decode_bytes_global=2.0, decode_bytes_window=1.0, decode_flops_global=0.0,
                         decode_flops_window=0.0, hbm_bytes_per_s=10.0, attention_flops_per_s=1.0,
                         prefill_flops_global=3.0, prefill_flops_window=0.0, prefill_bytes_per_token=0.0,
                         step_scale=2.0, verify_tokens=1, drafting=False, draft_ctx_s=0.0)
    # (1 + 0.5 + 0.25 + (2 x 100 + 1 x 40) / 10 + 3 x 6 / 1) x 2 = (1.75 + 24 + 18) x 2 = 87.5
    assert step_seconds(c, 0.5, 0.25, 0.0, 100, 40, 6.0, 0.0, 4.0) == pytest.approx(87.5, rel=1e-15)


def test_python_step_time_is_the_simulator_kernel():
    cat = load_catalog()
    g = cat.gpu("h100-sxm5-80gb")
    steps = step_time_model(Deployment(load_model("gemma-2-9b"), g, cat.system(g.id)))
    c = steps.step_coefficients()
    # 8 decoders of 1000 tokens (window 4096 not reached): the kernel with the tables at 8 tokens
    expect = step_seconds(c, table_lookup(steps.linear_table, 8), table_lookup(steps.logits_table, 8), 0.0,
                          8000, 8000, 0.0, 0.0, 0.0)
    assert steps.decode_step_time(8, 1000) == expect
    # a 512-token prompt: 512 x 513 / 2 causal pairs in both global and window layers
    expect = step_seconds(c, table_lookup(steps.linear_table, 512), table_lookup(steps.logits_table, 1), 0.0,
                          0, 0, 512 * 513 / 2, 512 * 513 / 2, 512.0)
    assert steps.prefill_time(1, 512) == expect
