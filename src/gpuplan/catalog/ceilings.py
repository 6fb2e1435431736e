"""Measured hardware ceilings (catalog/data/ceilings.toml) as knobs of the one registry.

Each entry of the table is a published microbenchmark of one part (or one generation), never a
gpuplan validation row. Loading this module registers, for primitives.efficiency to read:

- `efficiency.matmul_ceiling.<gpu>.<dtype>` = achieved / catalog dense peak ([[gemm]]);
- `efficiency.matmul_ceiling.family.<family>` = the same fraction of the entry marked `family`
  (the generation's measured flagship, for parts without their own measurement);
- `efficiency.hbm_stream.<gpu>` and `efficiency.hbm_stream.family.<family>` = measured STREAM-copy
  bandwidth / catalog peak ([[hbm]]), and `efficiency.hbm_stream.reference`, the H100 SXM copy
  fraction: the part at which the achievable-bandwidth knob `efficiency.hbm` applies unscaled
  (aiconfigurator's h100_sxm `mem_bw_empirical_scaling_factor: 0.8`; gpuplan's default GPU), against
  which primitives.efficiency scales each part's own measurement;
- `efficiency.attention_ceiling.<family>` ([[attention]]);
- `efficiency.sustained_gemm.<gpu>.<dtype>` = best GEMM rate after a long warm-up / the part's short-run
  [[gemm]] best in that dtype ([[gemm_sustained]]): the share of its measured ceiling a part keeps under a
  steady load (clocks settle at the power limit), `efficiency.sustained_gemm.family.<family>` for the
  generation's measured flagship, and `efficiency.sustained_gemm.reference`, the A100 SXM's: the part whose
  training rows fitted `training.sustained_gemm_fraction`, against which workloads.training.step.compute
  scales each generation's (sustained_gemm.family / sustained_gemm.reference).

The table is parsed once per content and kept in the user's cache dir (catalog.disk_cache).
This module imports nothing of gpuplan's but the knob registry and the disk cache (the catalog package imports it,
so every process that reads a catalog part has these knobs); a knob is a default a calibration
profile or a cross-validation fold can override (`gpuplan calibrate knobs` lists each with its source).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuplan import knobs

CEILINGS_FILE = Path(__file__).with_name("data") / "ceilings.toml"
_GEMM_KEYS = {"gpu", "dtype", "achieved_tflops", "peak_tflops", "family", "source"}
_HBM_KEYS = {"gpu", "achieved_gbps", "peak_gbps", "family", "source"}
_ATTENTION_KEYS = {"family", "fraction", "source"}
_SUSTAINED_KEYS = {"gpu", "dtype", "sustained_tflops", "family", "source"}
#: the part whose measured copy fraction stands behind `efficiency.hbm` (module docstring)
HBM_REFERENCE_PARTS = ("h100-sxm5-80gb",)
#: the part whose sustained GEMM share stands behind `training.sustained_gemm_fraction` (fitted on
#: Megatron A100 rows; module docstring)
SUSTAINED_REFERENCE_PART = "a100-sxm4-80gb"
_GEMM_SCALES = "every GEMM on this part in this dtype (training and serving): achieved = dense peak x ceiling x shape factor"


@dataclass(frozen=True)
class Measured:
    """One table entry: what was measured (achieved) against which peak, and where it was published."""

    key: str  # catalog GPU id (or id prefix) the entry measures
    dtype: str | None  # GEMM dtype; None for bandwidth
    achieved: float  # TFLOP/s or GB/s
    peak: float  # the catalog's dense peak / bandwidth of that part
    family: str | None  # generation this entry stands for, if any
    source: str

    @property
    def fraction(self) -> float:
        return self.achieved / self.peak


def _check(entry: dict, allowed: set[str], table: str) -> None:
    required = allowed - {"family"}
    missing, unknown = required - set(entry), set(entry) - allowed
    if missing or unknown:
        raise ValueError(f"ceilings.toml [[{table}]] {entry.get('gpu', entry.get('family'))}: "
                         f"missing {sorted(missing)}, unknown {sorted(unknown)}; allowed: {sorted(allowed)}")


def load_table(path: Path = CEILINGS_FILE) -> dict:
    """{"gemm": [Measured], "hbm": [Measured], "attention": [(family, fraction, source)],
    "gemm_sustained": [Measured whose `peak` is the part's short-run [[gemm]] best], "sources": {...}}."""
    try:  # Python 3.11+
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    sources = raw.get("sources", {})

    def cite(text: str) -> str:
        key = text.split(":", 1)[0]
        return f"{text} [{sources[key]['title']}]" if key in sources else text

    gemm, hbm = [], []
    for e in raw.get("gemm", []):
        _check(e, _GEMM_KEYS, "gemm")
        gemm.append(Measured(e["gpu"], e["dtype"], float(e["achieved_tflops"]), float(e["peak_tflops"]),
                             e.get("family"), cite(e["source"])))
    for e in raw.get("hbm", []):
        _check(e, _HBM_KEYS, "hbm")
        hbm.append(Measured(e["gpu"], None, float(e["achieved_gbps"]), float(e["peak_gbps"]), e.get("family"),
                            cite(e["source"])))
    attention = []
    for e in raw.get("attention", []):
        _check(e, _ATTENTION_KEYS, "attention")
        attention.append((e["family"], float(e["fraction"]), cite(e["source"])))
    short_run = {(m.key, m.dtype): m for m in gemm}
    sustained = []
    for e in raw.get("gemm_sustained", []):
        _check(e, _SUSTAINED_KEYS, "gemm_sustained")
        best = short_run.get((e["gpu"], e["dtype"]))
        if best is None:
            raise ValueError(f"ceilings.toml [[gemm_sustained]] {e['gpu']} {e['dtype']}: no [[gemm]] entry of that "
                             "part and dtype to stand against")
        sustained.append(Measured(e["gpu"], e["dtype"], float(e["sustained_tflops"]), best.achieved, e.get("family"),
                                  f"{cite(e['source'])}; short-run {best.source}"))
    return {"gemm": gemm, "hbm": hbm, "attention": attention, "gemm_sustained": sustained, "sources": sources}


def own_measurement(gpu, table_name: str, dtype: str | None = None) -> Measured | None:
    """The part's own entry of TABLE[table_name] ("gemm" in `dtype`, or "hbm"), matched by
    `Gpu.measured_part`; None where the part was not measured (a generation's entry standing in for it does
    not count: it is not this part's measurement)."""
    entries = [m for m in TABLE[table_name] if m.dtype == dtype]
    key = gpu.measured_part(m.key for m in entries)
    return next((m for m in entries if m.key == key), None) if key else None


def _register(table: dict) -> None:
    for m in table["gemm"]:
        src = f"{m.source}: {m.achieved:g} of {m.peak:g} TFLOP/s"
        # a GeForce part's rated peak is quoted at its rated boost clock, which GPU Boost exceeds: its
        # measured fraction may pass 1 (the RTX 3090 entry)
        knobs.register(f"efficiency.matmul_ceiling.{m.key}.{m.dtype}", unit="fraction of dense peak",
                       default=m.fraction, low=0.2, high=max(1.0, m.fraction), source=src, scales=_GEMM_SCALES)
        if m.family and m.dtype == "bf16":
            knobs.register(f"efficiency.matmul_ceiling.family.{m.family}", unit="fraction of dense peak",
                           default=m.fraction, low=0.2, high=1.0, source=f"{m.key}, {src}",
                           scales=f"bf16 GEMMs on {m.family} parts without a measurement of their own")
    for m in table["hbm"]:
        src = f"{m.source}: {m.achieved:g} of {m.peak:g} GB/s"
        knobs.register(f"efficiency.hbm_stream.{m.key}", unit="fraction of peak bandwidth", default=m.fraction,
                       low=0.3, high=1.0, source=src,
                       scales="this part's achievable HBM bandwidth relative to the reference parts "
                              "(primitives.efficiency.hbm_efficiency)")
        if m.family:
            knobs.register(f"efficiency.hbm_stream.family.{m.family}", unit="fraction of peak bandwidth",
                           default=m.fraction, low=0.3, high=1.0, source=f"{m.key}, {src}",
                           scales=f"achievable HBM bandwidth of {m.family} HBM parts without a measurement of their own")
    ref = [m for m in table["hbm"] if m.key in HBM_REFERENCE_PARTS]
    if len(ref) == len(HBM_REFERENCE_PARTS):
        knobs.register("efficiency.hbm_stream.reference", unit="fraction of peak bandwidth",
                       default=sum(m.fraction for m in ref) / len(ref), low=0.3, high=1.0,
                       source="BabelStream copy fraction of " + ", ".join(
                           f"{m.key} {m.achieved:g}/{m.peak:g}" for m in ref)
                       + " (the part of aiconfigurator's h100_sxm mem_bw_empirical_scaling_factor 0.8 = efficiency.hbm)",
                       scales="the measured copy fraction at which efficiency.hbm applies unscaled")
    for m in table["gemm_sustained"]:
        src = f"{m.source}: sustained {m.achieved:g} of short-run {m.peak:g} TFLOP/s"
        scales = "share of the part's short-run GEMM ceiling kept under a steady load (training step time)"
        knobs.register(f"efficiency.sustained_gemm.{m.key}.{m.dtype}", unit="fraction of the short-run ceiling",
                       default=m.fraction, low=0.3, high=1.0, source=src, scales=scales)
        if m.family:
            knobs.register(f"efficiency.sustained_gemm.family.{m.family}", unit="fraction of the short-run ceiling",
                           default=m.fraction, low=0.3, high=1.0, source=f"{m.key} {m.dtype}, {src}",
                           scales=f"{scales}, on {m.family} parts")
        if m.key == SUSTAINED_REFERENCE_PART:
            knobs.register("efficiency.sustained_gemm.reference", unit="fraction of the short-run ceiling",
                           default=m.fraction, low=0.3, high=1.0, source=f"{m.key} {m.dtype}, {src}",
                           scales="the sustained share at which training.sustained_gemm_fraction applies unscaled")
    for family, fraction, source in table["attention"]:
        knobs.register(f"efficiency.attention_ceiling.{family}", unit="fraction of dense peak", default=fraction,
                       low=0.05, high=1.0, source=source,
                       scales=f"FlashAttention-class attention core (serving, op_cost.attention_time) on {family}")


def _cached_table() -> dict:
    """`load_table()`, kept on disk per content of ceilings.toml and this module (catalog.disk_cache)."""
    from gpuplan.catalog import disk_cache

    key = disk_cache.content_key([CEILINGS_FILE], code=("catalog/ceilings.py", "catalog/disk_cache.py"))
    table = disk_cache.load("ceilings", key)
    if not isinstance(table, dict):
        table = load_table()
        disk_cache.store("ceilings", key, table)
    return table


TABLE = _cached_table()
_register(TABLE)

__all__ = ["CEILINGS_FILE", "HBM_REFERENCE_PARTS", "Measured", "SUSTAINED_REFERENCE_PART", "TABLE", "load_table", "own_measurement"]
