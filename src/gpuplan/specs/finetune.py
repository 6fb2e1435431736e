"""Fine-tuning choices of a training plan: which weights train, how the frozen base is stored, the
optimizer, what is offloaded to the host and whether an fp32 master copy exists.

One typed value, `FineTuning`, carried by `TrainPlan.fine_tuning` and read by the memory and the
step-time models alike. Its columns are those of ../shared/validation/SCHEMA.md (training.csv):

- `method`: FULL (every weight trains), LORA (frozen base + low-rank adapters, Hu et al. 2021) or
  QLORA (LoRA over a 4-bit frozen base, Dettmers et al. 2023).
- `lora_rank` r and `lora_targets`: the adapted projections, as Hugging Face module names
  (`q_proj k_proj v_proj o_proj gate_proj up_proj down_proj`, and `lm_head`). Presets: `attn`
  (q, k, v, o), `qv` (q and v: PEFT's default `target_modules` for Llama, peft/utils/constants.py
  TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), `all_linear` (attention and MLP
  projections; PEFT's "all-linear" leaves the output layer out). torchtune's names (`output_proj`,
  `w1`, `w2`, `w3`) and GPT-style ones (`fc1`, `fc2`, `dense`) are read as their Llama equivalents.
- `lora_dropout`: PEFT's LoraConfig default 0.0; a positive value saves a dropped copy of each
  adapted projection's input and its mask.
- `base_dtype`: storage of the frozen base linears: bf16 / fp16 / fp32, int8 (bitsandbytes
  LLM.int8, fp32 row scales), nf4 / fp4 (bitsandbytes 4-bit, 64-element blocks). Default: the
  activation dtype for LoRA, nf4 for QLoRA.
- `double_quant`: 4-bit block scales themselves quantised to 8 bits (bitsandbytes
  `compress_statistics`; True is the default of `bnb.nn.Linear4bit` and what torchao's NF4Tensor,
  torchtune's QLoRA, always does).
- `optimizer`: adamw (two moments), adamw_8bit / paged_adamw_8bit (bitsandbytes blockwise 8-bit;
  paged states live in CUDA unified memory), adamw_4bit (torchao), adafactor (factored second
  moment, HF transformers), sgd (momentum), lion (one moment).
- `optimizer_impl`: how the AdamW step is issued: loop (a Python loop over the parameter tensors,
  Hugging Face `adamw_hf`, torch foreach=False), foreach (torch's multi-tensor ops) or fused (one
  multi-tensor kernel); None = the framework's step as the model has it (one fused memory-bound
  pass, `workloads.training.step.optimizer`). AdamW on the GPU with fp32 states only; loop also
  with adafactor (transformers Adafactor) and adamw_8bit (bitsandbytes), whose steps are per-tensor loops.
- `offload`: none, optimizer (states and step on the CPU: ZeRO-Offload, torchao CPUOffloadOptimizer),
  params (also the parameters and gradients: FSDP CPUOffload(offload_params=True), ZeRO-3
  offload_param), nvme (ZeRO-Infinity).
- `master_weights`: fp32 (mixed precision) or none (pure bf16/fp16: weights, gradients and moments
  in the compute dtype, as torchtune, LitGPT `bf16-true` and Answer.AI's fsdp_qlora train).
- `chunked_loss`: the output head and cross-entropy run in chunks of the sequence (torchtune
  `CEWithChunkedOutputLoss`, LitGPT `chunked_cross_entropy`), so no fp32 copy of the whole logits
  is held (`workloads.training.memory.loss_bytes_per_vocab_entry`).
- `loss_chunk_tokens`: tokens of the sequence per chunk of a chunked loss's output head (LitGPT's
  `lm_head_chunk_size=128`: `[self.lm_head(x_i) for x_i in x.split(lm_head_chunk_size, dim=1)]`,
  lit_gpt/lora.py@8641822 `GPT.forward`), so the head runs ceil(seq_len / chunk) times; None: torchtune's
  fixed count of chunks (`output_head.CHUNKED_LOSS_CHUNKS`). Read by `output_head.head_calls`.
- `offload_activations`: the activations saved for backward are copied to host memory in the
  forward and back in the backward (torchtune `OffloadActivations`, saved-tensor hooks): the stored
  layers' activations leave the GPU.
- `base_matmul_keeps_input`: each 4-bit base matmul keeps its input for backward, adapted or not:
  bitsandbytes before 0.43.2, whose `MatMul4Bit.forward` stored `ctx.tensors = (A, B)` whenever an
  input needed a gradient (bitsandbytes/autograd/_functions.py; fixed to `(None, B)` by PR #1270,
  commit 9e753741, 2024-07-16, first in 0.43.2). Default False: the library as it is now.
- `optimizer_in_backward`: each parameter's optimizer steps as soon as its gradient is accumulated and
  then frees it (torchtune `optimizer_in_bwd: True`: training/memory.py `register_optim_in_bwd_hooks`,
  a post-accumulate-grad hook running `step()` then `zero_grad()`), so the gradients never exist all
  at once; torchtune refuses it with gradient accumulation (recipes/full_finetune_single_device.py).
- `logits_held_in_backward`: the training loop keeps the model's output, whose logits Hugging Face's
  causal-LM heads return upcast to fp32 (transformers LlamaForCausalLM.forward, v4.37-v4.40:
  `logits = logits.float()`, returned in `CausalLMOutputWithPast.logits`), alive until backward has
  run: Answer.AI's fsdp_qlora train.py@4cd6923 binds `output = model(...)`, calls
  `loss.backward()` and only then `output = None` ("Delete the output so more memory frees up before
  the next forward pass"). Lightning Fabric does the same to every LitGPT run: its module wrapper converts
  the model's output to torch's default dtype, fp32 (`_FabricModule.forward` calls the precision plugin's
  `convert_output`, `dst_type=torch.get_default_dtype()`, for bf16-true, bf16-mixed and bitsandbytes alike:
  lightning@71aed751 src/lightning/fabric/wrappers.py, plugins/precision/half.py, bitsandbytes.py), and
  lit-gpt's finetune/lora.py@8641822 binds that output (`logits`, the list of 128-token chunks) across
  `fabric.backward(loss)`. With `chunked_loss` too the chunks' cross-entropy reads the held fp32 logits
  (`loss_memory.loss_bytes_per_vocab_entry`). Default False: loops that drop it first (the HF Trainer's
  `compute_loss` returns the loss alone; torchtitan and torchtune `del` the logits before backward).
- `zero_grad_keeps_buffers`: the loop zeroes the gradients in place between steps instead of freeing
  them, so every `.grad` exists through the next forward: `zero_grad()` before PyTorch 2.0, whose
  default `set_to_none=False` filled them with zeros (pytorch/pytorch PR #92731, "Gradients are now
  set to `None` instead of zeros by default", first in 2.0.0 of 2023-03-15), called by the HF Trainer
  as `model.zero_grad()` until transformers PR #22136 (2023-03-13) passed `set_to_none=True`. Default
  False: the libraries as they are now.
- `fused_qkv_views`: the model computes q, k and v with one fused projection and splits its output by
  views (LitGPT lit_gpt/model.py@8641822 `CausalSelfAttention.forward`: `qkv.view(...).permute(...)
  .split(...)`, then `reshape`), adapted by one LoRA over the fused output (lit_gpt/lora.py@8641822
  `LoRAQKVLinear`: one `lora_dropout(x)` shared by the enabled q / k / v parts). What SDPA keeps
  differs from separate projections (`workloads.training.finetune_activations`, "Fused QKV").
- `quantized_head`: the output head is stored like the quantised base, not kept in 16 bits: Lightning's
  `BitsandbytesPrecision` (as LitGPT's `--quantize bnb.*` builds it, with no `ignore_modules`) replaces every
  `torch.nn.Linear` created under `fabric.init_module`, the head's included (lightning@71aed751
  src/lightning/fabric/plugins/precision/bitsandbytes.py: `init_context` swaps the `torch.nn.Linear` class,
  `_convert_layers` replaces each Linear not under `ignore_modules`). Its matmuls then dequantise the whole
  head, vocab x hidden in the activation dtype, in forward and backward (the largest dequantised weight:
  `finetune_memory`, `dequant_workspace`). Default False: the stacks that keep the head in 16 bits
  (`base_weights.float_bytes`). An untied head only (a tied head is the embedding's table).
- `compiled`: the training step runs under `torch.compile` (torchtune `compile: True`), whose
  partitioner recomputes pointwise ops in backward instead of keeping their outputs; default False:
  eager PyTorch (HF Trainer, LitGPT, fsdp_qlora, torchtune's default), whose unfused modules keep
  more (`workloads.training.finetune_memory`, "Eager modules").

Impossible combinations are refused when the value is built (one line naming the field); those that
involve the rest of the plan (sharding, precision) are checked by `TrainPlan`.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from gpuplan.specs._base import Spec
from gpuplan.specs.choices import BaseDtype, FineTuneMethod, MasterWeights, Offload, Optimizer, OptimizerImpl  # noqa: F401


#: The projections each preset adapts (module docstring).
LORA_TARGET_PRESETS: dict[str, tuple[str, ...]] = {
    "attn": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "qv": ("q_proj", "v_proj"),
    "all_linear": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
}
#: Module names other stacks use for the same projections (torchtune's Llama: output_proj, w1
#: (gate), w3 (up), w2 (down); GPT-style: dense (attention output), fc1 (up), fc2 (down); the
#: output head as torchtune names it).
LORA_TARGET_ALIASES: dict[str, str] = {
    "output_proj": "o_proj", "dense": "o_proj", "w1": "gate_proj", "w3": "up_proj", "w2": "down_proj",
    "fc1": "up_proj", "fc2": "down_proj", "output": "lm_head",
}
LORA_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
#: Upper bound of `loss_chunk_tokens` (bounded work: a chunk longer than any sequence is one chunk).
MAX_LOSS_CHUNK_TOKENS = 2**24
#: PEFT LoraConfig defaults: r = 8, lora_dropout = 0.0 (peft/tuners/lora/config.py).
DEFAULT_LORA_RANK = 8
MAX_LORA_RANK = 1 << 16


def parse_lora_targets(text: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Module names of a `lora_targets` cell or option: a preset (`attn`, `qv`, `all_linear`) or a
    `+`- or comma-joined list of names (aliases mapped, duplicates dropped, order kept). ValueError
    naming the allowed values for an unknown name."""
    if isinstance(text, (tuple, list)):
        parts = [str(p) for p in text]
    else:
        raw = text.strip().lower()
        if raw in LORA_TARGET_PRESETS:
            return LORA_TARGET_PRESETS[raw]
        parts = [p for p in raw.replace(",", "+").split("+")]
    out: list[str] = []
    for part in (p.strip().lower() for p in parts):
        if part in LORA_TARGET_PRESETS:
            names = LORA_TARGET_PRESETS[part]
        else:
            name = LORA_TARGET_ALIASES.get(part, part)
            if name not in LORA_MODULES:
                allowed = ", ".join(list(LORA_TARGET_PRESETS) + list(LORA_MODULES))
                raise ValueError(f"unknown LoRA target '{part}' (allowed: {allowed}, or a '+'-joined list)")
            names = (name,)
        out += [n for n in names if n not in out]
    if not out:
        raise ValueError("no LoRA target given (allowed: attn, qv, all_linear or a '+'-joined list of module names)")
    return tuple(out)


