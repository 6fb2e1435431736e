"""From plan to running job and back (docs/deploy.md): launch configs written from gpuplan's plans,
and users' own launch configs read back into plans.

One module per target, each with `emit` (a plan -> the config or command, text) and `read` (that
text -> a `launch.TrainingLaunch` / `launch.ServingLaunch`), over one table of recorded option names
and versions (`options`):

  training   megatron (torchrun + pretrain_gpt.py), nemo (nemo llm pretrain recipe overrides), torchtitan
             (job-config TOML), deepspeed (config JSON), maxtext (MaxText train with base.yml overrides)
  serving    vllm (vllm serve), sglang (sglang.launch_server), trtllm (trtllm-serve + options file),
             k8s (Deployment / LeaderWorkerSet manifests of an engine's command, one per pool)
  measuring  vllm-bench, sglang-bench, trtllm-bench (bench: the benchmark client's command with the
             prediction's workload, the run configuration and the `calibrate import` line)

Fine-tuning targets (FINETUNE_TARGETS: torchtune recipe configs, PEFT / TRL script arguments) are
modules with `emit(launch: TrainingLaunch, header: str) -> str` and `read(text, model, gpus) ->
TrainingLaunch`, and an OptionTable in `options.TABLES`; the API and the CLI dispatch every name of
TRAINING_TARGETS + FINETUNE_TARGETS the same way. They write LoRA / QLoRA plans only; the other
training targets refuse a fine-tuning plan (their configs state no adapters).
"""

from __future__ import annotations

#: `train|plan|fit --emit` targets with a module in this package
TRAINING_TARGETS = ("megatron", "nemo", "torchtitan", "deepspeed", "maxtext")
#: `serve run|plan --emit` targets
SERVING_TARGETS = ("vllm", "sglang", "trtllm", "k8s", "vllm-bench", "sglang-bench", "trtllm-bench")
#: the benchmark targets (interfaces.deploy.bench): the client command measuring a prediction's workload
BENCH_TARGETS = ("vllm-bench", "sglang-bench", "trtllm-bench")
#: the fine-tuning targets (module docstring): torchtune recipe configs, PEFT / TRL script arguments
FINETUNE_TARGETS = ("torchtune", "peft")
#: the serving engine profile (workloads.inference.engines) each engine target runs
ENGINE_OF_TARGET = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt-llm"}
#: the engine each benchmark target measures
ENGINE_OF_BENCH = {"vllm-bench": "vllm", "sglang-bench": "sglang", "trtllm-bench": "tensorrt-llm"}
#: the training framework (specs.execution.Framework value) each training target models
FRAMEWORK_OF_TARGET = {"megatron": "megatron", "nemo": "megatron", "torchtitan": "torchtitan", "deepspeed": "deepspeed",
                       "maxtext": "other", "torchtune": "fsdp", "peft": "fsdp"}


def training_module(target: str):
    """The module of a training (or registered fine-tuning) target."""
    from importlib import import_module

    return import_module(f"gpuplan.interfaces.deploy.{target}")


def serving_module(target: str):
    from importlib import import_module

    return import_module(f"gpuplan.interfaces.deploy.{target}")
