"""CLI: `gpuplan fit` -- does training fit: memory per GPU itemised, and the inverse questions
(largest micro-batch, longest sequence, fewest GPUs)."""

from __future__ import annotations

from typing import Optional

import typer

from gpuplan.cli.render import console, print_json, table
from gpuplan.errors import InputError
from gpuplan.specs.plan import Precision, Recompute, Sharding

fit_app = typer.Typer(help="Does training fit in GPU memory? Itemised bytes per GPU and the inverse questions.", no_args_is_help=True)

GIB = 2**30


def _plan(model, gpus: int | None, tp, pp, dp, cp, ep, vpp, micro_batch, global_batch, seq_len, recompute,
          sharding, precision, grad_precision, sequence_parallel, no_flash):
    """Build the TrainPlan; --gpus must equal tp x pp x dp x cp (dp derived when not given)."""
    from pydantic import ValidationError

    from gpuplan.specs.plan import TrainPlan

    if dp is None:
        if gpus is None:
            dp = 1
        else:
            if gpus % (tp * pp * cp):
                raise InputError(f"--gpus ({gpus}) must be a multiple of tp x pp x cp ({tp} x {pp} x {cp})", field="gpus")
            dp = gpus // (tp * pp * cp)
    if gpus is not None and tp * pp * dp * cp != gpus:
        raise InputError(f"--gpus ({gpus}) must equal tp x pp x dp x cp ({tp} x {pp} x {dp} x {cp} = {tp * pp * dp * cp})", field="gpus")
    try:
        return TrainPlan(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp, micro_batch=micro_batch, global_batch=global_batch,
                         seq_len=seq_len, recompute=recompute, sharding=sharding, precision=precision,
                         grad_precision=grad_precision, sequence_parallel=sequence_parallel, flash_attention=not no_flash)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "global_batch"
        raise InputError(f"--{field.replace('_', '-')}: {err['msg']}", field=field) from None


def _common(
    model: str = typer.Argument(..., help="Bundled model name, config.json, or a directory holding one."),
    gpu: str = typer.Option(..., "--gpu", help="GPU id from `gpuplan hw list` (its memory is the budget)."),
    tp: int = typer.Option(1, "--tp", min=1, help="Tensor parallel degree."),
    pp: int = typer.Option(1, "--pp", min=1, help="Pipeline parallel degree."),
    dp: Optional[int] = typer.Option(None, "--dp", min=1, help="Data parallel degree (default: gpus / (tp x pp x cp))."),
    cp: int = typer.Option(1, "--cp", min=1, help="Context parallel degree."),
    ep: int = typer.Option(1, "--ep", min=1, help="Expert parallel degree (carved out of dp x cp)."),
    vpp: int = typer.Option(1, "--vpp", min=1, help="Virtual pipeline stages per GPU (interleaved 1F1B)."),
    micro_batch: int = typer.Option(1, "--micro-batch", min=1, help="Sequences per micro-batch."),
    global_batch: Optional[int] = typer.Option(None, "--global-batch", min=1, help="Sequences per optimizer step (sets micro-batches in flight)."),
    seq_len: int = typer.Option(4096, "--seq-len", min=1, help="Tokens per sequence."),
    recompute: Recompute = typer.Option(Recompute.NONE, "--recompute", help="Activation recomputation."),
    sharding: Sharding = typer.Option(Sharding.NONE, "--sharding", help="ZeRO stage / FSDP over data parallel."),
    precision: Precision = typer.Option(Precision.BF16, "--precision", help="Matmul precision (master weights fp32)."),
    grad_precision: Precision = typer.Option(Precision.FP32, "--grad-precision", help="Gradient buffer dtype: fp32 (Megatron, 18 B/param) or bf16/fp16 (16 B/param)."),
    sequence_parallel: bool = typer.Option(False, "--sequence-parallel", help="Megatron sequence parallelism (needs tp > 1)."),
    no_flash: bool = typer.Option(False, "--no-flash-attention", help="Store the s x s attention scores (unfused attention)."),
):
    return locals()


