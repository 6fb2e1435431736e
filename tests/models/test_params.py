"""Exact parameter counts of every bundled model against the published figure.

Sources of the expected numbers:
- HF = the Hugging Face model API `safetensors.total` (the count shown on the model page) of the
  named repo; "arch" where that figure includes non-parameter buffers, explained per row.
- Hand derivations are given where no exact count is published.
"""

import pytest

from gpuplan.models import load_model
from gpuplan.layers import parameter_counts

EXACT = {
    # HF meta-llama/Llama-2-7b-hf shows 6,738,417,664 = 6,738,415,616 + 2,048: the checkpoint also stores
    # 32 layers x 64 rotary `inv_freq` buffers (not parameters). 6,738,415,616 is the Llama-2 paper's "7B" exactly
    # (32 x 202,383,360 per layer + 2 x 32000 x 4096 + 4096).
    "llama-2-7b": 6_738_415_616,
    # HF meta-llama/Llama-2-70b-hf shows 68,976,653,312 = 68,976,648,192 + 80 x 64 inv_freq buffers.
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,  # HF meta-llama/Meta-Llama-3-8B (and Llama-3.1-8B) safetensors total
    "llama-3-70b": 70_553_706_496,  # HF meta-llama/Meta-Llama-3-70B / Llama-3.1-70B safetensors total
    "llama-3.1-405b": 405_853_388_800,  # HF meta-llama/Llama-3.1-405B safetensors total
    "mistral-7b": 7_241_732_096,  # HF mistralai/Mistral-7B-v0.1 safetensors total
    "mixtral-8x7b": 46_702_792_704,  # HF mistralai/Mixtral-8x7B-v0.1 safetensors total ("46.7B")
    "mixtral-8x22b": 140_620_634_112,  # HF mistralai/Mixtral-8x22B-v0.1 safetensors total ("141B")
    "qwen2.5-7b": 7_615_616_512,  # HF Qwen/Qwen2.5-7B safetensors total ("7.61B" in the model card)
    "qwen2.5-72b": 72_706_203_648,  # HF Qwen/Qwen2.5-72B; ../shared/models/README.md quotes 72,706,203,648
    "qwen3-30b-a3b": 30_532_122_624,  # HF Qwen/Qwen3-30B-A3B safetensors total ("30.5B")
    "qwen3-235b-a22b": 235_093_634_560,  # HF Qwen/Qwen3-235B-A22B safetensors total ("235B")
    # DeepSeek-V3 main model: 671,026,419,200 = every tensor of the checkpoint index except layer 61 (MTP)
    # and the fp8 *_scale_inv tensors; DeepSeek README: "671B of the main model weights".
    "deepseek-v3": 671_026_419_200,
    "deepseek-r1": 671_026_419_200,  # same architecture (../shared/models/README.md)
    "gemma-2-9b": 9_241_705_984,  # HF google/gemma-2-9b safetensors total ("9.24B")
    "phi-3-mini": 3_821_079_552,  # HF microsoft/Phi-3-mini-4k-instruct safetensors total ("3.82B")
    # gpt-oss model card (OpenAI, Aug 2025) table: 20.91B / 116.83B total; exact sum of the checkpoint
    # tensors with the MXFP4 blocks unpacked (2 values per byte) and scales dropped.
    "gpt-oss-20b": 20_914_757_184,
    "gpt-oss-120b": 116_829_156_672,
    "gpt2": 124_439_808,  # HF openai-community/gpt2 safetensors total (the "124M" model)
}


@pytest.mark.parametrize("name,expected", EXACT.items())
def test_bundled_total_equals_published(name, expected):
    assert parameter_counts(load_model(name)).total == expected


def test_components_are_disjoint_and_sum_to_total():
    for name in ("deepseek-v3", "gpt-oss-120b", "gpt2", "gemma-2-9b", "qwen3-30b-a3b"):
        c = parameter_counts(load_model(name))
        assert sum(c.components.values()) == c.total, name
        assert c.embedding + c.non_embedding == c.total


