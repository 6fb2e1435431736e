"""CLI: the fine-tuning options shared by `gpuplan fit ...` and `gpuplan train` (parse and render only).

`fine_tuning_options(args)` collects `--finetune --lora-rank --lora-targets --lora-dropout
--base-dtype --double-quant --optimizer --optimizer-impl --offload --master-weights --chunked-loss --offload-activations
--base-matmul-keeps-input --optimizer-in-backward --logits-held-in-backward --fused-qkv-views --quantized-head
--loss-chunk-tokens` into the dict
`gpuplan.api` takes as `fine_tuning` (it validates them); `print_fine_tuning(rec)` prints the
fine-tuning lines of a `fit train` record.
"""

from __future__ import annotations

from typing import Any

import typer

from gpuplan.cli.render import console
from gpuplan.specs.choices import FineTuneMethod, MasterWeights, Offload, Optimizer, OptimizerImpl  # noqa: F401

#: the option names (python identifiers) that make up the `fine_tuning` record
FINE_TUNING_OPTIONS = ("finetune", "lora_rank", "lora_targets", "lora_dropout", "base_dtype", "double_quant",
                       "optimizer", "optimizer_impl", "offload", "master_weights", "chunked_loss", "offload_activations",
                       "base_matmul_keeps_input", "optimizer_in_backward", "logits_held_in_backward",
                       "fused_qkv_views", "quantized_head", "loss_chunk_tokens")
GIB = 2**30

# The typer declarations, one of each, shared by `fit ...` and `train` (a typer.Option may serve
# several commands: serve.py shares its length options the same way).
GRAD_ACCUM = typer.Option(None, "--grad-accum", min=1,
                          help="Micro-batches per step: global batch = micro-batch x grad-accum x dp.")
FINETUNE = typer.Option(FineTuneMethod.FULL, "--finetune",
                        help="full, lora or qlora (frozen 4-bit base); `train` evaluates the given plan (dp = GPUs unless set).")
LORA_RANK = typer.Option(None, "--lora-rank", min=1, help="LoRA rank r (default 8, PEFT's).")
LORA_TARGETS = typer.Option(None, "--lora-targets",
                            help="attn, qv (default), all_linear, or a '+'-joined list such as q_proj+v_proj+down_proj.")
LORA_DROPOUT = typer.Option(None, "--lora-dropout", help="LoRA dropout (default 0).")
BASE_DTYPE = typer.Option(None, "--base-dtype",
                          help="Frozen base storage: bf16, fp16, fp32, int8, nf4, fp4 (default: nf4 for qlora, else bf16).")
DOUBLE_QUANT = typer.Option(True, "--double-quant/--no-double-quant", help="4-bit block scales quantised to 8 bits.")
OPTIMIZER = typer.Option(Optimizer.ADAMW, "--optimizer",
                         help="adamw, adamw_8bit, paged_adamw_8bit, adamw_4bit, adafactor, sgd, lion.")
OPTIMIZER_IMPL = typer.Option(
    None, "--optimizer-impl",
    help="AdamW implementation: loop (per-tensor eager kernels: HF adamw_hf, torch foreach=False), foreach "
         "(torch.optim multi-tensor), fused (default: one fused pass).")
OFFLOAD = typer.Option(Offload.NONE, "--offload",
                       help="none, optimizer (ZeRO-Offload), params (FSDP CPU offload), nvme.")
MASTER_WEIGHTS = typer.Option(MasterWeights.FP32, "--master-weights",
                              help="fp32 (mixed precision) or none (pure bf16: weights, grads and moments in bf16).")

CHUNKED_LOSS = typer.Option(False, "--chunked-loss/--no-chunked-loss",
                            help="Output head and cross-entropy in chunks (torchtune CEWithChunkedOutputLoss): no fp32 copy of all logits.")
OFFLOAD_ACTIVATIONS = typer.Option(False, "--offload-activations/--no-offload-activations",
                                   help="Saved activations copied to host memory until backward (torchtune OffloadActivations).")

BASE_MATMUL_KEEPS_INPUT = typer.Option(
    False, "--base-matmul-keeps-input/--no-base-matmul-keeps-input",
    help="Each 4-bit base matmul keeps its input for backward, as bitsandbytes before 0.43.2 did (qlora only).")

OPTIMIZER_IN_BACKWARD = typer.Option(
    False, "--optimizer-in-backward/--no-optimizer-in-backward",
    help="Step each parameter's optimizer as its gradient arrives and free it (torchtune optimizer_in_bwd; one micro-batch per step).")

LOGITS_HELD_IN_BACKWARD = typer.Option(
    False, "--logits-held-in-backward/--no-logits-held-in-backward",
    help="The training loop keeps the model's fp32 logits until backward ends (Answer.AI fsdp_qlora train.py; "
         "LitGPT, whose Fabric wrapper returns them in fp32).")

FUSED_QKV_VIEWS = typer.Option(
    False, "--fused-qkv-views/--no-fused-qkv-views",
    help="q, k and v split from one fused projection by views, one LoRA over it (LitGPT's attention).")


QUANTIZED_HEAD = typer.Option(
    False, "--quantized-head/--no-quantized-head",
    help="The output head is stored like the quantised base and dequantised for its matmuls "
         "(Lightning BitsandbytesPrecision, LitGPT --quantize bnb.*).")

LOSS_CHUNK_TOKENS = typer.Option(
    None, "--loss-chunk-tokens", min=1,
    help="With --chunked-loss: tokens per chunk of the output head (LitGPT lm_head_chunk_size=128); "
         "default: 8 chunks (torchtune).")


def fine_tuning_options(args: dict[str, Any]) -> dict[str, Any]:
    """The `fine_tuning` dict of the given options (enum members as their values; unset ones left out)."""
    out = {}
    for name in FINE_TUNING_OPTIONS:
        value = args.get(name)
        if value is None:
            continue
        out[name] = getattr(value, "value", value)
    if out.get("finetune", "full") == "full":
        out.pop("double_quant", None)  # a flag with a default: meaningful only with a 4-bit base
    for flag in ("base_matmul_keeps_input", "logits_held_in_backward", "fused_qkv_views", "quantized_head"):  # off by default: left out unless set
        if not out.get(flag):
            out.pop(flag, None)
    return out


def print_fine_tuning(rec: dict[str, Any]) -> None:
    """The fine-tuning lines of a `fit train` record: what trains, bytes per trainable parameter,
    paged optimizer states and offloaded bytes (neither counted in the total)."""
    b = rec["bytes_per_param"]
    frozen = "" if rec["fine_tuning"].startswith("full") else "; the frozen base is in `weights` at its storage bytes"
    console.print(f"fine-tuning: {rec['fine_tuning']}; {rec['trainable_params_per_gpu']:,} trainable parameters per GPU "
                  f"at {b['weights']:g} (weights) + {b['gradients']:g} (grads) + {b['optimizer']:.4g} (optimizer) "
                  f"B each before sharding{frozen}")
    if rec["paged_optimizer_bytes"]:
        console.print(f"paged optimizer states: {rec['paged_optimizer_gib']:.2f} GiB in CUDA unified memory "
                      f"(outside PyTorch's allocated figure; not counted against fits)")
    if rec["host_offload_bytes"]:
        console.print(f"offloaded to the host: {rec['host_offload_gib']:.2f} GiB per GPU (not in GPU memory)")
