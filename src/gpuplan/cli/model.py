"""CLI: `gpuplan model` -- model specs: list, show (params, FLOPs/token, KV bytes/token), params from safetensors."""

from __future__ import annotations

import typer

from gpuplan.cli.render import console, print_json, table

model_app = typer.Typer(help="Transformer models: exact parameters, FLOPs per token, KV cache per token.", no_args_is_help=True)


def model_record(name_or_path: str, seq_len: int | None, kv_bytes: float) -> dict:
    """The JSON object of `model show` (stable keys; units in key names)."""
    from gpuplan.models import flops_per_token, kv_cache_bytes_per_token, load_model, parameter_counts

    model = load_model(name_or_path)
    counts = parameter_counts(model)
    seq = seq_len or min(model.max_position_embeddings or 4096, 4096)
    flops = flops_per_token(model, seq)
    return {
        "name": model.name,
        "family": model.family,
        "source": model.source,
        "total_params": counts.total,
        "active_params": counts.active,
        "active_params_excluding_input_embedding": counts.active_excluding_input_embedding,
        "embedding_params": counts.embedding,
        "non_embedding_params": counts.non_embedding,
        "mtp_params": counts.mtp,
        "params_by_component": counts.components,
        "architecture": {
            "layers": model.layers, "hidden": model.hidden, "heads": model.heads, "kv_heads": model.kv_heads,
            "head_dim": model.head_dim, "ffn": model.ffn, "ffn_kind": model.ffn_kind.value, "vocab": model.vocab,
            "tied_embeddings": model.tied_embeddings, "max_position_embeddings": model.max_position_embeddings,
            "mla": model.mla.model_dump() if model.mla else None,
            "moe": model.moe.model_dump() if model.moe else None,
            "sliding_window_layers": sum(1 for w in model.layer_windows if w is not None),
        },
        "flops_per_token": {
            "seq_len": flops.seq_len,
            "forward_flops": flops.forward,
            "backward_flops": flops.backward,
            "training_flops": flops.total,
            "attention_share_of_forward": flops.attention_share,
            "six_n_flops": flops.six_n,
            "training_over_six_n": flops.total / flops.six_n,
        },
        "kv_cache": {
            "bytes_per_element": kv_bytes,
            "bytes_per_token": kv_cache_bytes_per_token(model, kv_bytes),
            f"bytes_per_token_at_{seq}_context": kv_cache_bytes_per_token(model, kv_bytes, seq),
            "context_len": seq,
        },
    }


@model_app.command("show")
def show(
    name_or_path: str = typer.Argument(..., help="Bundled name (`gpuplan model list`), a config.json, or a directory holding one."),
    seq_len: int = typer.Option(None, "--seq-len", min=1, help="Sequence length for FLOPs/token and the KV average (default: min(max positions, 4096))."),
    kv_bytes: float = typer.Option(2.0, "--kv-bytes", min=0.125, help="Bytes per KV-cache element (2 = bf16, 1 = fp8)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Parameters (total, active, per component), FLOPs per token and KV-cache bytes per token."""
    rec = model_record(name_or_path, seq_len, kv_bytes)
    if as_json:
        print_json(rec)
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
    console.print(table("parameters", ["", "count"], rows))
    console.print(table(
        f"per token at seq {f['seq_len']} (causal)", ["quantity", "value"],
        [
            ("forward GFLOP", f["forward_flops"] / 1e9), ("backward GFLOP (2x fwd)", f["backward_flops"] / 1e9),
            ("training GFLOP", f["training_flops"] / 1e9), ("attention share of fwd", f["attention_share_of_forward"]),
            ("6N GFLOP (rule of thumb)", f["six_n_flops"] / 1e9), ("training / 6N", f["training_over_six_n"]),
            (f"KV-cache bytes/token ({kv['bytes_per_element']:g} B/elem)", kv["bytes_per_token"]),
            (f"KV-cache bytes/token averaged over {kv['context_len']} ctx", kv[f"bytes_per_token_at_{kv['context_len']}_context"]),
        ],
    ))
    if rec["source"]:
        console.print(f"source: {rec['source']}")


@model_app.command("list")
def list_models(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Bundled models with their total and active parameter counts."""
    from gpuplan.models import bundled_model_names, load_model, parameter_counts

    rows = []
    for name in bundled_model_names():
        m = load_model(name)
        c = parameter_counts(m)
        rows.append({"name": name, "family": m.family, "total_params": c.total, "active_params": c.active,
                     "layers": m.layers, "hidden": m.hidden, "source": m.source})
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
    from gpuplan.models.safetensors import checkpoint_params

    s = checkpoint_params(path)
    rec = {
        "total_params": s.params, "total_bytes": s.bytes, "total_gib": s.bytes / 2**30, "tensors": s.tensors,
        "metadata_tensors": s.metadata_tensors, "quantization": s.quantization, "files": list(s.files),
        "by_dtype": {k: {"tensors": v.tensors, "elements": v.elements, "bytes": v.bytes} for k, v in s.by_dtype.items()},
    }
    if as_json:
        print_json(rec)
        return
    console.print(f"parameters: {s.params:,}   bytes: {s.bytes:,} ({s.bytes / 2**30:.3f} GiB)   tensors: {s.tensors} "
                  f"({s.metadata_tensors} quantization metadata)   files: {len(s.files)}" + (f"   quantization: {s.quantization}" if s.quantization else ""))
    console.print(table("by dtype (raw elements as stored)", ["dtype", "tensors", "elements", "bytes"],
                        [(k, v.tensors, v.elements, v.bytes) for k, v in s.by_dtype.items()]))


def register(app: typer.Typer) -> None:
    """Add `gpuplan model` to the root app."""
    app.add_typer(model_app, name="model")
