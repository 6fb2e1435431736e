"""CLI: `gpuplan fit` -- does training fit: memory per GPU itemised, and the inverse questions
(largest micro-batch, longest sequence, fewest GPUs). Parses, calls `gpuplan.api.fit_*`, renders."""

from __future__ import annotations

from typing import Optional

import typer

from gpuplan import api
from gpuplan.cli.progress import progress_bar
from gpuplan.cli.render import console, print_json, table
from gpuplan.cli.stack_options import COMPILE, MEMORY_SAVINGS, PIPELINE_SCHEDULE
from gpuplan.cli.fine_tuning_options import (
    BASE_DTYPE, DOUBLE_QUANT, FINETUNE, GRAD_ACCUM, LORA_DROPOUT, LORA_RANK, LORA_TARGETS, MASTER_WEIGHTS, OFFLOAD,
    CHUNKED_LOSS, OFFLOAD_ACTIVATIONS,
    OPTIMIZER, OPTIMIZER_IMPL, FINE_TUNING_OPTIONS, BASE_MATMUL_KEEPS_INPUT, OPTIMIZER_IN_BACKWARD, LOGITS_HELD_IN_BACKWARD, FUSED_QKV_VIEWS, QUANTIZED_HEAD, LOSS_CHUNK_TOKENS,
    fine_tuning_options,
    print_fine_tuning,
)
from gpuplan.specs.choices import BaseDtype, FineTuneMethod, MasterWeights, Offload, Optimizer, OptimizerImpl
from gpuplan.specs.choices import Precision, Recompute, Sharding

fit_app = typer.Typer(help="Does training fit in GPU memory? Itemised bytes per GPU and the inverse questions.", no_args_is_help=True)

GIB = 2**30


def _common(
    model: str = typer.Argument(..., help="Bundled model name, config.json, or a directory holding one."),
    gpu: Optional[str] = typer.Option(
        None, "--gpu", help=f"GPU id from `gpuplan hw list` (its memory is the budget; default {api.DEFAULT_GPU})."),
    system: Optional[str] = typer.Option(None, "--system", help="System id: its GPU is the budget (instead of --gpu)."),
    tp: int = typer.Option(1, "--tp", min=1, help="Tensor parallel degree."),
    pp: int = typer.Option(1, "--pp", min=1, help="Pipeline parallel degree."),
    dp: Optional[int] = typer.Option(None, "--dp", min=1, help="Data parallel degree (default: gpus / (tp x pp x cp))."),
    cp: int = typer.Option(1, "--cp", min=1, help="Context parallel degree."),
    ep: int = typer.Option(1, "--ep", min=1, help="Expert parallel degree (carved out of dp x cp)."),
    vpp: int = typer.Option(1, "--vpp", min=1, help="Virtual pipeline stages per GPU (interleaved 1F1B)."),
    micro_batch: int = typer.Option(1, "--micro-batch", min=1, help="Sequences per micro-batch."),
    global_batch: Optional[int] = typer.Option(None, "--global-batch", min=1, help="Sequences per optimizer step (sets micro-batches in flight)."),
    seq_len: Optional[int] = typer.Option(
        None, "--seq-len", min=1, help="Tokens per sequence (default: min(the model's max positions, 4096))."),
    recompute: Recompute = typer.Option(Recompute.NONE, "--recompute", help="Activation recomputation."),
    sharding: Sharding = typer.Option(Sharding.NONE, "--sharding", help="ZeRO stage / FSDP over data parallel."),
    precision: Precision = typer.Option(Precision.BF16, "--precision", help="Matmul precision (master weights fp32)."),
    grad_precision: Precision = typer.Option(Precision.FP32, "--grad-precision", help="Gradient buffer dtype: fp32 (Megatron, 18 B/param) or bf16/fp16 (16 B/param)."),
    sequence_parallel: Optional[bool] = typer.Option(
        None, "--sequence-parallel/--no-sequence-parallel", help="Megatron sequence parallelism (default: on where tp > 1)."),
    no_flash: bool = typer.Option(False, "--no-flash-attention", help="Store the s x s attention scores (unfused attention)."),
    framework: Optional[str] = typer.Option(
        None, "--framework", help="megatron, deepspeed, fsdp, torchtitan, maxtext, transformers, other (default: maxtext on TPU pods; "
        "for LoRA / QLoRA deepspeed with a ZeRO --sharding, else fsdp (PyTorch); megatron elsewhere)."),
    compile: Optional[str] = COMPILE,
    pipeline_schedule: Optional[str] = PIPELINE_SCHEDULE,
    memory_savings: Optional[str] = MEMORY_SAVINGS,
    grad_accum: Optional[int] = GRAD_ACCUM,
    finetune: FineTuneMethod = FINETUNE,
    lora_rank: Optional[int] = LORA_RANK,
    lora_targets: Optional[str] = LORA_TARGETS,
    lora_dropout: Optional[float] = LORA_DROPOUT,
    base_dtype: Optional[BaseDtype] = BASE_DTYPE,
    double_quant: bool = DOUBLE_QUANT,
    optimizer: Optimizer = OPTIMIZER,
    optimizer_impl: Optional[OptimizerImpl] = OPTIMIZER_IMPL,
    offload: Offload = OFFLOAD,
    master_weights: MasterWeights = MASTER_WEIGHTS,
    chunked_loss: bool = CHUNKED_LOSS,
    offload_activations: bool = OFFLOAD_ACTIVATIONS,
    base_matmul_keeps_input: bool = BASE_MATMUL_KEEPS_INPUT,
    optimizer_in_backward: bool = OPTIMIZER_IN_BACKWARD,
    logits_held_in_backward: bool = LOGITS_HELD_IN_BACKWARD,
    fused_qkv_views: bool = FUSED_QKV_VIEWS,
    quantized_head: bool = QUANTIZED_HEAD,
    loss_chunk_tokens: Optional[int] = LOSS_CHUNK_TOKENS,
):
    return locals()


