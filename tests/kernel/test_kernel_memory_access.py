"""Coalescing, bank-conflict, divergence and lane-expression cases, each derived by hand.

Global-memory cases follow the CUDA C++ Best Practices Guide, section "Coalesced Access to Global
Memory" (subsections "A Simple Access Pattern", "A Sequential but Misaligned Access Pattern",
"Strided Accesses": "a stride of 2 results in a 50% of load/store efficiency"). Shared-memory
cases follow the CUDA C++ Programming Guide, "Compute Capability 5.x > Shared Memory", figures
"Strided Shared Memory Accesses" (stride 1 and 3 conflict-free, stride 2 two-way) and "Irregular
Shared Memory Accesses" (several threads reading one word are served by a broadcast).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import InputError
from gpuplan.kernel import analyze_bank_conflicts, analyze_divergence, analyze_global_access
from gpuplan.kernel.lane_expression import evaluate_over_lanes


@pytest.mark.parametrize(
    "elem,stride,offset,index,sectors,lines,eff",
    [
        # simple pattern: 32 lanes x 4 B = 128 contiguous aligned bytes -> 4 sectors, 1 line, 100%
        (4, 1, 0, None, 4, 1, 1.0),
        # sequential but misaligned by one word: bytes 4..131 span sectors 0..4 -> 5; lines 0..1 -> 2;
        # efficiency 128 / (5 x 32) = 0.8
        (4, 1, 1, None, 5, 2, 0.8),
        # stride 2: lane l at byte 8l, 0..248 -> sectors 0..7 = 8, lines 2, 128/256 = 50%
        (4, 2, 0, None, 8, 2, 0.5),
        # stride 32: every lane its own 128-byte line -> 32 sectors, 32 lines, 128/1024 = 12.5%
        (4, 32, 0, None, 32, 32, 0.125),
        # 8-byte elements contiguous: 256 B -> 8 sectors, 2 lines, 100%
        (8, 1, 0, None, 8, 2, 1.0),
        # 16-byte elements contiguous: 512 B -> 16 sectors, 4 lines, 100%
        (16, 1, 0, None, 16, 4, 1.0),
        # 2-byte elements: 64 B -> 2 sectors, 1 line
        (2, 1, 0, None, 2, 1, 1.0),
        # every lane the same word (stride 0): 1 sector; 4 distinct bytes of 32 -> 12.5%
        (4, 0, 0, None, 1, 1, 0.125),
        # a permutation inside the aligned 128 bytes (neighbouring lanes swapped) costs nothing extra
        (4, 1, 0, "lane ^ 1", 4, 1, 1.0),
        # transposed read of a 32-wide tile, (lane % 8) * 32 + lane / 8: 8 rows of 128 B, 4 lanes each,
        # each row's 4 consecutive words in one sector -> 8 sectors, 8 lines, 128/256 = 50%
        (4, 1, 0, "(lane % 8) * 32 + lane / 8", 8, 8, 0.5),
    ],
)
def test_global_access(elem, stride, offset, index, sectors, lines, eff):
    r = analyze_global_access(elem, stride, offset, index_expression=index)
    assert (r.sectors_per_request, r.lines_per_request) == (sectors, lines)
    assert r.efficiency == pytest.approx(eff)


@pytest.mark.parametrize(
    "elem,stride,pad,index,ways,wavefronts",
    [
        (4, 1, 0, None, 1, 1),  # Programming Guide figure: stride of one 32-bit word, no conflict
        (4, 2, 0, None, 2, 2),  # stride two: lanes l and l+16 share bank 2l mod 32 -> 2-way
        (4, 3, 0, None, 1, 1),  # stride three: 3 is odd, 3l mod 32 is a permutation -> no conflict
        (4, 32, 0, None, 32, 32),  # column of a 32x32 float tile: all lanes bank 0 -> 32-way
        (4, 32, 1, None, 1, 1),  # padded to pitch 33: bank 33l mod 32 = l -> conflict-free
        (4, 16, 0, None, 16, 16),  # stride 16: banks 0 and 16 only, 16 words each
        (4, 0, 0, None, 1, 1),  # all lanes one word: broadcast, no conflict
        (4, 1, 0, "lane / 4", 1, 1),  # groups of 4 lanes share a word (multicast) -> no conflict
        (1, 1, 0, None, 1, 1),  # 32 bytes = 8 words; 4 lanes per word -> no conflict
        # 8-byte elements: 2 half-warp phases of 16 lanes x 8 B = 128 B each -> 2 wavefronts, no conflict
        (8, 1, 0, None, 1, 2),
        # 8-byte stride 2: half-warp lane k at words 4k, 4k+1 -> banks repeat every 8 lanes -> 2-way, 4 wavefronts
        (8, 2, 0, None, 2, 4),
        # 16-byte elements: 4 quarter-warp phases -> 4 wavefronts, no conflict
        (16, 1, 0, None, 1, 4),
    ],
)
def test_bank_conflicts(elem, stride, pad, index, ways, wavefronts):
    r = analyze_bank_conflicts(elem, stride, pad=pad, index_expression=index)
    assert (r.conflict_ways, r.wavefronts) == (ways, wavefronts)
    assert r.efficiency == pytest.approx(r.ideal_wavefronts / wavefronts)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([1, 2, 4, 8, 16]), st.integers(0, 256), st.integers(0, 64))
def test_access_invariants(elem, stride, offset):
    g = analyze_global_access(elem, stride, offset)
    assert 0 < g.efficiency <= 1
    assert g.ideal_sectors <= g.sectors_per_request <= 32 * (1 + elem // 32 + 1)
    assert g.lines_per_request <= g.sectors_per_request
    b = analyze_bank_conflicts(elem, stride, offset)
    assert 1 <= b.conflict_ways <= 32
    assert b.ideal_wavefronts <= b.wavefronts <= 32 * max(1, elem // 4)


@pytest.mark.parametrize(
    "predicate,threads,divergent,branch_eff,simt_eff",
    [
        ("lane % 2 == 0", 32, 1, 0.0, 0.5),  # 16 lanes each side, both sides issued: 32/(32x2)
        ("lane < 32", 32, 0, 1.0, 1.0),  # uniform
        ("warp == 0", 64, 0, 1.0, 1.0),  # warp-uniform: no divergence
        # warp 0 all true (1 issue, 32 useful); warp 1 16/16 (2 issues, 32 useful): 64 / (32 x 3)
        ("tid < 48", 64, 1, 0.5, 64 / 96),
        ("lane == 0", 32, 1, 0.0, 0.5),  # 1 + 31 lanes, both sides once: 32 / 64
    ],
)
def test_divergence(predicate, threads, divergent, branch_eff, simt_eff):
    r = analyze_divergence(predicate, threads)
    assert r.divergent_warps == divergent
    assert r.branch_efficiency == pytest.approx(branch_eff)
    assert r.simt_efficiency == pytest.approx(simt_eff)


def test_divergence_if_without_else():
    # if (lane < 8) {10 instructions}: issued 10, useful 8 x 10 -> 80 / 320 = 25%
    r = analyze_divergence("lane < 8", 32, then_cost=10, else_cost=0)
    assert r.simt_efficiency == pytest.approx(0.25)


@pytest.mark.parametrize(
    "expr,lane0,lane5",
    [
        ("2 + 3 * lane", 2, 17),  # * binds tighter than +
        ("(2 + 3) * lane", 0, 25),
        ("lane ^ 1", 1, 4),
        ("lane >> 1 << 1", 0, 4),
        ("lane % 4 == 1 && lane > 2", 0, 1),
        ("-7 / 2 + lane * 0", -3, -3),  # C division truncates toward zero
        ("-7 % 2 + lane * 0", -1, -1),  # C remainder takes the dividend's sign
        ("!(lane & 1)", 1, 0),
        ("lane < 3 or lane == 5", 1, 1),
    ],
)
def test_lane_expression(expr, lane0, lane5):
    v = evaluate_over_lanes(expr)
    assert (v[0], v[5]) == (lane0, lane5)


@pytest.mark.parametrize(
    "expr,message",
    [
        ("__import__('os')", "cannot read"),
        ("lane.bit_length()", "cannot read"),
        ("x + 1", "unknown name 'x'"),
        ("lane / 0", "division by zero"),
        ("(lane + 1", "missing|end"),
        ("lane +", "end of expression"),
        ("", "empty"),
    ],
)
def test_lane_expression_rejects(expr, message):
    with pytest.raises(InputError, match=message):
        evaluate_over_lanes(expr)


def test_bad_access_input():
    with pytest.raises(InputError, match="elem_bytes"):
        analyze_global_access(3)
    with pytest.raises(InputError, match="pad"):
        analyze_bank_conflicts(4, 32, pad=-1)
    assert np.all(np.asarray(analyze_global_access(4, 2).element_indices) == 2 * np.arange(32))
