"""`gpuplan.api` for models: `model_show` (parameters, FLOPs/token, KV bytes/token, recurrent state
bytes/sequence of hybrid models, the warnings of the config read), `model_list`, `model_params`
(counts from safetensors headers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.interfaces.api._common import Result, default_seq_len, positive, resolve_model
from gpuplan.specs import ModelSpec


@dataclass(frozen=True)
class ModelResult(Result):
    """`model_show`: one model's counts at `seq_len`, KV at `kv_bytes` per element."""

    model: ModelSpec
    seq_len: int
    kv_bytes: float

    def json_data(self) -> dict:
        from gpuplan.layers import flops_per_token, kv_cache_bytes_per_token, parameter_counts, state_bytes_per_sequence

        model, seq, kv_bytes = self.model, self.seq_len, self.kv_bytes
        counts = parameter_counts(model)

        def flops_record(f) -> dict:
            return {
                "seq_len": f.seq_len,
                "attention_convention": f.attention_convention,
                "forward_flops": f.forward,
                "backward_flops": f.backward,
                "training_flops": f.total,
                "attention_share_of_forward": f.attention_share,
                "six_n_flops": f.six_n,
                "training_over_six_n": f.total / f.six_n,
                "recurrent_forward_flops": f.recurrent_forward,
            }
        mixers: dict[str, int] = {}
        for i in range(model.layers):
            for kind in model.mixers(i):
                mixers[kind.value] = mixers.get(kind.value, 0) + 1
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
                "layers_by_mixer": mixers,
                "ffn_layers": sum(1 for i in range(model.layers) if model.ffn_slot(i).value != "none"),
            },
            "flops_per_token": flops_record(flops_per_token(model, seq)),
            "flops_per_token_full_scores": flops_record(flops_per_token(model, seq, causal=False)),
            "kv_cache": {
                "bytes_per_element": kv_bytes,
                "bytes_per_token": kv_cache_bytes_per_token(model, kv_bytes),
                f"bytes_per_token_at_{seq}_context": kv_cache_bytes_per_token(model, kv_bytes, seq),
                "context_len": seq,
                "state_bytes_per_sequence": state_bytes_per_sequence(model, kv_bytes),
            },
            "warnings": list(model.warnings),
        }


def model_show(model: str | ModelSpec, seq_len: int | None = None, kv_bytes: float = 2.0) -> ModelResult:
    """Parameters (total, active, per component), FLOPs per token at `seq_len` (default
    min(max positions, 4096)) and KV-cache bytes per token."""
    from gpuplan.errors import InputError

    positive(seq_len, "seq_len")
    if not kv_bytes >= 0.125:
        raise InputError(f"--kv-bytes must be >= 0.125, got {kv_bytes}", field="kv_bytes")
    spec = resolve_model(model)
    return ModelResult(spec, seq_len or default_seq_len(spec), kv_bytes)


def on_config_warning(listener) -> None:
    """Call `listener(text)` with each warning of a config.json read from now on (an unknown
    model_type read by its fields, ...); the warnings are also `model_show`'s `warnings`. The CLI
    prints them on stderr. Registering the same listener twice has no effect."""
    from gpuplan.notices import config_warning_listeners

    if listener not in config_warning_listeners:
        config_warning_listeners.append(listener)


@dataclass(frozen=True)
class ModelListResult(Result):
    """`model_list`: one row per bundled model (a list in JSON)."""

    rows: tuple[dict, ...]

    def json_data(self) -> list:
        return list(self.rows)


def model_list() -> ModelListResult:
    """Bundled models with their total and active parameter counts."""
    from gpuplan.layers import parameter_counts
    from gpuplan.models import bundled_model_names, load_model

    rows = []
    for name in bundled_model_names():
        m = load_model(name)
        c = parameter_counts(m)
        rows.append({"name": name, "family": m.family, "total_params": c.total, "active_params": c.active,
                     "layers": m.layers, "hidden": m.hidden, "source": m.source})
    return ModelListResult(tuple(rows))


@dataclass(frozen=True)
class CheckpointResult(Result):
    """`model_params`: `summary` is models.safetensors' checkpoint summary."""

    summary: Any

    def json_data(self) -> dict:
        s = self.summary
        return {
            "total_params": s.params, "total_bytes": s.bytes, "total_gib": s.bytes / 2**30, "tensors": s.tensors,
            "metadata_tensors": s.metadata_tensors, "quantization": s.quantization, "files": list(s.files),
            "by_dtype": {k: {"tensors": v.tensors, "elements": v.elements, "bytes": v.bytes} for k, v in s.by_dtype.items()},
        }


def model_params(path: str) -> CheckpointResult:
    """Parameters and bytes from safetensors headers only (a file, an index.json, or a directory)."""
    from gpuplan.models.safetensors import checkpoint_params

    return CheckpointResult(checkpoint_params(path))
