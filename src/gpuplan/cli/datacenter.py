"""CLI: `gpuplan dc fabric | power | tco | assumptions` (cluster fabric, power and cooling, TCO).
Parses, calls `gpuplan.api.dc_*`, renders."""

from __future__ import annotations

from typing import List, Optional

import typer

from gpuplan import api
from gpuplan.cli.render import console, fmt, print_json, table

dc = typer.Typer(help="Data centre: fabric bill of materials, racks, power and cooling, TCO (cloud vs on-prem).",
                 no_args_is_help=True)

_SYSTEM = typer.Option(api.DEFAULT_SYSTEM, "--system", help="Catalog system id (dgx-h100, dgx-b200, dgx-a100-80gb, ...).")
_NODES = typer.Option(None, "--nodes", help="Number of nodes (overrides --scalable-units).")
_SU = typer.Option(None, "--scalable-units", help="Scalable units (32 eight-GPU nodes each, as DGX SuperPOD).")
_SET = typer.Option(None, "--set", help="Override an assumption, KEY=VALUE (repeatable; see `gpuplan dc assumptions`).")
_JSON = typer.Option(False, "--json", help="Print JSON.")


_PRICE_KWH = typer.Option(None, "--electricity-usd-per-kwh", help="Electricity price, $/kWh (default 0.10).")
_PRICE_KWH_OLD = typer.Option(None, "--price-kwh", hidden=True)  # old spelling of --electricity-usd-per-kwh
_PUE = typer.Option(None, "--pue", help="Power usage effectiveness, >= 1 (default 1.3; same as --set pue=).")


@dc.command("fabric")
def fabric_cmd(
    system: str = _SYSTEM, nodes: Optional[int] = _NODES, scalable_units: Optional[float] = _SU,
    oversubscription: float = typer.Option(1.0, "--oversubscription", help="Leaf down:up port ratio (1 = non-blocking)."),
    management_ports: int = typer.Option(0, "--management-ports", help="Extra leaf ports for UFM/management appliances (the H100 RA uses 4)."),
    radix: Optional[int] = typer.Option(None, "--radix", help="Switch ports (default 64, NDR)."),
    set_: Optional[List[str]] = _SET, as_json: bool = _JSON,
) -> None:
    """Rail-optimised fat tree: leaf/spine/core switches, cables, transceivers, bisection bandwidth, racks."""
    result = api.dc_fabric(system, nodes, scalable_units=scalable_units, oversubscription=oversubscription,
                           management_ports=management_ports, radix=radix, overrides=set_)
    if as_json:
        print_json(result.to_dict())
        return
    f, r = result.cluster.fabric, result.cluster.racks
    console.print(table(f"{system}: {f.nodes} nodes, {f.gpus} GPUs, {f.scalable_units:g} SU, {f.tiers_count}-tier fat tree "
                        f"(radix {f.switch_radix_ports}, {f.rails} rails)",
                        ["item", "count"], [
        ("leaf switches", f.leaf_switches), ("spine switches", f.spine_switches), ("core switches", f.core_switches),
        ("node-leaf cables", f.node_leaf_cables), ("leaf-spine cables", f.leaf_spine_cables),
        ("spine-core cables", f.spine_core_cables), ("cables (all)", f.cables), ("transceivers", f.transceivers),
        ("bisection (Tbit/s)", f.bisection_tbit_s), ("bisection (TB/s)", f.bisection_tbps),
        ("nodes per rack", f"{r.nodes_per_rack} ({r.limited_by}-limited)"), ("compute racks", r.compute_racks),
        ("network racks", r.network_racks), ("compute rack kW", r.compute_rack_kw), ("cooling", r.cooling.value),
    ]))


