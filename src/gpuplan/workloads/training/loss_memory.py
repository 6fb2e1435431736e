"""The cross-entropy's memory at its peak: bytes per vocabulary entry per token of the last pipeline
rank's loss phase, by how the stack computes the loss (Megatron's fused vocab-parallel cross entropy,
PyTorch's cross entropy on fp32-cast logits eager or under torch.compile, torchtitan's loss-parallel
path, chunked losses). `memory.training_memory` and `memory_grid` multiply it by tokens x vocab / tp
(`memory_terms.logits_bytes`); the formulas are in `loss_bytes_per_vocab_entry`. A loop that holds
the model's fp32 logits through backward (`FineTuning.logits_held_in_backward`) adds them to the
loss's peak and to every later backward phase (`held_logits_bytes_per_vocab_entry`).
"""

from __future__ import annotations

from gpuplan.specs.execution import Framework
from gpuplan.specs.plan import TrainPlan
from gpuplan.workloads.training.finetune_memory import pytorch_loop_loss
from gpuplan.workloads.training.memory_terms import LOGITS_FP32_BYTES, activation_bytes
from gpuplan.workloads.training.output_head import CHUNKED_LOSS_CHUNKS, head_calls  # noqa: F401 (re-exported)

#: bytes per vocabulary entry per token at the peak of PyTorch's own cross-entropy on fp32-cast
#: logits (torchtitan: `cross_entropy(pred.flatten(0, 1).float(), labels)`, then `del pred` before
#: `loss.backward()`): in backward the saved fp32 log-softmax output (4), the fp32 gradient of it
#: that nll_loss_backward writes (4) and the fp32 gradient log_softmax_backward writes (4) are alive
#: together (12); the forward peak is 10 (bf16 logits 2 + fp32 copy 4 + log-softmax output 4).
#: Megatron's fused vocab-parallel cross entropy instead turns the fp32 copy into the softmax and
#: then the gradient in place: b + 4 (`LOGITS_FP32_BYTES`).
PYTORCH_CROSS_ENTROPY_BYTES = 12.0
#: the same under tensor parallelism, where torchtitan computes the loss on vocabulary-sharded
#: logits (`loss_parallel`, torch/distributed/tensor/parallel/loss.py): forward `_log_softmax`
#: holds bf16 logits 2 + fp32 logits 4 + `shifted` 4 + `exp(shifted)` 4 (14); the fused backward
#: `_nll_loss_and_log_softmax_backward` computes `(grad_input + torch.exp(x)) * grad_output` with
#: the saved output x 4, `grad_input = zeros_like(x)` 4, `exp(x)` 4 and their sum 4 alive (16).
LOSS_PARALLEL_CROSS_ENTROPY_BYTES = 16.0
#: the same under torch.compile (`plan.compiled_loss`, torchtitan's `build_cross_entropy_loss` with
#: `training.compile`, since PR #1033 of 2025-04-02): Inductor fuses `.float()`, log-softmax and NLL into
#: reductions over the bf16 logits, saving only per-row statistics, and its backward writes the logits'
#: gradient in their dtype in one pointwise kernel. Alive at the peak: the logits (b) and their gradient
#: (b), 2 b = 4 B with bf16 logits. PyTorch's compiler team: compiled `cross_entropy` costs "~0 for just
#: fwd and ~d_input for fw+bw" (Dao-AILab/quack issue #48, 2025-10-07); torchtitan PR #1033: "compiled
#: saved more memory than chunked loss ever could". With tp > 1 the loss runs under torchtitan's
#: `loss_parallel` DTensor handlers (torch/distributed/tensor/parallel/loss.py), which this module keeps
#: at LOSS_PARALLEL_CROSS_ENTROPY_BYTES: no measurement of that path compiled was found.
COMPILED_CROSS_ENTROPY_LOGIT_COPIES = 2
#: a chunked cross-entropy over fp32 logits the loop holds (`FineTuning.logits_held_in_backward` with
#: `chunked_loss`: LitGPT under Lightning Fabric, whose wrapper returns the model's output chunks converted
#: to fp32): lit-gpt's `chunked_cross_entropy` (lit_gpt/utils.py@8641822) runs
#: `cross_entropy(logit_chunk, target_chunk, reduction="none")` on every chunk before `backward`, each
#: chunk's log_softmax saving its fp32 output for backward (LogSoftmaxBackward keeps `result`; nll_loss
#: reads the same tensor): 4 per entry for all chunks at once, beside the held logits (4). The chunks read
#: the held fp32 logits, so no upcast copy is made; the backward's gradients replace the saved outputs
#: chunk by chunk (one chunk's transient, left out). Peak 4 + 4 = 8 per entry.
CHUNKED_LOSS_ON_HELD_LOGITS_BYTES = LOGITS_FP32_BYTES


