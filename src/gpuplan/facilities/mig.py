"""Multi-Instance GPU (MIG): profiles, placement rules, and a fewest-GPUs planner.

Rules (NVIDIA MIG User Guide v580, hardware.md section 4). A MIG GPU has 8 memory slices and 7
compute (SM) slices. A GPU instance of a profile occupies a contiguous run of memory slices that
starts at one of the profile's allowed start slices (`nvidia-smi mig -lgipp`, syntax {starts}:size):

    profile kind   compute  memory  starts        max   lgip id
    1g             1        1       {0..6}        7     19
    1g+me          1        1       {0..6}        1     20   (media extensions: one per GPU)
    1g (2 slices)  1        2       {0,2,4,6}     4     15
    2g             2        2       {0,2,4}       3     14
    3g             3        4       {0,4}         2     9
    4g             4        4       {0}           1     5
    7g             7        8       {0}           1     0

Instances on one GPU may not overlap in memory slices, their compute slices sum to at most 7, and
at most one `+me` instance exists per GPU. Profile names differ per GPU (memory in the name):
A100-40GB 1g.5gb ... 7g.40gb, A100-80GB / H100 1g.10gb ... 7g.80gb, H200 1g.18gb ... 7g.141gb,
B200 1g.23gb ... 7g.180gb.

Planner: every valid geometry of one GPU is enumerated (a few hundred); a request (multiset of
profiles) is packed on the fewest GPUs by exact dynamic programming over the remaining demand,
using the per-GPU count vectors the geometries allow (greedy first when the demand is very large).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from gpuplan.errors import InputError

MEMORY_SLICES = 8
COMPUTE_SLICES = 7


class MigKind(str, Enum):
    G1 = "1g"
    G1_ME = "1g+me"
    G1_2SLICE = "1g-2slice"
    G2 = "2g"
    G3 = "3g"
    G4 = "4g"
    G7 = "7g"


@dataclass(frozen=True)
class ProfileShape:
    kind: MigKind
    compute_slices: int
    memory_slices: int
    starts: tuple[int, ...]
    max_instances: int
    lgip_id: int


SHAPES: dict[MigKind, ProfileShape] = {
    s.kind: s
    for s in (
        ProfileShape(MigKind.G1, 1, 1, (0, 1, 2, 3, 4, 5, 6), 7, 19),
        ProfileShape(MigKind.G1_ME, 1, 1, (0, 1, 2, 3, 4, 5, 6), 1, 20),
        ProfileShape(MigKind.G1_2SLICE, 1, 2, (0, 2, 4, 6), 4, 15),
        ProfileShape(MigKind.G2, 2, 2, (0, 2, 4), 3, 14),
        ProfileShape(MigKind.G3, 3, 4, (0, 4), 2, 9),
        ProfileShape(MigKind.G4, 4, 4, (0,), 1, 5),
        ProfileShape(MigKind.G7, 7, 8, (0,), 1, 0),
    )
}

_K = MigKind
#: profile names per MIG family (MIG User Guide v580 Table of supported profiles; hardware.md section 4)
FAMILIES: dict[str, dict[MigKind, str]] = {
    "a100-40gb": {_K.G1: "1g.5gb", _K.G1_ME: "1g.5gb+me", _K.G1_2SLICE: "1g.10gb", _K.G2: "2g.10gb", _K.G3: "3g.20gb", _K.G4: "4g.20gb", _K.G7: "7g.40gb"},
    "a100-80gb": {_K.G1: "1g.10gb", _K.G1_ME: "1g.10gb+me", _K.G1_2SLICE: "1g.20gb", _K.G2: "2g.20gb", _K.G3: "3g.40gb", _K.G4: "4g.40gb", _K.G7: "7g.80gb"},
    "h100-80gb": {_K.G1: "1g.10gb", _K.G1_ME: "1g.10gb+me", _K.G1_2SLICE: "1g.20gb", _K.G2: "2g.20gb", _K.G3: "3g.40gb", _K.G4: "4g.40gb", _K.G7: "7g.80gb"},
    "h100-94gb": {_K.G1: "1g.12gb", _K.G1_ME: "1g.12gb+me", _K.G1_2SLICE: "1g.24gb", _K.G2: "2g.24gb", _K.G3: "3g.47gb", _K.G4: "4g.47gb", _K.G7: "7g.94gb"},
    "h200-141gb": {_K.G1: "1g.18gb", _K.G1_ME: "1g.18gb+me", _K.G1_2SLICE: "1g.35gb", _K.G2: "2g.35gb", _K.G3: "3g.71gb", _K.G4: "4g.71gb", _K.G7: "7g.141gb"},
    "b200-180gb": {_K.G1: "1g.23gb", _K.G1_ME: "1g.23gb+me", _K.G1_2SLICE: "1g.45gb", _K.G2: "2g.45gb", _K.G3: "3g.90gb", _K.G4: "4g.90gb", _K.G7: "7g.180gb"},
}


def mig_family(gpu_id: str, memory_bytes: int | None = None) -> str:
    """The MIG family of a catalog GPU id (a100-sxm4-80gb -> a100-80gb); InputError if it has no MIG."""
    gid = gpu_id.lower()
    gib = (memory_bytes or 0) / 2**30
    if gid.startswith("a100"):
        return "a100-40gb" if ("40gb" in gid or 0 < gib < 60) else "a100-80gb"
    if gid.startswith("h100"):
        return "h100-94gb" if ("94gb" in gid or "nvl" in gid) else "h100-80gb"
    if gid.startswith("h200") or gid.startswith("gh200"):
        return "h200-141gb"
    if gid.startswith("b200") or gid.startswith("gb200"):
        return "b200-180gb"
    raise InputError(
        f"gpu: '{gpu_id}' has no MIG profiles in gpuplan; MIG GPUs: A100 40/80GB, H100 80/94GB, H200 141GB, B200 "
        f"(families {', '.join(FAMILIES)})",
        field="gpu",
    )


@dataclass(frozen=True)
class Instance:
    profile: str
    start_slice: int
    size_slices: int


@dataclass(frozen=True)
class GpuPlacement:
    gpu_index: int
    instances: tuple[Instance, ...]
    memory_slices_used: int
    compute_slices_used: int


@dataclass(frozen=True)
class MigPlan:
    gpu_id: str
    family: str
    requested: tuple[str, ...]
    feasible: bool
    gpus_used: int
    gpus_available: int | None
    placements: tuple[GpuPlacement, ...]
    reason: str


Geometry = tuple[tuple[MigKind, int], ...]  # ((kind, start), ...) sorted by start


@lru_cache(maxsize=1)
def all_geometries() -> tuple[Geometry, ...]:
    """Every valid non-empty set of instances on one GPU (memory disjoint, compute <= 7, <= 1 `+me`)."""
    options = [(shape.kind, s) for shape in SHAPES.values() for s in shape.starts]
    out: list[Geometry] = []

    def extend(i: int, used_mask: int, compute: int, me: int, chosen: list[tuple[MigKind, int]]) -> None:
        if chosen:
            out.append(tuple(sorted(chosen, key=lambda ks: (ks[1], ks[0].value))))
        for j in range(i, len(options)):
            kind, start = options[j]
            shape = SHAPES[kind]
            mask = ((1 << shape.memory_slices) - 1) << start
            if start + shape.memory_slices > MEMORY_SLICES or used_mask & mask:
                continue
            if compute + shape.compute_slices > COMPUTE_SLICES:
                continue
            if kind is MigKind.G1_ME and me:
                continue
            chosen.append((kind, start))
            extend(j + 1, used_mask | mask, compute + shape.compute_slices, me + (kind is MigKind.G1_ME), chosen)
            chosen.pop()

    extend(0, 0, 0, 0, [])
    return tuple(dict.fromkeys(out))


def maximal_geometries() -> list[Geometry]:
    """Geometries to which no further instance can be added (what `mig profiles` lists)."""
    geos = all_geometries()
    as_sets = [frozenset(g) for g in geos]
    present = set(as_sets)
    options = {(shape.kind, s) for shape in SHAPES.values() for s in shape.starts}
    return [g for g, gs in zip(geos, as_sets) if not any((gs | {o}) in present for o in options - gs)]


def profile_names(family: str) -> dict[str, MigKind]:
    return {name: kind for kind, name in FAMILIES[family].items()}


def _kinds_of(requested: list[str], family: str) -> list[MigKind]:
    names = profile_names(family)
    out = []
    for name in requested:
        key = name.strip().lower()
        if key not in names:
            raise InputError(
                f"profiles: '{name}' is not a MIG profile of {family}; valid: {', '.join(names)}", field="profiles"
            )
        out.append(names[key])
    return out


def _pack_vectors(kinds: list[MigKind]) -> dict[tuple[int, ...], Geometry]:
    """Per-GPU count vectors over `kinds` achievable by one geometry (geometry with only those kinds)."""
    index = {k: i for i, k in enumerate(kinds)}
    packs: dict[tuple[int, ...], Geometry] = {}
    for geo in all_geometries():
        if any(k not in index for k, _ in geo):
            continue
        vec = [0] * len(kinds)
        for k, _ in geo:
            vec[index[k]] += 1
        packs.setdefault(tuple(vec), geo)
    return packs


#: instances left to the exact DP of `_fewest_gpus` (one recursion level per GPU, at least one instance each)
DP_MAX_INSTANCES = 200
#: instances one request may hold: 7 per GPU on 10,000 GPUs (a plan beyond that is not a MIG question)
MAX_REQUESTED_INSTANCES = 70_000


def _fewest_gpus(demand: tuple[int, ...], packs: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Fewest per-GPU count vectors summing exactly to `demand`: DP over the remaining demand, trying
    only packs that are maximal within it; greedy (largest pack first) while the state space is huge
    or more than DP_MAX_INSTANCES instances remain (the DP recurses once per GPU, so this bounds its
    depth well inside Python's recursion limit)."""
    chosen: list[tuple[int, ...]] = []

    def fits(p, d):
        return all(a <= b for a, b in zip(p, d))

    def weight(p):  # memory slices then compute slices a pack uses (greedy order)
        return sum(p)

    d = demand
    while math.prod(x + 1 for x in d) > 50_000 or sum(d) > DP_MAX_INSTANCES:
        cand = [p for p in packs if fits(p, d)]
        best = max(cand, key=weight)
        chosen.append(best)
        d = tuple(a - b for a, b in zip(d, best))

    @lru_cache(maxsize=None)
    def solve(rem: tuple[int, ...]) -> tuple[int, tuple[tuple[int, ...], ...]]:
        if not any(rem):
            return 0, ()
        cand = [p for p in packs if fits(p, rem)]
        maximal = [p for p in cand if not any(q != p and fits(p, q) for q in cand)]
        best: tuple[int, tuple] = (10**9, ())
        for p in maximal:
            n, seq = solve(tuple(a - b for a, b in zip(rem, p)))
            if n + 1 < best[0]:
                best = (n + 1, (p,) + seq)
        return best

    return chosen + list(solve(d)[1])


