"""Model states of a fine-tuning run on one GPU: the frozen base in its storage dtype, the trainable
weights, their gradients and optimizer states, what offload moves to the host, and the extra
activations of LoRA adapters. Used by `workloads.training.memory.training_memory` whenever the plan's
`fine_tuning` is not ordinary training (specs.finetune.FineTuning.ordinary).

Per GPU of a pipeline rank (its layers; the embedding on the first rank, the final norm and an
untied head on the last), with b the activation bytes (2 for bf16 / fp16, 4 for fp32) and each
operator split by TP as the inventory splits it:

weights
- full fine-tuning: every parameter in its working dtype, b bytes;
- LoRA / QLoRA: each frozen projection in the base dtype (`base_weights.linear_storage_bytes`: NF4
  with its block scales, int8 with row scales, or a float dtype), the embeddings, norms, biases
  and the output head unquantised (`base_weights.float_bytes`; an untied head in the base dtype with
  `quantized_head`), plus the adapters (`lora`) in the working dtype.
gradients (trainable parameters only): `plan.grad_precision` bytes with fp32 master weights
  (Megatron's fp32 main grads, PyTorch AMP's fp32 .grad), the working dtype in pure low-precision
  training (`master_weights none`).
optimizer: `optimizer_states.optimizer_bytes` over the trainable tensors (fp32 states and an fp32
  master copy with master weights; states in the working dtype without); paged 8-bit states are
  reported apart (`paged_optimizer_bytes`: CUDA unified memory, outside PyTorch's counters).
sharding (ZeRO / FSDP over dp x cp, experts over their expert-data-parallel group, as ordinary
  training): zero1 divides the optimizer, zero2 also the gradients, zero3 / fsdp also the weights,
  frozen or not (FSDP flat-parameters hold both; fsdp_qlora shards the packed 4-bit weights).
offload (ZeRO-Offload, ZeRO-Infinity, FSDP CPUOffload): `optimizer` moves the optimizer states with
  the master copy and the gradients (streamed out as they are produced: torchao
  `CPUOffloadOptimizer`'s post-accumulate-grad hook, DeepSpeed's reduce buckets, of which one
  `reduce_bucket_size` = 5e8 elements of fp16 stays on the GPU: `DEEPSPEED_REDUCE_BUCKET_ELEMENTS`);
  `params` / `nvme` also the weights: the GPU keeps only what it computes with (the gather buffer
  below). Offloaded bytes are reported as `host_bytes`.
other
- `zero3_gather_buffer`: ZeRO-3 / FSDP gathers each layer for its forward and backward: two layers'
  unsharded weights in their storage bytes (the one computing and the one prefetched), as ordinary
  training counts them, here with the frozen base quantised.
- `fsdp_root_unsharded`: PyTorch FSDP never reshards its root unit between forward and backward
  (torch FSDP `_root_pre_forward`; FSDP2 docs: "The root FSDP state has its value specially set to
  False"); with the decoder layers wrapped one by one the root holds the embedding, final norm and
  head: those stay whole on every GPU (`torch_fsdp`: Framework.FSDP / TORCHTITAN, and `transformers`
  plans sharded zero3 / fsdp: HF Trainer / accelerate's FSDP plugin and Answer.AI's fsdp_qlora wrap torch
  `FullyShardedDataParallel`, whose `_post_forward_reshard` keeps the root's flat parameters
  unsharded, torch/distributed/fsdp/_runtime_utils.py: "Do not free the root's parameters in the
  post-forward for `FULL_SHARD`").
- `dequant_workspace`: a quantised base is dequantised into the activation dtype before each matmul
  (bitsandbytes `MatMul4Bit`: `dequantize_4bit` then the GEMM, forward and input-gradient backward):
  the largest projection's local weight in b bytes is alive while it multiplies; a quantised output head
  (`FineTuning.quantized_head`) is one of them, vocab x hidden, dequantised while the loss's tensors are
  alive (its forward ends the forward, its input gradient starts the backward).
- `offload_grad_bucket`: DeepSpeed's reduce bucket with ZeRO-Offload (above).
- `autocast_weight_copies`: a float base wider than the compute dtype (an fp32 base under bf16 /
  fp16 autocast, LitGPT's `bf16-mixed`) is cast to the compute dtype at every matmul, and the matmul
  keeps that copy for its input gradient (autograd saves the weight operand when the input needs a
  gradient; autocast's cast cache holds only leaves that require grad, so a frozen weight is cast
  anew): every stored layer's projections in b bytes (one layer's under full recompute, the layer
  being recomputed), and on the last rank the output head once per call (`output_head.head_calls`: a
  chunked head, LitGPT's 128-token chunks, keeps one cast per chunk until its backward).

Autocast over an fp32 model (`autocast_over_fp32_model`: `Framework.TRANSFORMERS` training every
weight with fp32 master weights, HF Trainer `bf16=True` over a model loaded in fp32): the parameters
are fp32 and are themselves the master copy, so a trainable parameter costs 4 (weight) + 4 (fp32
`.grad`) + 8 (Adam m + v) = 16 B, and no 16-bit working copy persists. torch.autocast casts each
weight to the compute dtype at its first matmul of the forward (aten/src/ATen/autocast_mode.cpp
`cached_cast`: a leaf that requires grad is cast once and cached for the autocast region) and the
matmul saves that cast for its input gradient, so it lives until that matmul's backward has run:
`autocast_weight_copies` = b x (every stored layer's projections + the output head on the last rank;
one layer's under full recompute). The embedding is not an autocast op (never cast). Under ZeRO-3 /
FSDP the gather buffer stands for them. This term is counted in both peak phases (at the end of
backward the casts are freed: an overestimate there, where the forward's end is the usual peak).

Fine-tuning stacks on a plain PyTorch loop (`pytorch_loop`: framework fsdp, torchtitan or other, the
stacks the fine-tuning recipes run: HF Trainer / PEFT, torchtune, LitGPT, Answer.AI's fsdp_qlora; not
Megatron or DeepSpeed, whose gradient buffers persist). Ordinary training keeps the accounting of
`memory` (its gates of record were set on it); a fine-tuning plan gets these rules:
- gradient lifetime: `.grad` is allocated by autograd's AccumulateGrad as each weight's backward runs
  and freed by `optimizer.zero_grad()` (set_to_none=True, PyTorch 2.0's default,
  torch/optim/optimizer.py). With one micro-batch per step no gradient exists while the forward's
  activations are stored, and at the end of backward the stored activations are gone: the peak is
  the larger of (stored activations + the loss or first backward phase, no gradients) and (every
  gradient + the backward working set) (`fine_tuning_peak`). With gradient accumulation the
  gradients persist across micro-batches and both are counted, as for ordinary training. With the
  optimizer stepped in backward (`FineTuning.optimizer_in_backward`, torchtune `optimizer_in_bwd`: each
  parameter's post-accumulate-grad hook runs its `step()` and `zero_grad()`) the end of backward holds
  at most one gradient, the largest trainable tensor's (`FineTuneStates.largest_gradient`). A loop that
  zeroes gradients in place (`FineTuning.zero_grad_keeps_buffers`: `zero_grad()` before PyTorch 2.0)
  keeps every gradient through the next forward, as with accumulation (`gradients_freed_between_steps`).
- the loss: PyTorch's cross entropy on logits cast to fp32 (transformers' LlamaForCausalLM
  `logits = logits.float()`, torchtune's `self.output(h).float()`): 12 B per logit at its peak
  (`memory.PYTORCH_CROSS_ENTROPY_BYTES`, as torchtitan), unless the loss is chunked; a loop that holds
  the model's output through backward (`FineTuning.logits_held_in_backward`, Answer.AI fsdp_qlora)
  adds its fp32 logits, 4 B per logit, to the loss's peak and to every later backward phase
  (`loss_memory.held_logits_bytes_per_vocab_entry`).
- activation offloading (`FineTuning.offload_activations`, torchtune `OffloadActivations`): the
  stored layers' activations wait in host memory, reported with the offloaded bytes.

Activations through a frozen base and what eager modules keep besides: `finetune_activations`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpuplan.layers.inventory import layer_ops, model_ops
from gpuplan.layers.operators import AttentionCore, Linear, Norm, Shard
from gpuplan.specs.finetune import BaseDtype, MasterWeights
from gpuplan.specs.execution import Framework
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.plan import Precision, Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.base_weights import float_bytes, linear_storage_bytes
from gpuplan.workloads.training.lora import adapted, head_projection, layer_projections
from gpuplan.workloads.training.optimizer_states import Tensor, optimizer_bytes
from gpuplan.workloads.training.output_head import head_calls

#: DeepSpeed `zero_optimization.reduce_bucket_size` default: 5e8 elements (DeepSpeed config docs,
#: "ZeRO optimizations": reduce_bucket_size 500,000,000), the gradient bucket ZeRO-Offload keeps on the GPU.
DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 5e8


def activation_bytes(precision: Precision) -> float:
    """b: 4 for fp32 / tf32 runs, else 2 (bf16 / fp16; FP8 recipes keep bf16 activations)."""
    return 4.0 if Precision(precision) in (Precision.FP32, Precision.TF32) else 2.0


def grad_bytes(plan: TrainPlan) -> float:
    """Bytes of a trainable parameter's gradient (module docstring)."""
    if plan.fine_tuning.master_weights is MasterWeights.NONE:
        return activation_bytes(plan.precision)
    return 4.0 if Precision(plan.grad_precision) in (Precision.FP32, Precision.TF32) else 2.0


