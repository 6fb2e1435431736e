"""Hybrid models (Mamba-2, Gated DeltaNet, short conv, RG-LRU layers) against hand derivations from
the transformers modules and the published parameter counts; KV bytes of the attention layers only
and the constant state per sequence of the recurrent ones. Configs: tests/models/hybrid_configs.py."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hybrid_configs import (  # noqa: E402
    LFM2_1_2B, LLAVA_1_5_7B, MAMBA_CODESTRAL_7B, NEMOTRON_H_8B, QWEN3_NEXT_80B_A3B, RECURRENTGEMMA_2B,
)

from gpuplan.errors import InputError  # noqa: E402
from gpuplan.layers import (  # noqa: E402
    flops_per_token, kv_bytes_per_token_split, kv_cache_bytes_per_token, parameter_counts, state_bytes_per_sequence,
)
from gpuplan.models import model_from_hf_config  # noqa: E402
from gpuplan.specs import FfnSlot, MixerKind  # noqa: E402

#: a small Falcon-H1 config (no published config.json was found verbatim; the structure is checked
#: against the module shapes of transformers FalconH1DecoderLayer by hand below)
FALCON_H1_TINY = {
    "model_type": "falcon_h1", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 100, "hidden_act": "silu",
    "mamba_d_ssm": 64, "mamba_n_heads": 4, "mamba_d_head": "auto", "mamba_d_state": 8, "mamba_n_groups": 1,
    "mamba_d_conv": 4, "mamba_rms_norm": True, "tie_word_embeddings": False,
}


def test_nemotron_h_8b_parameters_and_pattern():
    m = model_from_hf_config(NEMOTRON_H_8B, "nemotron-h-8b")
    kinds = [m.mixers(i) for i in range(m.layers)]
    # pattern M-M-M-M*-M-...: 24 Mamba-2, 4 attention (layers 7, 18, 29, 40), 24 MLP blocks
    assert kinds.count((MixerKind.MAMBA2,)) == 24 and kinds.count(()) == 24
    assert [i for i, k in enumerate(kinds) if k == (MixerKind.ATTENTION,)] == [7, 18, 29, 40]
    assert sum(m.ffn_slot(i) is FfnSlot.DENSE for i in range(m.layers)) == 24
    # Hand count from the transformers modules (NemotronHMamba2Mixer, NemotronHMLP, NemotronHAttention):
    # Mamba block: in_proj 4096 x (8192 + 10240 + 128) = 76,021,760; conv1d 10240 x 4 + 10240 = 51,200;
    #   A_log, D, dt_bias 3 x 128 = 384; gated norm 8192; out_proj 8192 x 4096 = 33,554,432; norm 4096
    #   -> 109,640,064
    # MLP block: up + down 2 x 4096 x 21504 (relu2, no gate) = 176,160,768 + norm 4096 = 176,164,864
    # attention block: q,k,v 4096 x (32 + 2 x 8) x 128 + o 4096 x 4096 = 41,943,040 + norm 4096 = 41,947,136
    # embeddings 2 x 131072 x 4096 (untied) = 1,073,741,824; final norm 4096
    expected = 24 * 109_640_064 + 24 * 176_164_864 + 4 * 41_947_136 + 1_073_741_824 + 4096
    counts = parameter_counts(m)
    assert counts.total == expected == 8_100_852_736
    # Published: the HF model page lists the checkpoint as 8.1B params and an enumeration of the loaded
    # checkpoint's named_parameters gives 8,100,852,736 (public "Nemotron-H-8B-Base-8K Architecture
    # Analysis Summary"); the model card says "8B" (rounded: 8.1B is 1.26% above it).
    assert abs(counts.total - 8.1e9) / 8.1e9 < 0.01 and round(counts.total / 1e9) == 8
    assert counts.components["mamba2"] == 24 * (109_640_064 - 4096)


def test_nemotron_h_8b_kv_is_only_the_attention_layers():
    m = model_from_hf_config(NEMOTRON_H_8B, "nemotron-h-8b")
    # 4 attention layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 16,384 B/token (52 layers would be 13x)
    assert kv_cache_bytes_per_token(m, 2) == 4 * 2 * 8 * 128 * 2 == 16_384
    # Mamba-2 state per sequence (vLLM mamba2_state_shape): conv (4 - 1) x (8192 + 2 x 8 x 128) = 30,720
    # + ssm 128 heads x 64 x 128 = 1,048,576 elements per layer; 24 layers x 2 B
    assert state_bytes_per_sequence(m, 2) == 24 * (30_720 + 1_048_576) * 2 == 51_806_208
    # ssm state in fp32 (vLLM mamba_ssm_cache_dtype float32): 24 x (30,720 x 2 + 1,048,576 x 4)
    assert state_bytes_per_sequence(m, 2, 4) == 24 * (30_720 * 2 + 1_048_576 * 4)


def test_qwen3_next_80b_a3b_total_and_active():
    m = model_from_hf_config(QWEN3_NEXT_80B_A3B, "qwen3-next-80b-a3b")
    kinds = [m.mixers(i) for i in range(m.layers)]
    # full_attention_interval 4: layers 3, 7, ..., 47 full attention ((i + 1) % 4 == 0), 36 Gated DeltaNet
    assert [i for i, k in enumerate(kinds) if k == (MixerKind.ATTENTION,)] == list(range(3, 48, 4))
    # Hand count (Qwen3NextAttention, Qwen3NextGatedDeltaNet, Qwen3NextSparseMoeBlock):
    # gated attention: q_proj 2048 x (16 x 256 x 2) = 16,777,216; k, v 2048 x 512 each; o 4096 x 2048;
    #   q/k norms 2 x 256 -> 27,263,488
    # Gated DeltaNet: in_proj_qkvz 2048 x (2 x 2048 + 2 x 4096) = 25,165,824; in_proj_ba 2048 x 64;
    #   conv1d 8192 x 4; A_log + dt_bias 2 x 32; norm 128; out_proj 4096 x 2048 -> 33,718,464
    # MoE: router 2048 x 512; 512 experts x 3 x 2048 x 512 = 1,610,612,736; shared expert 3 x 2048 x 512;
    #   shared_expert_gate 2048 -> 1,614,809,088; 2 norms 4096 per layer; embeddings 2 x 151936 x 2048
    moe_layer = 1_048_576 + 1_610_612_736 + 3_145_728 + 2048
    expected = 12 * 27_263_488 + 36 * 33_718_464 + 48 * (moe_layer + 4096) + 2 * 151936 * 2048 + 2048
    counts = parameter_counts(m)
    assert counts.total == expected == 79_674_391_296
    # active: 10 of 512 experts: 10 x 3 x 2048 x 512 = 31,457,280 routed per layer
    active_moe = 1_048_576 + 31_457_280 + 3_145_728 + 2048
    assert counts.active == expected - 48 * moe_layer + 48 * active_moe == 3_874_929_408
    # Model card Qwen/Qwen3-Next-80B-A3B: "80B in total and 3B activated" (the 3B without the embedding
    # table and LM head: 3,874,929,408 - 2 x 311,164,928 = 3,252,599,552). The same two totals appear in
    # a public parser test computed from the published safetensors of Qwen3-Coder-Next (same shape).
    assert abs(counts.total - 80e9) / 80e9 < 0.01
    assert round((counts.active - 2 * 151936 * 2048) / 1e9) == 3
    # KV: 12 attention layers x 2 x 2 KV heads x 256 x 2 B
    assert kv_cache_bytes_per_token(m, 2) == 12 * 2 * 2 * 256 * 2 == 24_576
    # state: 36 x [conv 3 x (2 x 2048 + 4096) + recurrent 32 heads x 128 x 128] x 2 B
    assert state_bytes_per_sequence(m, 2) == 36 * (3 * 8192 + 32 * 128 * 128) * 2 == 39_518_208


def test_mamba_codestral_7b_published_count():
    m = model_from_hf_config(MAMBA_CODESTRAL_7B, "mamba-codestral-7b")
    # 64 Mamba-2 blocks of 109,640,064 (the Nemotron-H block above: same 4096 / 128 x 64 / 128 / 8 shape)
    # + 2 x 32768 x 4096 untied embeddings + final norm 4096. Mistral AI, "Codestral Mamba" (2024-07):
    # "an instructed model, with 7,285,403,648 parameters".
    assert parameter_counts(m).total == 64 * 109_640_064 + 2 * 32768 * 4096 + 4096 == 7_285_403_648
    assert kv_cache_bytes_per_token(m, 2) == 0  # no attention layer
    assert state_bytes_per_sequence(m, 2) == 64 * (30_720 + 1_048_576) * 2
    # SSD scan FLOPs per layer at s = 4096 (chunk Q = 256, H = 128, P = 64, N = 128, G = 8):
    # conv 2 x 4 x 10240 = 81,920; H (4 N P + 2 Q P) = 128 x (32,768 + 32,768); G 2 Q N = 8 x 65,536
    per_layer = 81_920 + 128 * (32_768 + 32_768) + 8 * 65_536
    assert flops_per_token(m, 4096).recurrent_forward == 64 * per_layer
    # s = 100 < chunk: Q = 100
    assert flops_per_token(m, 100).recurrent_forward == 64 * (81_920 + 128 * (32_768 + 12_800) + 8 * 25_600)


def test_lfm2_1_2b_published_count():
    m = model_from_hf_config(LFM2_1_2B, "lfm2-1.2b")
    # FFN: int(2 x 12288 / 3) = 8192, x 1.0, rounded up to a multiple of 256 -> 8192 (Lfm2MLP)
    assert m.ffn == 8192 and m.tied_embeddings
    # conv layer: in_proj 2048 x 6144 + conv 2048 x 3 + out_proj 2048 x 2048 = 16,783,360
    # attention: q, o 2048 x 2048; k, v 2048 x 512; q/k layernorms 2 x 64 -> 10,485,888
    # MLP 3 x 2048 x 8192 = 50,331,648 and 2 norms per layer; embedding 65536 x 2048 (tied) + final norm
    expected = 10 * 16_783_360 + 6 * 10_485_888 + 16 * (50_331_648 + 4096) + 65536 * 2048 + 2048
    # Model card LiquidAI/LFM2-1.2B: "Parameters 1,170,340,608"
    assert parameter_counts(m).total == expected == 1_170_340_608
    assert kv_cache_bytes_per_token(m, 2) == 6 * 2 * 8 * 64 * 2  # 6 attention layers, head_dim 2048 / 32
    assert state_bytes_per_sequence(m, 2) == 10 * (3 - 1) * 2048 * 2  # conv (L - 1) x h per conv layer


def test_recurrentgemma_2b_count_and_windowed_kv():
    m = model_from_hf_config(RECURRENTGEMMA_2B, "recurrentgemma-2b")
    kinds = [m.mixers(i) for i in range(m.layers)]
    assert [i for i, k in enumerate(kinds) if k == (MixerKind.ATTENTION,)] == [2, 5, 8, 11, 14, 17, 20, 23]
    # recurrent block: linear_y, linear_x, linear_out 2560 x 2560 + 2560 each; conv 2560 x 4 + 2560;
    #   recurrent_param 2560; two gates 10 x 256 x 256 + 10 x 256 -> 20,999,680
    # attention: q 2560 x 2560, k, v 2560 x 256, o 2560 x 2560 + 2560 (bias) -> 14,420,480
    # MLP (RecurrentGemmaMlp, 15360 // 2 = 7680): 3 x 2560 x 7680 + 2 x 7680 + 2560 = 59,000,320; 2 norms
    recurrent = 3 * (2560 * 2560 + 2560) + 2560 * 4 + 2560 + 2560 + 2 * (10 * 256 * 256 + 10 * 256)
    attention = 2560 * 2560 + 2 * 2560 * 256 + 2560 * 2560 + 2560
    mlp = 3 * 2560 * 7680 + 2 * 7680 + 2560
    counts = parameter_counts(m)
    assert counts.total == 18 * recurrent + 8 * attention + 26 * (mlp + 2 * 2560) + 256000 * 2560 + 2560
    # Botev et al. 2024 (arXiv 2404.07839): "2B non-embedding parameters"
    assert counts.non_embedding == 2_027_502_080 and round(counts.non_embedding / 1e9) == 2
    # KV of the 8 local-attention layers (window 2048): 2 x 1 x 256 x 2 B each; at 8192 context, 2048 / 8192
    assert kv_cache_bytes_per_token(m, 2) == 8 * 1024
    assert kv_cache_bytes_per_token(m, 2, 8192) == 8 * 1024 * 2048 / 8192
    split = kv_bytes_per_token_split(m, 2)
    assert split.global_bytes_per_token == 0 and split.window_bytes_per_token == 8 * 1024 and split.window == 2048
    # state: 18 x [conv 3 x 2560 + recurrent 2560]; HF keeps the recurrent one in fp32
    assert state_bytes_per_sequence(m, 2, 4) == 18 * (3 * 2560 * 2 + 2560 * 4)


def test_falcon_h1_parallel_attention_and_mamba():
    m = model_from_hf_config(FALCON_H1_TINY, "falcon-h1-tiny")
    assert all(m.mixers(i) == (MixerKind.ATTENTION, MixerKind.MAMBA2) for i in range(2))
    # per layer (FalconH1DecoderLayer): attention q, o 64 x 64, k, v 64 x 32 -> 12,288;
    # FalconH1Mixer d_ssm 64, conv_dim 64 + 2 x 1 x 8 = 80: in_proj 64 x (64 + 80 + 4) = 9,472,
    #   conv 80 x 4 + 80, A_log/D/dt_bias 3 x 4, gated norm 64 (mamba_rms_norm), out_proj 64 x 64 -> 14,044;
    # gated MLP 3 x 64 x 128 = 24,576; 2 norms 128; embeddings 2 x 100 x 64; final norm 64
    assert parameter_counts(m).total == 2 * (12_288 + 14_044 + 24_576 + 128) + 12_800 + 64
    # every layer holds KV (2 x 2 x 16 x 2 B) and Mamba state (3 x 80 + 4 x 16 x 8 elements)
    assert kv_cache_bytes_per_token(m, 2) == 2 * 2 * 2 * 16 * 2
    assert state_bytes_per_sequence(m, 2) == 2 * (3 * 80 + 4 * 16 * 8) * 2


def test_gated_deltanet_flops_hand_value():
    m = model_from_hf_config(QWEN3_NEXT_80B_A3B, "qwen3-next")
    # per GDN layer at s = 4096: conv 2 x 4 x 8192; per value head 6 d_k d_v + 2 C (3 d_k + 2 d_v)
    # with C = 64, d_k = d_v = 128: 98,304 + 81,920; 32 value heads
    per_layer = 2 * 4 * 8192 + 32 * (6 * 128 * 128 + 2 * 64 * (3 * 128 + 2 * 128))
    f = flops_per_token(m, 4096)
    assert f.recurrent_forward == 36 * per_layer
    assert f.forward == pytest.approx(f.matmul_forward + f.attention_forward + f.recurrent_forward, rel=1e-15)


def test_unknown_model_type_warns_and_reads_by_fields():
    cfg = {"model_type": "my_new_lm", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
           "intermediate_size": 4096, "vocab_size": 1000, "hidden_act": "gelu_pytorch_tanh"}
    m = model_from_hf_config(cfg, "x")
    assert len(m.warnings) == 1 and "my_new_lm" in m.warnings[0] and "2-matrix MLP" in m.warnings[0]
    # read by its fields as stated: 4 x (4 x 1024^2 attention + 2 x 1024 x 4096 MLP + 2 norms) + 2 x 1000 x 1024 + 1024
    assert parameter_counts(m).total == 4 * (4 * 1024**2 + 2 * 1024 * 4096 + 2048) + 2 * 1000 * 1024 + 1024
    no_type = model_from_hf_config({k: v for k, v in cfg.items() if k != "model_type"}, "y")
    assert "no model_type" in no_type.warnings[0]
    assert model_from_hf_config({**cfg, "model_type": "llama"}, "z").warnings == ()


@pytest.mark.parametrize("cfg,named", [
    (LLAVA_1_5_7B, ("vision tower", "llava")),
    ({"model_type": "whisper_like", "audio_config": {"d_model": 8}, "text_config": {}}, ("audio encoder", "whisper_like")),
    ({**NEMOTRON_H_8B, "model_type": "jamba"}, ("Mamba-1", "jamba")),
    ({"model_type": "mllama", "text_config": {"cross_attention_layers": [3, 8]}}, ("cross-attention", "mllama")),
    ({**QWEN3_NEXT_80B_A3B, "model_type": "my_hybrid"}, ("linear_num_key_heads", "my_hybrid")),
    ({"model_type": "t5", "is_encoder_decoder": True}, ("encoder-decoder", "t5")),
])
def test_unmodelled_layers_refused_by_name(cfg, named):
    with pytest.raises(InputError) as exc:
        model_from_hf_config(cfg, "x")
    assert all(n in str(exc.value) for n in named) and "\n" not in str(exc.value)


def test_layer_types_must_be_known_strings():
    base = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 10, "sliding_window": 16, "max_position_embeddings": 64}
    assert model_from_hf_config({**base, "layer_types": ["sliding_attention", "full_attention"]}, "x").layer_windows == (16, None)
    for bad, field in (([1, 0], "layer_types"), (["sliding", "full_attention"], "layer_types"), ("full", "layer_types")):
        with pytest.raises(InputError) as exc:
            model_from_hf_config({**base, "layer_types": bad}, "x")
        assert exc.value.field == field
    with pytest.raises(InputError, match="linear_attention.*llama"):  # a recurrent type in a transformer family
        model_from_hf_config({**base, "layer_types": ["linear_attention", "full_attention"]}, "x")


def test_string_booleans_parsed_or_refused():
    base = {"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 10, "sliding_window": 16, "max_position_embeddings": 64}
    # "false" is truthy in Python: it must not switch windows on
    assert model_from_hf_config({**base, "use_sliding_window": "false"}, "x").layer_windows == ()
    assert model_from_hf_config({**base, "use_sliding_window": "True"}, "x").layer_windows == (16, 16)
    assert model_from_hf_config({**base, "tie_word_embeddings": "false"}, "x").tied_embeddings is False
    assert model_from_hf_config({**base, "attention_bias": "false"}, "x").attn_out_bias is False
    for field in ("use_sliding_window", "tie_word_embeddings", "attention_bias", "mlp_bias"):
        with pytest.raises(InputError) as exc:
            model_from_hf_config({**base, field: "no"}, "x")
        assert exc.value.field == field and "true or false" in str(exc.value)


def test_nemotron_h_pattern_errors_named():
    for bad in ("M-X", 5, ""):
        with pytest.raises(InputError) as exc:
            model_from_hf_config({**NEMOTRON_H_8B, "hybrid_override_pattern": bad}, "x")
        assert exc.value.field == "hybrid_override_pattern"
    # the list form with legacy and current names reads the same (NemotronHConfig remap_legacy_layer_types)
    cfg = {k: v for k, v in NEMOTRON_H_8B.items() if k != "hybrid_override_pattern"}
    names = {"M": "mamba", "*": "attention", "-": "mlp"}
    legacy = model_from_hf_config({**cfg, "layers_block_type": [names[c] for c in NEMOTRON_H_8B["hybrid_override_pattern"]]}, "x")
    assert parameter_counts(legacy).total == 8_100_852_736
    # num_hidden_layers disagreeing with the pattern: the pattern wins, with a warning (as transformers)
    short = model_from_hf_config({**NEMOTRON_H_8B, "num_hidden_layers": 50}, "x")
    assert short.layers == 52 and "pattern" in short.warnings[0]
