"""torchtitan's per-op selective activation checkpointing: the bytes one token keeps for one layer
(`op_sac_bytes_per_token`, read by `memory.layer_activation_bytes_per_token` under selective
recompute on torchtitan)."""

from __future__ import annotations

from functools import lru_cache

from gpuplan.layers.inventory import layer_ops
from gpuplan.layers.operators import FLASH_LSE_BYTES, Activation, AttentionCore, Linear, Saved, Shard
from gpuplan.specs.model import ModelSpec


def _mm_outputs(ops) -> list[tuple[float, Shard]]:
    """The `aten.mm` calls of a layer's forward in order, as (output features, shard), the way
    torchtitan's models issue them (one nn.Linear per projection): a fused grouped-query QKV is
    wq, wk, wv (a d, g d, g d); a gated FFN's fc1 is w1 then w3 (f each: `w2(silu(w1(x)) * w3(x))`
    evaluates w1 first); routed experts run as grouped GEMMs (`_grouped_mm`, not `aten.mm`) and
    are not listed."""
    out: list[tuple[float, Shard]] = []
    for i, op in enumerate(ops):
        if not isinstance(op, Linear) or op.shard is Shard.EXPERT:
            continue
        if op.grouped_heads is not None:
            a, g, d = op.grouped_heads
            out += [(a * d, op.shard), (g * d, op.shard), (g * d, op.shard)]
            continue
        follower = ops[i + 1] if i + 1 < len(ops) else None
        if isinstance(follower, Activation) and follower.gated and follower.shard is not Shard.EXPERT:
            half = op.out_features / 2
            out += [(half, op.shard), (half, op.shard)]
            continue
        out.append((op.out_features * op.instances, op.shard))
    return out


@lru_cache(maxsize=65536)
def op_sac_bytes_per_token(model: ModelSpec, layer: int, saved: Saved) -> float:
    """Bytes one token keeps for one layer under torchtitan's per-op selective activation
    checkpointing (`selective_ac_option = "op"`, its Llama 3 presets' default; torchtitan
    activation_checkpoint.py `_custom_policy`: save the outputs of `aten.mm` except every second one,
    of the SDPA kernels and of `reduce_scatter_tensor`; recompute everything else; the checkpointed
    block's input is kept to re-run it).

    Per token: the block input b h / sp; the output of the 1st, 3rd, 5th, ... mm of the block
    (`_mm_outputs`): b x out / tp for a COLUMN projection, b x out for a ROW projection (the partial
    sums before the reduction) plus b x out / tp for its reduce-scatter output under sequence
    parallelism, b x out for a replicated one; the attention output b a d_v / tp and the fp32
    log-sum-exp 4 a / tp. Llama 3 8B (tp 1): 2 x (4096 input + 4096 wq + 1024 wv + 4096 SDPA
    + 14336 w1 + 4096 w2) + 4 x 32 = 63,616 B (tests derive it).
    """
    ops = layer_ops(model, layer).ops
    b, tp, sp = saved.act_bytes, saved.tp, saved.sp
    total = b * model.hidden / sp
    for k, (features, shard) in enumerate(_mm_outputs(ops), start=1):
        if k % 2 == 0:
            continue
        if shard is Shard.COLUMN:
            total += b * features / tp
        elif shard is Shard.ROW:
            total += b * features + (b * features / tp if sp > 1 else 0.0)
        else:
            total += b * features
    for op in ops:
        if isinstance(op, AttentionCore):
            total += (b * op.heads * op.v_head_dim + FLASH_LSE_BYTES * op.heads) / tp
    return total


__all__ = ["op_sac_bytes_per_token"]