def state_element_bytes(plan: TrainPlan) -> float:
    """s: fp32 states with master weights, the working dtype without (optimizer_states docstring)."""
    return 4.0 if plan.fine_tuning.master_weights is MasterWeights.FP32 else activation_bytes(plan.precision)


def master_copy_bytes(plan: TrainPlan) -> float:
    """An fp32 master copy beside 16-bit weights (4 B), none in fp32 runs, pure low precision or an fp32
    model under autocast (`autocast_over_fp32_model`: the parameters are the master copy)."""
    if (plan.fine_tuning.master_weights is MasterWeights.NONE or activation_bytes(plan.precision) >= 4
            or autocast_over_fp32_model(plan)):
        return 0.0
    return 4.0


def autocast_over_fp32_model(plan: TrainPlan) -> bool:
    """Whether the trained model itself is fp32 under torch.autocast (module docstring, "autocast over an
    fp32 model"): `Framework.TRANSFORMERS` with fp32 master weights training every weight in bf16 / fp16
    (HF Trainer `bf16=True` over a model loaded in fp32). Reads `framework`, `fine_tuning` and `precision`
    only, so the step's context passes too (step.native_amp.autocast_over_fp32)."""
    return (plan.framework is Framework.TRANSFORMERS and plan.fine_tuning.master_weights is MasterWeights.FP32
            and not plan.fine_tuning.adapters and Precision(plan.precision) in (Precision.BF16, Precision.FP16))


