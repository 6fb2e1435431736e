"""config.json import: family traps and clean errors on malformed input."""

import json

import pytest

from gpuplan.errors import InputError, UnknownIdError
from gpuplan.models import load_model, model_from_arch_row, model_from_hf_config
from gpuplan.layers import parameter_counts
from gpuplan.specs.model import FfnKind

LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "intermediate_size": 11008, "vocab_size": 32000, "hidden_act": "silu"}


def test_missing_kv_heads_means_mha():
    m = model_from_hf_config(LLAMA, "x")
    assert m.kv_heads == 32 and m.head_dim == 128 and m.ffn_kind is FfnKind.SWIGLU


@pytest.mark.parametrize("field,value", [("hidden_size", None), ("num_hidden_layers", "32"), ("vocab_size", -5), ("num_attention_heads", 0)])
def test_malformed_field_named(field, value):
    cfg = dict(LLAMA)
    if value is None:
        del cfg[field]
    else:
        cfg[field] = value
    with pytest.raises(InputError) as exc:
        model_from_hf_config(cfg, "x")
    assert field in str(exc.value)


def test_kv_heads_not_dividing_heads_is_named():
    with pytest.raises(InputError, match="kv_heads"):
        model_from_hf_config({**LLAMA, "num_key_value_heads": 5}, "x")


def test_gemma3_nested_text_config_and_pattern():
    # Gemma 3 27B text config (google/gemma-3-27b-it config.json text_config): 62 layers, hidden 5376,
    # 32 heads / 16 KV of head_dim 128, ffn 21504, sliding_window 1024, pattern 6 -> 5 local : 1 global.
    cfg = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
           "text_config": {"model_type": "gemma3_text", "hidden_size": 5376, "num_hidden_layers": 62,
                           "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
                           "intermediate_size": 21504, "vocab_size": 262208, "sliding_window": 1024,
                           "sliding_window_pattern": 6, "max_position_embeddings": 131072}}
    m = model_from_hf_config(cfg, "gemma-3-27b")
    assert m.head_dim == 128 and m.tied_embeddings and m.qk_norm and m.norms_per_layer == 4
    globals_ = [i for i, w in enumerate(m.layer_windows) if w is None]
    assert globals_ == [5, 11, 17, 23, 29, 35, 41, 47, 53, 59]  # every 6th layer is global


def test_gemma2_alternates_and_gpt_oss_layer_types():
    g = load_model("gemma-2-9b")
    assert g.layer_windows[:4] == (4096, None, 4096, None)  # even layers sliding (Gemma2DecoderLayer)
    o = load_model("gpt-oss-20b")
    assert o.layer_windows[:2] == (128, None) and o.attention_sinks and o.moe.router_bias


def test_deepseek_mla_fields():
    m = load_model("deepseek-v3")
    assert m.mla.kv_lora_rank == 512 and m.mla.qk_rope_head_dim == 64 and m.moe.dense_layers == 3
    assert m.moe.shared_experts == 1 and m.mtp_layers == 1


def test_qwen2_sliding_window_ignored_when_disabled():
    assert load_model("qwen2.5-7b").layer_windows == ()  # use_sliding_window: false


def test_unknown_name_lists_bundled():
    with pytest.raises(UnknownIdError) as exc:
        load_model("llama-3-7b")
    assert "llama-3-8b" in str(exc.value) or "llama-3-70b" in str(exc.value)


def test_path_and_directory(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    assert load_model(str(tmp_path)).layers == 32
    assert load_model(str(tmp_path / "config.json")).hidden == 4096
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_model(str(tmp_path / "bad.json"))


def test_arch_row_defaults_and_errors():
    row = {"model": "GPT 7B", "layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "", "ffn": "",
           "ffn_kind": "", "vocab": "51200", "seq_len": "2048"}
    m = model_from_arch_row(row)
    assert m.kv_heads == 32 and m.ffn == 16384 and m.ffn_kind is FfnKind.GELU
    # Megatron GPT shape, untied, learned positions, biases: 12lh^2 + 13lh + 2Vh + sh + 2h
    l, h, V, s = 32, 4096, 51200, 2048
    assert parameter_counts(m).total == 12 * l * h * h + 13 * l * h + 2 * V * h + s * h + 2 * h
    with pytest.raises(InputError, match="ffn_kind"):
        model_from_arch_row({**row, "ffn_kind": "relu2"})
    with pytest.raises(InputError, match="layers"):
        model_from_arch_row({**row, "layers": ""})
    moe = model_from_arch_row({**row, "ffn_kind": "swiglu", "moe_experts": "8", "moe_topk": "2", "moe_ffn": "14336"})
    assert moe.moe.num_experts == 8 and moe.moe.expert_ffn == 14336


def test_gpt_neox_pythia_160m_non_embedding():
    # Pythia paper (Biderman et al. 2023) Table 1: Pythia-160M has 85,056,000 non-embedding parameters
    # (12 layers, d_model 768, 12 heads; GPT-NeoX: LayerNorm, biases everywhere, untied, vocab 50304).
    cfg = {"model_type": "gpt_neox", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
           "intermediate_size": 3072, "vocab_size": 50304, "max_position_embeddings": 2048, "hidden_act": "gelu",
           "tie_word_embeddings": False}
    c = parameter_counts(model_from_hf_config(cfg, "pythia-160m"))
    assert c.non_embedding == 85_056_000
    assert c.total == 85_056_000 + 2 * 50304 * 768