def _plan_kw(args: dict) -> dict:
    """The api's plan keywords from the shared options (`--no-flash-attention` -> flash_attention)."""
    kw = {k: v for k, v in args.items() if k not in ("model", "gpu", "no_flash", *FINE_TUNING_OPTIONS)}
    kw["flash_attention"] = not args["no_flash"]  # system is the api's keyword too
    kw["fine_tuning"] = fine_tuning_options(args)
    return kw


def _print_memory(rec: dict) -> None:
    p = rec["plan"]
    console.print(f"{rec['model']} on {rec['num_gpus']} x {rec['gpu']}: tp {p['tp']} pp {p['pp']} dp {p['dp']} cp {p['cp']} ep {p['ep']}"
                  f" vpp {p['vpp']}, micro-batch {p['micro_batch']} x {p['seq_len']} tokens, recompute {p['recompute']}, "
                  f"sharding {p['sharding']}, {p['precision']} (grads {p['grad_precision']})")
    gib = rec["per_gpu_gib"]
    rows = [(k, gib[k]) for k in ("weights", "gradients", "optimizer", "activations", "other")]
    rows += [(f"  activations: {k}", v / GIB) for k, v in rec["activations_bytes"].items()]
    rows += [(f"  other: {k}", v / GIB) for k, v in rec["other_bytes"].items()]
    rows.append(("total", gib["total"]))
    console.print(table(f"memory per GPU (most loaded: pipeline rank {rec['peak_pipeline_rank']})", ["item", "GiB"], rows))
    b = rec["bytes_per_param"]
    if rec["fine_tuning"] != "full, adamw":
        print_fine_tuning(rec)
    else:
        console.print(
            f"model states: {b['weights']} (weights) + {b['gradients']} (grads) + {b['optimizer']} (Adam: fp32 master 4 + m + v"
            f" {b['optimizer'] - 4:g})"
            f" = {b['model_states']} B/param before sharding. 18 B/param is this with fp32 gradients (Megatron's fp32 main-grad"
            f" accumulation); the classic 16 B/param keeps 16-bit gradients (2 + 2 + 4 + 4 + 4; --grad-precision bf16)."
        )
    console.print(f"activations add {rec['per_gpu_gib']['activations']:.2f} GiB per GPU "
                  f"({rec['activation_bytes_per_param']:.2f} B per parameter held) at this micro-batch and sequence length.")
    verdict = "fits" if rec["fits"] else "does NOT fit"
    console.print(f"{verdict}: {gib['total']:.2f} of {rec['capacity_gib']:.2f} GiB, headroom {rec['headroom_gib']:.2f} GiB")
    if not rec["fits"] and rec["plan"]["recompute"] != "full":
        console.print("hint: --recompute full keeps only each layer's input (activation checkpointing)")
    band = rec.get("band_80pct") or {}
    if band:
        lo, hi = band["per_gpu_gib"]
        state = "" if band["validated"] else " - UNVALIDATED regime: band borrowed from a broader one"
        at_high = "still fits" if band["fits_at_band_high"] else "would NOT fit"
        console.print(f"80% band (cross-validated errors of {band['rows']} public rows, {band['regime']}): "
                      f"{lo:.1f} .. {hi:.1f} GiB; at the band's top it {at_high}{state}")
    for note in rec["notes"]:
        console.print(f"note: {note}")