def fine_tuning_rules(plan: TrainPlan) -> bool:
    """Whether a plan's memory takes this module's rules: every fine-tuning plan, and every
    `Framework.TRANSFORMERS` plan (HF Trainer's loop, ordinary training included: `pytorch_loop`)."""
    return not plan.fine_tuning.ordinary or plan.framework is Framework.TRANSFORMERS


@dataclass
class _Held:
    """Bytes and parameters one GPU holds, dense (sharded over dp x cp) and expert (over expert dp)."""

    dense: float = 0.0
    expert: float = 0.0

    def add(self, value: float, expert: bool) -> None:
        if expert:
            self.expert += value
        else:
            self.dense += value

    def sharded(self, plan: TrainPlan, on: bool) -> float:
        if not on:
            return self.dense + self.expert
        return self.dense / (plan.dp * plan.cp) + self.expert / plan.expert_dp


@dataclass(frozen=True)
class FineTuneStates:
    """Model states of one GPU under a fine-tuning plan (module docstring)."""

    weights: float
    gradients: float
    optimizer: float
    paged_optimizer: float
    host: float
    other: dict[str, float] = field(default_factory=dict)
    trainable_params: float = 0.0
    frozen_params: float = 0.0
    bytes_per_param: dict[str, float] = field(default_factory=dict)
    largest_gradient: float = 0.0  # the largest one trainable tensor's gradient on this GPU (optimizer in backward)


