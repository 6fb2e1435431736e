"""`gpuplan.api` for models: `model_show` (parameters, FLOPs/token, KV bytes/token, recurrent state
bytes/sequence of hybrid models, the warnings of the config read; with a PEFT adapter config, its exact
trainable parameters), `model_list`, `model_params` (counts from safetensors headers).

An adapter config (`gpuplan model show ADAPTER_CONFIG`, or `model_show(BASE, adapter=FILE)`): its base
is the bundled model its `base_model_name_or_path` names (models.bundled.bundled_name_for_hub_id, the
one resolver of Hub ids); given both, they must agree (InputError otherwise, exit 2)."""

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
    adapter: Any = None  # models.adapter_config.AdapterConfig

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
            "adapter": None if self.adapter is None else adapter_record(model, self.adapter, counts.total),
        }


def model_show(model: str | ModelSpec, seq_len: int | None = None, kv_bytes: float = 2.0,
               adapter: str | None = None) -> ModelResult:
    """Parameters (total, active, per component), FLOPs per token at `seq_len` (default
    min(max positions, 4096)) and KV-cache bytes per token. `model` may be a PEFT adapter_config.json
    (its base found among the bundled models); `adapter`: an adapter config for `model` (module
    docstring). Either way the result's `adapter` holds its exact trainable parameters."""
    from gpuplan.errors import InputError

    positive(seq_len, "seq_len")
    if not kv_bytes >= 0.125:
        raise InputError(f"--kv-bytes must be >= 0.125, got {kv_bytes}", field="kv_bytes")
    config = None
    if adapter is not None:
        config = _read_adapter(adapter)
    elif isinstance(model, str) and (config := _adapter_at(model)) is not None:
        model = _base_of(config)
    spec = resolve_model(model)
    if config is not None:
        _check_base(config, spec)
    return ModelResult(spec, seq_len or default_seq_len(spec), kv_bytes, config)


def _read_adapter(path: str):
    from gpuplan.models.adapter_config import read_adapter_config

    return read_adapter_config(path)


def _adapter_at(path: str):
    """The AdapterConfig at `path` when it names a PEFT adapter config, else None."""
    from gpuplan.models.adapter_config import adapter_config_file, adapter_from_dict, is_adapter_dict, read_json

    found = adapter_config_file(path)
    if found is None:
        return None
    data = read_json(found)
    return adapter_from_dict(data, str(found)) if is_adapter_dict(data) else None


def _base_of(config) -> str:
    """The bundled model an adapter's base_model_name_or_path names (InputError when none does)."""
    from gpuplan.errors import InputError
    from gpuplan.models.bundled import bundled_name_for_hub_id

    name = bundled_name_for_hub_id(config.base_model or "")
    if name is None:
        raise InputError(f"adapter: base_model_name_or_path {config.base_model!r} of '{config.source}' is not a bundled "
                         "model's Hugging Face id (`gpuplan model list`); give the base: gpuplan model show BASE --adapter FILE",
                         field="adapter")
    return name


def _check_base(config, spec: ModelSpec) -> None:
    """The adapter's base (when it names a bundled model) must be `spec` or a model of its shapes (a
    local copy of the same config); its targets must match a linear module of `spec`."""
    from gpuplan.errors import InputError
    from gpuplan.models.bundled import bundled_name_for_hub_id
    from gpuplan.workloads.training.lora import adapter_counts

    named = bundled_name_for_hub_id(config.base_model or "")
    if named is not None and named != spec.name and _shape(resolve_model(named)) != _shape(spec):
        raise InputError(f"adapter: '{config.source}' was trained on {config.base_model} (bundled {named}), not on "
                         f"{spec.name}: give that base, or the adapter of this one", field="adapter")
    if adapter_counts(spec, config).adapted_modules == 0:
        raise InputError(f"adapter: the target_modules of '{config.source}' match no linear module of {spec.name}",
                         field="adapter")


def _shape(m: ModelSpec) -> tuple:
    """What an adapter's shapes depend on: layers, widths, heads, FFN, vocabulary, experts."""
    return (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.ffn_kind, m.vocab,
            m.moe.model_dump() if m.moe else None, m.mla.model_dump() if m.mla else None)


def adapter_record(model: ModelSpec, config, base_params: int) -> dict:
    """The `adapter` object of model_show's JSON: the config as read and its exact parameters
    (workloads.training.lora.adapter_counts); all_params and trainable_pct as PEFT's
    `print_trainable_parameters` prints them (base + adapter parameters, unquantised)."""
    from gpuplan.workloads.training.lora import adapter_counts

    c = adapter_counts(model, config)
    all_params = base_params + c.trainable_params
    targets = config.target_regex if config.target_regex is not None else list(config.target_modules)
    return {
        "source": config.source, "base_model_name_or_path": config.base_model, "base_model": model.name,
        "peft_type": "LORA", "r": config.rank, "lora_alpha": config.alpha, "lora_dropout": config.dropout,
        "target_modules": targets, "layers_to_transform": None if config.layers_to_transform is None else list(config.layers_to_transform),
        "rank_pattern": dict(config.rank_pattern), "use_dora": config.use_dora,
        "trainable_params": c.trainable_params, "lora_params": c.lora_params,
        "dora_magnitude_params": c.dora_magnitude_params, "lora_bias_params": c.lora_bias_params,
        "modules_to_save_params": c.modules_to_save_params, "adapted_modules": c.adapted_modules,
        "adapted_layers": len(c.adapted_layers), "by_projection": c.by_projection,
        "all_params": all_params, "trainable_pct": 100.0 * c.trainable_params / all_params,
        "adapter_bytes_fp32": 4 * c.trainable_params, "adapter_bytes_bf16": 2 * c.trainable_params,
        "notes": list(c.notes),
    }


def on_config_warning(listener) -> None:
    """Call `listener(text)` with each warning of a config.json read from now on (an unknown
    model_type read by its fields, ...); the warnings are also `model_show`'s `warnings`. The CLI
    prints them on stderr. Registering the same listener twice has no effect."""
    from gpuplan.models.hf_config import config_warning_listeners

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
