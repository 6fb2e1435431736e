"""Training workloads: memory per GPU, step time, plan search (one concept per module)."""