@dataclass
class _Inventory:
    """What one GPU of a pipeline rank holds before sharding: frozen bytes, trainable tensors."""

    frozen_bytes: _Held = field(default_factory=_Held)
    frozen_params: _Held = field(default_factory=_Held)
    trainable: list[tuple[Tensor, bool]] = field(default_factory=list)  # (tensor, expert)
    largest_quantized: float = 0.0  # elements of the largest quantised projection (local)
    layer_storage: list[float] = field(default_factory=list)  # storage bytes of each layer (local, unsharded)
    layer_linear_elements: list[float] = field(default_factory=list)  # projection elements of each layer (local)


def _collect(model: ModelSpec, plan: TrainPlan, layers: list[int], first: bool, last: bool) -> _Inventory:
    ft = plan.fine_tuning
    b = activation_bytes(plan.precision)
    base = ft.base_storage("fp16" if Precision(plan.precision) is Precision.FP16 else "bf16")
    if not ft.adapters:
        base = BaseDtype.FP32 if b >= 4 else BaseDtype.BF16  # full fine-tuning: the working copy
    plain = float_bytes(base, b)
    tp, etp, ep = float(plan.tp), float(plan.expert_tp), float(plan.ep)
    inv = _Inventory()

    def frozen(elements: float, nbytes: float, expert: bool = False) -> None:
        inv.frozen_params.add(elements, expert)
        inv.frozen_bytes.add(nbytes, expert)

    def train(t: Tensor, expert: bool = False) -> None:
        inv.trainable.append((t, expert))

    for i in layers:
        storage = elements = 0.0
        for p in layer_projections(model, i):
            expert = p.shard is Shard.EXPERT
            k, n = p.local_shape(tp, etp)
            count = p.instances / (ep if expert else 1.0)
            elements += n * k * count
            if not ft.adapters:
                train(Tensor(n, k, count), expert)
                storage += b * n * k * count
                continue
            nbytes = linear_storage_bytes(k, n, base, ft.double_quant) * count
            frozen(n * k * count, nbytes, expert)
            storage += nbytes
            if base.quantized:
                inv.largest_quantized = max(inv.largest_quantized, n * k)
            if adapted(p, ft.targets):
                train(Tensor(ft.rank, k, count), expert)
                train(Tensor(n, ft.rank, count), expert)
                storage += b * ft.rank * (k + n) * count
        for op in layer_ops(model, i).ops:  # biases, norms, attention sinks: unquantised vectors
            vec = _vector_params(op, tp)
            if vec:
                storage += plain * vec
                if ft.adapters:
                    frozen(vec, plain * vec)
                else:
                    train(Tensor(vec))
        inv.layer_storage.append(storage)
        inv.layer_linear_elements.append(elements)
    table = model.vocab * model.hidden / tp
    tables = []
    if first:
        tables.append(table)
        if model.learned_position_embeddings:
            tables.append(float((model.max_position_embeddings or 0) * model.hidden))
    if last:
        if not model.tied_embeddings or plan.pp > 1:
            if ft.adapters and ft.quantized_head and not model.tied_embeddings:
                # stored like the base and dequantised whole for its matmuls (specs.finetune `quantized_head`)
                k, n = head_projection(model).local_shape(tp)
                frozen(n * k, linear_storage_bytes(k, n, base, ft.double_quant))
                inv.largest_quantized = max(inv.largest_quantized, n * k)
            else:
                tables.append(table)
        norm = float(model_ops(model).final_norm.params)
        if ft.adapters:
            frozen(norm, plain * norm)
        else:
            train(Tensor(norm))
        if ft.adapters and "lm_head" in ft.targets:
            head = head_projection(model)
            k, n = head.local_shape(tp)
            train(Tensor(ft.rank, k))
            train(Tensor(n, ft.rank))
    for t in tables:
        if ft.adapters:
            frozen(t, plain * t)
        else:
            train(Tensor(t / model.hidden, model.hidden))
    return inv


