"""flash-attn FlashAttention-2's deterministic backward: its grid, and what the grid costs.

TransformerEngine hands `deterministic=True` to flash-attn whenever NVTE_ALLOW_NONDETERMINISTIC_ALGO=0
(transformer_engine/pytorch/attention/dot_product_attention/dot_product_attention.py: `self.deterministic`;
backends.py `FlashAttention.forward`: `fa_optional_forward_kwargs["deterministic"] = self.deterministic`
from flash-attn 2.4.1); its docs: "To observe deterministic behavior at the cost of performance, use
FlashAttention version >= 2.4.1 and set ... NVTE_ALLOW_NONDETERMINISTIC_ALGO=0". Megatron's
`--deterministic-mode` sets that variable (megatron/training/determinism.py; `step.deterministic`).

Which runs take this path (`applies`): deterministic mode with flash-attn's FlashAttention-2 running the
attention, i.e. `AttentionKernel.FLASH2`, or `AttentionKernel.FLASH` on an NVIDIA part below compute
capability 9.0, where TE's determinism filter turns its cuDNN FusedAttention off ("device_compute_capability
< (9, 0)", dot_product_attention/utils.py `get_attention_backend`, "Filter: Determinism") and leaves
FlashAttention-2. On Hopper TE keeps cuDNN (deterministic there): nothing changes.

The kernel (Dao-AILab/flash-attention csrc/flash_attn/src/flash_bwd_launch_template.h,
`run_flash_bwd_seqk_parallel`; flash_bwd_kernel.h `compute_dq_dk_dv_seqk_parallel`): the backward runs
one CTA per key block of kBlockN keys, per batch element and query head. Each CTA walks the query
blocks of kBlockM rows its keys see (causal: from block floor(n kBlockN / kBlockM) to the last, a
non-causal key block sees all ceil(s / kBlockM)) and adds its dQ share into an fp32 dQ accumulator.

- default grid: ceil(s / kBlockN) x b x h CTAs, one key block each (atomic adds into one accumulator);
- deterministic grid: nsplits x b x h CTAs with nsplits = ceil(SMs / (b h)); CTA x loops over the key
  blocks x, x + nsplits, x + 2 nsplits, ... and adds into its own accumulator slice (dq_accum of
  nsplits x b x s x h x d fp32, `torch::zeros`; flash_api.cpp `mha_bwd`), which `convert_dQ` sums in a
  fixed order.

Time. A CTA's time is proportional to the query blocks it walks (every iteration is the same five
block GEMMs). The CTAs are dispatched in launch order (x fastest, then batch, then head) to whichever
slot frees first, floor(shared memory per SM / the tile's `Kernel_traits::kSmemSize1colblock`) slots per
SM (`ctas_per_sm`; at least one): 144 KiB for head_dim 64 and 128, 116 KiB for 96 and 160, 136 KiB for
192, 176 KiB for 256, so one CTA per SM on the 164 KiB (A100) and 228 KiB (H100, B200) parts, two for
head_dim 32 (104 KiB) on the latter (registers, which the source does not state, may hold it to one).
The step's backward attention time is the measured rate's (default grid, large problems) times

    factor = makespan(deterministic grid) / makespan(default grid)          (`backward_time_factor`)

both from the same greedy list schedule (`makespan`); at b h >= SMs the deterministic grid is one CTA
per (b, h) looping over every key block, all of equal work. With context parallelism the call's length is
taken as s / cp (TE's ring calls the kernel once per K/V chunk; the chunks' own grids are not modelled). E.g. b = 2, h = 8 (tp 4 of 32
heads), s = 8192, head_dim 128 on 108 SMs (A100): nsplits = 7, 112 CTAs of 540-650 block iterations
on 108 SMs, so 4 CTAs start only when the first ones finish. Plus the accumulator traffic: the
deterministic path zeroes and `convert_dQ` reads nsplits slices where the default clears and reads
one, 2 (nsplits - 1) b s_rounded h d_rounded x 4 bytes more (`extra_accumulator_bytes`), at HBM speed.
"""

from __future__ import annotations

