"""CLI: the fine-tuning options shared by `gpuplan fit ...` and `gpuplan train` (parse and render only).

`fine_tuning_options(args)` collects `--finetune --lora-rank --lora-targets --lora-dropout
--base-dtype --double-quant --optimizer --offload --master-weights` into the dict
`gpuplan.api` takes as `fine_tuning` (it validates them); `print_fine_tuning(rec)` prints the
fine-tuning lines of a `fit train` record.
"""

from __future__ import annotations

from typing import Any

from gpuplan.cli.render import console

#: the option names (python identifiers) that make up the `fine_tuning` record
FINE_TUNING_OPTIONS = ("finetune", "lora_rank", "lora_targets", "lora_dropout", "base_dtype", "double_quant",
                       "optimizer", "offload", "master_weights")
GIB = 2**30


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
