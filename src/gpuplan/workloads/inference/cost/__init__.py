"""Cost of one serving engine step and the memory of one replica (see workloads.inference)."""
