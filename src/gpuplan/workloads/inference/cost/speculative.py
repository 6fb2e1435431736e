"""Speculative decoding: a draft (a small model, or the target's MTP heads) proposes k tokens, the
target verifies them in one pass over k + 1 positions per sequence.

With a per-token acceptance rate alpha (each drafted token accepted with probability alpha,
independently, until the first rejection; the verify pass always yields one token of its own),
the expected tokens per verify step is (Leviathan, Kalman, Matias 2023, "Fast Inference from
Transformers via Speculative Decoding", eq. 1):

    E[tokens per step] = (1 - alpha^(k+1)) / (1 - alpha)        (= k + 1 at alpha = 1)

Cost of one engine step with d decoding sequences (what the simulator charges):

    k draft steps:   k x (draft linear(d) + draft LM head(d)) + k x draft KV bytes x sum(ctx) / HBM
    verify pass:     the target's step over (k + 1) tokens per decoding sequence: GEMMs and LM head
                     over d (k + 1) rows, decode attention reading each KV cache once with (k + 1)
                     queries (k + 1 times the FLOPs, the same bytes)

The verify pass is a short prefill: at small batch the GEMMs are weight-bandwidth-bound, so k + 1
rows cost about what 1 row does and the speedup approaches E[tokens]; at large batch they are
compute-bound and cost about k + 1 times as much, so the speedup shrinks and turns into a loss.

A sequence of L output tokens needs 1 + ceil((L - 1) / E) engine iterations (the first token comes
from the prefill), its context grows by E tokens per step on average (expected-value model: no
per-step randomness), and each step writes KV for k + 1 positions (the rejected ones are freed).

Draft costs: a draft model runs on the target's GPUs with the same tp and formats; MTP heads
(DeepSeek-V3 `num_nextn_predict_layers`, reused for k > 1 as TensorRT-LLM does) cost `mtp_layers`
layers of the target's own architecture plus its LM head per draft step (the small eh_proj
concat projection is left out). The draft's weights and KV cache come out of the KV budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.specs import ModelSpec
from gpuplan.validation_rules import check_number
from gpuplan.workloads.inference.cost.deployment import Deployment


def expected_tokens_per_step(k: int, alpha: float) -> float:
    """(1 - alpha^(k+1)) / (1 - alpha): Leviathan et al. 2023 eq. 1 (k + 1 at alpha = 1)."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


@dataclass(frozen=True)
class SpeculativeDecoding:
    """k speculated tokens per step at per-token acceptance `acceptance`, drafted by `draft_model`
    or by `mtp_layers` MTP heads of the target (exactly one of the two)."""

    tokens: int
    acceptance: float
    draft_model: ModelSpec | None = None
    mtp_layers: int = 0

    def __post_init__(self):
        check_number(self.tokens, "spec_tokens", gt=0, integer=True)
        check_number(self.acceptance, "spec_acceptance", ge=0.0, le=1.0)
        if (self.draft_model is None) == (self.mtp_layers <= 0):
            raise InputError("draft_model: speculative decoding needs one draft: --draft-model MODEL or --mtp N "
                             "(MTP layers of the target), not both", field="draft_model")

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens_per_step(self.tokens, self.acceptance)

    def iterations(self, output_len: np.ndarray) -> np.ndarray:
        """Engine iterations a request of output_len tokens needs: 1 + ceil((L - 1) / E)."""
        e = self.tokens_per_step
        out = np.asarray(output_len, dtype=np.int64)
        return 1 + np.ceil(np.maximum(out - 1, 0) / e - 1e-9).astype(np.int64)


@dataclass(frozen=True)
class DraftCost:
    """What the simulator needs of the draft: `table[n]` = seconds of k draft steps (GEMMs + LM head)
    over n decoding sequences; `ctx_seconds_per_token` = k x draft KV bytes per context token / HBM;
    the draft's weights and KV bytes per token on one GPU (out of the KV budget)."""

    table: np.ndarray
    ctx_seconds_per_token: float
    weights_bytes_per_gpu: float
    kv_bytes_per_token_per_gpu: float


def _mtp_model(model: ModelSpec, layers: int) -> ModelSpec:
    """`layers` layers of the target's architecture (MoE layers where the target is MoE)."""
    update: dict = {"layers": layers, "name": f"{model.name} MTP", "mtp_layers": 0}
    if model.layer_windows:
        update["layer_windows"] = tuple(model.layer_windows[-layers:])
    if model.moe is not None:
        update["moe"] = model.moe.model_copy(update={"dense_layers": 0})
    return model.model_copy(update=update)


def draft_deployment(dep: Deployment, spec: SpeculativeDecoding) -> Deployment:
    model = spec.draft_model if spec.draft_model is not None else _mtp_model(dep.model, spec.mtp_layers)
    return Deployment(model, dep.gpu, dep.system, tp=dep.tp, pp=1, ep=dep.ep if model.moe is not None else 1,
                      attention_dp=dep.attention_dp if model.moe is not None else 1,
                      weight_dtype=dep.weight_dtype.value, kv_dtype=dep.kv_dtype.value)


def draft_cost(dep: Deployment, spec: SpeculativeDecoding, table_tokens: int = 4096) -> DraftCost:
    """The draft's per-step cost tables on the target's GPUs (module docstring)."""
    from gpuplan.layers import kv_cache_bytes_per_token
    from gpuplan.specs.dtypes import bytes_per_element
    from gpuplan.workloads.inference.cost.operators import StepTimeModel
    from gpuplan.workloads.inference.cost.weights import stage_weights

    ddep = draft_deployment(dep, spec)
    st = StepTimeModel(ddep, table_tokens=table_tokens)
    k = spec.tokens
    table = k * (st.linear_table + st.logits_table)
    kv_tok = kv_cache_bytes_per_token(ddep.model, bytes_per_element(ddep.kv_dtype)) * ddep.kv_shard_fraction
    (stage,) = stage_weights(ddep)  # the draft runs unpipelined (draft_deployment: pp = 1)
    weights = stage.total_bytes
    if spec.draft_model is None:  # MTP heads share the target's embedding and LM head
        weights -= stage.table_bytes
    return DraftCost(table=np.ascontiguousarray(table, dtype=float),
                     ctx_seconds_per_token=k * st.layers * st.decode_kv_bytes_per_token_layer / st.hbm_bytes_per_s,
                     weights_bytes_per_gpu=float(max(weights, 0.0)), kv_bytes_per_token_per_gpu=float(kv_tok))

