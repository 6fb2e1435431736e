"""The router a training.csv row states, where it is not the model's learned one.

Rule: a row whose notes name a fake balanced gate ("fake balanced gate": NeMo AutoModel's
`FakeBalancedGate`, switched on by `fake_balanced_gate: true` in its benchmark configs, e.g.
NVIDIA-NeMo/Automodel@89e3a9fdd604:examples/benchmark/configs/deepseek_v3_te_deepep.yaml) runs its MoE
layers with round-robin routing: token i goes to experts (i k + j) mod E, j < k
(nemo_automodel/components/moe/layers.py `FakeBalancedGate.forward`: `torch.arange(n_tokens * k)
.view(-1, k) % n_experts`), the model's `MoeSpec.round_robin_routing`. Megatron-core's
`--moe-router-force-load-balancing` (the Megatron-Bridge MoE tables' "force-balanced router") is not
this: it draws random logits (router.py `apply_random_logits`), i.e. the uniform routing the step
model assumes anyway.
"""

from __future__ import annotations

import re

from gpuplan.specs import ModelSpec

_STATED_FAKE_BALANCED_GATE = re.compile(r"\bfake[ _]balanced[ _]gate\b", re.IGNORECASE)


def model_with_stated_router(row: dict[str, str], model: ModelSpec) -> ModelSpec:
    """`model` with round-robin routing where the row's notes state a fake balanced gate and the model
    has MoE layers (module docstring); `model` itself otherwise."""
    if model.moe is None or not _STATED_FAKE_BALANCED_GATE.search(row.get("notes") or ""):
        return model
    return model.model_copy(update={"moe": model.moe.model_copy(update={"round_robin_routing": True})})


__all__ = ["model_with_stated_router"]
