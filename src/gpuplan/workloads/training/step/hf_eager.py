"""Hugging Face transformers decoder layers run eagerly (`Framework.TRANSFORMERS`: HF Trainer, TRL,
Axolotl, accelerate or a plain PyTorch loop over an `AutoModelForCausalLM`): the HBM bytes of the
operators between the GEMMs and SDPA, counted from the modelling code, and the residual stream's
dtype under torch.autocast.

Source: transformers `models/llama/modeling_llama.py` (v4.46 .. v5; Mistral, Qwen2/3, Phi-3 and
the other Llama-shaped decoders copy these modules), per token of one layer, forward, bytes per
element read + written (bf16 = 2, fp32 = 4; r = the residual stream's bytes):

- `LlamaRMSNorm.forward`: `hidden_states.to(torch.float32)` (read r, write 4; no kernel when r = 4),
  `.pow(2)` (4 + 4), `.mean(-1, keepdim=True)` (read 4), `hidden_states * torch.rsqrt(variance + eps)`
  (4 + 4), `.to(input_dtype)` (read 4, write r; none when r = 4), `self.weight * ...` (read r, write
  r): 36 B per hidden element at r = 2, 28 at r = 4; `norms_per_layer` of them.
- Residual adds `hidden_states = residual + hidden_states`: read r + 2 (the projection's bf16
  output), write r: 6 B at r = 2, 10 at r = 4; two per layer.
- Under autocast over an fp32 model (r = 4) every Linear that reads the norm output casts it to
  bf16/fp16 first (autocast's `cached_cast` caches only leaf tensors, not activations): read 4,
  write 2 per hidden element per such module (q, k, v, gate, up in Llama; the fused qkv_proj and
  gate_up_proj in Phi-3): `native_amp.INPUT_CAST_BYTES`; `native_amp.autocast_over_fp32` says when.
- `apply_rotary_pos_emb` on q and k: `q * cos` (2 + 2), `rotate_half(q)` = `torch.cat((-x2, x1))`
  (neg over half: 1 + 1; cat: 2 + 2), `* sin` (2 + 2), the sum (4 + 2): 20 B per q and k element.
- `sdpa_attention_forward`: `attn_output.transpose(1, 2).contiguous()` before `o_proj`: 2 + 2 per q
  element (GQA runs in SDPA itself, `enable_gqa`, no `repeat_kv` copy on torch >= 2.5).
- `LlamaMLP`: `down_proj(act_fn(gate_proj(x)) * up_proj(x))`: silu (2 + 2), the product (2 + 2 + 2):
  10 B per FFN element (Phi-3's `gate_up_proj` + `chunk` makes views, the same 10).
- Attention masks (`masking_utils._ignore_causal_mask_sdpa`): SDPA gets `is_causal=True` and no mask
  only when no token is padded and `local_attention_size is None or kv_length < local_attention_size`.
  A sliding-window layer whose window is not longer than the sequence (Phi-3-mini-4k: 2,047 at 4,096
  tokens; Mistral v0.1: 4,096) gets a materialised boolean mask instead, so the kernel visits every
  (query, key) block (`masked_attention_flops_per_token`: all s keys per query, not the window's
  causal share), and FlashAttention, which takes no mask, cannot run it.
- Backward moves 2 x the forward bytes (the convention of every elementwise term in step.compute).
- Cross entropy (`loss_utils.ForCausalLMLoss`): `logits.float()` (2 + 4), `cross_entropy`'s
  log_softmax (4 + 4; the nll gather is per token); backward: the nll gradient written dense (4),
  log_softmax's backward (read 4 + its saved output 4, write 4), the cast back (4 + 2): 36 B per logit.

LayerNorm / GELU encoder layers (`applies_layernorm_gelu`; transformers `models/bert/modeling_bert.py`
BertLayer, post-norm: `BertSelfOutput` / `BertOutput` run `LayerNorm(dropout(dense(x)) + input_tensor)`,
`BertIntermediate` runs `gelu(dense(x))`), per token of one layer, forward, b = 2 (the matmuls' dtype):

- `nn.LayerNorm` (one `native_layer_norm` kernel: read r, write r; autocast's fp32 op list makes its
  output fp32, so r = 4 under autocast over an fp32 model): 4 B per hidden element at r = 2, 8 at r = 4;
  two per layer.
- `self.dropout(hidden_states)` on the attention-output and FFN-output projections (hidden dropout > 0;
  `native_dropout`: read b, write b and a 1-byte bool mask): 5 B per hidden element, two per layer.
- `hidden_states + input_tensor`: read b + r, write r (type promotion to the residual's dtype): the
  residual add above, 6 / 10 B; two per layer. The Linear biases are fused into the GEMM (aten
  `at::linear`: a contiguous 3-D input with bias runs `addmm` / `_flatten_nd_linear`).
- r = 4: the q, k, v and intermediate Linears each cast the fp32 LayerNorm output to b
  (`native_amp.INPUT_CAST_BYTES`, `native_amp.norm_readers`).
- `BertSelfAttention` (eager): `torch.matmul` on the permuted q, k^T and v views folds their batch
  dimensions with `reshape` (aten `_matmul_impl`: `tensor1.expand(...).reshape({expand_batch_product, n,
  m1})`), which copies a (b, a, s, d) view of a (b, s, a d) projection: read b, write b per q, k and v
  element (`EAGER_MATMUL_COPY_BYTES`); `context_layer.permute(0, 2, 1, 3).contiguous()`: the attention
  output copy above. The score chain is the unfused attention core's (`native_amp.UNFUSED_AMP_SCORE_*`).
- `BertIntermediate`: `ACT2FN["gelu"]` = `F.gelu` (erf), one kernel, read b, write b: 4 B per FFN
  element. GPT-2's `gelu_new` (tanh form written as several ops, `NewGELUActivation`) moves more: this
  count is a lower bound there.
- The embeddings' sum, LayerNorm and dropout run once per model, not per layer: not counted. An encoder
  attends bidirectionally (no causal mask): on the unfused path the s x s scores are computed whole
  either way; gpuplan's ModelSpec has no encoder flag, so a fused kernel's causal FLOP share is not
  doubled for encoders.
"""