def _resolve(args: dict, gpus: int | None):
    from gpuplan.catalog import get_gpu
    from gpuplan.models import load_model

    model = load_model(args["model"])
    gpu = get_gpu(args["gpu"])
    plan = _plan(model, gpus, args["tp"], args["pp"], args["dp"], args["cp"], args["ep"], args["vpp"], args["micro_batch"],
                 args["global_batch"], args["seq_len"], args["recompute"], args["sharding"], args["precision"],
                 args["grad_precision"], args["sequence_parallel"], args["no_flash"])
    return model, gpu, plan


def memory_record(model, gpu, plan, mem) -> dict:
    """The JSON object of `fit train` (stable keys, units in names)."""
    from gpuplan.models import parameter_counts

    states = mem.bytes_per_param
    total_params = parameter_counts(model).total
    return {
        "model": model.name,
        "gpu": gpu.id,
        "plan": plan.model_dump(mode="json"),
        "num_gpus": plan.num_gpus,
        "per_gpu_bytes": mem.per_gpu_bytes,
        "per_gpu_gib": {k: v / GIB for k, v in mem.per_gpu_bytes.items()},
        "activations_bytes": mem.activations_bytes_detail,
        "other_bytes": mem.other_bytes_detail,
        "allocated_bytes": mem.allocated_bytes,
        "capacity_bytes": mem.capacity_bytes,
        "capacity_gib": mem.capacity_bytes / GIB,
        "fits": mem.fits,
        "headroom_bytes": mem.headroom_bytes,
        "headroom_gib": mem.headroom_bytes / GIB,
        "params_per_gpu": mem.params_per_gpu,
        "total_params": total_params,
        "peak_pipeline_rank": mem.peak_pipeline_rank,
        "bytes_per_param": {**states, "model_states": sum(states.values())},
        "activation_bytes_per_param": mem.per_gpu_bytes["activations"] / max(1, mem.params_per_gpu),
        "notes": list(mem.notes),
    }


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
    console.print(
        f"model states: {b['weights']} (weights) + {b['gradients']} (grads) + {b['optimizer']} (Adam: fp32 master 4 + m 4 + v 4)"
        f" = {b['model_states']} B/param before sharding. 18 B/param is this with fp32 gradients (Megatron's fp32 main-grad"
        f" accumulation); the classic 16 B/param keeps 16-bit gradients (2 + 2 + 4 + 4 + 4; --grad-precision bf16)."
    )
    console.print(f"activations add {rec['per_gpu_gib']['activations']:.2f} GiB per GPU "
                  f"({rec['activation_bytes_per_param']:.2f} B per parameter held) at this micro-batch and sequence length.")
    verdict = "fits" if rec["fits"] else "does NOT fit"
    console.print(f"{verdict}: {gib['total']:.2f} of {rec['capacity_gib']:.2f} GiB, headroom {rec['headroom_gib']:.2f} GiB")
    for note in rec["notes"]:
        console.print(f"note: {note}")


def _train(args: dict, gpus: int, as_json: bool) -> None:
    from gpuplan.workloads.training.memory import training_memory

    model, gpu, plan = _resolve(args, gpus)
    rec = memory_record(model, gpu, plan, training_memory(model, plan, gpu))
    if as_json:
        print_json(rec)
    else:
        _print_memory(rec)


