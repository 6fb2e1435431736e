"""`gpuplan plan` and `gpuplan dc`: from a model and a system to a costed cluster."""
