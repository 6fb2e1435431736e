"""Evidence beside a training number: the published runs nearest to a plan, and the MFU they reached.

The index is built once per process from the validation data that ships with the package
(catalog/data/validation/training.csv, SCHEMA.md): every high/medium-confidence row whose metric is an
MFU (`mfu_pct`) or model TFLOP/s per GPU (`tflops_per_gpu_model`, divided by the GPU's dense bf16 peak
from the catalog: the MFU convention of workloads.training.step.assembly, also for fp8 runs). Each row carries its GPU generation (the catalog GPU's
architecture), whether the model routes experts, its size (12 L h^2, the transformer-block parameters
from the row's columns; Kaplan et al. 2020 eq. 2.1 without embeddings) and its GPU count.

A plan's comparable runs: same GPU generation and model class (dense / MoE), sorted by distance
|log10(params / P)| + |log10(gpus / N)|; the nearest COMPARABLE_RUNS within a factor SIZE_BAND of
the size and SCALE_BAND of the GPU count, else the nearest of the same generation and class with a note
that none is that close. The range is [min, max] of their MFU; a plan outside it is flagged.

Why a plan lies outside the range (`beside_band`): the plan's MFU has an 80% band from the
cross-validated errors of the public rows of its regime (interfaces.validation.error_bands; MFU
scales as 1 / step time, so the band is [MFU / hi, MFU / lo] of the step-time ratios). When that
band reaches the published range, the gap is within the model's measured error on data it was not
tuned on; when it does not, the model is outside its measured error there and the note says so.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache

from gpuplan.specs.gpu import architecture_family

#: comparable runs reported per plan
COMPARABLE_RUNS = 5
#: a comparable run's model size and GPU count within these factors of the plan's (else "no close run")
SIZE_BAND = 4.0
SCALE_BAND = 8.0


def generation_of(architecture: str) -> str:
    """The GPU generation of a catalog architecture string ("Hopper GH100" -> "hopper"):
    specs.gpu.architecture_family, "" when it names none."""
    return architecture_family(architecture) or ""


@dataclass(frozen=True)
class PublishedRun:
    id: str
    model: str
    system: str
    generation: str
    moe: bool
    params: float
    num_gpus: int
    mfu_pct: float
    source: str

    def as_dict(self) -> dict:
        return {"id": self.id, "model": self.model, "system": self.system, "num_gpus": self.num_gpus,
                "mfu_pct": self.mfu_pct, "source": self.source}


def _int(row: dict, key: str, default: int = 0) -> int:
    try:
        return int(float(row.get(key) or default))
    except ValueError:
        return default


@lru_cache(maxsize=1)
def published_runs() -> tuple[PublishedRun, ...]:
    """The MFU rows of the packaged training validation file (module docstring)."""
    from gpuplan.catalog import DATA_DIR, load_catalog
    from gpuplan.errors import GpuplanError

    path = DATA_DIR / "validation" / "training.csv"
    if not path.is_file():
        return ()
    cat = load_catalog()
    out = []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            metric = (row.get("metric") or "").strip()
            if row.get("confidence") == "low" or metric not in ("mfu_pct", "tflops_per_gpu_model"):
                continue
            if any((row.get(k) or "").strip() not in ("", "full", "adamw", "none", "fp32")
                   for k in ("finetune", "optimizer", "offload")):
                continue  # fine-tuning regimes are not pre-training evidence
            try:
                gpu = cat.gpu(cat.system(row["system"].strip()).gpu)
                value = float(row["value"])
                if metric == "tflops_per_gpu_model":  # MFU against the dense bf16 peak, also for fp8 runs
                    value = 100.0 * value / gpu.peak("bf16" if "bf16" in gpu.peak_tflops else "fp16")
            except (GpuplanError, KeyError, ValueError, TypeError):
                continue
            layers, hidden = _int(row, "layers"), _int(row, "hidden")
            if layers < 1 or hidden < 1 or not 0 < value <= 100:
                continue
            out.append(PublishedRun(
                id=row["id"], model=row.get("model") or "", system=row["system"].strip(),
                generation=generation_of(gpu.architecture), moe=bool(_int(row, "moe_experts")),
                params=12.0 * layers * hidden**2, num_gpus=max(1, _int(row, "num_gpus", 1)), mfu_pct=value,
                source=(row.get("source") or "")[:160]))
    return tuple(out)


def comparable_runs(generation: str, moe: bool, params: float, num_gpus: int) -> tuple[list[PublishedRun], bool]:
    """(nearest runs of the same generation and class, whether they lie within the size/scale bands)."""
    generation = generation_of(generation)
    pool = [r for r in published_runs() if r.generation == generation and r.moe == moe]

    def distance(r: PublishedRun) -> float:
        return abs(math.log10(r.params / params)) + abs(math.log10(r.num_gpus / num_gpus))

    close = [r for r in pool if 1 / SIZE_BAND <= r.params / params <= SIZE_BAND
             and 1 / SCALE_BAND <= r.num_gpus / num_gpus <= SCALE_BAND]
    chosen = close if close else pool
    return sorted(chosen, key=distance)[:COMPARABLE_RUNS], bool(close)


def mfu_evidence(generation: str, moe: bool, params: float, num_gpus: int, plan_mfu_pct: float) -> dict:
    """`comparable_published_mfu_pct` of `train --json` / `plan --json`: {low, high, rows, note}."""
    runs, close = comparable_runs(generation, moe, params, num_gpus)
    generation = generation_of(generation)
    if not runs:
        return {"low": None, "high": None, "rows": [],
                "note": f"no published {'MoE' if moe else 'dense'} run on {generation} GPUs in the validation data: "
                        "this plan is outside what was ever measured"}
    low, high = min(r.mfu_pct for r in runs), max(r.mfu_pct for r in runs)
    where = "" if close else (f" (none within {SIZE_BAND:g}x the model size and {SCALE_BAND:g}x the GPU count: "
                              "the nearest of the same generation and class)")
    if plan_mfu_pct > high:
        verdict = f"the plan's {plan_mfu_pct:.1f}% MFU is above every comparable published run ({low:.1f}-{high:.1f}%)"
    elif plan_mfu_pct < low:
        verdict = f"the plan's {plan_mfu_pct:.1f}% MFU is below every comparable published run ({low:.1f}-{high:.1f}%)"
    else:
        verdict = f"the plan's {plan_mfu_pct:.1f}% MFU lies inside the comparable published runs' {low:.1f}-{high:.1f}%"
    return {"low": low, "high": high, "rows": [r.as_dict() for r in runs], "note": verdict + where}


def beside_band(evidence: dict, plan_mfu_pct: float, mfu_band_pct: list | tuple | None) -> dict:
    """`evidence` (mfu_evidence) with the plan's 80% MFU band (`band_mfu_pct`: [low, high] %) and,
    when the plan lies outside the published range, why (module docstring)."""
    low, high = evidence.get("low"), evidence.get("high")
    if not mfu_band_pct or low is None or high is None:
        return evidence
    b_low, b_high = float(min(mfu_band_pct)), float(max(mfu_band_pct))
    out = dict(evidence, band_mfu_pct=[b_low, b_high])
    if low <= plan_mfu_pct <= high:
        return out
    if b_low <= high and b_high >= low:
        why = (f"why: the plan's 80% band ({b_low:.1f}-{b_high:.1f}% MFU, the model's cross-validated error on public "
               "runs of its regime) reaches the published range, so the gap is within the model's measured error; "
               "the published runs also differ in model, scale and layout")
    else:
        side = "optimistic" if plan_mfu_pct > high else "pessimistic"
        why = (f"why: even the plan's 80% band ({b_low:.1f}-{b_high:.1f}% MFU) misses the published range: the model "
               f"is likely {side} here, beyond its measured error")
    out["note"] = f"{evidence['note']}; {why}"
    return out


__all__ = ["PublishedRun", "beside_band", "comparable_runs", "generation_of", "mfu_evidence", "published_runs"]
