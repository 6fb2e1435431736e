"""Cooling class of a rack from its power density.

Thresholds (kW per rack) are assumptions (`air_cooling_max_kw_per_rack`,
`assisted_air_max_kw_per_rack`): conventional air up to ~30 kW, air with hot/cold-aisle
containment or rear-door heat exchangers up to ~50 kW, direct-to-chip liquid above (seed module
004: "Air cooling: up to 30-40 kW/rack; Liquid cooling: 50+ kW/rack"; the DGX H100 SuperPOD RA runs
~41 kW air-cooled racks). A rack-scale liquid system (GB200 NVL72, ~120 kW) is liquid by design.
"""

from __future__ import annotations

from enum import Enum

from gpuplan.facilities.assumptions import DEFAULT_ASSUMPTIONS, Assumptions


class CoolingClass(str, Enum):
    AIR = "air"
    ASSISTED_AIR = "air with containment / rear-door heat exchanger"
    LIQUID = "direct liquid cooling"


def cooling_class(rack_kw: float, assumptions: Assumptions = DEFAULT_ASSUMPTIONS) -> CoolingClass:
    """AIR if rack_kw <= air max, ASSISTED_AIR if <= assisted max, else LIQUID."""
    if rack_kw <= assumptions.air_cooling_max_kw_per_rack:
        return CoolingClass.AIR
    if rack_kw <= assumptions.assisted_air_max_kw_per_rack:
        return CoolingClass.ASSISTED_AIR
    return CoolingClass.LIQUID