def _vector_params(op, tp: float) -> float:
    """Parameters of an operator that are vectors (biases, norm weights, attention sinks), local to
    one GPU: a column-split bias divides over tp, a row-split bias and norms stay whole."""
    if isinstance(op, Norm):
        return float(op.params)
    if isinstance(op, AttentionCore):
        return op.params / tp
    if isinstance(op, Linear) and op.bias and op.counts_params:
        per = op.out_features * op.instances
        return per / tp if op.shard is Shard.COLUMN else float(per)
    return 0.0


def rank_fine_tuning_states(model: ModelSpec, plan: TrainPlan, layers: list[int], first: bool, last: bool) -> FineTuneStates:
    """Model states of one GPU of the pipeline rank holding `layers` (module docstring)."""
    ft = plan.fine_tuning
    inv = _collect(model, plan, layers, first, last)
    b = activation_bytes(plan.precision)
    g = grad_bytes(plan)
    s = state_element_bytes(plan)
    master = master_copy_bytes(plan)
    zero3 = plan.sharding in (Sharding.ZERO3, Sharding.FSDP)
    zero2 = zero3 or plan.sharding is Sharding.ZERO2
    zero1 = plan.sharding is not Sharding.NONE

    trainable, train_w, train_g = _Held(), _Held(), _Held()
    opt_device, opt_paged = _Held(), _Held()
    largest = 0.0
    w = 4.0 if autocast_over_fp32_model(plan) else b  # the fp32 parameters are the master copy (master 0)
    for t, expert in inv.trainable:
        n = t.count * t.elements
        shard = (plan.expert_dp if expert else plan.dp * plan.cp) if zero2 else 1.0
        largest = max(largest, g * t.elements / shard)
        trainable.add(n, expert)
        train_w.add(w * n, expert)
        train_g.add(g * n, expert)
        ob = optimizer_bytes(ft.optimizer, [t], s, master)
        opt_device.add(ob.device, expert)
        opt_paged.add(ob.paged, expert)

    weights = inv.frozen_bytes.sharded(plan, zero3) + train_w.sharded(plan, zero3)
    gradients = train_g.sharded(plan, zero2)
    optimizer = opt_device.sharded(plan, zero1)
    paged = opt_paged.sharded(plan, zero1)
    host = 0.0
    other: dict[str, float] = {}
    if ft.offload.moves_optimizer:
        host += optimizer + gradients
        if plan.framework is Framework.DEEPSPEED:
            local = trainable.sharded(plan, zero2)
            other["offload_grad_bucket"] = min(DEEPSPEED_REDUCE_BUCKET_ELEMENTS, local) * 2.0
        optimizer = gradients = 0.0
    if ft.offload.moves_params:
        host += weights
        weights = 0.0
    if zero3 and inv.layer_storage:
        other["zero3_gather_buffer"] = 2.0 * max(inv.layer_storage)
        if torch_fsdp(plan):
            other["fsdp_root_unsharded"] = _root_bytes(model, plan, first, last)
    if inv.largest_quantized:
        other["dequant_workspace"] = b * inv.largest_quantized
    if ft.adapters and ft.base_storage("bf16") is BaseDtype.FP32 and b < 4 and inv.layer_linear_elements:
        held = inv.layer_linear_elements
        head = model.vocab * model.hidden / plan.tp * head_calls(plan) if last else 0.0  # a cast per head call
        other["autocast_weight_copies"] = b * ((max(held) if plan.recompute is Recompute.FULL else sum(held)) + head)
    if autocast_over_fp32_model(plan) and not zero3 and inv.layer_linear_elements:
        held = inv.layer_linear_elements  # the weight-cast cache: layers' projections, the head on the last rank
        head = model.vocab * model.hidden / plan.tp if last else 0.0
        other["autocast_weight_copies"] = b * ((max(held) if plan.recompute is Recompute.FULL else sum(held)) + head)
    n_train = trainable.dense + trainable.expert
    per_param = {"weights": w, "gradients": g,
                 "optimizer": (opt_device.dense + opt_device.expert + opt_paged.dense + opt_paged.expert) / n_train
                 if n_train else 0.0}
    return FineTuneStates(
        weights=weights, gradients=gradients, optimizer=optimizer, paged_optimizer=paged, host=host, other=other,
        trainable_params=n_train, frozen_params=inv.frozen_params.dense + inv.frozen_params.expert,
        bytes_per_param=per_param, largest_gradient=0.0 if ft.offload.moves_optimizer else largest,
    )


