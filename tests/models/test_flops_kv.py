"""FLOPs per token and KV-cache bytes per token against hand derivations."""

import pytest

from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.layers import flops_per_token, kv_cache_bytes_per_token


@pytest.mark.parametrize("name,l,h,V", [("megatron-gpt-145b", 80, 12288, 51200), ("megatron-gpt-1t", 128, 25600, 51200)])
def test_non_causal_equals_narayanan_model_flops(name, l, h, V):
    # Narayanan et al. 2021 eq. 3 without the recompute pass: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)),
    # per token: 72 l h^2 (1 + s/(6h) + V/(12 l h)); it counts attention without the causal mask.
    s = 2048
    f = flops_per_token(load_model(name), s, causal=False)
    assert f.total == pytest.approx(72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)), rel=1e-12)


def test_causal_halves_attention_and_grows_with_seq():
    m = load_model("llama-3-8b")
    nc = flops_per_token(m, 8192, causal=False)
    c = flops_per_token(m, 8192)
    # causal mean keys (s + 1) / 2 vs s: attention ratio (8193/2)/8192
    assert c.attention_forward / nc.attention_forward == pytest.approx(8193 / 2 / 8192)
    assert c.matmul_forward == nc.matmul_forward
    assert c.backward == 2 * c.forward and c.total == 3 * c.forward
    # attention per layer per token at s: 2 * a * (d + d) * (s+1)/2 = 2*32*256*4096.5 ; x 32 layers
    assert c.attention_forward == pytest.approx(32 * 2 * 32 * 256 * 8193 / 2)
    assert flops_per_token(m, 16384).total > c.total


def test_six_n_cross_check_llama3_8b():
    # N (matmul weights) = total - input embedding - norms = 8,030,261,248 - 525,336,576 - 266,240
    f = flops_per_token(load_model("llama-3-8b"), 4096)
    assert f.matmul_params == 8_030_261_248 - 128256 * 4096 - (65 * 4096)
    assert f.six_n == 6 * f.matmul_params
    assert 1.0 < f.total / f.six_n < 1.2  # attention adds ~9% at 4k context


def test_sliding_window_caps_attention():
    m = load_model("mistral-7b")  # every layer window 4096
    f = flops_per_token(m, 32768)
    w, s = 4096, 32768
    mean_keys = (w * (w + 1) / 2 + (s - w) * w) / s
    assert f.attention_forward == pytest.approx(32 * 2 * 32 * 256 * mean_keys)


def test_seq_len_validated():
    with pytest.raises(InputError, match="seq_len"):
        flops_per_token(load_model("gpt2"), 0)


def test_kv_bytes_hand_values():
    # Llama-3-8B bf16: 2 (K,V) x 8 KV heads x 128 x 2 B x 32 layers = 131,072 B/token
    assert kv_cache_bytes_per_token(load_model("llama-3-8b"), 2) == 131_072
    # DeepSeek-V3 MLA latent: (512 + 64) x 2 B x 61 layers = 70,272 B/token
    assert kv_cache_bytes_per_token(load_model("deepseek-v3"), 2) == 70_272
    # decompressed: 128 heads x (128 + 64 + 128) x 2 B x 61
    assert kv_cache_bytes_per_token(load_model("deepseek-v3"), 2, mla_latent=False) == 128 * 320 * 2 * 61
    # Qwen3-30B-A3B: explicit head_dim 128 (hidden/heads would be 64): 2 x 4 x 128 x 2 x 48
    assert kv_cache_bytes_per_token(load_model("qwen3-30b-a3b"), 2) == 98_304


def test_kv_sliding_window_average():
    g = load_model("gemma-2-9b")  # 42 layers, 21 sliding (4096); 2 x 8 x 256 x 2 B = 8192 B per layer-token
    assert kv_cache_bytes_per_token(g, 2, context_len=8192) == 21 * 8192 + 21 * 8192 * 4096 / 8192
    assert kv_cache_bytes_per_token(g, 2, context_len=4096) == 42 * 8192
    o = load_model("gpt-oss-120b")  # 18 of 36 layers window 128; 2 x 8 x 64 x 1 B (fp8) = 1024 B per layer-token
    assert kv_cache_bytes_per_token(o, 1, context_len=131072) == pytest.approx(18 * 1024 + 18 * 1024 * 128 / 131072)
