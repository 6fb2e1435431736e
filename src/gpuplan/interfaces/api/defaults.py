"""The defaults of the API's options (docs/options.md is the table of them), in a module that
imports nothing: the CLI reads them to build its options (`--help`) without importing the API.

Each figure is used by the function named beside it; those modules import it from here.
"""

from __future__ import annotations

#: every command that takes a model, a system or a GPU (interfaces.api._common)
DEFAULT_MODEL = "gpt3-175b"
DEFAULT_SYSTEM = "dgx-h100"
DEFAULT_GPU = "h100-sxm5-80gb"

#: `gpuplan train` (interfaces.api.training)
DEFAULT_GPUS = 1024
DEFAULT_TOKENS = "300B"  # GPT-3's training set (Brown et al. 2020, Table 2.1)

#: request shape of every serving command (interfaces.api.serving)
DEFAULT_INPUT_LEN = 2048
DEFAULT_OUTPUT_LEN = 256
#: serving objectives shared by `serve plan` and `plan --goal serve`
DEFAULT_RATE = 10.0
DEFAULT_TTFT_MS = 2000.0
DEFAULT_TPOT_MS = 50.0
#: the serving engine profile used when none is named: workloads.inference.engines.GENERIC.name
#: (tests/api/test_lazy_api.py checks the two agree)
DEFAULT_ENGINE = "generic"

#: `gpuplan formats compare` and `formats matmul` (interfaces.api.formats)
DEFAULT_COMPARE = "mxfp4,nvfp4,mxfp6_e2m3,mxfp8_e4m3,fp8_e4m3,bf16"
DEFAULT_MATMUL = "mxfp8_e4m3,mxfp8_e5m2,mxfp6_e2m3,mxfp4,mxint8,nvfp4"

#: `gpuplan validate --builtin NAME`: the shipped validation sets, catalog.validation_sets.VALIDATION_SETS
#: (tests/api/test_lazy_api.py checks the two agree)
VALIDATION_SETS: tuple[str, ...] = ("training", "inference", "collectives")