from __future__ import annotations

import dataclasses

from gpuplan.specs.execution import Framework
from gpuplan.specs.model import FfnKind, NormKind
from gpuplan.workloads.training.step import native_amp

#: LlamaRMSNorm forward bytes per hidden element (module docstring), by the residual stream's bytes.
RMSNORM_BYTES = {2: 36.0, 4: 28.0}
#: `residual + hidden_states` forward bytes per hidden element, by the residual stream's bytes.
RESIDUAL_ADD_BYTES = {2: 6.0, 4: 10.0}
#: Rotary embedding on q and k, per element (module docstring).
ROPE_BYTES = 20.0
#: `transpose(1, 2).contiguous()` of the attention output, per q element.
ATTN_OUT_COPY_BYTES = 4.0
#: SwiGLU `act_fn(gate) * up`, per FFN element.
SWIGLU_BYTES_PER_FFN = 10.0
#: ForCausalLMLoss: fp32 upcast, log_softmax and their backward, per logit.
LOSS_BYTES_PER_LOGIT = 36.0
#: nn.LayerNorm forward bytes per hidden element (read r, write r), by the residual stream's bytes.
LAYERNORM_BYTES = {2: 4.0, 4: 8.0}
#: nn.Dropout on a 16-bit projection output, per element: read 2, write 2, bool mask 1.
DROPOUT_BYTES = 5.0
#: torch.matmul's reshape copy of a permuted q, k or v view, per element: read 2, write 2.
EAGER_MATMUL_COPY_BYTES = 4.0
#: F.gelu on the 16-bit intermediate, per FFN element: read 2, write 2.
GELU_BYTES_PER_FFN = 4.0


