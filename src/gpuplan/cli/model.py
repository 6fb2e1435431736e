"""CLI: `gpuplan model` -- model specs: list, show (params, FLOPs/token, KV bytes/token), params from
safetensors. Parses, calls `gpuplan.api.model_*`, renders."""

from __future__ import annotations

import typer

from gpuplan import api
from gpuplan.cli.render import console, print_json, table

model_app = typer.Typer(help="Transformer models: exact parameters, FLOPs per token, KV cache per token.", no_args_is_help=True)


@model_app.command("show")
def show(
    name_or_path: str = typer.Argument(..., help="Bundled name (`gpuplan model list`), a config.json, a directory holding one, "
                                       "or a PEFT adapter_config.json (its base found among the bundled models)."),
    adapter: str = typer.Option(None, "--adapter", help="A PEFT LoRA adapter_config.json (or its folder) for this model: "
                                "print its exact trainable parameters; its base must be this model."),
    seq_len: int = typer.Option(None, "--seq-len", min=1, help="Sequence length for FLOPs/token and the KV average (default: min(max positions, 4096))."),
    kv_bytes: float = typer.Option(2.0, "--kv-bytes", min=0.125, help="Bytes per KV-cache element (2 = bf16, 1 = fp8)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Parameters (total, active, per component), FLOPs per token and KV-cache bytes per token."""
    rec = api.model_show(name_or_path, seq_len, kv_bytes, adapter=adapter).to_dict()
    if as_json:
        print_json(rec)
        return
    if rec["adapter"] is not None:
        _print_adapter(rec["adapter"])
        return
    a, f, kv = rec["architecture"], rec["flops_per_token"], rec["kv_cache"]
    console.print(f"{rec['name']} ({rec['family']}): {a['layers']} layers, hidden {a['hidden']}, "
                  f"{a['heads']} heads / {a['kv_heads']} KV heads of {a['head_dim']}, FFN {a['ffn']} ({a['ffn_kind']}), vocab {a['vocab']}")
    rows = [
        ("total", rec["total_params"]), ("active per token", rec["active_params"]),
        ("embedding (tables)", rec["embedding_params"]), ("non-embedding", rec["non_embedding_params"]),
    ]
    if rec["mtp_params"]:
        rows.append(("MTP modules (apart)", rec["mtp_params"]))
    rows += [(f"  {k}", v) for k, v in rec["params_by_component"].items() if v]
    console.print(table("parameters", ["", "count"], rows, name="parameters"))
    console.print(table(
        f"per token at seq {f['seq_len']} (causal)", ["quantity", "value"],
        [
            ("forward GFLOP", f["forward_flops"] / 1e9), ("backward GFLOP (2x fwd)", f["backward_flops"] / 1e9),
            ("training GFLOP", f["training_flops"] / 1e9), ("attention share of fwd", f["attention_share_of_forward"]),
            ("6N GFLOP (rule of thumb)", f["six_n_flops"] / 1e9), ("training / 6N", f["training_over_six_n"]),
            (f"KV-cache bytes/token ({kv['bytes_per_element']:g} B/elem)", kv["bytes_per_token"]),
            (f"KV-cache bytes/token averaged over {kv['context_len']} ctx", kv[f"bytes_per_token_at_{kv['context_len']}_context"]),
        ] + ([("recurrent state bytes/sequence", kv["state_bytes_per_sequence"])] if kv["state_bytes_per_sequence"] else []),
        name="per-token",
    ))
    if set(a["layers_by_mixer"]) != {"attention"}:
        console.print("layers by sequence mixer: " + ", ".join(f"{k} {v}" for k, v in a["layers_by_mixer"].items())
                      + f"; FFN in {a['ffn_layers']} of {a['layers']}")
    if rec["source"]:
        console.print(f"source: {rec['source']}")


def _print_adapter(a: dict) -> None:
    """The adapter's exact parameters (api.models.adapter_record)."""
    targets = a["target_modules"] if isinstance(a["target_modules"], str) else ", ".join(a["target_modules"])
    console.print(f"LoRA adapter {a['source']} on {a['base_model']} (base_model_name_or_path {a['base_model_name_or_path']}): "
                  f"r {a['r']}, alpha {a['lora_alpha']:g}, targets {targets}, {a['adapted_modules']} modules in "
                  f"{a['adapted_layers']} layers")
    rows = [(name, v["modules"], v["params"]) for name, v in a["by_projection"].items()]
    for key, label in (("dora_magnitude_params", "DoRA magnitudes (in the rows)"), ("modules_to_save_params", "modules_to_save copies")):
        if a[key]:
            rows.append((label, "", a[key]))
    rows.append(("trainable params", "", a["trainable_params"]))
    console.print(table("adapter parameters (r (in + out) per adapted module)", ["module", "count", "params"], rows, name="adapter"))
    console.print(f"trainable params: {a['trainable_params']:,} || all params: {a['all_params']:,} || "
                  f"trainable%: {a['trainable_pct']:.4f}  (as PEFT's print_trainable_parameters)")
    for note in a["notes"]:
        console.print(f"note: {note}")


@model_app.command("list")
def list_models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Bundled models with their total and active parameter counts."""
    rows = api.model_list().to_dict()
    if as_json:
        print_json(rows)
        return
    console.print(table("bundled models (`gpuplan model show NAME`)", ["name", "family", "total params", "active params", "layers", "hidden"],
                        [(r["name"], r["family"], r["total_params"], r["active_params"], r["layers"], r["hidden"]) for r in rows]))


@model_app.command("params")
def params(
    path: str = typer.Argument(..., help="A .safetensors file, model.safetensors.index.json, or a directory holding them."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Parameters and bytes from safetensors headers only (quantized packing unpacked)."""
    result = api.model_params(path)
    if as_json:
        print_json(result.to_dict())
        return
    s = result.summary
    console.print(f"parameters: {s.params:,}   bytes: {s.bytes:,} ({s.bytes / 2**30:.3f} GiB)   tensors: {s.tensors} "
                  f"({s.metadata_tensors} quantization metadata)   files: {len(s.files)}" + (f"   quantization: {s.quantization}" if s.quantization else ""))
    console.print(table("by dtype (raw elements as stored)", ["dtype", "tensors", "elements", "bytes"],
                        [(k, v.tensors, v.elements, v.bytes) for k, v in s.by_dtype.items()]))


def register(app: typer.Typer) -> None:
    """Add `gpuplan model` to the root app."""
    app.add_typer(model_app, name="model")
