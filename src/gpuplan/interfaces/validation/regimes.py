"""Regimes: what a prediction has in common with the public measurements, and what it does not.

A *regime* places a prediction (or a validation row) on four axes:

- `hardware`: GPU vendor and generation, `<vendor>/<generation>` ("nvidia/hopper", "amd/cdna3",
  "google/tpu-v6e"; `hardware_generation`);
- `engine`: the serving engine (`tensorrt-llm`, `vllm`, `sglang`, `lmdeploy`, `tgi`, `other`,
  `generic` for gpuplan's own default) or, for training, the framework (`megatron`, `deepspeed`,
  `fsdp`, `torchtitan`, `maxtext`, `other`);
- `architecture`: `dense` or `moe` (routed experts);
- `precision`: the weight format class (`16-bit` for bf16/fp16, else the format: `fp8`, `int4`,
  `nvfp4`, ...; `precision_class`).

The regime *held out as a whole* is the tuple of the first three (REGIME_AXES): leave-one-regime-out
cross-validation (`validate --cv regime`) refits the fitted knobs without every row of a tuple and
predicts them, and does the same for each single axis value (every row on one hardware generation,
with one engine, of one architecture class, in one precision), so the error of a prediction on
hardware, an engine, an architecture or a precision the public rows never saw is measured, not
assumed. The error bands (`interfaces.validation.error_bands`) take their width from the residuals
of the most novel axis a prediction falls in (`novelty`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

#: the four axes, in the order they are reported
AXES = ("hardware", "engine", "architecture", "precision")
#: the axes whose tuple is one regime, held out as a whole (the brief of issue 30)
REGIME_AXES = ("hardware", "engine", "architecture")
#: the value of an axis a row does not resolve
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Regime:
    """The four axes of a prediction (module docstring)."""

    hardware: str
    engine: str
    architecture: str
    precision: str

    def value(self, axis: str) -> str:
        return getattr(self, axis)

    @property
    def key(self) -> str:
        """The regime tuple (REGIME_AXES) as one string: 'nvidia/hopper|tensorrt-llm|dense'."""
        return "|".join(self.value(a) for a in REGIME_AXES)

    def to_dict(self) -> dict:
        return {a: self.value(a) for a in AXES}


def hardware_generation(vendor: str, architecture: str) -> str:
    """`<vendor>/<generation>`: the vendor lower-cased and the first word of the catalog's
    architecture ("Hopper GH100" -> hopper, "Blackwell Ultra + Grace" -> blackwell, "CDNA3" -> cdna3,
    "Ada Lovelace AD102" -> ada); TPUs keep their version ("TPU v6e" -> tpu-v6e)."""
    words = architecture.lower().replace("(", " ").replace("+", " ").split()
    gen = words[0] if words else UNKNOWN
    if gen == "tpu" and len(words) > 1:
        gen = f"tpu-{words[1]}"
    return f"{(vendor or UNKNOWN).strip().lower()}/{gen}"


def precision_class(dtype: str) -> str:
    """`16-bit` for bf16 / fp16 (the same tensor-core rate and bytes), else the format itself
    (fp8, int8, int4, nvfp4, mxfp4, ...); empty -> 16-bit (the harness's default weight format)."""
    d = (dtype or "").strip().lower()
    return "16-bit" if d in ("", "bf16", "fp16", "16-bit") else d


def serving_regime(gpu, engine: str, moe: bool, weight_dtype: str) -> Regime:
    """The regime of a serving prediction: its GPU (a specs.Gpu), engine name, MoE or not, weight format."""
    return Regime(hardware_generation(gpu.vendor, gpu.architecture), (engine or UNKNOWN).strip().lower(),
                  "moe" if moe else "dense", precision_class(weight_dtype))


def training_regime(gpu, framework: str, moe: bool, precision: str) -> Regime:
    """The regime of a training prediction: its GPU, framework, MoE or not, precision recipe."""
    return Regime(hardware_generation(gpu.vendor, gpu.architecture), (framework or UNKNOWN).strip().lower(),
                  "moe" if moe else "dense", precision_class(precision))


def row_regime(row: Mapping[str, str], kind: str) -> Regime:
    """The regime of a validation row (SCHEMA.md columns): hardware from its `system` (the catalog
    GPU of that system), engine from `engine` (inference) or `framework` (training), MoE from its
    architecture, precision from `weight_dtype` (inference) or `precision` (training). An axis the
    row does not resolve is `unknown` (its own value: such rows never match a prediction)."""
    from gpuplan.errors import GpuplanError

    hardware = UNKNOWN
    try:
        from gpuplan.catalog import load_catalog

        cat = load_catalog()
        gpu = cat.gpu(cat.system((row.get("system") or "").strip()).gpu)
        hardware = hardware_generation(gpu.vendor, gpu.architecture)
    except GpuplanError:
        pass
    architecture = UNKNOWN
    try:
        from gpuplan.models import model_from_arch_row

        architecture = "moe" if model_from_arch_row(dict(row)).moe is not None else "dense"
    except Exception:  # noqa: BLE001 - a row whose model cannot be built has no architecture class
        pass
    if kind == "training":
        engine = (row.get("framework") or "megatron").strip().lower() or "megatron"
        precision = precision_class(row.get("precision") or "")
    else:
        engine = (row.get("engine") or "other").strip().lower() or "other"
        precision = precision_class(row.get("weight_dtype") or "")
    return Regime(hardware, engine, architecture, precision)


def inventory(regimes: Iterable[Regime]) -> dict[str, list[str]]:
    """{axis: sorted values seen, "regimes": sorted regime keys seen} over `regimes`."""
    regimes = list(regimes)
    out = {a: sorted({r.value(a) for r in regimes}) for a in AXES}
    out["regimes"] = sorted({r.key for r in regimes})
    return out


@dataclass(frozen=True)
class Novelty:
    """How a prediction's regime relates to the public rows: `unseen_axes` (axes whose value no
    public row has), `unseen_regime` (no public row of its regime tuple)."""

    unseen_axes: tuple[str, ...]
    unseen_regime: bool

    @property
    def validated(self) -> bool:
        """Whether public rows of the prediction's regime (its tuple and its precision) exist."""
        return not self.unseen_axes and not self.unseen_regime


def novelty(regime: Regime, seen: Mapping[str, Sequence[str]]) -> Novelty:
    """The prediction's novelty against an `inventory`."""
    axes = tuple(a for a in AXES if regime.value(a) not in set(seen.get(a, ())))
    return Novelty(axes, regime.key not in set(seen.get("regimes", ())))


def describe(regime: Regime, nov: Novelty) -> str:
    """One line for people: validated, or which part of the regime has no public rows."""
    if nov.validated:
        return f"validated regime ({regime.hardware}, {regime.engine}, {regime.architecture}, {regime.precision})"
    if nov.unseen_axes:
        parts = ", ".join(f"{a} {regime.value(a)}" for a in nov.unseen_axes)
        return f"unvalidated regime: no public row with {parts}"
    return (f"unvalidated regime: no public row of ({regime.hardware}, {regime.engine}, {regime.architecture}) "
            "together")


__all__ = ["AXES", "REGIME_AXES", "Novelty", "Regime", "describe", "hardware_generation", "inventory", "novelty",
           "precision_class", "row_regime", "serving_regime", "training_regime"]