def applies(ctx) -> bool:
    """Whether the layer's elementwise bytes are counted from the HF Llama modules: the framework is
    `transformers` and the model is Llama-shaped (RMSNorm, SwiGLU, rotary positions)."""
    model = ctx.model
    return (ctx.framework is Framework.TRANSFORMERS and model.norm is NormKind.RMSNORM
            and model.ffn_kind is FfnKind.SWIGLU and not model.learned_position_embeddings)


def applies_layernorm_gelu(ctx) -> bool:
    """Whether the layer's elementwise bytes are counted from the HF BERT-style modules: the framework is
    `transformers` and the model has LayerNorm and a plain (ungated) GELU FFN (module docstring)."""
    model = ctx.model
    return (ctx.framework is Framework.TRANSFORMERS and model.norm is NormKind.LAYERNORM
            and model.ffn_kind is FfnKind.GELU)


def layernorm_gelu_bytes_per_token(ctx) -> float:
    """Forward bytes per token of one BERT-style layer's LayerNorms, dropouts, residual adds, (r = 4)
    input casts, the eager matmul's q / k / v copies and the attention output copy (module docstring)."""
    r = residual_bytes(ctx)
    per_hidden = 2.0 * LAYERNORM_BYTES[r] + 2.0 * RESIDUAL_ADD_BYTES[r]
    if ctx.model.hidden_dropout > 0:
        per_hidden += 2.0 * DROPOUT_BYTES
    if r == 4:
        per_hidden += native_amp.norm_readers(ctx) * native_amp.INPUT_CAST_BYTES
    heads = EAGER_MATMUL_COPY_BYTES * (ctx.q_dim + 2.0 * ctx.kv_dim) + ATTN_OUT_COPY_BYTES * ctx.q_dim
    return per_hidden * float(ctx.hidden) + heads


def residual_bytes(ctx) -> int:
    """Bytes per element of the residual stream: 4 under autocast over fp32 parameters (the embedding
    lookup is not autocast, so the stream stays fp32), else 2."""
    return 4 if native_amp.autocast_over_fp32(ctx) else 2


def hidden_bytes_per_token(ctx) -> float:
    """Forward bytes per token of one layer's norms, residual adds and (r = 4) input casts: the
    part that scales with the hidden size (not divided by tp: HF layers run without tensor parallelism)."""
    r = residual_bytes(ctx)
    h = float(ctx.hidden)
    per_hidden = ctx.model.norms_per_layer * RMSNORM_BYTES[r] + 2.0 * RESIDUAL_ADD_BYTES[r]
    if r == 4:
        per_hidden += native_amp.norm_readers(ctx) * native_amp.INPUT_CAST_BYTES
    return per_hidden * h


def masked_attention_flops_per_token(layers, seq_len: int) -> float:
    """Attention-core forward FLOPs per token, mean over `layers` (the inventory's `LayerOps`), as HF's SDPA
    path runs them (module docstring): a layer whose window is at most `seq_len` computes every key of a
    dense masked score matrix; the others run causal (`is_causal=True`) over their keys."""
    total = 0.0
    for layer in layers:
        core = layer.core
        if core.window is not None and core.window <= seq_len:
            total += dataclasses.replace(core, window=None).forward_flops(seq_len, causal=False)
        else:
            total += core.forward_flops(seq_len, True)
    return total


def head_bytes_per_token(ctx) -> float:
    """Forward bytes per token of rotary on q and k and the attention output's copy."""
    return ROPE_BYTES * (ctx.q_dim + ctx.kv_dim) + ATTN_OUT_COPY_BYTES * ctx.q_dim


__all__ = ["ATTN_OUT_COPY_BYTES", "DROPOUT_BYTES", "EAGER_MATMUL_COPY_BYTES", "GELU_BYTES_PER_FFN",
           "LAYERNORM_BYTES", "LOSS_BYTES_PER_LOGIT", "RESIDUAL_ADD_BYTES", "RMSNORM_BYTES",
           "ROPE_BYTES", "SWIGLU_BYTES_PER_FFN", "applies", "applies_layernorm_gelu", "head_bytes_per_token",
           "layernorm_gelu_bytes_per_token",
           "hidden_bytes_per_token", "masked_attention_flops_per_token", "residual_bytes"]
