"""Facilities layer (DESIGN.md): what a cluster needs around its GPUs and what it costs.

- `assumptions`: every price, power figure and threshold not in the catalog, each named, dated,
  sourced and overridable (`Assumptions.with_overrides`).
- `fabric`: rail-optimised fat-tree bill of materials (leaf / spine / core switches, cables,
  transceivers, bisection bandwidth), reproducing NVIDIA's DGX SuperPOD tables.
- `racks`: nodes per rack from rack power and space limits; rack counts.
- `cooling`: cooling class by rack power density.
- `power`: IT and facility power, annual energy, cost and CO2.
- `tco`: cloud vs on-prem total cost of ownership, breakeven months and utilisation.
- `mig`: Multi-Instance GPU profiles, placement rules and a fewest-GPUs planner.
"""
