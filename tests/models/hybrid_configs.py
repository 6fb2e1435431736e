"""Published config.json fields of hybrid models (none of them is in ../shared/models), each with the
copy it was read from. Only the fields gpuplan reads are kept; values are as published."""

#: nvidia/Nemotron-H-8B-Base-8K config.json (https://huggingface.co/nvidia/Nemotron-H-8B-Base-8K),
#: read from the verbatim copy in NVIDIA-NeMo/Megatron-Bridge
#: tests/unit_tests/models/nemotronh/test_nemotron_h_bridge.py (fixture `nemotronh_8b_config_dict`;
#: its test-only `n_routed_experts: None` left out). The pattern also matches Megatron-Bridge
#: docs/models/llm/nemotronh.md and the NVIDIA ADLR Nemotron-H page (24 Mamba-2, 24 MLP, 4 attention).
NEMOTRON_H_8B = {
    "architectures": ["NemotronHForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attention_head_dim": 128, "chunk_size": 128, "conv_kernel": 4, "expand": 2, "hidden_act": "relu2",
    "hidden_dropout": 0.0, "hidden_size": 4096,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
    "intermediate_size": 21504, "mamba_head_dim": 64, "mamba_hidden_act": "silu", "mamba_num_heads": 128,
    "mamba_proj_bias": False, "max_position_embeddings": 8192, "mlp_bias": False, "mlp_hidden_act": "relu2",
    "model_type": "nemotron_h", "n_groups": 8, "num_attention_heads": 32, "num_hidden_layers": 52,
    "num_key_value_heads": 8, "ssm_state_size": 128, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_bias": False, "use_conv_bias": True, "vocab_size": 131072,
}

#: Qwen/Qwen3-Next-80B-A3B-Instruct config.json (https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct):
#: the shape fields, identical to the defaults of transformers Qwen3NextConfig (whose docstring names
#: that checkpoint) apart from intermediate_size 5120 and max_position_embeddings 262144, as printed
#: in the model config of a public copy (search: "Qwen/Qwen3-Next-80B-A3B-Instruct ## model config").
QWEN3_NEXT_80B_A3B = {
    "architectures": ["Qwen3NextForCausalLM"], "decoder_sparse_step": 1, "full_attention_interval": 4,
    "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 5120,
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
    "mlp_only_layers": [], "model_type": "qwen3_next", "moe_intermediate_size": 512, "norm_topk_prob": True,
    "num_attention_heads": 16, "num_experts": 512, "num_experts_per_tok": 10, "num_hidden_layers": 48,
    "num_key_value_heads": 2, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
    "vocab_size": 151936,
}

#: mistralai/Mamba-Codestral-7B-v0.1 config.json (https://huggingface.co/mistralai/Mamba-Codestral-7B-v0.1):
#: the Mamba2Config shape (num_heads 128 x head_dim 64 = 2 x 4096, state 128, 8 groups, 64 layers,
#: vocab 32768, untied). Mistral's announcement "Codestral Mamba" (mistral.ai/news/codestral-mamba):
#: "an instructed model, with 7,285,403,648 parameters".
MAMBA_CODESTRAL_7B = {
    "architectures": ["Mamba2ForCausalLM"], "chunk_size": 256, "conv_kernel": 4, "expand": 2, "head_dim": 64,
    "hidden_size": 4096, "model_type": "mamba2", "n_groups": 8, "num_heads": 128, "num_hidden_layers": 64,
    "state_size": 128, "tie_word_embeddings": False, "use_bias": False, "use_conv_bias": True, "vocab_size": 32768,
}

#: LiquidAI/LFM2-1.2B config.json (https://huggingface.co/LiquidAI/LFM2-1.2B): 16 layers (10 conv +
#: 6 attention at full_attn_idxs 2, 5, 8, 10, 12, 14), hidden 2048, block_ff_dim 12288 auto-adjusted,
#: conv_L_cache 3, vocab 65536, tied. Model card: "Parameters 1,170,340,608".
LFM2_1_2B = {
    "architectures": ["Lfm2ForCausalLM"], "block_auto_adjust_ff_dim": True, "block_ff_dim": 12288,
    "block_ffn_dim_multiplier": 1.0, "block_multiple_of": 256, "conv_L_cache": 3, "conv_bias": False,
    "full_attn_idxs": [2, 5, 8, 10, 12, 14], "hidden_size": 2048, "max_position_embeddings": 128000,
    "model_type": "lfm2", "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
    "tie_embedding": True, "vocab_size": 65536,
}

#: google/recurrentgemma-2b config.json (https://huggingface.co/google/recurrentgemma-2b), as read
#: through the Hub and embedded verbatim in a public test (search: "The REAL
#: `google/recurrentgemma-2b/config.json`"). RecurrentGemma paper (Botev et al. 2024, arXiv
#: 2404.07839) abstract: "a pre-trained model with 2B non-embedding parameters".
RECURRENTGEMMA_2B = {
    "_block_types": ["recurrent", "recurrent", "attention"], "architectures": ["RecurrentGemmaForCausalLM"],
    "attention_bias": False, "attention_dropout": 0.0, "attention_window_size": 2048, "conv1d_width": 4,
    "embeddings_scale_by_sqrt_dim": True, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 2560, "intermediate_size": 15360, "logits_soft_cap": 30.0, "lru_width": 2560,
    "model_type": "recurrent_gemma", "num_attention_heads": 10, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "vocab_size": 256000,
}

#: llava-hf/llava-1.5-7b-hf config.json (https://huggingface.co/llava-hf/llava-1.5-7b-hf), the fields
#: that matter here: a CLIP vision tower beside a Llama text model (transformers LlavaConfig).
LLAVA_1_5_7B = {
    "architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "image_token_index": 32000,
    "text_config": {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                    "intermediate_size": 11008, "vocab_size": 32064},
    "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "num_hidden_layers": 24,
                      "image_size": 336, "patch_size": 14},
}
