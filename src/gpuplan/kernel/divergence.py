"""Branch divergence of an if/else whose condition is a predicate of the lane (or thread) id.

A warp executes both sides of a branch one after the other when its lanes disagree, with the
lanes of the other side masked off (CUDA C++ Programming Guide, "SIMT Architecture": "If threads
of a warp diverge via a data-dependent conditional branch, the warp executes each branch path
taken, disabling threads that are not on that path"). For a warp with `t` lanes taking the
`then` side (cost `c_then` instructions) and `f` lanes the `else` side (cost `c_else`):

    issued     = c_then * [t > 0] + c_else * [f > 0]           (instructions the warp issues)
    useful     = t * c_then + f * c_else                       (lane-instructions that do work)
    simt_efficiency = useful / (32 * issued)                   (1 = no lane idles)
    branch_efficiency = non-divergent warps / warps            (Nsight / nvprof definition)

Over a block of `threads` threads the predicate may use `tid` (thread index), `lane` = tid % 32
and `warp` = tid / 32; partial last warps count their inactive lanes as idle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.kernel.lane_expression import evaluate, parse

WARP_SIZE = 32


@dataclass(frozen=True)
class DivergenceResult:
    predicate: str
    threads: int
    warps: int
    divergent_warps: int
    branch_efficiency: float  # non-divergent warps / warps
    simt_efficiency: float  # useful lane-instructions / (32 x issued), over the block
    lanes_taking_then: list[int]  # per warp
    then_cost: float
    else_cost: float


def analyze_divergence(predicate: str, threads: int = WARP_SIZE, then_cost: float = 1.0,
                       else_cost: float = 1.0) -> DivergenceResult:
    """Divergence of `if (predicate) {then} else {else}` over one block (formula in module doc)."""
    if threads < 1 or threads > 1024:
        raise InputError(f"threads: must be 1..1024, got {threads}", field="threads")
    if then_cost < 0 or else_cost < 0 or then_cost + else_cost <= 0:
        raise InputError("then_cost/else_cost: must be >= 0 and not both 0", field="then_cost")
    n_warps = -(-threads // WARP_SIZE)
    tid = np.arange(n_warps * WARP_SIZE, dtype=np.int64)
    env = {"tid": tid, "lane": tid % WARP_SIZE, "warp": tid // WARP_SIZE}
    node = parse(predicate, tuple(env), field="predicate")
    taken = np.broadcast_to(evaluate(node, env, field="predicate") != 0, tid.shape)
    exists = tid < threads
    then_lanes = (taken & exists).reshape(n_warps, WARP_SIZE).sum(axis=1)
    else_lanes = (~taken & exists).reshape(n_warps, WARP_SIZE).sum(axis=1)
    issued = then_cost * (then_lanes > 0) + else_cost * (else_lanes > 0)
    useful = then_lanes * then_cost + else_lanes * else_cost
    divergent = (then_lanes > 0) & (else_lanes > 0)
    return DivergenceResult(
        predicate=predicate,
        threads=threads,
        warps=n_warps,
        divergent_warps=int(divergent.sum()),
        branch_efficiency=float(1 - divergent.mean()),
        simt_efficiency=float(useful.sum() / (WARP_SIZE * issued.sum())) if issued.sum() > 0 else 1.0,
        lanes_taking_then=then_lanes.tolist(),
        then_cost=then_cost,
        else_cost=else_cost,
    )
