"""`gpuplan sweep`: co-design and what-if sweeps (many training searches or serving plans), the same
on a laptop's process pool and on a Ray cluster, resumable, with Pareto fronts (docs/sweeps.md).

- `spec`: the TOML spec, validated (pydantic); `hardware`: catalog nodes and hypothetical variants;
  `points`: cartesian / random / Latin-hypercube points; `evaluate`: one row per point;
  `backends`: local process pool, Ray; `store`: part files, resume, atomic output; `runner`: the
  loop; `report`: Pareto fronts and plots.
"""

from gpuplan.interfaces.sweep.report import SweepReport, pareto_front, sweep_report
from gpuplan.interfaces.sweep.runner import DryRun, Prepared, SweepSummary, dry_run, prepare, run, run_sweep
from gpuplan.interfaces.sweep.spec import SweepSpec, load_spec, parse_spec

__all__ = ["SweepSpec", "load_spec", "parse_spec", "Prepared", "prepare", "run", "run_sweep", "dry_run", "DryRun",
           "SweepSummary", "SweepReport", "sweep_report", "pareto_front"]
