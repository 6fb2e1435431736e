"""Occupancy cases worked by hand from cuda_occupancy.h's algorithm
(../shared/reference/hardware.md section 2.2), for every supported CC and every limiter.

Notation in the comments: W = warps per block = ceil(threads / 32);
r = registers allocated per warp = roundup(regs x 32, 256);
regs limit = floor(4 x floor(16384 / r) / W)  (65536 registers in 4 sub-partitions);
warps limit = floor(max_warps / W); smem per block = roundup(smem + reserved, granularity);
smem limit = floor(carveout / smem per block).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import InputError
from gpuplan.kernel import SUPPORTED_CCS, Limiter, limits_for, max_potential_block_size, occupancy

W, R, S, B, BAR = Limiter.WARPS, Limiter.REGISTERS, Limiter.SHARED_MEMORY, Limiter.BLOCKS, Limiter.BARRIERS
KIB = 1024

CASES = [
    # (cc, threads, regs, smem bytes, active blocks, occupancy, limiters)
    # --- 7.0: 64 warps, 32 blocks, 96 KB smem (98304), 256 B granularity, no reservation
    # W=8, r=64*32=2048, 16384/2048=8 -> 32 warps -> 32/8=4 blocks; warps 64/8=8 -> 4 blocks = 32/64
    ("7.0", 256, 64, 0, 4, 0.5, [R]),
    # W=32, r=512, 16384/512=32 -> 128 warps -> 4; warps 64/32=2 -> 2 blocks = 64/64
    ("7.0", 1024, 16, 0, 2, 1.0, [W]),
    # smem 40960 (multiple of 256) -> 98304/40960=2.4 -> 2; W=4, regs 64/4=16, warps 16 -> 2 blocks = 8/64
    ("7.0", 128, 32, 40 * KIB, 2, 0.125, [S]),
    # W=1: warps 64, regs (r=1024: 16 per sub-partition -> 64 warps) 64, blocks 32 -> 32 = 32/64
    ("7.0", 32, 32, 0, 32, 0.5, [B]),
    # granularity: 19584 B rounds up to 19712 (77 x 256); 98304/19712 = 4.99 -> 4 (unrounded: 5)
    ("7.0", 64, 32, 19584, 4, 8 / 64, [S]),
    # --- 7.5: 32 warps, 16 blocks, 64 KB smem
    # W=1: warps 32, regs 64, blocks 16 -> 16 = 16/32
    ("7.5", 32, 32, 0, 16, 0.5, [B]),
    # r=128*32=4096, 16384/4096=4 -> 16 warps -> 16/8=2; warps 32/8=4 -> 2 = 16/32
    ("7.5", 256, 128, 0, 2, 0.5, [R]),
    # W=16: warps 32/16=2, regs 64/16=4 -> 2 = 32/32
    ("7.5", 512, 32, 0, 2, 1.0, [W]),
    # smem 20480: 65536/20480=3.2 -> 3; W=8: warps 4, regs 8 -> 3 = 24/32
    ("7.5", 256, 32, 20 * KIB, 3, 0.75, [S]),
    # opt-in: 61440 > 48 KB default, <= 64 KB opt-in -> 65536/61440 = 1
    ("7.5", 256, 32, 60 * KIB, 1, 0.25, [S]),
    # --- 8.0: 64 warps, 32 blocks, 164 KB (167936), 128 B granularity, 1 KB reserved per block
    # 49152+1024=50176; 167936/50176=3.35 -> 3; W=8: warps 8, regs 8 -> 3 = 24/64
    ("8.0", 256, 32, 48 * KIB, 3, 0.375, [S]),
    # reservation bites: 41984+1024=43008; 167936/43008=3.9 -> 3 (without it 167936/41984 = 4)
    ("8.0", 32, 32, 41 * KIB, 3, 3 / 64, [S]),
    # r=255*32=8160 -> 8192; 16384/8192=2 -> 8 warps -> 8/4=2; warps 16 -> 2 = 8/64
    ("8.0", 128, 255, 0, 2, 0.125, [R]),
    # sub-partition rule: r=40*32=1280; 16384/1280=12.8 -> 12 -> 48 warps -> 48/2=24 blocks
    # (a whole-SM count would give 65536/1280 = 51 warps -> 25); warps 32, blocks 32 -> 24 = 48/64
    ("8.0", 64, 40, 0, 24, 0.75, [R]),
    # W=3: r=4096 -> 4 per sub-partition -> 16 warps -> floor(16/3)=5 blocks = 15/64
    ("8.0", 96, 128, 0, 5, 15 / 64, [R]),
    # W=32: r=2048 -> 8 per sub-partition -> 32 warps -> 1; warps 2 -> 1 = 32/64
    ("8.0", 1024, 64, 0, 1, 0.5, [R]),
    # W=32, r=512 -> 128 warps -> 4; warps 64/32=2 -> 2 = 64/64
    ("8.0", 1024, 16, 0, 2, 1.0, [W]),
    # W=1: warps 64, regs 64, smem 167936/1024 = 164, blocks 32 -> 32 = 32/64
    ("8.0", 32, 32, 0, 32, 0.5, [B]),
    # --- 8.6: 48 warps, 16 blocks, 100 KB (102400)
    # W=16: warps 48/16=3, regs 64/16=4 -> 3 = 48/48
    ("8.6", 512, 32, 0, 3, 1.0, [W]),
    # W=2: warps 24, regs 32, blocks 16 -> 16 = 32/48
    ("8.6", 64, 32, 0, 16, 32 / 48, [B]),
    # 32768+1024=33792; 102400/33792=3.03 -> 3; W=4: warps 12, regs 16 -> 3 = 12/48
    ("8.6", 128, 32, 32 * KIB, 3, 0.25, [S]),
    # r=2048 -> 8 per sub-partition -> 32 warps -> 32/8=4; warps 48/8=6 -> 4 = 32/48
    ("8.6", 256, 64, 0, 4, 32 / 48, [R]),
    # opt-in maximum 99 KB: 101376+1024=102400 <= 99 KB + 1 KB -> 1 block = 4/48
    ("8.6", 128, 32, 99 * KIB, 1, 4 / 48, [S]),
    # --- 8.7: 48 warps, 16 blocks, 164 KB
    # 81920+1024=82944; 167936/82944=2.02 -> 2; W=8: warps 6, regs 8 -> 2 = 16/48
    ("8.7", 256, 32, 80 * KIB, 2, 16 / 48, [S]),
    # r=96*32=3072; 16384/3072=5.3 -> 5 -> 20 warps -> 20/8=2; warps 6 -> 2 = 16/48
    ("8.7", 256, 96, 0, 2, 16 / 48, [R]),
    # W=16: warps 48/16=3, regs 64/16=4 -> 3 = 48/48
    ("8.7", 512, 32, 0, 3, 1.0, [W]),
    # W=1: warps 48, regs 64, blocks 16 -> 16 = 16/48
    ("8.7", 32, 32, 0, 16, 16 / 48, [B]),
    # --- 8.9: 48 warps, 24 blocks, 100 KB
    # W=1: warps 48, regs 64, smem 100, blocks 24 -> 24 = 24/48
    ("8.9", 32, 32, 0, 24, 0.5, [B]),
    # W=24, r=512 -> 32 per sub -> 128 warps -> 5; warps 48/24=2 -> 2 = 48/48
    ("8.9", 768, 16, 0, 2, 1.0, [W]),
    # 65536+1024=66560; 102400/66560=1.5 -> 1 = 8/48
    ("8.9", 256, 32, 64 * KIB, 1, 8 / 48, [S]),
    # r=4096 -> 4 per sub -> 16 warps -> 16/8 = 2 = 16/48
    ("8.9", 256, 128, 0, 2, 16 / 48, [R]),
    # --- 9.0 (H100): 64 warps, 32 blocks, 228 KB (233472), barriers 2 x 32 = 64
    # hardware.md worked check: W=8, r=2048, 8 per sub -> 32 warps -> 4 blocks; warps 8 -> 4 = 32/64
    ("9.0", 256, 64, 0, 4, 0.5, [R]),
    # 49152+1024=50176; 233472/50176=4.65 -> 4; W=8, r=1024: regs 8, warps 8 -> 4 = 32/64
    ("9.0", 256, 32, 48 * KIB, 4, 0.5, [S]),
    # opt-in maximum 227 KB: 232448+1024=233472 -> 1 block = 8/64
    ("9.0", 256, 32, 227 * KIB, 1, 0.125, [S]),
    # W=32, r=512 -> 128 warps -> 4; warps 2 -> 2 = 64/64
    ("9.0", 1024, 16, 0, 2, 1.0, [W]),
    # W=1: warps 64, regs 64, smem 228, blocks 32, barriers 64 -> 32 = 32/64
    ("9.0", 32, 32, 0, 32, 0.5, [B]),
    # W=32, r=1024 -> 16 per sub -> 64 warps -> 2; warps 2 -> 2, both limit
    ("9.0", 1024, 32, 0, 2, 1.0, [W, R]),
    # --- 10.0 (B200): same limits as 9.0
    # r=168*32=5376 (=21x256); 16384/5376=3.05 -> 3 -> 12 warps -> 12/4 = 3 = 12/64
    ("10.0", 128, 168, 0, 3, 12 / 64, [R]),
    # 102400+1024=103424; 233472/103424=2.26 -> 2 = 8/64
    ("10.0", 128, 32, 100 * KIB, 2, 0.125, [S]),
    ("10.0", 32, 32, 0, 32, 0.5, [B]),
    # W=16, r=1024 -> 64 warps -> 64/16=4; warps 64/16=4 -> 4 = 64/64, warps and registers
    ("10.0", 512, 32, 0, 4, 1.0, [W, R]),
    # W=32, r=512 -> 128 warps -> 4; warps 2 -> 2 = 64/64
    ("10.0", 1024, 16, 0, 2, 1.0, [W]),
    # --- 12.0: 48 warps, 24 blocks, 100 KB, barriers 1 x 24 = 24
    # W=1: warps 48, regs 64, blocks 24, barriers 24 -> 24 = 24/48, blocks and barriers
    ("12.0", 32, 32, 0, 24, 0.5, [B, BAR]),
    # 40960+1024=41984; 102400/41984=2.44 -> 2; W=8: warps 6, regs 8 -> 2 = 16/48
    ("12.0", 256, 32, 40 * KIB, 2, 16 / 48, [S]),
    # r=4096 -> 16 warps -> 2 = 16/48
    ("12.0", 256, 128, 0, 2, 16 / 48, [R]),
    # W=16: warps 48/16=3, regs 64/16=4 -> 3 = 48/48
    ("12.0", 512, 32, 0, 3, 1.0, [W]),
]


@pytest.mark.parametrize("cc,threads,regs,smem,blocks,occ,limiters", CASES)
def test_occupancy_hand_cases(cc, threads, regs, smem, blocks, occ, limiters):
    r = occupancy(limits_for(cc), threads, regs, smem)
    assert r.active_blocks_per_sm == blocks
    assert r.active_warps_per_sm == blocks * -(-threads // 32)
    assert r.occupancy == pytest.approx(occ)
    assert r.limiters == limiters


def test_every_cc_and_every_limiter_is_covered():
    assert {c[0] for c in CASES} == set(SUPPORTED_CCS)
    for cc in SUPPORTED_CCS:
        seen = {lim for c in CASES if c[0] == cc for lim in c[6]}
        assert {W, R, S, B} <= seen, cc


def test_h100_256x64_detail():
    # hardware.md worked check: 4 blocks by registers, 8 by warps, 32 by blocks, 64 by barriers,
    # 233472/1024 = 228 by shared memory (only the 1 KB reservation)
    r = occupancy(limits_for("9.0"), 256, 64)
    assert r.blocks_per_sm_by_limit == {"warps": 8, "registers": 4, "shared_memory": 228, "blocks": 32, "barriers": 64}
    assert r.allocated_registers_per_warp == 2048
    assert r.allocated_registers_per_block == 2048 * 8
    assert r.allocated_smem_per_block_bytes == 1024
    assert r.smem_carveout_bytes == 228 * KIB


def test_zero_registers_is_unlimited():
    # numRegs = 0 -> INT_MAX register limit (cuda_occupancy.h); 7.0 has no smem reservation -> unlimited too
    r = occupancy(limits_for("7.0"), 64, 0)
    assert r.blocks_per_sm_by_limit["registers"] is None
    assert r.blocks_per_sm_by_limit["shared_memory"] is None
    assert r.active_blocks_per_sm == 32  # warps 64/2 = 32 = block limit 32
    assert r.limiters == [W, B]


@pytest.mark.parametrize(
    "cc,threads,regs,smem,limiter",
    [
        # 1024 threads x 72 regs: r=2304, 32 warps x 2304 = 73728 > 65536 registers per block
        ("8.0", 1024, 72, 0, R),
        # 800 threads (25 warps) x 80 regs: r=2560; 16384/2560=6 -> 24 warps < 25
        ("9.0", 800, 80, 0, R),
        # 228 KB + 1 KB reservation = 234496 > 227 KB opt-in + 1 KB = 233472
        ("9.0", 256, 32, 228 * KIB, S),
        # 99 KB + 1 byte: 101377+1024 -> 102528 > 102400
        ("8.6", 128, 32, 99 * KIB + 1, S),
        # 7.5: 65 KB > 64 KB opt-in maximum
        ("7.5", 128, 32, 65 * KIB, S),
    ],
)
def test_unlaunchable_blocks_get_zero(cc, threads, regs, smem, limiter):
    r = occupancy(limits_for(cc), threads, regs, smem)
    assert r.active_blocks_per_sm == 0
    assert r.occupancy == 0
    assert r.limiters == [limiter]
    assert r.notes


def test_carveout_preference():
    lim = limits_for("9.0")
    # 50% of 233472 = 116736 (114 KB) -> next carveout 132 KB = 135168; 135168/50176 = 2.69 -> 2
    r = occupancy(lim, 256, 32, 48 * KIB, carveout_percent=50)
    assert (r.smem_carveout_bytes, r.active_blocks_per_sm) == (135168, 2)
    # 0% -> carveout 0 < 50176, so the driver picks the smallest carveout that fits one block:
    # 64 KB = 65536; 65536/50176 = 1
    r = occupancy(lim, 256, 32, 48 * KIB, carveout_percent=0)
    assert (r.smem_carveout_bytes, r.active_blocks_per_sm) == (65536, 1)
    # 7.5 (Turing) carveouts are 32 and 64 KB: 25% of 64 KB = 16 KB -> 32 KB; 10 KB blocks -> 3
    r = occupancy(limits_for("7.5"), 64, 32, 10 * KIB, carveout_percent=25)
    assert (r.smem_carveout_bytes, r.active_blocks_per_sm) == (32 * KIB, 3)


@pytest.mark.parametrize(
    "cc,regs,smem,sm_count,block,blocks",
    [
        # 9.0, 32 regs: 1024 threads -> 2 blocks (regs 64 warps/32, warps 64/32) = 2048 threads = max -> stop
        ("9.0", 32, 0, 132, 1024, 2),
        # 9.0, 64 regs: 1024 -> 1 block (32 warps by regs) = 1024 threads; 512 -> 2 x 512 ties; keep the larger
        ("9.0", 64, 0, 132, 1024, 1),
        # 8.6 (48 warps), 32 regs: 1024 -> 1 block; 800..992 -> 1 block; 768 (24 warps) -> 2 blocks = 1536 = max
        ("8.6", 32, 0, None, 768, 2),
        # 9.0, 128 regs: r=4096 -> 16 warps per SM; 1024 threads cannot launch (32 x 4096 > 65536);
        # 512 -> 1 block = 512 threads; 256 -> 2 blocks = 512 ties -> 512
        ("9.0", 128, 0, 132, 512, 1),
        # 7.5 (32 warps), 32 regs: 1024 -> 1 block = 1024 = max threads per SM
        ("7.5", 32, 0, 40, 1024, 1),
        # 8.0, 32 regs, 80 KB smem: 82944 per block -> 167936/82944 = 2 blocks; 1024 threads -> 2 x 32 warps = 64
        ("8.0", 32, 80 * KIB, 108, 1024, 2),
    ],
)
def test_max_potential_block_size(cc, regs, smem, sm_count, block, blocks):
    best = max_potential_block_size(limits_for(cc), regs, smem, sm_count=sm_count)
    assert (best.block_size, best.active_blocks_per_sm) == (block, blocks)
    assert best.min_grid_size == (blocks * sm_count if sm_count else None)


def test_bad_input():
    lim = limits_for("9.0")
    with pytest.raises(InputError, match="threads"):
        occupancy(lim, 2048, 32)
    with pytest.raises(InputError, match="regs"):
        occupancy(lim, 256, 256)
    with pytest.raises(InputError, match="cc"):
        limits_for("6.1")
    assert limits_for("sm_90") is limits_for("9.0") is limits_for("90")
    assert limits_for("120").compute_capability == "12.0"


def _reference_blocks(cc, threads, regs, smem):
    """Independent literal transcription of hardware.md section 2.2 for one case (default carveout)."""
    L = limits_for(cc)
    w = -(-threads // 32)
    lim_w = L.max_warps_per_sm // w
    rpw = -(-(regs * 32) // 256) * 256
    if rpw * (-(-w // 4) * 4) > 65536 or rpw * w > 65536 or regs > 255:
        lim_r = 0
    elif rpw == 0:
        lim_r = 10**9
    else:
        lim_r = ((16384 // rpw) * 4) // w
    reserved = 1024 if L.major >= 8 else 0
    gran = 128 if L.major >= 8 else 256
    alloc = -(-(smem + reserved) // gran) * gran
    cap = (L.smem_per_block_optin_bytes if smem + reserved > 48 * 1024 else 48 * 1024) + reserved
    lim_s = 0 if alloc > cap else (L.smem_per_sm_bytes // alloc if alloc else 10**9)
    lim_b = L.max_blocks_per_sm
    lim_bar = L.barrier_multiplier * L.max_blocks_per_sm if L.major >= 9 else 10**9
    return min(lim_w, lim_r, lim_s, lim_b, lim_bar)


cc_st = st.sampled_from(SUPPORTED_CCS)
threads_st = st.integers(1, 1024)
regs_st = st.integers(0, 255)
smem_st = st.integers(0, 240 * KIB)


@settings(max_examples=300, deadline=None)
@given(cc_st, threads_st, regs_st, smem_st)
def test_matches_literal_transcription_and_bounds(cc, threads, regs, smem):
    r = occupancy(limits_for(cc), threads, regs, smem)
    assert r.active_blocks_per_sm == _reference_blocks(cc, threads, regs, smem)
    assert 0 <= r.occupancy <= 1
    assert (r.occupancy > 0) == (r.active_blocks_per_sm > 0)
    assert r.active_warps_per_sm <= r.max_warps_per_sm
    assert r.limiters  # at least one factor attains the minimum


@settings(max_examples=200, deadline=None)
@given(cc_st, threads_st, regs_st, regs_st, smem_st, smem_st)
def test_monotone_in_registers_and_smem(cc, threads, r1, r2, s1, s2):
    lim = limits_for(cc)
    lo_r, hi_r = sorted((r1, r2))
    lo_s, hi_s = sorted((s1, s2))
    assert occupancy(lim, threads, hi_r, lo_s).occupancy <= occupancy(lim, threads, lo_r, lo_s).occupancy
    assert occupancy(lim, threads, lo_r, hi_s).occupancy <= occupancy(lim, threads, lo_r, lo_s).occupancy
