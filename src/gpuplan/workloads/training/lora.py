"""LoRA adapters on the operator inventory: which projections a target list adapts and how many
parameters the adapters add.

LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", sec. 4.1) keeps a
projection W (out x in) frozen and trains h = W x + (alpha / r) B A x with A: r x in and B: out x r,
so an adapted projection adds r (in + out) parameters (PEFT `lora.Linear.update_layer`:
`nn.Linear(in_features, r)` and `nn.Linear(r, out_features)`, no biases; `bias="none"`).

The inventory fuses what frameworks keep as separate `nn.Linear` modules; adapters attach to those
modules, so a fused operator is split back into its projections (`layer_projections`):
- grouped-query `qkv` h -> (a + 2g) d: q_proj (a d), k_proj (g d), v_proj (g d), each reading h;
- `out` a d -> h: o_proj;
- a gated `fc1` h -> 2f: gate_proj and up_proj (f each); an ungated one: up_proj; `fc2`: down_proj;
- routed and shared experts: the same names per expert instance (PEFT matches every module whose
  name ends with a target, e.g. `experts.3.gate_proj`);
- the output head: lm_head (adapted only when named).
MLA's projections (q_a / q_b / kv_a / kv_b) keep their inventory names and are never matched by
the Llama names; only o_proj and the MLP are adaptable there.

Tensor parallelism splits the adapter like its projection (Megatron-style LoRA): a column-split
projection keeps A whole and splits B by out / tp; a row-split one splits A by in / tp.

Checks (tests): Llama-2-7B, r 8 on q and v: 32 x 2 x (4096 x 8 + 8 x 4096) = 4,194,304, the figure
PEFT's `print_trainable_parameters` reports; phi-1.5 (24 layers, h 2048), r 8 on q and v:
24 x 2 x 2 x 8 x 2048 = 1,572,864, LitGPT's resource table.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gpuplan.layers.inventory import layer_ops, model_ops
from gpuplan.layers.operators import Activation, Linear, Shard
from gpuplan.specs.model import ModelSpec


@dataclass(frozen=True)
class Projection:
    """One `nn.Linear` as a framework builds it: its Hugging Face name, the inventory operator it is
    part of, its shape, how TP splits it and how many instances a layer holds (experts: E, of which
    a token uses `active_instances`)."""

    name: str
    op: str
    in_features: int
    out_features: int
    shard: Shard
    instances: int = 1
    active_instances: float = 1.0
    reads_layer_input: bool = False

    def local_shape(self, tp: float, etp: float = 1.0) -> tuple[float, float]:
        """(in, out) on one GPU: COLUMN out / tp, ROW in / tp, experts over etp like their operator."""
        if self.shard is Shard.COLUMN:
            return self.in_features, self.out_features / tp
        if self.shard is Shard.ROW:
            return self.in_features / tp, self.out_features
        if self.shard is Shard.EXPERT:
            up = self.name in ("gate_proj", "up_proj")
            return (self.in_features, self.out_features / etp) if up else (self.in_features / etp, self.out_features)
        return self.in_features, self.out_features

    def adapter_params(self, rank: int, tp: float = 1.0, etp: float = 1.0) -> float:
        """r (in + out) per instance on one GPU (A: r x in, B: out x r, split like the projection)."""
        k, n = self.local_shape(tp, etp)
        return self.instances * rank * (k + n)


def _split(op: Linear, gated_next: bool) -> list[Projection]:
    kw = dict(shard=op.shard, instances=op.instances, active_instances=op.active_instances,
              reads_layer_input=op.reads_layer_input)
    h_in = op.in_features
    if op.grouped_heads is not None:
        a, g, d = op.grouped_heads
        return [Projection("q_proj", op.name, h_in, a * d, **kw), Projection("k_proj", op.name, h_in, g * d, **kw),
                Projection("v_proj", op.name, h_in, g * d, **kw)]
    base = op.name.removeprefix("expert_").removeprefix("shared_")
    if base == "out":
        return [Projection("o_proj", op.name, h_in, op.out_features, **kw)]
    if base == "fc1":
        if gated_next:
            half = op.out_features // 2
            return [Projection("gate_proj", op.name, h_in, half, **kw), Projection("up_proj", op.name, h_in, half, **kw)]
        return [Projection("up_proj", op.name, h_in, op.out_features, **kw)]
    if base == "fc2":
        return [Projection("down_proj", op.name, h_in, op.out_features, **kw)]
    if base == "q":  # MLA without a query down-projection: h -> a (d_nope + d_rope), the query projection
        return [Projection("q_proj", op.name, h_in, op.out_features, **kw)]
    return [Projection(op.name, op.name, h_in, op.out_features, **kw)]


@lru_cache(maxsize=4096)
def layer_projections(model: ModelSpec, layer: int) -> tuple[Projection, ...]:
    """The projections of one layer, as frameworks build them (module docstring); the router and
    other operators keep their inventory names."""
    ops = layer_ops(model, layer).ops
    out: list[Projection] = []
    for i, op in enumerate(ops):
        if not isinstance(op, Linear):
            continue
        follower = ops[i + 1] if i + 1 < len(ops) else None
        out += _split(op, isinstance(follower, Activation) and follower.gated)
    return tuple(out)


def head_projection(model: ModelSpec) -> Projection:
    """The output head h -> V as a projection (`lm_head`), column-split over tp (vocab-parallel)."""
    head = model_ops(model).head
    return Projection("lm_head", head.name, head.in_features, head.out_features, Shard.COLUMN)


def adapted(projection: Projection, targets: tuple[str, ...]) -> bool:
    """Whether a target list adapts this projection."""
    return projection.name in targets


def layer_adapter_params(model: ModelSpec, layer: int, targets: tuple[str, ...], rank: int,
                         tp: float = 1.0, etp: float = 1.0, ep: float = 1.0) -> float:
    """Adapter parameters of one layer on one GPU: the sum of r (in + out) over its adapted
    projections (routed experts' adapters divided over ep like the experts)."""
    total = 0.0
    for p in layer_projections(model, layer):
        if adapted(p, targets):
            share = ep if p.shard is Shard.EXPERT else 1.0
            total += p.adapter_params(rank, tp, etp) / share
    return total


def lora_parameter_count(model: ModelSpec, targets: tuple[str, ...], rank: int) -> int:
    """Trainable adapter parameters of the whole model (tp = 1): what PEFT's
    `print_trainable_parameters` prints as "trainable params" (module docstring)."""
    total = sum(layer_adapter_params(model, i, targets, rank) for i in range(model.layers))
    if "lm_head" in targets:
        total += head_projection(model).adapter_params(rank)
    return int(round(total))


__all__ = ["Projection", "adapted", "head_projection", "layer_adapter_params", "layer_projections", "lora_parameter_count"]