@dc.command("power")
def power_cmd(
    system: str = _SYSTEM, nodes: Optional[int] = _NODES, scalable_units: Optional[float] = _SU,
    electricity_usd_per_kwh: Optional[float] = _PRICE_KWH, price_kwh: Optional[float] = _PRICE_KWH_OLD,
    pue: Optional[float] = _PUE,
    grid_kg_co2_per_kwh: Optional[float] = typer.Option(None, "--grid-kg-co2-per-kwh", help="Grid carbon intensity, kg CO2/kWh (default 0.39)."),
    grid_kg_per_kwh: Optional[float] = typer.Option(None, "--grid-kg-per-kwh", hidden=True),
    no_fabric: bool = typer.Option(False, "--no-fabric", help="Count the nodes only, not fabric switches."),
    no_storage: bool = typer.Option(False, "--no-storage", help="Leave out the storage power share."),
    utilization: Optional[float] = typer.Option(None, "--utilization", help="Fraction of hours the cluster is busy, "
                                                "for its average draw (default 0.7: assumption "
                                                "energy_utilization_fraction)."),
    set_: Optional[List[str]] = _SET, as_json: bool = _JSON,
) -> None:
    """IT and facility power, annual energy, electricity cost and CO2 (nameplate all year, and the
    average draw at --utilization with nodes at the measured loaded fraction of nameplate)."""
    result = api.dc_power(system, nodes, scalable_units=scalable_units, electricity_usd_per_kwh=electricity_usd_per_kwh,
                          price_kwh=price_kwh, pue=pue, grid_kg_co2_per_kwh=grid_kg_co2_per_kwh,
                          grid_kg_per_kwh=grid_kg_per_kwh, fabric=not no_fabric, storage=not no_storage, overrides=set_,
                          utilization=utilization)
    if as_json:
        print_json(result.to_dict())
        return
    p, r = result.cluster.power, result.cluster.racks
    console.print(table(f"{system}: {p.nodes} nodes", ["quantity", "value"], [
        ("node power (kW)", p.node_power_kw), ("nodes (kW)", p.nodes_power_kw),
        (f"switches x{p.switches} (kW)", p.switch_power_kw), ("storage share (kW)", p.storage_power_kw),
        ("IT power (kW)", p.it_power_kw), ("IT power idle (kW)", p.idle_it_power_kw), ("PUE", p.pue), ("facility power (kW)", p.facility_power_kw),
        ("annual energy (kWh)", p.annual_energy_kwh), ("$/kWh", p.electricity_usd_per_kwh),
        ("annual cost ($)", p.annual_cost_usd), ("annual cost at PUE 1 ($)", p.it_only_annual_cost_usd),
        ("annual CO2 (t)", p.annual_co2_tonnes),
        (f"average draw: loaded IT (kW, nodes at {p.loaded_power_fraction_of_nameplate:.0%} of nameplate)",
         p.loaded_it_power_kw),
        (f"average draw: IT / facility (kW) at {p.utilization:.0%} utilisation",
         f"{fmt(p.average_it_power_kw)} / {fmt(p.average_facility_power_kw)}"),
        ("average draw: annual energy (kWh)", p.average_annual_energy_kwh),
        ("average draw: annual cost ($)", p.average_annual_cost_usd),
        ("average draw: annual CO2 (t)", p.average_annual_co2_tonnes),
        ("compute rack kW", r.compute_rack_kw), ("cooling", r.cooling.value),
    ]))
    console.print("annual energy, cost and CO2 above the average-draw rows: nameplate all year (the provisioning "
                  "view); the average draw: idle + (loaded - idle) x utilisation (facilities.power; "
                  "--set loaded_power_fraction_of_nameplate=1 for nameplate)")


