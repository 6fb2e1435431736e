"""`gpuplan.api` for Multi-Instance GPU: `mig_plan` (fewest GPUs for requested instances) and
`mig_profiles` (one GPU's profiles and maximal geometries), gpuplan.facilities.mig."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from gpuplan.interfaces.api._common import DEFAULT_GPU, Result, resolve_gpu
from gpuplan.specs import Gpu


@dataclass(frozen=True)
class MigPlanResult(Result):
    """`mig_plan`: `plan` is facilities.mig.MigPlan."""

    plan: Any

    def json_data(self) -> dict:
        p = self.plan
        return {
            "gpu": p.gpu_id, "family": p.family, "requested": p.requested, "feasible": p.feasible, "gpus_used": p.gpus_used,
            "gpus_available": p.gpus_available, "reason": p.reason,
            "placements": [{"gpu": g.gpu_index, "memory_slices_used": g.memory_slices_used,
                            "compute_slices_used": g.compute_slices_used,
                            "instances": [vars(i) for i in g.instances]} for g in p.placements],
        }


def mig_plan(profiles: Sequence[str], gpu: str | Gpu = DEFAULT_GPU, gpus: int | None = None) -> MigPlanResult:
    """Place the requested MIG instances (e.g. ["3g.40gb", "1g.10gb"]) on the fewest GPUs, or say why not."""
    from gpuplan.facilities.mig import plan_mig

    spec = resolve_gpu(gpu)
    return MigPlanResult(plan_mig(spec.id, list(profiles), gpus, spec.memory_bytes))


@dataclass(frozen=True)
class MigProfilesResult(Result):
    """`mig_profiles`: the GPU's MIG family, its profiles and its maximal geometries."""

    gpu: Gpu
    family: str
    profiles: tuple
    geometries: tuple

    def json_data(self) -> dict:
        return {"gpu": self.gpu.id, "family": self.family, "profiles": [vars(i) for i in self.profiles],
                "maximal_geometries_count": len(self.geometries), "maximal_geometries": list(self.geometries)}


def mig_profiles(gpu: str | Gpu = DEFAULT_GPU) -> MigProfilesResult:
    """MIG profiles of one GPU (slices, memory, SMs, placements) and its maximal geometries."""
    from gpuplan.facilities.mig import list_profiles

    spec = resolve_gpu(gpu)
    family, infos, geos = list_profiles(spec.id, spec.memory_bytes)
    return MigProfilesResult(spec, family, tuple(infos), tuple(geos))
