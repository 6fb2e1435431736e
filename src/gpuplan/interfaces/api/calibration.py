"""`gpuplan.api.calibrate_knobs`: the registry of efficiency knobs (gpuplan.knobs), every module that
declares knobs loaded (interfaces.knob_catalog)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.interfaces.api._common import Result


@dataclass(frozen=True)
class KnobsResult(Result):
    """`calibrate_knobs`: the knobs (gpuplan.knobs.Knob), in registry order."""

    knobs: tuple

    def json_data(self) -> dict:
        return {"count": len(self.knobs), "fitted_count": sum(k.fitted for k in self.knobs),
                "knobs": [k.to_dict() for k in self.knobs]}


def calibrate_knobs(fitted: bool = False) -> KnobsResult:
    """Every efficiency knob: name, unit, default and its source, value in effect, physical range,
    what it scales and, for fitted knobs, the validation families it was chosen on (`fitted`: only those)."""
    from gpuplan.interfaces.knob_catalog import load_all

    return KnobsResult(tuple(k for k in load_all().values() if k.fitted or not fitted))
