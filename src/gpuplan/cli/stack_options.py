"""CLI: the training-stack options shared by `gpuplan train`, `gpuplan plan` and `gpuplan fit ...`
(`--framework`, `--compile`, `--deepspeed-release`, `--deterministic`, `--no-grad-accum-fusion`; parse only: gpuplan.api checks the values,
interfaces.api.framework_choice). One typer declaration of each, as cli/fine_tuning_options.py
shares the fine-tuning options."""

from __future__ import annotations

import typer

#: `--compile` of `train`, `plan` and `fit` (interfaces.api.compile_option)
COMPILE = typer.Option(
    None, "--compile", help="torch.compile: none, model, loss or model+loss (torchtitan's compile.components; "
    "needs --framework torchtitan; default: the framework's, off).")
#: `--framework` of `train` and `plan` (gpuplan.specs.execution.Framework)
FRAMEWORK = typer.Option(
    None, "--framework",
    help="megatron, deepspeed, fsdp, torchtitan, maxtext, transformers (Hugging Face modules in eager PyTorch: "
         "HF Trainer, TRL, PEFT) (default: maxtext on TPU pods, megatron elsewhere).")
#: `--deepspeed-release` of `train` and `plan` (interfaces.api.deepspeed_release)
DEEPSPEED_RELEASE = typer.Option(
    None, "--deepspeed-release",
    help="DeepSpeed engine of --framework deepspeed: current (default, v0.6.0 on: coalesced ZeRO-3 gathers) "
    "or a version; below 0.6 (e.g. 0.5) runs the 2021 ZeRO-3 engine (one gather per weight matrix).")
#: `--deterministic` of `train` and `plan` (interfaces.api.megatron_modes)
DETERMINISTIC = typer.Option(
    False, "--deterministic",
    help="Megatron-LM --deterministic-mode: collectives without NVLink SHARP, deterministic kernels (Megatron's "
         "documented cost: ~4% dense, ~17% MoE; docs/training.md). Megatron only.")
#: `--no-grad-accum-fusion` of `train` and `plan` (interfaces.api.megatron_modes)
NO_GRAD_ACCUM_FUSION = typer.Option(
    False, "--no-grad-accum-fusion",
    help="Megatron-LM --no-gradient-accumulation-fusion: each weight gradient is written and added to the fp32 "
         "main_grad in a separate pass. Megatron only.")