#: frameworks whose ZeRO-3 sharding is PyTorch FSDP (module docstring, `fsdp_root_unsharded`); a
#: `transformers` run under DeepSpeed's ZeRO-3 is planned as Framework.DEEPSPEED
TORCH_FSDP_FRAMEWORKS = (Framework.FSDP, Framework.TORCHTITAN, Framework.TRANSFORMERS)


def torch_fsdp(plan: TrainPlan) -> bool:
    """Whether PyTorch FSDP shards the plan: ZeRO-3 / fsdp sharding under TORCH_FSDP_FRAMEWORKS."""
    return plan.framework in TORCH_FSDP_FRAMEWORKS and plan.sharding in (Sharding.ZERO3, Sharding.FSDP)


def _root_bytes(model: ModelSpec, plan: TrainPlan, first: bool, last: bool) -> float:
    """Bytes of FSDP's root unit (embedding, final norm, untied head) unsharded on this GPU, in the
    unquantised dtype (module docstring)."""
    b = activation_bytes(plan.precision)
    base = plan.fine_tuning.base_storage("fp16" if Precision(plan.precision) is Precision.FP16 else "bf16")
    plain = float_bytes(base, b) if plan.fine_tuning.adapters else b
    table = model.vocab * model.hidden / plan.tp
    total = 0.0
    if first:
        total += table
    if last:
        total += model_ops(model).final_norm.params
        if not model.tied_embeddings or plan.pp > 1:
            total += table
    return plain * total


#: frameworks whose fine-tuning runs a plain PyTorch loop (module docstring)
PYTORCH_LOOPS = (Framework.FSDP, Framework.TORCHTITAN, Framework.OTHER, Framework.TRANSFORMERS)


def pytorch_loop(plan: TrainPlan) -> bool:
    """A fine-tuning plan on a plain PyTorch loop (module docstring); under `Framework.TRANSFORMERS` every
    plan, ordinary training too (HF Trainer's loop: no persistent gradient buffers, fp32 logits)."""
    return runs_pytorch_loop(plan.framework, plan.fine_tuning)


def runs_pytorch_loop(framework: Framework, fine_tuning) -> bool:
    """`pytorch_loop` of a plan's framework and FineTuning (the step-time model's StepContext has both)."""
    if framework is Framework.TRANSFORMERS:
        return True
    return not fine_tuning.ordinary and framework in PYTORCH_LOOPS


def pytorch_loop_loss(plan: TrainPlan) -> bool:
    """Whether the loss is PyTorch's cross entropy on fp32 logits because of `pytorch_loop` (torchtitan
    has its own rule in `memory.loss_bytes_per_vocab_entry`)."""
    return pytorch_loop(plan) and plan.framework is not Framework.TORCHTITAN


@dataclass(frozen=True)
class FineTunePeak:
    """What one GPU holds at its peak beside the model states (module docstring): the gradients then,
    the activations by part, the activations offloaded to the host, and notes saying why."""

    gradients: float
    acts: dict[str, float]
    host_activations: float = 0.0
    notes: tuple[str, ...] = ()


