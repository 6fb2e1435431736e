"""`gpuplan validate`: per-kind row predictors, the runner, error statistics, cross-validation and
the error bands derived from it."""