class FineTuning(Spec):
    """The fine-tuning choices of a plan (module docstring). The default is ordinary training:
    every weight trains with AdamW and an fp32 master copy, nothing offloaded."""

    method: FineTuneMethod = FineTuneMethod.FULL
    lora_rank: int | None = Field(default=None, gt=0, le=MAX_LORA_RANK)
    lora_targets: tuple[str, ...] | None = None
    lora_dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    base_dtype: BaseDtype | None = None
    double_quant: bool = True
    optimizer: Optimizer = Optimizer.ADAMW
    optimizer_impl: OptimizerImpl | None = None
    offload: Offload = Offload.NONE
    master_weights: MasterWeights = MasterWeights.FP32
    chunked_loss: bool = False
    offload_activations: bool = False
    base_matmul_keeps_input: bool = False
    optimizer_in_backward: bool = False
    logits_held_in_backward: bool = False
    fused_qkv_views: bool = False
    zero_grad_keeps_buffers: bool = False
    quantized_head: bool = False
    loss_chunk_tokens: int | None = Field(default=None, gt=0, le=MAX_LOSS_CHUNK_TOKENS)

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _targets(cls, value):
        return None if value is None or value == "" else parse_lora_targets(value)

    @model_validator(mode="after")
    def _consistent(self):
        adapters = self.method is not FineTuneMethod.FULL
        if not adapters:
            for name in ("lora_rank", "lora_targets", "base_dtype"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} applies to LoRA / QLoRA only; with finetune full every weight trains "
                                     f"(give finetune lora or qlora)")
            if self.lora_dropout:
                raise ValueError("lora_dropout applies to LoRA / QLoRA only (give finetune lora or qlora)")
        base = self.base_dtype
        if self.method is FineTuneMethod.QLORA and base is not None and not base.four_bit:
            raise ValueError(f"finetune qlora stores the frozen base in 4 bits: base_dtype must be nf4 or fp4, "
                             f"not {base.value} (use finetune lora for a {base.value} base)")
        if self.method is FineTuneMethod.LORA and base is not None and base.four_bit:
            raise ValueError(f"a {base.value} base is QLoRA: give finetune qlora (lora takes bf16, fp16, fp32 or int8)")
        if self.base_matmul_keeps_input and not (self.method is FineTuneMethod.QLORA or (base is not None and base.four_bit)):
            raise ValueError("base_matmul_keeps_input describes bitsandbytes' 4-bit matmul: it needs finetune qlora "
                             "(an nf4 or fp4 base)")
        if self.quantized_head and not (self.method is FineTuneMethod.QLORA or (base is not None and base.quantized)):
            raise ValueError("quantized_head stores the output head like the quantised base: it needs finetune qlora "
                             "or a quantised base_dtype (nf4, fp4, int8)")
        if self.loss_chunk_tokens is not None and not self.chunked_loss:
            raise ValueError("loss_chunk_tokens sizes the chunks of a chunked loss: give chunked_loss too")
        if self.optimizer_in_backward and self.offload.moves_optimizer:
            raise ValueError(f"optimizer_in_backward steps each parameter on the GPU as its gradient arrives; offload "
                             f"{self.offload.value} steps the optimizer on the CPU: give one of the two")
        if self.optimizer is Optimizer.PAGED_ADAMW_8BIT and self.offload.moves_optimizer:
            raise ValueError("paged_adamw_8bit already pages its states to host memory; offload moves them to the CPU: "
                             "give one of the two (optimizer adamw_8bit with offload, or offload none)")
        impl = self.optimizer_impl
        if impl is not None and impl is not OptimizerImpl.FUSED:
            loops = (Optimizer.ADAMW, Optimizer.ADAFACTOR, Optimizer.ADAMW_8BIT)
            if impl is OptimizerImpl.LOOP and self.optimizer not in loops:
                raise ValueError(f"optimizer_impl loop times {', '.join(o.value for o in loops)}, not "
                                 f"{self.optimizer.value} (or optimizer_impl fused)")
            if impl is OptimizerImpl.FOREACH and self.optimizer is not Optimizer.ADAMW:
                raise ValueError(f"optimizer_impl foreach is an AdamW implementation: give optimizer adamw, not "
                                 f"{self.optimizer.value} (or optimizer_impl fused)")
            if self.offload.moves_optimizer:
                raise ValueError(f"optimizer_impl {impl.value} times AdamW on the GPU; offload {self.offload.value} runs "
                                 f"the step on the CPU (give offload none)")
            if self.master_weights is MasterWeights.NONE:
                raise ValueError(f"optimizer_impl {impl.value} counts fp32 master weights and moments; master_weights "
                                 f"none keeps them in 16 bits (give master_weights fp32)")
        return self

    @property
    def adapters(self) -> bool:
        """LoRA or QLoRA: a frozen base with trainable adapters."""
        return self.method is not FineTuneMethod.FULL

    @property
    def rank(self) -> int:
        return self.lora_rank or DEFAULT_LORA_RANK

    @property
    def targets(self) -> tuple[str, ...]:
        return self.lora_targets or LORA_TARGET_PRESETS["qv"]

    def base_storage(self, activation_dtype: str) -> BaseDtype:
        """The frozen base's storage dtype: as given, else nf4 for QLoRA and the activation dtype
        (bf16 / fp16) for LoRA; under full fine-tuning the weights are the working copy (the
        activation dtype)."""
        if self.base_dtype is not None:
            return self.base_dtype
        return BaseDtype.NF4 if self.method is FineTuneMethod.QLORA else BaseDtype(activation_dtype)

    @property
    def ordinary(self) -> bool:
        """Ordinary mixed-precision training (the model of `workloads.training.memory` alone)."""
        return (self.method is FineTuneMethod.FULL and self.optimizer is Optimizer.ADAMW
                and self.offload is Offload.NONE and self.master_weights is MasterWeights.FP32
                and not self.chunked_loss and not self.offload_activations and not self.optimizer_in_backward
                and not self.logits_held_in_backward and not self.fused_qkv_views and not self.zero_grad_keeps_buffers)

    def label(self) -> str:
        """A short human label: `qlora r64 nf4-dq all_linear, adamw, offload params, pure bf16`."""
        parts = []
        if self.adapters:
            base = self.base_dtype.value if self.base_dtype else ("nf4" if self.method is FineTuneMethod.QLORA else "bf16")
            dq = "-dq" if base in ("nf4", "fp4") and self.double_quant else ""
            parts.append(f"{self.method.value} r{self.rank} {base}{dq} {'+'.join(self.targets)}")
        else:
            parts.append("full")
        parts.append(self.optimizer.value if self.optimizer_impl is None
                     else f"{self.optimizer.value} ({self.optimizer_impl.value})")
        if self.offload is not Offload.NONE:
            parts.append(f"offload {self.offload.value}")
        if self.master_weights is MasterWeights.NONE:
            parts.append("no fp32 master")
        if self.chunked_loss:
            parts.append("chunked loss" + (f" ({self.loss_chunk_tokens}-token chunks)" if self.loss_chunk_tokens else ""))
        if self.offload_activations:
            parts.append("activations offloaded")
        if self.base_matmul_keeps_input:
            parts.append("4-bit matmuls keep inputs (bitsandbytes < 0.43.2)")
        if self.optimizer_in_backward:
            parts.append("optimizer in backward")
        if self.logits_held_in_backward:
            parts.append("fp32 logits held through backward")
        if self.fused_qkv_views:
            parts.append("fused qkv split by views")
        if self.zero_grad_keeps_buffers:
            parts.append("zero_grad keeps gradient buffers (PyTorch < 2.0)")
        if self.quantized_head:
            parts.append("output head quantised")
        return ", ".join(parts)


__all__ = ["BaseDtype", "DEFAULT_LORA_RANK", "FineTuneMethod", "FineTuning", "LORA_MODULES", "LORA_TARGET_ALIASES",
           "LORA_TARGET_PRESETS", "MasterWeights", "Offload", "Optimizer", "OptimizerImpl", "parse_lora_targets"]
