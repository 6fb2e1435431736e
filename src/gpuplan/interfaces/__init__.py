"""Interfaces: the outermost layer (validation harness, API surfaces). Shared validation types
live in `gpuplan.interfaces.row_types` (no gpuplan imports, safe for workloads)."""
