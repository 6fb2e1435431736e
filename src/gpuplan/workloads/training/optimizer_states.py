"""Optimizer state bytes per trainable tensor, and the HBM bytes of one optimizer step.

States are allocated per parameter tensor, and several optimizers treat a tensor by its shape or
size, so they are counted over the trainable tensors (`Tensor`: rows x cols, `count` alike) with
s = bytes of a full-precision state element: 4 with fp32 master weights (the states are fp32), the
parameter's own dtype (2 for bf16) in pure low-precision training (`torch.optim.AdamW` allocates
`torch.zeros_like(p)`).

- adamw: exp_avg and exp_avg_sq, 2 s per element (torch.optim.AdamW `_init_group`).
- adamw_8bit / paged_adamw_8bit (bitsandbytes `Optimizer2State.init_state`, optim/optimizer.py):
  uint8 `state1` and `state2` (1 byte each) and one fp32 `absmax1` / `absmax2` per block of 256
  elements (`blocksize = 256` since bitsandbytes 0.44, PR #1365; 2048 before): 2 (1 + 4 / 256) =
  2.03125 B per element. Tensors under `min_8bit_size` = 4096 elements keep two fp32 states (8 B).
  Paged: `get_state_buffer` puts `state1` / `state2` of tensors of at least 1e5 elements in CUDA
  unified memory (`F.get_paged`), which PyTorch's allocator statistics do not count and which the
  driver pages to host memory under pressure; their absmax stay device tensors (`torch.zeros(...,
  device=p.device)`), smaller tensors stay on the device whole.
- adamw_4bit (torchao `AdamW4bit`, torchao/optim/subclass_4bit.py): two 4-bit codes per byte and one
  fp32 scale per block of 128 for each moment: 2 (0.5 + 4 / 128) = 1.0625 B per element; tensors
  under 4096 elements, or not a multiple of the block, keep `torch.zeros_like(p)` moments (2 s).
- adafactor (HF transformers `Adafactor`, beta1 = None by default: no first moment): for a tensor of
  two or more dimensions the factored second moment, one fp32 row vector and one fp32 column vector,
  4 (rows + cols); for a vector one fp32 `exp_avg_sq` of its size (grads are cast to fp32 first).
- sgd: one momentum buffer (`momentum_buffer`, zeros_like the gradient), s per element.
- lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Alg. 2): one moment, s.
Plus, with fp32 master weights in a 16-bit run, the fp32 master copy: 4 B per element (Megatron /
DeepSpeed mixed precision; in PyTorch AMP the fp32 parameter itself, beside its 16-bit copy).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.specs.finetune import Optimizer

#: bitsandbytes 8-bit blockwise optimizer block (`blocksize = 256`, optim/optimizer.py, >= 0.44).
BNB_8BIT_BLOCK = 256
#: bitsandbytes `min_8bit_size`: smaller tensors keep 32-bit states.
BNB_MIN_8BIT_SIZE = 4096
#: bitsandbytes paged optimizers page only state buffers of at least this many elements
#: (`get_state_buffer`: `if not self.is_paged or p.numel() < 1e5: torch.zeros_like(...)`).
BNB_PAGED_MIN_ELEMENTS = 100_000
#: torchao low-bit optimizers: 4-bit moments in blocks of 128, quantised only from 4096 elements.
TORCHAO_4BIT_BLOCK = 128
TORCHAO_MIN_QUANT_SIZE = 4096
FP32 = 4.0


@dataclass(frozen=True)
class Tensor:
    """`count` trainable tensors of rows x cols elements on one GPU (cols = 1 for a vector)."""

    rows: float
    cols: float = 1.0
    count: float = 1.0

    @property
    def elements(self) -> float:
        return self.rows * self.cols

    @property
    def matrix(self) -> bool:
        return self.cols > 1 and self.rows > 1


@dataclass(frozen=True)
class OptimizerBytes:
    """Bytes of optimizer state on one GPU: `device` (PyTorch-allocated, incl. any fp32 master copy)
    and `paged` (in CUDA unified memory: outside PyTorch's statistics)."""

    device: float
    paged: float = 0.0


def _eight_bit(t: Tensor) -> float:
    """Bytes of bitsandbytes' two 8-bit states of one tensor (module docstring): 2 fp32 states under
    `min_8bit_size`, else two uint8 codes per element and two fp32 absmax per 256-block."""
    if t.elements < BNB_MIN_8BIT_SIZE:
        return 2 * FP32 * t.elements
    return 2.0 * t.elements + 2.0 * FP32 * -(-t.elements // BNB_8BIT_BLOCK)


def state_bytes(optimizer: Optimizer, t: Tensor, s: float) -> OptimizerBytes:
    """State bytes of one tensor (x its count), master copy excluded (module docstring)."""
    n = t.elements
    if optimizer is Optimizer.ADAMW:
        one = 2.0 * s * n
    elif optimizer in (Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        device = _eight_bit(t)
        if optimizer is Optimizer.PAGED_ADAMW_8BIT and n >= BNB_PAGED_MIN_ELEMENTS:
            codes = 2.0 * n  # state1 + state2 paged; the absmax stay on the device
            return OptimizerBytes(device=t.count * (device - codes), paged=t.count * codes)
        one = device
    elif optimizer is Optimizer.ADAMW_4BIT:
        quantized = n >= TORCHAO_MIN_QUANT_SIZE and n % TORCHAO_4BIT_BLOCK == 0
        one = 2.0 * (0.5 * n + FP32 * n / TORCHAO_4BIT_BLOCK) if quantized else 2.0 * s * n
    elif optimizer is Optimizer.ADAFACTOR:
        one = FP32 * (t.rows + t.cols) if t.matrix else FP32 * n
    elif optimizer in (Optimizer.SGD, Optimizer.LION):
        one = s * n
    else:  # pragma: no cover - the enum is closed
        raise ValueError(optimizer)
    return OptimizerBytes(device=t.count * one)


def optimizer_bytes(optimizer: Optimizer, tensors: list[Tensor], state_element_bytes: float,
                    master_bytes: float) -> OptimizerBytes:
    """Optimizer bytes of `tensors` on one GPU: the states of each (`state_bytes`) plus a master copy
    of `master_bytes` per element (4 with an fp32 master beside 16-bit weights, else 0)."""
    device = paged = 0.0
    for t in tensors:
        b = state_bytes(optimizer, t, state_element_bytes)
        device += b.device + t.count * master_bytes * t.elements
        paged += b.paged
    return OptimizerBytes(device=device, paged=paged)


#: HBM bytes per element of one optimizer step besides the parameter, gradient and master traffic
#: (reads + writes of the states): AdamW m and v read and written (4 s); 8-bit: codes read and
#: written (4 x 1 B, absmax negligible); 4-bit: 4 x 0.5 B; Adafactor: its update is built from
#: full-size fp32 temporaries (HF `_approx_sq_grad`, `update = grad**2 + eps`, the row/column means,
#: the outer product, `update.mul_(grad)`, the RMS clip and the scaled add: about six fp32 passes
#: written and read, 6 x 8 B); SGD and Lion: one state read and written (2 s).
def state_step_bytes_per_element(optimizer: Optimizer, s: float) -> float:
    if optimizer is Optimizer.ADAMW:
        return 4.0 * s
    if optimizer in (Optimizer.ADAMW_8BIT, Optimizer.PAGED_ADAMW_8BIT):
        return 4.0
    if optimizer is Optimizer.ADAMW_4BIT:
        return 2.0
    if optimizer is Optimizer.ADAFACTOR:
        return 6.0 * 2 * FP32
    return 2.0 * s


def step_bytes_per_element(optimizer: Optimizer, weight_bytes: float, grad_bytes: float, state_element_bytes: float,
                           master: bool) -> float:
    """HBM bytes per trainable element of one optimizer step: read the gradient, read and write the
    parameter (the fp32 master with mixed precision, then write the 16-bit working copy too) and the
    states (`state_step_bytes_per_element`). AdamW with an fp32 master and fp32 gradients:
    4 + 2 x 4 + 2 + 4 x 4 = 30 B (the `step_time.ADAM_BYTES_PER_PARAM` of ordinary training)."""
    param = 2.0 * FP32 + weight_bytes if master and weight_bytes < FP32 else 2.0 * weight_bytes
    return grad_bytes + param + state_step_bytes_per_element(optimizer, state_element_bytes)


__all__ = ["BNB_8BIT_BLOCK", "BNB_MIN_8BIT_SIZE", "BNB_PAGED_MIN_ELEMENTS", "OptimizerBytes", "Tensor",
           "optimizer_bytes", "state_bytes", "state_step_bytes_per_element", "step_bytes_per_element"]
