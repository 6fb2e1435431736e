"""`gpuplan calibrate` and `gpuplan bench`: importers of tools' logs, measurement of this machine,
the profile file, the fit (plain and hierarchical)."""
