"""The Hugging Face Trainer's per-step gradient loops on PyTorch before 2.0: norm clipping and the
in-place zeroing of every gradient, one eager kernel chain per parameter tensor.

Source: the Trainer's `_inner_training_loop` of 2021-2022 (transformers v4.1x-v4.2x trainer.py), at each
optimizer step: with `max_grad_norm` > 0 (TrainingArguments default 1.0) and no DeepSpeed, after
GradScaler's `unscale_` (native AMP, timed in `native_amp`), `nn.utils.clip_grad_norm_(model.parameters(),
args.max_grad_norm)`; after the optimizer step, `model.zero_grad()`. On PyTorch 1.x:
- `torch.nn.utils.clip_grad_norm_` (torch/nn/utils/clip_grad.py, 1.x): `total_norm =
  torch.norm(torch.stack([torch.norm(p.grad.detach(), norm_type).to(device) for p in parameters]),
  norm_type)`, `clip_coef = max_norm / (total_norm + 1e-6)`, `clip_coef_clamped = torch.clamp(clip_coef,
  max=1.0)`, then `for p in parameters: p.grad.detach().mul_(clip_coef_clamped.to(p.grad.device))`:
  per gradient tensor a norm and a scale (2 kernels; `.to` onto the same device launches none), per
  step the stack, the norm of the norms, the add, the division and the clamp (5). PyTorch 2.x groups
  the gradients by device and dtype and calls `torch._foreach_norm` / `torch._foreach_mul_` (a few
  launches per step): not counted.
- `Module.zero_grad()` with PyTorch 1.x's `set_to_none=False`: per gradient `p.grad.requires_grad_(False)`
  (or `detach_()`) and `p.grad.zero_()`: 1 kernel per tensor (PyTorch 2.0 sets them to None instead:
  `FineTuning.zero_grad_keeps_buffers`, which marks exactly these loops: an HF Trainer on PyTorch < 2.0).
Bytes per gradient element (fp32 gradients of native AMP over fp32 parameters): the norm reads 4, the
scale reads and writes 8, the zeroing writes 4: 16 B.

Time (`seconds`): the kernels issue from Python one at a time; the step's syncs (GradScaler's
`found_inf.item()`, the loss check) leave the GPU queue empty around it, so it takes the longer of the
host's issue time, kernels x `optimizer_impl.EAGER_KERNEL_S` (18.2 us, PR #45299's per-kernel figure),
and the GPU's memory time, elements x 16 B / achievable HBM bandwidth.
"""

from __future__ import annotations

import numpy as np

from gpuplan.workloads.training.step.optimizer_impl import EAGER_KERNEL_S

#: Kernels per gradient tensor: clip_grad_norm_'s norm and scale, zero_grad's zero_ (module docstring).
KERNELS_PER_TENSOR = 3
#: Kernels per step of clip_grad_norm_ outside the per-tensor loops: stack, norm, add, divide, clamp.
KERNELS_PER_STEP = 5
#: HBM bytes per fp32 gradient element: norm read 4, scale read + write 8, zero write 4.
BYTES_PER_ELEMENT = 16.0


def applies(ctx) -> bool:
    """Whether the step runs these loops: an HF Trainer on PyTorch before 2.0 (`zero_grad_keeps_buffers`)."""
    return bool(ctx.fine_tuning.zero_grad_keeps_buffers)


def seconds(ctx, tensors, elements, hbm_bytes_s: float):
    """Seconds per optimizer step of the clip and zero loops over `tensors` gradient tensors holding
    `elements` elements: max((3 x tensors + 5) x EAGER_KERNEL_S, elements x 16 B / hbm_bytes_s); 0 where
    `applies` does not hold (module docstring)."""
    if not applies(ctx):
        return 0.0
    issue = (KERNELS_PER_TENSOR * np.asarray(tensors, dtype=np.float64) + KERNELS_PER_STEP) * EAGER_KERNEL_S
    return np.maximum(issue, np.asarray(elements, dtype=np.float64) * BYTES_PER_ELEMENT / hbm_bytes_s)


__all__ = ["BYTES_PER_ELEMENT", "KERNELS_PER_STEP", "KERNELS_PER_TENSOR", "applies", "seconds"]
