"""Facilities layer (DESIGN.md): what a cluster needs around its GPUs and what it costs.

- `assumptions`: every price, power figure and threshold not in the catalog, each named, dated,
  sourced and overridable (`Assumptions.with_overrides`).
- `fabric`: rail-optimised fat-tree bill of materials (leaf / spine / core switches, cables,
  transceivers, bisection bandwidth), reproducing NVIDIA's DGX SuperPOD tables.
- `racks`: nodes per rack from rack power and space limits; rack counts.
- `cooling`: cooling class by rack power density.
- `power`: THE power model (GPU board power x activity + per-system node overhead, storage,
  switches, x PUE) and energy / electricity cost / CO2; a cluster over a year.
- `pricing`: THE price lookup ($/GPU-hour to rent, $ per node to buy) every command uses.
- `run_cost`: power, energy, CO2 and rental cost of a training run or a day of serving.
- `tco`: cloud vs on-prem total cost of ownership, breakeven months and utilisation.
- `mig`: Multi-Instance GPU profiles, placement rules and a fewest-GPUs planner.
"""
