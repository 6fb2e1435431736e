"""CLI: the training-stack options shared by `gpuplan train`, `gpuplan plan` and `gpuplan fit ...`
(`--framework`, `--compile`, `--deepspeed-release`, `--deterministic`, `--no-grad-accum-fusion`,
`--pipeline-schedule`, `--pipeline-flushes`, `--checkpoint-early-stop`, `--cuda-graph-scope`; parse only: gpuplan.api checks the values,
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
#: `--pipeline-schedule` of `train` (interfaces.api.pipeline_options; specs.execution.PipelineSchedule)
PIPELINE_SCHEDULE = typer.Option(
    None, "--pipeline-schedule",
    help="Pipeline schedule of the given plan: 1f1b (default; interleaved with --vpp > 1) or dualpipe (DeepSeek-V3's "
    "bidirectional schedule: even --pp, --vpp 1, 2x parameters per rank).")
#: `--pipeline-flushes` of `train` (interfaces.api.pipeline_options; TrainPlan.pipeline_flushes)
PIPELINE_FLUSHES = typer.Option(
    None, "--pipeline-flushes",
    help="Pipeline schedule runs per step of the given plan (default 1): torchtitan / NeMo AutoModel run the schedule "
    "once per local batch, global batch / (local batch x dp) times; each run pays the bubble and an FSDP2 gradient sync.")
#: `--deterministic` of `train` and `plan` (interfaces.api.megatron_modes)
DETERMINISTIC = typer.Option(
    False, "--deterministic",
    help="Megatron-LM --deterministic-mode: collectives without NVLink SHARP, deterministic kernels (Megatron's "
         "documented cost: ~4% dense, ~17% MoE), flash-attn's deterministic backward grid where FlashAttention-2 "
         "runs (flash2; flash below sm90); docs/training.md. Megatron only.")
#: `--no-grad-accum-fusion` of `train` and `plan` (interfaces.api.megatron_modes)
NO_GRAD_ACCUM_FUSION = typer.Option(
    False, "--no-grad-accum-fusion",
    help="Megatron-LM --no-gradient-accumulation-fusion: each weight gradient is written and added to the fp32 "
         "main_grad in a separate pass. Megatron only.")
#: `--cuda-graph-scope` of `train` (interfaces.api.megatron_modes.cuda_graph_fields; specs.execution.CudaGraphScope)
CUDA_GRAPH_SCOPE = typer.Option(
    None, "--cuda-graph-scope",
    help="Megatron-LM training CUDA graphs: none (default) or comma-separated scopes attn, mlp, moe, moe_router, "
         "moe_preprocess, mamba, or full_iteration (--cuda-graph-impl full_iteration). Only full_iteration removes a "
         "MoE layer's fixed launch / sync time in the model (docs/training.md). Megatron only.")
#: `--memory-savings` of `train` and `fit` (interfaces.api.memory_saving_options; TrainPlan.memory_savings)
MEMORY_SAVINGS = typer.Option(
    None, "--memory-savings",
    help="Memory savings of the given plan, '+'-joined (DeepSeek-V3 report sec. 3.2.3, 3.3.2): norm_recompute (norm "
    "outputs recomputed in backward), up_projection_recompute (MLA Q, K, V recomputed from the latents), "
    "expert_activation_recompute (routed experts keep the SwiGLU input in the linear-input format, recompute its "
    "output), bf16_optimizer_states (AdamW moments in BF16, fp32 master kept); or none.")
#: `--checkpoint-early-stop/--no-checkpoint-early-stop` of `train` (interfaces.api.checkpoint_early_stop_option)
CHECKPOINT_EARLY_STOP = typer.Option(
    None, "--checkpoint-early-stop/--no-checkpoint-early-stop",
    help="Full AC recompute stops once every saved tensor is rebuilt (PyTorch non-reentrant checkpoint early stop: "
         "the MLP down projection is not re-run). Default: the framework's (fsdp on; torchtitan off since its PR #1580, "
         "2025-08-29: give it for earlier torchtitan runs). Not for megatron, deepspeed, maxtext.")