def plan_mig(gpu_id: str, requested: list[str], gpus: int | None = None, memory_bytes: int | None = None) -> MigPlan:
    """Place the requested instances on the fewest GPUs; `feasible` is False (with a reason) when more
    than `gpus` GPUs would be needed. An unknown profile name is an InputError listing the valid ones."""
    family = mig_family(gpu_id, memory_bytes)
    if not requested:
        raise InputError(f"profiles: give at least one MIG profile; valid: {', '.join(profile_names(family))}", field="profiles")
    if gpus is not None and gpus < 1:
        raise InputError(f"gpus: must be >= 1, got {gpus}", field="gpus")
    if len(requested) > MAX_REQUESTED_INSTANCES:
        raise InputError(f"profiles: {len(requested):,} instances requested; the limit is {MAX_REQUESTED_INSTANCES:,} "
                         "(7 per GPU on 10,000 GPUs)", field="profiles", allowed=f"<= {MAX_REQUESTED_INSTANCES} instances")
    kinds_req = _kinds_of(requested, family)
    kinds = list(dict.fromkeys(kinds_req))
    demand = tuple(kinds_req.count(k) for k in kinds)
    packs = _pack_vectors(kinds)
    vectors = _fewest_gpus(demand, list(packs))
    names = FAMILIES[family]
    placements = []
    for i, vec in enumerate(vectors):
        geo = packs[vec]
        insts = tuple(Instance(names[k], s, SHAPES[k].memory_slices) for k, s in geo)
        placements.append(GpuPlacement(
            i, insts, sum(SHAPES[k].memory_slices for k, _ in geo), sum(SHAPES[k].compute_slices for k, _ in geo)
        ))
    needed = len(vectors)
    if gpus is not None and needed > gpus:
        lower = max(
            math.ceil(sum(SHAPES[k].memory_slices for k in kinds_req) / MEMORY_SLICES),
            math.ceil(sum(SHAPES[k].compute_slices for k in kinds_req) / COMPUTE_SLICES),
        )
        reason = (
            f"needs {needed} GPUs but only {gpus} given: the request uses "
            f"{sum(SHAPES[k].memory_slices for k in kinds_req)} memory slices (8 per GPU) and "
            f"{sum(SHAPES[k].compute_slices for k in kinds_req)} compute slices (7 per GPU), a lower bound of {lower} GPUs; "
            f"placement rules (allowed start slices, one +me per GPU) bring it to {needed}"
        )
        return MigPlan(gpu_id, family, tuple(requested), False, needed, gpus, tuple(placements), reason)
    return MigPlan(gpu_id, family, tuple(requested), True, needed, gpus, tuple(placements), "")