def fine_tuning_peak(plan: TrainPlan, states: FineTuneStates, acts: dict[str, float], loss_phase: dict[str, float],
                     backward_phase: dict[str, float], micro_batches: float) -> FineTunePeak:
    """Activation offloading and the gradient lifetime of a PyTorch loop (module docstring), given the
    activations of `memory` (stored layers + the larger of `loss_phase` and `backward_phase`) and the
    GPU's fine-tuning `states`."""
    acts = dict(acts)
    notes: list[str] = []
    host = 0.0
    gradients = states.gradients
    if plan.fine_tuning.offload_activations:
        host, acts["layers"] = acts.get("layers", 0.0), 0.0
        notes.append(f"activations offloaded: {host / 2**30:.2f} GiB per GPU of saved activations kept in host "
                     f"memory between forward and backward")
    in_backward = pytorch_loop(plan) and plan.fine_tuning.optimizer_in_backward
    single_pass = in_backward or (gradients_freed_between_steps(plan) and micro_batches == 1)
    held, at_backward_end = gradient_lifetime(gradients, sum(acts.values()), sum(backward_phase.values()), single_pass,
                                              states.largest_gradient if in_backward else None)
    if not (single_pass and gradients > 0):
        return FineTunePeak(gradients, acts, host, tuple(notes))
    gib = gradients / 2**30
    if not at_backward_end:
        notes.append(f"gradients ({gib:.2f} GiB) are allocated during backward as the activations are freed "
                     f"(zero_grad sets them to None): none exist at the peak, the end of the forward")
        return FineTunePeak(float(held), acts, host, tuple(notes))
    held_note = (f"the largest one gradient ({float(held) / 2**30:.2f} GiB; the optimizer steps and frees each in "
                 f"backward)" if in_backward else f"every gradient ({gib:.2f} GiB)")
    notes.append(f"peak at the end of backward: {held_note} and the backward working set; the stored activations "
                 f"are freed by then")
    return FineTunePeak(float(held), dict(backward_phase), host, tuple(notes))


def gradients_freed_between_steps(plan: TrainPlan) -> bool:
    """Whether a step starts with no `.grad` allocated (module docstring, gradient lifetime): a PyTorch loop
    whose `zero_grad` frees them (set_to_none, PyTorch 2.0's default), not `zero_grad_keeps_buffers`."""
    return pytorch_loop(plan) and not plan.fine_tuning.zero_grad_keeps_buffers


def gradient_lifetime(gradients, forward_end, backward_phase, single_pass, last_gradient=None):
    """(gradient bytes held at the peak, whether the peak is the end of backward) of a PyTorch loop
    (module docstring, "gradient lifetime"): with one micro-batch per step (`single_pass`) and
    gradients to hold, the peak is the larger of the end of the forward (`forward_end`: every
    activation at the peak, no gradient yet) and the end of backward (every gradient + the backward
    working set `backward_phase`, the stored activations freed); otherwise every gradient is held.
    With the optimizer stepped in backward (`last_gradient`: the largest one tensor's gradient; specs.
    finetune `optimizer_in_backward`) each gradient is freed after its step, so the end of backward
    holds at most that one. Numbers or numpy arrays (the plan search's memory screen, `memory_grid`)."""
    at_end = gradients if last_gradient is None else last_gradient
    applies = np.logical_and(single_pass, np.greater(gradients, 0))
    at_backward_end = applies & np.less(forward_end, np.add(at_end, backward_phase))
    return np.where(applies, np.where(at_backward_end, at_end, 0.0), gradients), at_backward_end


__all__ = ["DEEPSPEED_REDUCE_BUCKET_ELEMENTS", "FineTunePeak", "FineTuneStates", "PYTORCH_LOOPS",
           "autocast_over_fp32_model", "fine_tuning_peak", "fine_tuning_rules", "gradient_lifetime",
           "gradients_freed_between_steps", "pytorch_loop",
           "pytorch_loop_loss", "runs_pytorch_loop",
           "grad_bytes", "master_copy_bytes", "rank_fine_tuning_states", "state_element_bytes"]