def test_active_parameters_moe():
    # Mixtral 8x7B: Mistral's announcement, "uses only 12.9B parameters per token"
    # (embedding included): 32 x (attention 41,943,040 + norms 8,192 + router 32,768 + 2 experts x 176,160,768)
    # + 2 x 32000 x 4096 + 4096 = 12,879,925,248.
    assert parameter_counts(load_model("mixtral-8x7b")).active == 12_879_925_248
    # gpt-oss model card: 3.61B (20b) and 5.13B (120b) active, not counting the input embedding.
    assert round(parameter_counts(load_model("gpt-oss-20b")).active_excluding_input_embedding / 1e9, 2) == 3.61
    assert round(parameter_counts(load_model("gpt-oss-120b")).active_excluding_input_embedding / 1e9, 2) == 5.13
    # DeepSeek-V3 README_WEIGHTS: 36.6B activated without the input embedding ("37B").
    ds = parameter_counts(load_model("deepseek-v3"))
    assert round(ds.active_excluding_input_embedding / 1e9, 1) == 36.6
    # Qwen3-30B-A3B model card: "3.3B activated"; Qwen3-235B-A22B: "22B activated".
    # (Qwen truncates: 3,353,032,704 is "3.3B")
    assert 3.3e9 <= parameter_counts(load_model("qwen3-30b-a3b")).active < 3.4e9
    assert round(parameter_counts(load_model("qwen3-235b-a22b")).active / 1e9) == 22


def test_deepseek_routed_experts_and_mtp():
    c = parameter_counts(load_model("deepseek-v3"))
    # 58 MoE layers x 256 experts x 3 x 7168 x 2048 = 653,908,770,816
    assert c.components["moe_routed_experts"] == 58 * 256 * 3 * 7168 * 2048
    # MTP (V3 report sec. 2.2): one MoE layer 11,507,286,272 + eh_proj 14336 x 7168 + 3 norms x 7168
    assert c.mtp == 11_507_286_272 + 14336 * 7168 + 3 * 7168


# Published but rounded: GPT-3 paper Table 2.1 and Narayanan et al. 2021 Table 1 (billions, 1 decimal).
ROUNDED = {
    "gpt3-125m": 125e6, "gpt3-350m": 350e6, "gpt3-760m": 760e6, "gpt3-1.3b": 1.3e9, "gpt3-2.7b": 2.7e9,
    "gpt3-6.7b": 6.7e9, "gpt3-13b": 13e9, "gpt3-175b": 175e9,
    "megatron-gpt-1.7b": 1.7e9, "megatron-gpt-3.6b": 3.6e9, "megatron-gpt-7.5b": 7.5e9, "megatron-gpt-18b": 18.4e9,
    "megatron-gpt-39b": 39.1e9, "megatron-gpt-76b": 76.1e9, "megatron-gpt-145b": 145.6e9,
    "megatron-gpt-310b": 310.1e9, "megatron-gpt-530b": 529.6e9, "megatron-gpt-1t": 1008.0e9,
    "megatron-gpt-22b": 22e9,
}


@pytest.mark.parametrize("name,published", ROUNDED.items())
def test_paper_shapes_match_rounded_counts(name, published):
    total = parameter_counts(load_model(name)).total
    # the papers' sizes are labels rounded to 2 significant figures (GPT-3 "350M" is 355.9M, "2.7B" 2.65B;
    # Megatron "1.7B" is 1.65B), hence 3%; the exact check is test_megatron_formula_exact.
    assert abs(total - published) / published < 0.03


def test_megatron_formula_exact():
    # Narayanan et al. 2021 sec. 5.1: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)), tied embeddings, learned positions
    m = load_model("megatron-gpt-145b")
    l, h, V, s = 80, 12288, 51200, 2048
    assert parameter_counts(m).total == 12 * l * h * h + 13 * l * h + (V + s) * h + 2 * h
    # (+2h: the final LayerNorm, which the paper's formula leaves out)
