"""The AdamW step by implementation (`specs.choices.OptimizerImpl`): kernels issued per parameter
tensor, HBM bytes per element, and the time of the two together.

Sources (AdamW with fp32 parameters and moments, amsgrad off, capturable off, the defaults):
- `loop`: pytorch/pytorch@c15fcf4eb79d torch/optim/adamw.py `_single_tensor_adamw` (foreach=False)
  runs per parameter tensor `param.mul_(1 - lr wd)`, `exp_avg.lerp_(grad, 1 - beta1)`,
  `exp_avg_sq.mul_(beta2)`, `.addcmul_(grad, grad, value=1 - beta2)`, `exp_avg_sq.sqrt()`,
  `/ bias_correction2_sqrt`, `.add_(eps)`, `param.addcdiv_(exp_avg, denom, value=-step_size)`:
  8 CUDA kernels. Bytes per element (4 B fp32 tensors, read + write of each distinct tensor): mul_
  4 + 4, lerp_ 8 + 4, mul_ 4 + 4, addcmul_ 8 + 4 (grad read once from HBM), sqrt 4 + 4, div 4 + 4,
  add_ 4 + 4, addcdiv_ 12 + 4: 80 B. Hugging Face `transformers.optimization.AdamW.step` (Trainer
  `optim="adamw_hf"`, 2020-2022 releases) runs `exp_avg.mul_(beta1).add_(grad, ...)`,
  `exp_avg_sq.mul_(beta2).addcmul_(grad, grad, ...)`, `denom = exp_avg_sq.sqrt().add_(eps)`,
  `p.data.addcdiv_(exp_avg, denom, ...)` and, with weight decay > 0, `p.data.add_(p.data, ...)`:
  the same 8 kernels and 80 B (7 and 72 B with weight decay 0, Trainer's default; not modelled apart).
- `foreach`: the same file's `_multi_tensor_adamw` issues the same 8 operations as `torch._foreach_*`
  calls over the tensor list (`_foreach_mul_`, `_foreach_lerp_`, `_foreach_mul_`, `_foreach_addcmul_`,
  `_foreach_sqrt`, `_foreach_div_`, `_foreach_add_`, `_foreach_addcdiv_`): the same 80 B per element
  (every op still reads and writes whole fp32 tensors), but each op launches one kernel per group
  of tensors: aten/src/ATen/native/cuda/MultiTensorApply.cuh launches when a group reaches
  `depth_to_max_tensors` = {110, 64, 48, 36, 30} tensors (by list depth; scalar-list ops {96, 64,
  48, 36, 30}) or `depth_to_max_blocks` = 320 chunks of kChunkSize = 65536 elements.
  `FOREACH_OP_DEPTHS` lists each op's (depth, scalar list).
- `fused` (torch fused=True `_fused_adamw_`, apex / TransformerEngine / DeepSpeed FusedAdam): one pass
  over parameter, gradient and moments, the model's `step.optimizer.ADAM_BYTES_PER_PARAM` (30 B,
  which also writes a 16-bit weight copy) and a handful of launches (one per 36 tensors), left out.

Time (`adamw_step_seconds`): the host issues the kernels asynchronously while the GPU runs them;
GradScaler's step (torch/amp/grad_scaler.py `_maybe_opt_step`: `found_inf.item()`) and the start of
a step leave the GPU queue empty, so the step takes the longer of the host's issue time (kernels x
EAGER_KERNEL_S) and the GPU's memory time (elements x 80 B / achievable HBM bandwidth).

EAGER_KERNEL_S, the host time to issue one eager PyTorch kernel from Python (interpreter, ATen
dispatcher, launch): pytorch/pytorch PR #45299 ("Added optimizers based on multi tensor apply",
2020) times `optimizer.step()` of torch.optim.AdamW on torchvision ResNet-101 at 51.38 ms; that
AdamW ran 9 kernels per parameter tensor (the 8 above with the bias-corrected denominator in two
ops) over ResNet-101's 314 parameter tensors (104 convolutions, 104 batch norms x 2, fc weight and
bias): 51.38 ms / (314 x 9) = 18.2 us per kernel. ResNet-101's 44.5 M parameters x ~92 B move in
about 5 ms on the V100-class GPUs of the time, a tenth of the step: the benchmark is issue-bound, so
the figure is the host's per-kernel time (on that host; a faster CPU issues faster).

Tensor counts (`parameter_tensor_count`): the model's operator inventory as Hugging Face builds the
modules: each nn.Linear (q, k, v, o, gate, up, down separately; experts one per instance) a weight
and, where the model has biases, a bias; each norm a weight (+ a bias for LayerNorm); each embedding
table one; the output head one when untied. Adapter training (LoRA / QLoRA): two tensors (A, B) per
adapted projection.

Per-tensor loops of other optimizers (`optimizer_impl` loop with optimizer adafactor or adamw_8bit:
what the Hugging Face Trainer runs, its `optimizer.step()` calling the optimizer's own step):
- Adafactor, transformers/optimization.py `Adafactor.step` (read at huggingface/transformers@005edacb;
  the step body is the 2021-2022 one) with the Trainer's `optim="adafactor"` settings
  (scale_parameter=False, relative_step=False, beta1=None, weight_decay 0, fp32 parameters and
  gradients under native AMP). Per 2-D (factored) tensor: `_rms(p)` norm + divide (2),
  `grad**2 + eps` (2), `exp_avg_sq_row.mul_().add_(update.mean(dim=-1))` (3), the same for the
  column (3), `_approx_sq_grad`: row mean, divide, `rsqrt_`, column `rsqrt`, `torch.mul` outer
  product (5), `update.mul_(grad)` (1), the clip `update.div_((_rms(update) / clip).clamp_(min=1))`:
  norm, divide, divide, clamp_, div_ (5), `update.mul_(lr)` (1), `p.add_(-update)`: neg + add_ (2):
  24 kernels. Per 1-D tensor (unfactored `exp_avg_sq`): 2 + 2 + `mul_().add_()` 2 + `rsqrt().mul_(grad)`
  2 + clip 5 + 1 + 2 = 16. Bytes per element of a factored tensor (4 B fp32; row/column statistics
  negligible): norm(p) 4, grad**2 8, + eps 8, the two means 4 + 4, outer product written 4,
  mul_(grad) 12, norm(update) 4, div_ 8, mul_(lr) 8, neg 8, add_ 12: 84 B (1-D tensors, about 0.1 %
  of a transformer's elements, are charged the same).
- bitsandbytes Adam8bit / AdamW8bit (bitsandbytes/optim/optimizer.py `Optimizer8bit.step` loops over
  each group's parameters calling `Optimizer2State.update_step`, which calls
  functional.py `optimizer_update_8bit_blockwise`: one `cadam_8bit_blockwise` kernel through ctypes;
  tensors under `min_8bit_size` = 4096 elements take `optimizer_update_32bit`, also one kernel):
  1 kernel per tensor, its Python (config dict, checks, ctypes call) charged as one eager kernel.
  Bytes per element: fp32 parameter read + written 8, fp32 gradient 4, the two 8-bit states read +
  written 4 (block absmax per 2048 elements negligible): 16 B. Later releases (paged optimizers,
  2023) add a `torch.cuda.synchronize()` per tensor; not modelled (the 2022 step has none).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gpuplan.layers.inventory import model_ops
from gpuplan.layers.operators import Linear, Norm
from gpuplan.specs.choices import Optimizer, OptimizerImpl
from gpuplan.specs.model import ModelSpec
from gpuplan.workloads.training.lora import adapted, layer_projections

#: CUDA kernels per parameter tensor of the per-tensor loop (module docstring).
LOOP_KERNELS_PER_TENSOR = 8
#: HBM bytes per fp32 parameter element of the loop and of foreach (module docstring).
EAGER_ADAMW_BYTES_PER_ELEMENT = 80.0
#: (list depth, scalar list) of each `_foreach_*` op of `_multi_tensor_adamw`, in order: mul_
#: (params; 1), lerp_ (exp_avgs, grads; 2), mul_ (exp_avg_sqs; 1), addcmul_ (exp_avg_sqs, grads,
#: grads; 3), sqrt (out of place: input and output; 2), div_ by the bias-correction list (1, scalar
#: list), add_ eps (1), addcdiv_ with the step-size list (params, exp_avgs, denominators; 3, scalar list).
FOREACH_OP_DEPTHS: tuple[tuple[int, bool], ...] = (
    (1, False), (2, False), (1, False), (3, False), (2, False), (1, True), (1, False), (3, True))
#: MultiTensorApply.cuh: tensors per launch by depth (1..5), and for scalar-list ops.
MAX_TENSORS_PER_LAUNCH = (110, 64, 48, 36, 30)
MAX_TENSORS_PER_LAUNCH_SCALARLIST = (96, 64, 48, 36, 30)
#: MultiTensorApply.cuh: chunks per launch (depth_to_max_blocks) x elements per chunk (kChunkSize).
MAX_ELEMENTS_PER_LAUNCH = 320 * 65536
#: Per-tensor loops of other optimizers (module docstring): kernels per 2-D tensor, per 1-D tensor,
#: HBM bytes per element.
LOOP_OPTIMIZERS: dict[Optimizer, tuple[int, int, float]] = {
    Optimizer.ADAFACTOR: (24, 16, 84.0),
    Optimizer.ADAMW_8BIT: (1, 1, 16.0),
}
#: Host seconds to issue one eager kernel (module docstring: PR #45299, 51.38 ms / (314 x 9)).
EAGER_KERNEL_S = 51.38e-3 / (314 * 9)


@lru_cache(maxsize=256)
def parameter_tensor_count(model: ModelSpec) -> int:
    """Parameter tensors of the model as Hugging Face builds its modules (module docstring)."""
    ops = model_ops(model)
    total = 0
    for lo in ops.layers:
        linears = {op.name: op for op in lo.ops if isinstance(op, Linear)}
        for p in layer_projections(model, lo.index):
            op = linears.get(p.op)
            total += p.instances * (2 if op is not None and op.bias else 1)
        total += sum(op.instances * (2 if op.with_bias else 1) for op in lo.ops if isinstance(op, Norm))
    total += len(ops.embeddings)
    total += 2 if ops.final_norm.with_bias else 1
    total += 1 if ops.head.counts_params else 0
    return total


@lru_cache(maxsize=256)
def parameter_matrix_count(model: ModelSpec) -> int:
    """The 2-D tensors among `parameter_tensor_count`: each nn.Linear weight, embedding table and
    untied head (the rest, biases and norm weights, are 1-D)."""
    ops = model_ops(model)
    total = sum(p.instances for lo in ops.layers for p in layer_projections(model, lo.index))
    return total + len(ops.embeddings) + (1 if ops.head.counts_params else 0)


def adapter_tensor_count(model: ModelSpec, targets: tuple[str, ...], layers: float) -> float:
    """Trainable tensors of adapter training over `layers` layers: A and B of each adapted projection
    instance (the mean layer of the model), and of the head when `lm_head` is a target."""
    per_layer = [sum(2 * p.instances for p in layer_projections(model, lo.index) if adapted(p, targets))
                 for lo in model_ops(model).layers]
    mean = sum(per_layer) / max(1, len(per_layer))
    return mean * layers + (2.0 if "lm_head" in targets else 0.0)


def foreach_launches(tensors, elements):
    """Kernel launches of `_multi_tensor_adamw` over `tensors` tensors holding `elements` elements:
    per op, the more of the tensor-count and the chunk-count limits (a lower bound: MultiTensorApply
    starts a launch when either fills)."""
    tensors = np.asarray(tensors, dtype=np.float64)
    elements = np.asarray(elements, dtype=np.float64)
    total = 0.0
    for depth, scalar_list in FOREACH_OP_DEPTHS:
        per_launch = (MAX_TENSORS_PER_LAUNCH_SCALARLIST if scalar_list else MAX_TENSORS_PER_LAUNCH)[depth - 1]
        total = total + np.maximum(np.ceil(tensors / per_launch), np.ceil(elements / MAX_ELEMENTS_PER_LAUNCH))
    return total


def kernel_launches(impl: OptimizerImpl, tensors, elements):
    """Kernels one AdamW step issues: loop 8 per tensor, foreach `foreach_launches`."""
    if impl is OptimizerImpl.LOOP:
        return LOOP_KERNELS_PER_TENSOR * np.asarray(tensors, dtype=np.float64)
    return foreach_launches(tensors, elements)


def adamw_step_seconds(impl: OptimizerImpl, elements, tensors, hbm_bytes_s: float):
    """Seconds of one eager AdamW step (loop or foreach) updating `elements` fp32 elements in
    `tensors` tensors: max(kernels x EAGER_KERNEL_S, elements x EAGER_ADAMW_BYTES_PER_ELEMENT /
    hbm_bytes_s) (module docstring)."""
    if impl not in (OptimizerImpl.LOOP, OptimizerImpl.FOREACH):
        raise ValueError(f"adamw_step_seconds times loop and foreach, not {impl.value}")
    issue = kernel_launches(impl, tensors, elements) * EAGER_KERNEL_S
    memory = np.asarray(elements, dtype=np.float64) * EAGER_ADAMW_BYTES_PER_ELEMENT / hbm_bytes_s
    return np.maximum(issue, memory)


def loop_step_seconds(optimizer: Optimizer, elements, tensors, matrices, hbm_bytes_s: float):
    """Seconds of one per-tensor loop step of `optimizer` (adafactor, adamw_8bit) over `tensors`
    tensors, `matrices` of them 2-D, holding `elements` elements: max((matrices x per-matrix kernels +
    (tensors - matrices) x per-vector kernels) x EAGER_KERNEL_S, elements x bytes / hbm_bytes_s)
    (`LOOP_OPTIMIZERS`, module docstring)."""
    if optimizer not in LOOP_OPTIMIZERS:
        raise ValueError(f"loop_step_seconds times {', '.join(o.value for o in LOOP_OPTIMIZERS)}, not {optimizer.value}")
    per_matrix, per_vector, per_element = LOOP_OPTIMIZERS[optimizer]
    tensors = np.asarray(tensors, dtype=np.float64)
    matrices = np.minimum(np.asarray(matrices, dtype=np.float64), tensors)
    issue = (matrices * per_matrix + (tensors - matrices) * per_vector) * EAGER_KERNEL_S
    return np.maximum(issue, np.asarray(elements, dtype=np.float64) * per_element / hbm_bytes_s)


def eager(impl: OptimizerImpl | None) -> bool:
    """Whether `impl` is timed here (loop, foreach) rather than as the fused pass."""
    return impl in (OptimizerImpl.LOOP, OptimizerImpl.FOREACH)


def assumed_line(impl: OptimizerImpl | None, optimizer: Optimizer = Optimizer.ADAMW) -> str:
    """What `gpuplan train` says of the optimizer step it assumed (`framework_defaults_assumed`)."""
    if impl is OptimizerImpl.LOOP and optimizer in LOOP_OPTIMIZERS:
        per_matrix, per_vector, per_element = LOOP_OPTIMIZERS[optimizer]
        return (f"optimizer step: per-tensor {optimizer.value} loop ({per_matrix} eager kernels per 2-D tensor, "
                f"{per_vector} per 1-D, at {EAGER_KERNEL_S * 1e6:.1f} us each, {per_element:.0f} B per parameter; "
                f"--optimizer-impl loop)")
    if impl is None:
        return ("optimizer step: one fused memory-bound AdamW pass (apex / TransformerEngine / DeepSpeed FusedAdam, "
                "torch fused=True); --optimizer-impl loop or foreach for eager torch.optim / Hugging Face adamw_hf")
    if impl is OptimizerImpl.FUSED:
        return "optimizer step: fused AdamW (one multi-tensor kernel, --optimizer-impl fused)"
    if impl is OptimizerImpl.FOREACH:
        return ("optimizer step: torch.optim.AdamW foreach (8 _foreach_* ops, 80 B per parameter, "
                "--optimizer-impl foreach)")
    return (f"optimizer step: per-tensor AdamW loop ({LOOP_KERNELS_PER_TENSOR} eager kernels per parameter tensor at "
            f"{EAGER_KERNEL_S * 1e6:.1f} us each, 80 B per parameter; --optimizer-impl loop)")


__all__ = ["EAGER_ADAMW_BYTES_PER_ELEMENT", "EAGER_KERNEL_S", "FOREACH_OP_DEPTHS", "LOOP_KERNELS_PER_TENSOR",
           "MAX_ELEMENTS_PER_LAUNCH", "MAX_TENSORS_PER_LAUNCH", "MAX_TENSORS_PER_LAUNCH_SCALARLIST",
           "adamw_step_seconds", "adapter_tensor_count", "assumed_line", "eager", "foreach_launches",
           "kernel_launches", "LOOP_OPTIMIZERS", "loop_step_seconds", "parameter_matrix_count",
           "parameter_tensor_count"]