@dc.command("tco")
def tco_cmd(
    system: str = _SYSTEM, nodes: Optional[int] = _NODES, scalable_units: Optional[float] = _SU,
    years: float = typer.Option(4.0, "--years", help="Depreciation period, years."),
    utilization: float = typer.Option(0.7, "--utilization", help="Fraction of hours the GPUs are busy (0-1]."),
    cloud_usd_per_gpu_hour: Optional[float] = typer.Option(None, "--cloud-usd-per-gpu-hour", help="Cloud price (default: cheapest catalog on-demand)."),
    system_price_usd: Optional[float] = typer.Option(None, "--system-price-usd", help="Price of one node."),
    electricity_usd_per_kwh: Optional[float] = _PRICE_KWH, price_kwh: Optional[float] = _PRICE_KWH_OLD,
    pue: Optional[float] = _PUE,
    set_: Optional[List[str]] = _SET, as_json: bool = _JSON,
) -> None:
    """Cloud vs on-prem: capex, opex, effective $/GPU-hour, breakeven months and utilisation."""
    result = api.dc_tco(system, nodes, scalable_units=scalable_units, years=years, utilization=utilization,
                        cloud_usd_per_gpu_hour=cloud_usd_per_gpu_hour, system_price_usd=system_price_usd,
                        electricity_usd_per_kwh=electricity_usd_per_kwh, price_kwh=price_kwh, pue=pue, overrides=set_)
    if as_json:
        print_json(result.to_dict())
        return
    rep = result.cluster
    t = rep.tco
    rows = [(f"capex: {k}", v) for k, v in t.capex_breakdown_usd.items()] + [("capex ($)", t.capex_usd)]
    rows += [(f"opex/yr: {k}", v) for k, v in t.opex_breakdown_usd_per_year.items()] + [("opex per year ($)", t.opex_usd_per_year)]
    rows += [("residual value ($)", t.residual_value_usd), (f"on-prem total over {t.years:g} y ($)", t.on_prem_total_usd),
             ("GPU-hours used", t.gpu_hours), ("on-prem $/GPU-hour", t.on_prem_usd_per_gpu_hour),
             (f"cloud $/GPU-hour ({_headline(t)})", t.cloud_usd_per_gpu_hour), ("cloud total ($)", t.cloud_total_usd),
             ("savings on-prem vs cloud ($)", t.savings_usd), ("breakeven (months)", t.breakeven_months),
             ("breakeven utilisation", t.breakeven_utilization)]
    console.print(table(f"{system}: {t.nodes} nodes, {t.gpus} GPUs, {t.years:g} years at {t.utilization:.0%}", ["item", "value"], rows,
                        name="tco"))
    console.print(f"cloud price: {t.cloud_price_source}")
    if t.cloud_comparison:
        console.print(table("on-prem vs each cloud offer, like for like: one row per provider and term (a provider's "
                            "reservation under its own on-demand price)",
                            ["provider", "instance", "term", "usd_per_gpu_hour", "cloud_total_usd", "savings_usd",
                             "breakeven_months", "date"],
                            [(o.provider, o.instance, o.term, o.usd_per_gpu_hour, o.cloud_total_usd, o.savings_usd,
                              o.breakeven_months, o.date) for o in t.cloud_comparison], name="clouds"))
    if t.cloud_reserved_label:
        how = "the same provider" if t.cloud_reserved_same_provider else "another provider than the headline price"
        console.print(f"reserved price beside it: {fmt(t.cloud_reserved_usd_per_gpu_hour)} $/GPU-hour, "
                      f"{t.cloud_reserved_label} ({how})")
    for note in t.notes:
        console.print(f"note: {note}")
    _print_assumptions(rep.assumptions + rep.prices[:1])


def _headline(t) -> str:
    """Who offers the headline cloud price, on what term (its source's first words)."""
    return t.cloud_price_source.split(":", 1)[0]


def _print_assumptions(rows) -> None:
    console.print(table("assumptions (override with --set KEY=VALUE)", ["key", "value", "source", "date"],
                        [(r["key"], fmt(r["value"]), r["source"], r["date"]) for r in rows], keep_whole=1,
                        name="assumptions"))


@dc.command("assumptions")
def assumptions_cmd(set_: Optional[List[str]] = _SET, as_json: bool = _JSON) -> None:
    """Every facilities / cost assumption with its value, source and date."""
    result = api.dc_assumptions(set_)
    if as_json:
        print_json(result.to_dict())
        return
    _print_assumptions(result.rows)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(dc, name="dc")
