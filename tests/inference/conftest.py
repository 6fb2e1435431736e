"""The serving tests run the kernels compiled, as before they could run interpreted
(workloads/inference/jit.py): compiled here, before the test modules import the loops by name.
tests/inference/test_kernel_tiers.py runs them interpreted in fresh interpreters and compares."""

from gpuplan.workloads.inference import jit

jit.compile_kernels()
