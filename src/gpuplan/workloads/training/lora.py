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


# ---- a PEFT adapter config on a model: exact adapter parameters ------------------------------------
#: Hugging Face module paths (transformers modeling_<family>.py) of each projection, per naming
#: convention: LlamaForCausalLM and the families built like it (Mistral, Qwen2/3, Gemma, DeepSeek:
#: `self_attn.*`, `mlp.*`, routed experts `mlp.experts.<e>.*`, shared `mlp.shared_experts.*`, router
#: `mlp.gate`; MLA `q_a_proj`, `q_b_proj`, `kv_a_proj_with_mqa`, `kv_b_proj`), Mixtral
#: (`block_sparse_moe.experts.<e>.w1|w3|w2`, router `block_sparse_moe.gate`), Phi-3 (fused `qkv_proj`,
#: `gate_up_proj`) and GPT-2 (Conv1D `attn.c_attn`, `attn.c_proj`, `mlp.c_fc`, `mlp.c_proj`).
_ATTENTION = {"q_proj", "k_proj", "v_proj", "o_proj", "q_a", "q_b", "kv_a", "kv_b"}
_MLA_NAMES = {"q_a": "q_a_proj", "q_b": "q_b_proj", "kv_a": "kv_a_proj_with_mqa", "kv_b": "kv_b_proj"}
_MIXTRAL_EXPERT = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}
_FUSED = {
    "phi3": {"q_proj": "self_attn.qkv_proj", "k_proj": "self_attn.qkv_proj", "v_proj": "self_attn.qkv_proj",
             "gate_proj": "mlp.gate_up_proj", "up_proj": "mlp.gate_up_proj"},
    "gpt2": {"q_proj": "attn.c_attn", "k_proj": "attn.c_attn", "v_proj": "attn.c_attn", "o_proj": "attn.c_proj",
             "up_proj": "mlp.c_fc", "down_proj": "mlp.c_proj"},
}


@dataclass(frozen=True)
class HfModule:
    """One adaptable `nn.Linear` (or Conv1D) of a Hugging Face model: its full path, shape, layer and
    the gpuplan projection name it is (a fused module: its first projection's)."""

    path: str
    in_features: int
    out_features: int
    layer: int | None
    projection: str
    output_layer: bool = False


def _module_path(model: ModelSpec, p: Projection, expert: int | None) -> str:
    fused = _FUSED.get(model.family, {}).get(p.name)
    if fused is not None:
        return fused
    if model.family == "gpt2":
        return p.name
    name = _MLA_NAMES.get(p.name, p.name)
    if p.name in _ATTENTION:
        return f"self_attn.{name}"
    mixtral = model.family == "mixtral"
    block = "block_sparse_moe" if mixtral else "mlp"
    if p.name == "router":
        return f"{block}.gate"
    if p.op.startswith("shared_"):
        return f"mlp.shared_experts.{name}"
    if expert is not None:
        leaf = _MIXTRAL_EXPERT[name] if mixtral else name
        return f"{block}.experts.{expert}.{leaf}"
    return f"mlp.{name}"


def hf_modules(model: ModelSpec) -> tuple[HfModule, ...]:
    """Every adaptable linear module of the model as transformers names it (`_FUSED` and the names
    above: `model.layers.<i>.<path>`; GPT-2 `transformer.h.<i>.<path>`), fused projections merged
    (out = the sum of theirs), and the output head `lm_head`."""
    prefix = "transformer.h" if model.family == "gpt2" else "model.layers"
    out: list[HfModule] = []
    for i in range(model.layers):
        merged: dict[str, HfModule] = {}
        for p in layer_projections(model, i):
            experts = range(p.instances) if p.shard is Shard.EXPERT else [None] * p.instances
            for e in experts:
                path = f"{prefix}.{i}.{_module_path(model, p, e)}"
                prev = merged.get(path)
                if prev is None:
                    merged[path] = HfModule(path, p.in_features, p.out_features, i, p.name)
                else:  # a fused module (Phi-3 qkv_proj, GPT-2 c_attn): outputs side by side
                    merged[path] = HfModule(path, prev.in_features, prev.out_features + p.out_features, i, prev.projection)
        out += merged.values()
    head = head_projection(model)
    out.append(HfModule("lm_head", head.in_features, head.out_features, None, "lm_head", output_layer=True))
    return tuple(out)


@dataclass(frozen=True)
class AdapterCounts:
    """Trainable parameters an adapter config adds to a model (`adapter_counts`)."""

    trainable_params: int
    lora_params: int  # A and B of every adapted module
    dora_magnitude_params: int
    lora_bias_params: int
    modules_to_save_params: int
    adapted_modules: int
    adapted_layers: tuple[int, ...]
    by_projection: dict  # {projection: {"modules": n, "params": p}}
    notes: tuple[str, ...] = ()


def adapter_counts(model: ModelSpec, adapter) -> AdapterCounts:
    """Exact trainable parameters of a PEFT LoRA adapter (models.adapter_config.AdapterConfig) on
    `model`: per adapted module r (in + out) (PEFT `LoraLayer.update_layer`: lora_A =
    nn.Linear(in, r, bias=False), lora_B = nn.Linear(r, out, bias=False)), r from `rank_pattern`;
    + out for DoRA's magnitude vector (peft/tuners/lora/dora.py `DoraLinearLayer.update_layer`: the
    row norms of W + s B A, one per output) and for `lora_bias` (lora_B with a bias); + the full
    copies of `modules_to_save` (PEFT `ModulesToSaveWrapper`: lm_head and embed_tokens, V x h each).
    Which modules: the adapter's matching rule on `hf_modules` (models.adapter_config)."""
    by: dict[str, dict] = {}
    lora = dora = bias = count = 0
    layers: set[int] = set()
    for m in hf_modules(model):
        if not adapter.targets(m.path, m.layer, linear_not_output=not m.output_layer):
            continue
        r = adapter.rank_of(m.path)
        params = r * (m.in_features + m.out_features)
        lora += params
        dora += m.out_features if adapter.use_dora else 0
        bias += m.out_features if adapter.lora_bias else 0
        count += 1
        if m.layer is not None:
            layers.add(m.layer)
        row = by.setdefault(m.projection, {"modules": 0, "params": 0})
        row["modules"] += 1
        row["params"] += params + (m.out_features if adapter.use_dora else 0) + (m.out_features if adapter.lora_bias else 0)
    notes: list[str] = []
    saved = 0
    table = model.vocab * model.hidden
    for name in adapter.modules_to_save:
        if name in ("lm_head", "embed_tokens", "wte"):
            saved += table
        else:
            notes.append(f"modules_to_save '{name}' is not counted (gpuplan knows lm_head and embed_tokens)")
    if adapter.bias != "none":
        notes.append(f"bias '{adapter.bias}': the base biases it trains are not counted")
    total = lora + dora + bias + saved
    return AdapterCounts(int(total), int(lora), int(dora), int(bias), int(saved), count, tuple(sorted(layers)), by,
                         tuple(notes))


__all__ = ["AdapterCounts", "HfModule", "Projection", "adapter_counts", "hf_modules", "adapted", "head_projection", "layer_adapter_params", "layer_projections", "lora_parameter_count"]