import heapq
import math
from functools import lru_cache

import numpy as np

from gpuplan.specs import Gpu
from gpuplan.specs.execution import AttentionKernel

#: The backward tile by head dim, (head dim limit, kHeadDim, kBlockM, kBlockN), on parts whose per-block shared
#: memory opt-in is at least 144 KiB (A100, H100, B200: `max_smem_per_block >= 144 * 1024`), with attention
#: dropout (Megatron-core's default 0.1; `Is_V_in_regs` false): flash_bwd_launch_template.h
#: `run_mha_bwd_hdim32` (128, 128), `hdim64` (128, 128), `hdim96` (64, 128), `hdim128` (64, 128), `hdim160` /
#: `hdim192` / `hdim256` (64, 64). Keyed by the smallest supported head dim >= the model's.
BACKWARD_TILES = ((32, 32, 128, 128), (64, 64, 128, 128), (96, 96, 64, 128), (128, 128, 64, 128),
                  (160, 160, 64, 64), (192, 192, 64, 64), (256, 256, 64, 64))
#: bf16 / fp16 tiles in shared memory
_ELEMENT_BYTES = 2
#: flash-attn pads the accumulator's head dim to a multiple of 32 up to 192, else to 256 (flash_api.cpp
#: `head_size_rounded = head_size <= 192 ? round_multiple(head_size, 32) : 256`) and its rows to a multiple
#: of 128 (`seqlen_q_rounded`).
HEAD_DIM_ROUND = 32
SEQ_ROUND = 128
#: The dQ accumulator is fp32.
ACCUMULATOR_BYTES = 4.0


def applies(gpu: Gpu, kernel: AttentionKernel, deterministic: bool) -> bool:
    """Whether flash-attn's deterministic FlashAttention-2 backward runs (module docstring): deterministic
    mode and `AttentionKernel.FLASH2`, or `AttentionKernel.FLASH` on an NVIDIA part below compute
    capability 9.0 (TransformerEngine's determinism filter turns cuDNN off there)."""
    if not deterministic:
        return False
    if kernel is AttentionKernel.FLASH2:
        return True
    if kernel is not AttentionKernel.FLASH or gpu.vendor.lower() != "nvidia" or not gpu.compute_capability:
        return False
    try:
        return float(gpu.compute_capability) < 9.0
    except ValueError:
        return False


def _tile(head_dim: int) -> tuple[int, int, int]:
    for limit, k_head_dim, block_m, block_n in BACKWARD_TILES:
        if head_dim <= limit:
            return k_head_dim, block_m, block_n
    raise ValueError(f"head_dim {head_dim} is above FlashAttention-2's 256")


def backward_tile(head_dim: int) -> tuple[int, int]:
    """(kBlockM, kBlockN) of flash-attn's backward for `head_dim` (BACKWARD_TILES)."""
    return _tile(head_dim)[1:]


def tile_shared_memory_bytes(head_dim: int) -> int:
    """kSmemSize1colblock of the tile (flash-attn kernel_traits.h, `Is_V_in_regs` false): Q and dO
    kBlockM x d, triple-buffered (x 3), + K and V kBlockN x d each, + dS and P kBlockM x kBlockN each,
    2 B per element. E.g. head_dim 128: 64 x 128 x 3 x 2 + 128 x 128 x 2 x 2 + 2 x 64 x 128 x 2 = 147,456."""
    d, block_m, block_n = _tile(head_dim)
    return _ELEMENT_BYTES * (3 * block_m * d + 2 * block_n * d + 2 * block_m * block_n)