def _max_batch(args: dict, gpus: int, as_json: bool) -> None:
    from gpuplan.workloads.training.memory import max_micro_batch, training_memory

    model, gpu, plan = _resolve(args, gpus)
    best = max_micro_batch(model, plan, gpu)
    rec = {"model": model.name, "gpu": gpu.id, "num_gpus": plan.num_gpus, "seq_len": plan.seq_len, "max_micro_batch": best}
    if best:
        steps = plan.grad_accum_steps if plan.global_batch is not None else None
        fitted = plan.model_copy(update={"micro_batch": best, "global_batch": None if steps is None else steps * best * plan.dp})
        rec["memory"] = memory_record(model, gpu, fitted, training_memory(model, fitted, gpu))
    if as_json:
        print_json(rec)
    elif best:
        console.print(f"largest micro-batch that fits: {best} sequences of {plan.seq_len} tokens "
                      f"({rec['memory']['per_gpu_gib']['total']:.2f} of {rec['memory']['capacity_gib']:.2f} GiB)")
    else:
        console.print(f"nothing fits: even micro-batch 1 exceeds {gpu.memory_bytes / GIB:.1f} GiB on {gpu.id}")


def _max_seq(args: dict, gpus: int, as_json: bool) -> None:
    from gpuplan.workloads.training.memory import max_seq_len, training_memory

    model, gpu, plan = _resolve(args, gpus)
    best = max_seq_len(model, plan, gpu)
    rec = {"model": model.name, "gpu": gpu.id, "num_gpus": plan.num_gpus, "micro_batch": plan.micro_batch, "max_seq_len": best}
    if best:
        fitted = plan.model_copy(update={"seq_len": best})
        rec["memory"] = memory_record(model, gpu, fitted, training_memory(model, fitted, gpu))
    if as_json:
        print_json(rec)
    elif best:
        console.print(f"longest sequence that fits: {best} tokens at micro-batch {plan.micro_batch} "
                      f"({rec['memory']['per_gpu_gib']['total']:.2f} of {rec['memory']['capacity_gib']:.2f} GiB)")
    else:
        console.print(f"nothing fits on {gpu.id}, even at 128 tokens")


def _min_gpus(args: dict, max_gpus: int, as_json: bool) -> None:
    from gpuplan.workloads.training.memory import min_gpus

    model, gpu, plan = _resolve(args, None)
    answer = min_gpus(model, plan, gpu, max_gpus=max_gpus)
    if answer is None:
        if as_json:
            print_json({"model": model.name, "gpu": gpu.id, "min_gpus": None, "max_gpus_searched": max_gpus})
        else:
            console.print(f"no layout up to {max_gpus} GPUs fits (try --recompute full or --sharding zero3)")
        return
    rec = {"model": model.name, "gpu": gpu.id, "min_gpus": answer.num_gpus, "layouts_tried": answer.layouts_tried,
           "plan": answer.plan.model_dump(mode="json"), "memory": memory_record(model, gpu, answer.plan, answer.memory)}
    if as_json:
        print_json(rec)
        return
    p = answer.plan
    console.print(f"fewest GPUs: {answer.num_gpus} x {gpu.id} with tp {p.tp} pp {p.pp} dp {p.dp} cp {p.cp} "
                  f"({answer.layouts_tried} layouts tried)")
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

    def make(name: str, doc: str, runner, extra: inspect.Parameter):
        def command(**kwargs):
            count = kwargs.pop(extra.name)
            as_json = kwargs.pop("as_json")
            runner(kwargs, count, as_json)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.kind != inspect.Parameter.KEYWORD_ONLY else p for p in shared]
        command.__signature__ = inspect.Signature([*params, extra, json_opt])
        command.__doc__ = doc
        command.__name__ = name.replace("-", "_")
        fit_app.command(name)(command)

    make("train", "Itemised training memory per GPU (weights, gradients, optimizer, activations, other), fits or not, headroom.", _train, gpus_opt)
    make("max-batch", "Largest micro-batch that fits on the given GPUs and layout.", _max_batch, gpus_opt)
    make("max-seq", "Longest sequence (multiple of 128) that fits on the given GPUs and layout.", _max_seq, gpus_opt)
    make("min-gpus", "Fewest GPUs, with a tp/pp/dp layout, that fit (cp, ep, recompute, sharding, batch from the options).", _min_gpus, max_opt)


_install()


def register(app: typer.Typer) -> None:
    """Add `gpuplan fit` to the root app."""
    app.add_typer(fit_app, name="fit")