def loss_bytes_per_vocab_entry(plan: TrainPlan) -> float:
    """Bytes per vocabulary entry (of the vocab / tp shard) per token at the loss's peak: Megatron's
    fused vocab-parallel cross entropy b + 4 (logits in the compute dtype + the fp32 copy it turns
    into the softmax and the gradient in place); torchtitan's PyTorch cross entropy on fp32-cast
    logits 12 (`PYTORCH_CROSS_ENTROPY_BYTES`), 16 with tp > 1 (its loss-parallel implementation,
    `LOSS_PARALLEL_CROSS_ENTROPY_BYTES`). A chunked loss (`fine_tuning.chunked_loss`) keeps every
    chunk's logits in the compute dtype (torchtune's model returns the list of chunk outputs) and
    upcasts one chunk at a time: b + 4 / CHUNKED_LOSS_CHUNKS; over fp32 logits the loop holds, every
    chunk's fp32 log-softmax output is saved beside them: 4 + 4 (`CHUNKED_LOSS_ON_HELD_LOGITS_BYTES`). A fine-tuning plan on a plain PyTorch
    loop (finetune_memory.pytorch_loop_loss) computes PyTorch's cross entropy on fp32 logits: 12.
    A compiled loss (`plan.compiled_loss`) at tp = 1 holds the logits and their gradient only:
    COMPILED_CROSS_ENTROPY_LOGIT_COPIES x b. Unchunked, plus the fp32 logits a loop holds
    (`held_logits_bytes_per_vocab_entry`)."""
    held = held_logits_bytes_per_vocab_entry(plan)
    if plan.fine_tuning.chunked_loss:
        if held:  # every chunk's cross entropy on the held fp32 logits keeps its fp32 log-softmax output
            return CHUNKED_LOSS_ON_HELD_LOGITS_BYTES + held
        return activation_bytes(plan.precision) + LOGITS_FP32_BYTES / CHUNKED_LOSS_CHUNKS
    if plan.compiled_loss and plan.tp == 1:
        return COMPILED_CROSS_ENTROPY_LOGIT_COPIES * activation_bytes(plan.precision) + held
    if plan.framework is Framework.TORCHTITAN or pytorch_loop_loss(plan):
        return (LOSS_PARALLEL_CROSS_ENTROPY_BYTES if plan.tp > 1 else PYTORCH_CROSS_ENTROPY_BYTES) + held
    return activation_bytes(plan.precision) + LOGITS_FP32_BYTES + held


def held_logits_bytes_per_vocab_entry(plan: TrainPlan) -> float:
    """Bytes per vocabulary entry (of the vocab / tp shard) per token of fp32 logits the training loop
    keeps alive through backward (`FineTuning.logits_held_in_backward`: Answer.AI fsdp_qlora
    train.py@4cd6923 holds `output` until `loss.backward()` has returned; transformers'
    LlamaForCausalLM returns `logits.float()`): `LOGITS_FP32_BYTES` (4), else 0. On top of the loss's
    own tensors at its peak: in PyTorch's cross entropy the held logits (4) sit beside the saved
    log-softmax output (4), nll_loss_backward's gradient (4) and log_softmax_backward's (4): 16 per
    entry where `del`-ing loops peak at 12 (`PYTORCH_CROSS_ENTROPY_BYTES`); the forward's
    `logits[..., :-1, :].contiguous()` copy peaks lower (held 4 + copy 4 + log-softmax output 4).
    They stay through every layer's backward (`memory._rank_memory`'s backward phase)."""
    return LOGITS_FP32_BYTES if plan.fine_tuning.logits_held_in_backward else 0.0


__all__ = ["CHUNKED_LOSS_CHUNKS", "CHUNKED_LOSS_ON_HELD_LOGITS_BYTES", "head_calls", "held_logits_bytes_per_vocab_entry", "COMPILED_CROSS_ENTROPY_LOGIT_COPIES", "LOSS_PARALLEL_CROSS_ENTROPY_BYTES",
           "PYTORCH_CROSS_ENTROPY_BYTES", "loss_bytes_per_vocab_entry"]