def _train(args: dict, gpus: int, as_json: bool) -> None:
    emit = args.pop("emit", None)
    result = api.fit_train(args["model"], args["gpu"], gpus, **_plan_kw(args))
    if emit:  # only the config on stdout
        from gpuplan.cli.train import emit_text

        emit_text(api.emit_fit(result, emit, args.get("system")), emit)
        return
    rec = result.to_dict()
    if as_json:
        print_json(rec)
    else:
        _print_memory(rec)


def _max_batch(args: dict, gpus: int, as_json: bool) -> None:
    result = api.fit_max_batch(args["model"], args["gpu"], gpus, **_plan_kw(args))
    rec = result.to_dict()
    if as_json:
        print_json(rec)
    elif result.best:
        console.print(f"largest micro-batch that fits: {result.best} sequences of {result.plan.seq_len} tokens "
                      f"({rec['memory']['per_gpu_gib']['total']:.2f} of {rec['memory']['capacity_gib']:.2f} GiB)")
    else:
        console.print(f"nothing fits: even micro-batch 1 exceeds {result.gpu.memory_bytes / GIB:.1f} GiB on {result.gpu.id}")


def _max_seq(args: dict, gpus: int, as_json: bool) -> None:
    result = api.fit_max_seq(args["model"], args["gpu"], gpus, **_plan_kw(args))
    rec = result.to_dict()
    if as_json:
        print_json(rec)
    elif result.best:
        console.print(f"longest sequence that fits: {result.best} tokens at micro-batch {result.plan.micro_batch} "
                      f"({rec['memory']['per_gpu_gib']['total']:.2f} of {rec['memory']['capacity_gib']:.2f} GiB)")
    else:
        console.print(f"nothing fits on {result.gpu.id}, even at 128 tokens")


def _min_gpus(args: dict, max_gpus: int, as_json: bool) -> None:
    with progress_bar("fit min-gpus") as bar:
        result = api.fit_min_gpus(args["model"], args["gpu"], max_gpus, progress=bar, **_plan_kw(args))
    rec = result.to_dict()
    if as_json:
        print_json(rec)
        return
    if result.answer is None:
        console.print(f"no layout up to {max_gpus} GPUs fits (try --recompute full or --sharding zero3)")
        return
    p = result.answer.plan
    console.print(f"fewest GPUs: {result.answer.num_gpus} x {result.gpu.id} with tp {p.tp} pp {p.pp} dp {p.dp} cp {p.cp} "
                  f"({result.answer.layouts_tried} layouts tried)")
    _print_memory(rec["memory"])


def _install() -> None:
    """Register the four commands with the shared options (typer needs real signatures)."""
    import inspect

    import typing

    hints = typing.get_type_hints(_common)  # real types, not the postponed-annotation strings
    shared = [p.replace(annotation=hints[p.name]) for p in inspect.signature(_common).parameters.values()]
    gpus_opt = inspect.Parameter("gpus", inspect.Parameter.KEYWORD_ONLY, annotation=int,
                                 default=typer.Option(..., "--gpus", min=1, help="Total GPUs (= tp x pp x dp x cp)."))
    max_opt = inspect.Parameter("max_gpus", inspect.Parameter.KEYWORD_ONLY, annotation=int,
                                default=typer.Option(16384, "--max-gpus", min=1, help="Search limit."))
    json_opt = inspect.Parameter("as_json", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                                 default=typer.Option(False, "--json", help="Print JSON."))

    emit_opt = inspect.Parameter("emit", inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
                                 default=typer.Option(None, "--emit", help="Print only this plan as a launch config: "
                                                      "megatron, nemo, torchtitan, deepspeed or maxtext (docs/deploy.md)."))

    def make(name: str, doc: str, runner, extra: inspect.Parameter, *more: inspect.Parameter):
        def command(**kwargs):
            count = kwargs.pop(extra.name)
            as_json = kwargs.pop("as_json")
            runner(kwargs, count, as_json)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.kind != inspect.Parameter.KEYWORD_ONLY else p for p in shared]
        command.__signature__ = inspect.Signature([*params, extra, *more, json_opt])
        command.__doc__ = doc
        command.__name__ = name.replace("-", "_")
        fit_app.command(name)(command)

    make("train", "Itemised training memory per GPU (weights, gradients, optimizer, activations, other), fits or not, headroom.", _train, gpus_opt,
         emit_opt)
    make("max-batch", "Largest micro-batch that fits on the given GPUs and layout.", _max_batch, gpus_opt)
    make("max-seq", "Longest sequence (multiple of 128) that fits on the given GPUs and layout.", _max_seq, gpus_opt)
    make("min-gpus", "Fewest GPUs, with a tp/pp/dp layout, that fit (cp, ep, recompute, sharding, batch from the options).", _min_gpus, max_opt)


_install()


def register(app: typer.Typer) -> None:
    """Add `gpuplan fit` to the root app."""
    app.add_typer(fit_app, name="fit")
