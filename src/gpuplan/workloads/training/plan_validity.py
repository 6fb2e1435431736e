"""Whether a parallel plan can run a model at all: degrees that divide the heads, layers, experts
and sequence (an impossible plan is bad input, `InputError` naming the field)."""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.plan import TrainPlan


def check_plan(model: ModelSpec, plan: TrainPlan) -> None:
    """Impossible parallelism -> InputError naming the field."""
    if model.heads % plan.tp:
        raise InputError(f"tp ({plan.tp}) must divide the number of attention heads ({model.heads})", field="tp")
    if model.kv_heads % plan.tp and plan.tp % model.kv_heads:
        raise InputError(
            f"tp ({plan.tp}) and kv_heads ({model.kv_heads}) must divide one another", field="tp"
        )
    if plan.pp * plan.vpp > model.layers:
        raise InputError(
            f"pp x vpp ({plan.pp} x {plan.vpp}) exceeds the number of layers ({model.layers})", field="pp"
        )
    if plan.vpp > 1 and plan.pp == 1:
        raise InputError("vpp > 1 (interleaved schedule) needs pp > 1", field="vpp")
    if plan.ep > 1:
        if model.moe is None:
            raise InputError(f"ep ({plan.ep}) > 1 needs a MoE model; {model.name} is dense", field="ep")
        if model.moe.num_experts % plan.ep:
            raise InputError(f"ep ({plan.ep}) must divide the number of experts ({model.moe.num_experts})", field="ep")
    if model.moe is not None:
        ranks = plan.tp * plan.cp * plan.dp
        if ranks % (plan.ep * plan.expert_tp):
            raise InputError(
                f"ep x etp ({plan.ep} x {plan.expert_tp}) must divide tp x cp x dp ({ranks}) "
                "(experts are folded over a pipeline stage's ranks)", field="ep"
            )
    if plan.cp > 1 and plan.seq_len % (2 * plan.cp):
        raise InputError(f"seq_len ({plan.seq_len}) must be a multiple of 2 x cp ({2 * plan.cp})", field="seq_len")