@dataclass(frozen=True)
class ProfileInfo:
    profile: str
    lgip_id: int
    compute_slices: int
    memory_slices: int
    memory_nominal_gib: float  # memory_bytes * memory slices / 8 (nvidia-smi shows a little less)
    sm_count: int | None  # as observed with nvidia-smi mig -lgip where known (hardware.md section 4), else None
    max_instances: int
    placements: str  # {starts}:size


#: SMs per instance as printed by `nvidia-smi mig -lgip` (hardware.md section 4: A100-80GB user output,
#: H100 80GB GCP docs; 4g on H100 from the H100 NVL listing). Not a formula: A100 exposes 98 of 108 SMs.
OBSERVED_SMS: dict[str, dict[MigKind, int]] = {
    "a100-80gb": {_K.G1: 14, _K.G1_ME: 14, _K.G1_2SLICE: 14, _K.G2: 28, _K.G3: 42, _K.G4: 56, _K.G7: 98},
    "a100-40gb": {_K.G1: 14, _K.G1_ME: 14, _K.G1_2SLICE: 14, _K.G2: 28, _K.G3: 42, _K.G4: 56, _K.G7: 98},
    "h100-80gb": {_K.G1: 16, _K.G1_ME: 16, _K.G1_2SLICE: 26, _K.G2: 32, _K.G3: 60, _K.G4: 64, _K.G7: 132},
}


def list_profiles(gpu_id: str, memory_bytes: int) -> tuple[str, list[ProfileInfo], list[str]]:
    """(family, profiles, maximal geometries as 'name@start + ...')."""
    family = mig_family(gpu_id, memory_bytes)
    names = FAMILIES[family]
    infos = [
        ProfileInfo(
            names[s.kind], s.lgip_id, s.compute_slices, s.memory_slices, memory_bytes * s.memory_slices / MEMORY_SLICES / 2**30,
            OBSERVED_SMS.get(family, {}).get(s.kind), s.max_instances,
            "{" + ",".join(map(str, s.starts)) + "}:" + str(s.memory_slices),
        )
        for s in SHAPES.values()
    ]
    geos = [" + ".join(f"{names[k]}@{s}" for k, s in g) for g in maximal_geometries()]
    return family, infos, geos
