"""The serving simulation: workload, schedulers, the discrete-event simulator (see workloads.inference)."""