def ctas_per_sm(head_dim: int, smem_per_sm_bytes: int | None) -> int:
    """floor(shared memory per SM / tile_shared_memory_bytes), at least 1 (1 where the part's is unknown)."""
    if not smem_per_sm_bytes:
        return 1
    return max(1, int(smem_per_sm_bytes) // tile_shared_memory_bytes(head_dim))


def key_block_work(seq: int, block_m: int, block_n: int, causal: bool = True) -> tuple[int, ...]:
    """Query blocks each key block's CTA walks: ceil(s / kBlockM) - floor(n kBlockN / kBlockM) causal
    (flash_bwd_kernel.h `m_block_min`), ceil(s / kBlockM) otherwise; one entry per key block n."""
    m_blocks, n_blocks = math.ceil(seq / block_m), math.ceil(seq / block_n)
    return tuple(m_blocks - (n * block_n) // block_m if causal else m_blocks for n in range(n_blocks))


def makespan(works, slots: int) -> float:
    """Finish time of CTAs of the given durations, dispatched in order, each to the slot that frees first."""
    free_at = [0.0] * int(slots)
    for w in works:
        heapq.heapreplace(free_at, free_at[0] + w)
    return max(free_at)


def splits(batch: int, heads: int, sms: int) -> int:
    """nsplits = ceil(SMs / (b h)): the deterministic grid's CTAs per (batch element, head)."""
    return -(-int(sms) // (int(batch) * int(heads)))


@lru_cache(maxsize=256)
def backward_time_factor(batch: int, heads: int, seq: int, head_dim: int, sms: int, causal: bool = True,
                         smem_per_sm_bytes: int | None = None) -> float:
    """makespan(deterministic grid) / makespan(default grid) of flash-attn's backward on `sms` SMs of
    `ctas_per_sm` slots each (module docstring)."""
    block_m, block_n = backward_tile(head_dim)
    work = key_block_work(seq, block_m, block_n, causal)
    pairs = int(batch) * int(heads)
    slots = int(sms) * ctas_per_sm(head_dim, smem_per_sm_bytes)
    default = makespan((w for _ in range(pairs) for w in work), slots)
    n = splits(batch, heads, sms)
    per_split = [sum(work[x::n]) for x in range(n)]
    deterministic = makespan((w for _ in range(pairs) for w in per_split), slots)
    return deterministic / default


def extra_accumulator_bytes(batch, heads, seq, head_dim: int, sms: int):
    """2 (nsplits - 1) b s_rounded h d_rounded x 4 bytes: the deterministic path's zeroing and reading of
    nsplits fp32 dQ slices over the default's one (module docstring)."""
    b, h = np.asarray(batch, dtype=np.float64), np.asarray(heads, dtype=np.float64)
    n = np.ceil(sms / (b * h))
    s_rounded = np.ceil(np.asarray(seq, dtype=np.float64) / SEQ_ROUND) * SEQ_ROUND
    d_rounded = math.ceil(head_dim / HEAD_DIM_ROUND) * HEAD_DIM_ROUND if head_dim <= 192 else 256
    return 2.0 * (n - 1.0) * b * s_rounded * h * d_rounded * ACCUMULATOR_BYTES


def extra_backward_seconds(attn_bwd, batch, heads, seq, head_dim: int, sms: int, hbm_bytes_s: float, causal=True,
                           smem_per_sm_bytes: int | None = None):
    """Seconds the deterministic backward adds to one layer's attention backward per micro-batch:
    attn_bwd x (backward_time_factor - 1) + extra_accumulator_bytes / HBM bandwidth. `batch`, `heads`
    (query heads on the rank) and `seq` (keys per call) broadcast as arrays; each distinct point is
    scheduled once."""
    b, h, s = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (batch, heads, seq)))
    points, inverse = np.unique(np.stack([b.ravel(), h.ravel(), s.ravel()], axis=1), axis=0, return_inverse=True)
    factors = np.array([backward_time_factor(int(bb), math.ceil(hh), math.ceil(ss), int(head_dim), int(sms),
                                             bool(causal), smem_per_sm_bytes) for bb, hh, ss in points])
    factor = factors[inverse.ravel()].reshape(b.shape)
    return attn_bwd * (factor - 1.0) + extra_accumulator_bytes(b, h, s, head_dim, sms) / hbm_bytes_s


__all__ = ["BACKWARD_TILES", "applies", "backward_tile", "backward_time_factor", "ctas_per_sm",
           "extra_accumulator_bytes", "extra_backward_seconds", "key_block_work", "makespan", "splits",
           "tile_shared_memory_bytes"]
