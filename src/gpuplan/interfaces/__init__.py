"""Interfaces: the outermost layer (validation harness, API surfaces). Shared validation types
live in `gpuplan.interfaces.validation_types` (no gpuplan imports, safe for workloads)."""
