"""Whether a parallel plan can run a model at all, written once.

Each rule is one array expression: it takes the plan's degrees as ints (one plan) or numpy arrays
that broadcast together (a plan search's grid of ~10^6 plans) and returns True where the plan
breaks the rule. The expressions use Python's operators (%, *, >, ==, &, |), which numpy arrays
overload: on one plan's ints they are exact at any size (no int64 overflow), on arrays elementwise. `check_plan` evaluates the rules on one `TrainPlan` and raises the first broken
one as an `InputError` naming the field; `plan_search` evaluates the same functions on its grid
(`violations`) and reports each rule's `reason` in `SearchResult.rejected`. The rules, in the order
they are checked, with what each framework checks:

- degrees x GPUs: tp x pp x dp x cp = the GPU count. Megatron-LM training/arguments.py
  `assert args.world_size % total_model_size == 0` (total_model_size = tp x pp x cp, then
  dp = world_size // total_model_size); torchtitan distributed/parallel_dims.py
  `assert dp_replicate * dp_shard * cp * tp * pp == self.world_size`.
- batch: global_batch % (micro_batch x dp) == 0 (`specs.plan.batch_splits_into_micro_batches`,
  which `TrainPlan` also enforces). Megatron-core num_microbatches_calculator.py
  `assert global_batch_size % micro_batch_times_data_parallel_size == 0`.
- heads: heads % tp == 0. Megatron-core transformer/transformer_config.py
  `if self.num_attention_heads % self.tensor_model_parallel_size != 0: raise ValueError`; torchtitan
  models/common/decoder.py `if n_heads % tp != 0: raise ValueError`.
- KV heads: Megatron-core transformer_config.py raises unless `num_query_groups %
  tensor_model_parallel_size == 0` or `tensor_model_parallel_size % num_query_groups == 0` (KV heads
  replicated over tp / g ranks); torchtitan models/common/decoder.py `if n_kv_heads % tp != 0: raise
  ValueError` (wk / wv are column-sharded by head): kv_heads % tp == 0 under `Framework.TORCHTITAN`.
- layers: pp x vpp <= layers, every model chunk holds a layer. The split is Megatron's uneven one
  (`memory._layer_split`, `pipeline_model_parallel_layout` in Megatron-LM arguments.py; the even
  split there asserts `num_layers_per_pipeline_stage % num_layers_per_virtual_pipeline_stage == 0`).
- interleaving: vpp > 1 needs pp > 1 (Megatron-LM arguments.py, with the default overlap_p2p_comm:
  "When interleaved schedule is used, pipeline-model-parallel size should be greater than 1") and,
  when the micro-batches per step m are known, m % pp == 0: Megatron-core
  pipeline_parallel/schedules.py `forward_backward_pipelining_with_interleaving` raises unless
  pp <= microbatch_group_size_per_vp_stage <= m and the last group is empty or >= pp; the group
  size defaults to pp (model_parallel_config.py), so m must be a multiple of pp.
- MoE + TP: a Megatron MoE model with tp > 1 needs sequence parallelism: Megatron-core
  transformer/moe/moe_layer.py `MoELayer.forward`: `if self.training and
  self.attn_tp_group.size() > 1 and not self.config.sequence_parallel: raise ValueError`.
- experts: ep > 1 only for a MoE model, and ep divides the routed experts. Megatron-LM arguments.py
  `assert args.num_experts is not None` and `args.num_experts % args.expert_model_parallel_size ==
  0`; torchtitan models/common/decoder.py `if moe.num_experts % ep != 0: raise ValueError`.
- expert folding: ep x etp divides tp x cp x dp (the experts of a pipeline stage are laid over its
  ranks). Megatron-core parallel_state.py `initialize_model_parallel`: `world_size %
  (expert_tensor_parallel_size * expert_model_parallel_size * pipeline_model_parallel_size)` must
  be 0; torchtitan parallel_dims.py `if (dp_shard * cp * tp) % ep != 0: raise ValueError`.
- context parallelism: cp > 1 needs seq_len % (2 cp) == 0 (each rank takes two of 2 cp chunks,
  the causal load balance). Megatron-LM arguments.py `assert args.seq_length %
  (args.context_parallel_size * 2) == 0`.

Not validity, and so not here: `plan_search`'s own enumeration rules (sequence parallelism with
tp = 1 and etp = 1 with tp = 1 are the same plans as their twins: Megatron-LM arguments.py sets
`args.sequence_parallel = False` when tp = 1) and its default-batch policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gpuplan.errors import InputError
from gpuplan.specs.execution import Framework
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.plan import TrainPlan, batch_splits_into_micro_batches


@dataclass(frozen=True)
class PlanDegrees:
    """The plan quantities the rules read: ints for one plan, or numpy arrays broadcast together.
    `m` (micro-batches per step) and `global_batch` are None without a global batch; `num_gpus`
    None skips the GPU-count rule; `framework` is one framework for all the plans."""

    tp: Any
    pp: Any
    dp: Any
    cp: Any
    ep: Any
    etp: Any
    vpp: Any
    micro_batch: Any
    sequence_parallel: Any
    seq_len: Any
    framework: Framework
    global_batch: Any = None
    m: Any = None
    num_gpus: int | None = None

    @classmethod
    def of_plan(cls, plan: TrainPlan, num_gpus: int | None = None) -> "PlanDegrees":
        known = plan.global_batch is not None
        return cls(tp=plan.tp, pp=plan.pp, dp=plan.dp, cp=plan.cp, ep=plan.ep, etp=plan.expert_tp, vpp=plan.vpp,
                   micro_batch=plan.micro_batch, sequence_parallel=plan.sequence_parallel, seq_len=plan.seq_len,
                   framework=plan.framework, global_batch=plan.global_batch,
                   m=plan.grad_accum_steps if known else None, num_gpus=num_gpus)


# --- the rules: True where broken ------------------------------------------------------------------

def gpu_count_broken(model: ModelSpec, d: PlanDegrees):
    """tp x pp x dp x cp differs from the GPU count (module docstring: arguments.py, parallel_dims.py)."""
    if d.num_gpus is None:
        return np.False_
    return d.tp * d.pp * d.dp * d.cp != d.num_gpus


def batch_broken(model: ModelSpec, d: PlanDegrees):
    """global_batch % (micro_batch x dp) != 0 (num_microbatches_calculator.py)."""
    if d.global_batch is None:
        return np.False_
    return np.logical_not(batch_splits_into_micro_batches(d.global_batch, d.micro_batch, d.dp))


def heads_broken(model: ModelSpec, d: PlanDegrees):
    """heads % tp != 0 (transformer_config.py; torchtitan decoder.py)."""
    return model.heads % d.tp != 0


def kv_heads_broken(model: ModelSpec, d: PlanDegrees):
    """Megatron-core: neither kv_heads % tp nor tp % kv_heads is 0; torchtitan: kv_heads % tp != 0."""
    unsplit = model.kv_heads % d.tp != 0
    if d.framework is Framework.TORCHTITAN:
        return unsplit
    return unsplit & (d.tp % model.kv_heads != 0)


def layers_broken(model: ModelSpec, d: PlanDegrees):
    """pp x vpp > layers: a model chunk without a layer."""
    return d.pp * d.vpp > model.layers


def interleaving_broken(model: ModelSpec, d: PlanDegrees):
    """vpp > 1 with pp = 1 (arguments.py), or with m % pp != 0 where m is known (schedules.py)."""
    interleaved = d.vpp > 1
    if d.m is None:
        return interleaved & (d.pp == 1)
    return interleaved & ((d.pp == 1) | (d.m % d.pp != 0))


def moe_tp_needs_sequence_parallel(moe: bool, framework: Framework, tp):
    """Whether a plan must run sequence parallelism: a Megatron MoE model with tp > 1 (moe_layer.py).
    The validation harness also reads it, to complete a row that does not state sequence parallelism."""
    if not moe or framework is not Framework.MEGATRON:
        return np.False_
    return tp > 1


def moe_tp_without_sp_broken(model: ModelSpec, d: PlanDegrees):
    """A Megatron MoE model with tp > 1 and no sequence parallelism (moe_layer.py)."""
    needs = moe_tp_needs_sequence_parallel(model.moe is not None, d.framework, d.tp)
    return needs & np.logical_not(d.sequence_parallel)


def dense_ep_broken(model: ModelSpec, d: PlanDegrees):
    """ep > 1 on a dense model (arguments.py: num_experts must be set)."""
    if model.moe is not None:
        return np.False_
    return d.ep > 1


def experts_broken(model: ModelSpec, d: PlanDegrees):
    """num_experts % ep != 0 (arguments.py; torchtitan decoder.py)."""
    if model.moe is None:
        return np.False_
    return model.moe.num_experts % d.ep != 0


def expert_folding_broken(model: ModelSpec, d: PlanDegrees):
    """(tp x cp x dp) % (ep x etp) != 0 for a MoE model (parallel_state.py; torchtitan parallel_dims.py)."""
    if model.moe is None:
        return np.False_
    return (d.tp * d.cp * d.dp) % (d.ep * d.etp) != 0


def context_broken(model: ModelSpec, d: PlanDegrees):
    """cp > 1 and seq_len % (2 cp) != 0 (arguments.py)."""
    return (d.cp > 1) & (d.seq_len % (2 * d.cp) != 0)


@dataclass(frozen=True)
class Rule:
    """One validity rule: `reason` is what a plan search reports for the plans it rejects, `field`
    the input an `InputError` names, `broken` the array expression, `message` the one-line error
    for one plan."""

    reason: str
    field: str
    broken: Callable[[ModelSpec, PlanDegrees], Any]
    message: Callable[[ModelSpec, PlanDegrees], str]


def _interleaving_message(model: ModelSpec, d: PlanDegrees) -> str:
    if d.pp == 1:
        return "vpp > 1 (interleaved schedule) needs pp > 1"
    return (f"vpp > 1 (interleaved schedule) needs the micro-batches per step, global_batch / (micro_batch x dp) = "
            f"{d.m}, to be a multiple of pp ({d.pp})")


def _kv_message(model: ModelSpec, d: PlanDegrees) -> str:
    if d.framework is Framework.TORCHTITAN:
        return f"tp ({d.tp}) must divide kv_heads ({model.kv_heads}) under torchtitan (it shards K and V by head)"
    return f"tp ({d.tp}) and kv_heads ({model.kv_heads}) must divide one another"


#: rejection reason of a plan whose degrees do not multiply to the GPU count
GPU_COUNT_REASON = "degrees do not divide the GPU count"
#: rejection reason of a Megatron MoE plan with tp > 1 and no sequence parallelism (Megatron-core refuses it)
MOE_TP_NEEDS_SP_REASON = "Megatron MoE with tp > 1 needs sequence parallelism"

RULES: tuple[Rule, ...] = (
    Rule(GPU_COUNT_REASON, "dp", gpu_count_broken,
         lambda model, d: f"tp x pp x dp x cp = {d.tp * d.pp * d.dp * d.cp} does not equal the GPU count {d.num_gpus}"),
    Rule("global batch does not divide into micro-batches x dp", "global_batch", batch_broken,
         lambda model, d: (f"global_batch ({d.global_batch}) is not a multiple of micro_batch x dp "
                           f"({d.micro_batch} x {d.dp})")),
    Rule("tp does not divide the heads", "tp", heads_broken,
         lambda model, d: f"tp ({d.tp}) must divide the number of attention heads ({model.heads})"),
    Rule("tp and the KV heads do not divide one another", "tp", kv_heads_broken, _kv_message),
    Rule("pp x vpp exceeds the layers", "pp", layers_broken,
         lambda model, d: f"pp x vpp ({d.pp} x {d.vpp}) exceeds the number of layers ({model.layers})"),
    Rule("interleaving needs pp > 1 and m divisible by pp", "vpp", interleaving_broken, _interleaving_message),
    Rule(MOE_TP_NEEDS_SP_REASON, "sequence_parallel", moe_tp_without_sp_broken,
         lambda model, d: (f"a Megatron MoE model with tp ({d.tp}) > 1 needs sequence parallelism "
                           "(Megatron-core MoELayer refuses the layout)")),
    Rule("ep > 1 needs a MoE model", "ep", dense_ep_broken,
         lambda model, d: f"ep ({d.ep}) > 1 needs a MoE model; {model.name} is dense"),
    Rule("ep does not divide the experts", "ep", experts_broken,
         lambda model, d: f"ep ({d.ep}) must divide the number of experts ({model.moe.num_experts})"),
    Rule("ep x etp must divide tp x cp x dp", "ep", expert_folding_broken,
         lambda model, d: (f"ep x etp ({d.ep} x {d.etp}) must divide tp x cp x dp ({d.tp * d.cp * d.dp}) "
                           "(experts are folded over a pipeline stage's ranks)")),
    Rule("seq_len is not a multiple of 2 x cp", "seq_len", context_broken,
         lambda model, d: f"seq_len ({d.seq_len}) must be a multiple of 2 x cp ({2 * d.cp})"),
)


def violations(model: ModelSpec, degrees: PlanDegrees) -> dict[str, Any]:
    """Each rule's `reason` -> where it is broken (bool or bool array), in the order of RULES."""
    return {rule.reason: rule.broken(model, degrees) for rule in RULES}


def check_plan(model: ModelSpec, plan: TrainPlan, num_gpus: int | None = None) -> None:
    """Raise InputError (naming the field) for the first rule `plan` breaks on `model`; with
    `num_gpus`, the degrees must also multiply to it."""
    degrees = PlanDegrees.of_plan(plan, num_gpus)
    for rule in RULES:
        if bool(rule.broken(model, degrees)):
            raise InputError(rule.message(model, degrees), field=rule.field)


__all__ = ["GPU_COUNT_REASON", "MOE_TP_NEEDS_SP_REASON", "PlanDegrees", "RULES", "Rule", "check_plan",
           "moe_tp_needs_sequence_parallel", "violations"]
