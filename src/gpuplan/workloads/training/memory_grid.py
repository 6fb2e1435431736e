"""Training memory of a grid of plans: `memory.training_memory`'s terms for one pipeline rank,
evaluated on numpy arrays (the plan search's memory screen scores ~10^6 plans at once).

The terms are `memory_terms`' formulas, the same functions `memory._rank_memory` calls for one
plan. What differs is only how the rank's layers are summed: `_rank_memory` walks them one by one;
here the layers are grouped by kind (layers with the same operator inventory, `layers.inventory.
layer_ops`: dense and MoE layers, sliding-window and global attention) and each kind's per-token
bytes are computed once per distinct (tp, sequence parallelism, recompute, etp) and weighted by its
count on the rank; parameters are summed once per distinct (pp, vpp). A test checks every term
against `_rank_memory` on 10,000 random plans (equal to float rounding).

A fine-tuning plan (`proto.fine_tuning` not ordinary training; every `Framework.TRANSFORMERS` plan:
`finetune_memory.fine_tuning_rules`) gets `memory._rank_memory`'s
fine-tuning rules from the same functions: its model states and their "other" terms from
`finetune_memory.rank_fine_tuning_states` (once per distinct parallel layout, sharding and
recompute), its activations through `memory.layer_activation_bytes_per_token` (which adds
`finetune_activations`' deltas), its loss from `memory.loss_bytes_per_vocab_entry` (chunked, or
PyTorch's fp32 cross entropy), and the gradient lifetime of a PyTorch loop and activation offloading
from `finetune_memory.gradient_lifetime` on the arrays (`_fine_tuning_terms`).

`screen_bytes` is the screen: the larger of the first and the last rank (the first holds the most
micro-batches in flight and the embedding, the last the output head and the loss), a lower bound
of `training_memory`'s peak over all ranks, so a plan the screen finds too big cannot fit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpuplan.layers.inventory import layer_kinds
from gpuplan.layers.params import layer_params, norm_params
from gpuplan.specs.dtypes import number_format
from gpuplan.specs.execution import Framework
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.plan import TrainPlan, expert_data_parallel_size
from gpuplan.workloads.training import memory_terms as terms
from gpuplan.workloads.training.memory import (
    _layer_param_split, _mtp_param_split, activation_bytes, layer_activation_bytes_per_token, loss_bytes_per_vocab_entry,
    outside_allocator_bytes, pipeline_layer_split, saved_context, state_bytes_per_param, widest_ffn,
)
from gpuplan.workloads.training.finetune_memory import (
    fine_tuning_rules, gradient_lifetime, gradients_freed_between_steps, pytorch_loop, rank_fine_tuning_states)
from gpuplan.workloads.training.loss_memory import held_logits_bytes_per_vocab_entry
from gpuplan.workloads.training.plan_codes import RECOMPUTE_OF_CODE, SHARDING_OF_CODE, RecomputeCode, ShardingCode


def _per_distinct(fn, *arrays, memo: dict | None = None) -> tuple[np.ndarray, ...]:
    """fn(*scalars) -> tuple of numbers, called once per distinct combination of the broadcast
    `arrays`; each output as an array of their broadcast shape. `memo`: fn's results by combination,
    kept by the caller across calls (a plan search's blocks repeat the same combinations)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays))
    columns = [_float_column(a, shape) for a in arrays]  # each broadcast to `shape`, flat, as floats
    if columns[0].size <= _DISTINCT_BY_DICT:
        # few combinations (the axes of a block are short): a dict of first appearances, not a sort of rows
        keys = list(zip(*(c.tolist() for c in columns)))
        first: dict[tuple, int] = {}
        inverse = np.fromiter(map(lambda key: first.setdefault(key, len(first)), keys), dtype=np.intp, count=len(keys))
        rows = list(first)
    else:
        rows, inverse = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
    if memo is None:
        values = np.array([fn(*row) for row in rows], dtype=float)
    else:
        keys = [tuple(row) for row in (rows if isinstance(rows, list) else rows.tolist())]
        values = np.array([memo[key] if key in memo else memo.setdefault(key, fn(*key)) for key in keys], dtype=float)
    return tuple(values[inverse.ravel(), j].reshape(shape) for j in range(values.shape[1]))


def _float_column(a, shape: tuple[int, ...]) -> np.ndarray:
    """`a` broadcast to `shape` as a new flat float64 array (np.broadcast_to(a, shape).ravel().astype(float))."""
    out = np.empty(shape)
    np.copyto(out, a)
    return out.ravel()


#: `_per_distinct` finds the distinct combinations with a dict up to this many broadcast points (3x
#: faster than np.unique(axis=0) on the ~10^2 points of a plan search's (pp, vpp) or (tp, sp, recompute));
#: beyond it, np.unique's sort of the rows (fine-tuning states over every layout axis of a block)
_DISTINCT_BY_DICT = 4096


@dataclass(frozen=True)
class RankLayers:
    """What one pipeline rank's layers add up to: their number, parameters split over tp, replicated
    and routed (`memory._layer_param_split`), the largest layer's parameters, and the count of each kind."""

    count: int
    split: float
    replicated: float
    routed: float
    biggest: float
    kinds: tuple[int, ...]


    def numbers(self) -> tuple[float, ...]:
        """count, split, replicated, routed, biggest, then the count of each kind."""
        return (self.count, self.split, self.replicated, self.routed, self.biggest, *self.kinds)


@lru_cache(maxsize=8192)
def rank_layers(model: ModelSpec, pp: int, vpp: int, rank: int) -> RankLayers:
    layers = pipeline_layer_split(model.layers, pp, vpp)[rank]
    kind, representative = layer_kinds(model)
    splits = [_layer_param_split(model, i) for i in layers]
    return RankLayers(
        count=len(layers), split=float(sum(s[0] for s in splits)), replicated=float(sum(s[1] for s in splits)),
        routed=float(sum(s[2] for s in splits)), biggest=float(max((layer_params(model, i).total for i in layers), default=0)),
        kinds=tuple(sum(1 for i in layers if kind[i] == k) for k in range(len(representative))),
    )


def _per_token_bytes(model: ModelSpec, proto: TrainPlan, tp, sp, rc, etp, cp) -> tuple[float, ...]:
    """Bytes per token of each layer kind: stored (as the plan keeps them) then the full saved set
    (`stored=False`: what a recomputed layer re-materialises), under `proto` with these axes."""
    plan = proto.model_copy(update={"tp": int(tp), "sequence_parallel": bool(sp), "recompute": RECOMPUTE_OF_CODE[int(rc)],
                                    "etp": int(etp), "cp": int(cp)})
    saved = saved_context(model, plan)
    _, representative = layer_kinds(model)
    stored = [layer_activation_bytes_per_token(model, plan, i, saved=saved) for i in representative]
    full = [layer_activation_bytes_per_token(model, plan, i, stored=False, saved=saved) for i in representative]
    return (*stored, *full)


def per_kind_bytes_per_token(model: ModelSpec, proto: TrainPlan, *, tp, cp, etp, recompute, sequence_parallel,
                             memo: dict | None = None, **_) -> tuple[np.ndarray, ...]:
    """`_per_token_bytes` of each layer kind (stored ones, then full ones) for every plan of the grid,
    computed once per distinct (tp, sequence parallelism, recompute, etp; cp for unfused attention).
    `memo`: those values by combination, for the one `model` and `proto` of a search (`screen_bytes`)."""
    cp_key = 1 if proto.flash_attention else cp  # the sequence shard matters only for stored scores
    return _per_distinct(lambda *a: _per_token_bytes(model, proto, *a), tp, sequence_parallel, recompute, etp, cp_key,
                         memo=memo)


def rank_memory_arrays(model: ModelSpec, proto: TrainPlan, *, tp, pp, dp, cp, ep, etp, vpp, micro_batch, m, recompute,
                       sequence_parallel, sharding, num_gpus: int, last: bool | np.ndarray = False,
                       per_kind: tuple[np.ndarray, ...] | None = None) -> dict[str, np.ndarray]:
    """`memory._rank_memory`'s terms (bytes, by their names there, and "total") of the first
    pipeline rank (`last` False) or the last one, for plans given as broadcastable arrays: the axes
    (`recompute` RecomputeCode, `sharding` ShardingCode, `m` micro-batches per step, inf without a
    global batch); seq_len, precision, gradient precision, framework and attention kernel from `proto`.
    `last` may also be a boolean array broadcast with the axes (`screen_bytes`' BOTH_RANKS: the first
    and the last rank in one call, on a leading axis of their own).
    `per_kind`: `per_kind_bytes_per_token` of these axes, when the caller has it."""
    if per_kind is None:
        per_kind = per_kind_bytes_per_token(model, proto, tp=tp, cp=cp, etp=etp, recompute=recompute,
                                            sequence_parallel=sequence_parallel)
    if isinstance(last, (bool, np.bool_)):
        rank = np.subtract(pp, 1) if last else 0
        first, is_last = (np.equal(pp, 1), True) if last else (True, np.equal(pp, 1))
    else:  # both ranks at once
        rank = np.where(last, np.subtract(pp, 1), 0)
        first, is_last = np.where(last, np.equal(pp, 1), True), np.where(last, True, np.equal(pp, 1))
    comp = _per_distinct(lambda p, v, r: rank_layers(model, int(p), int(v), int(p) - 1 if r else 0).numbers(), pp, vpp,
                         last)
    count, split_sum, replicated_sum, routed_sum, biggest = comp[:5]
    kind_counts = comp[5:]
    k = len(kind_counts)
    titan = proto.framework is Framework.TORCHTITAN
    b = activation_bytes(proto.precision)

    # parameters held by one GPU of the rank (memory.rank_params)
    table = model.vocab * model.hidden / tp
    positions = (model.max_position_embeddings or 0) * model.hidden if model.learned_position_embeddings else 0
    mtp_split, mtp_replicated, mtp_routed = _mtp_param_split(model) if model.mtp_layers else (0, 0, 0)
    expert_group = np.multiply(ep, etp)
    block_dense = split_sum / tp + replicated_sum
    dense = (block_dense + np.where(first, table + positions, 0.0)
             + np.where(is_last, norm_params(model) + np.where(model.tied_embeddings & np.equal(pp, 1), 0.0, table)
                        + mtp_split / tp + mtp_replicated, 0.0))
    experts = routed_sum / expert_group + np.where(is_last, mtp_routed / expert_group, 0.0)
    # a term whose condition is one value for the whole search (the model, the framework, the precision) is
    # decided here once: a scalar 0 where it cannot apply (sums and maxima below take it as the zeros it stands for)
    fsdp2 = proto.framework.pipelines_fsdp2
    fsdp2_pp = (sharding >= ShardingCode.ZERO3) & np.greater(pp, 1) if fsdp2 else False
    out: dict[str, np.ndarray] = {}
    out["weights"], out["gradients"], out["optimizer"] = terms.model_state_bytes(
        dense, experts, state_bytes_per_param(proto), sharding, np.multiply(dp, cp),
        expert_data_parallel_size(tp, cp, dp, ep, etp), fsdp2_pp, b)

    # activations: the rank's layers by kind, per token
    stored, full = per_kind[:k], per_kind[k:]
    has_layers = count > 0
    tokens = micro_batch * proto.seq_len / cp
    sp = np.where(sequence_parallel, tp, 1)
    in_flight = terms.chunks_in_flight(pp, vpp, m, rank)
    mean_stored = sum(n * x for n, x in zip(kind_counts, stored)) / np.maximum(count, 1)
    out["layers"] = np.where(has_layers, terms.stored_activation_bytes(mean_stored * tokens, count, vpp, in_flight), 0.0)
    out["embedding_dropout_masks"] = np.where(first, terms.embedding_dropout_bytes(
        tokens, model.hidden, sp, in_flight, pp), 0.0) if model.hidden_dropout > 0 else 0.0
    backward = np.where(has_layers, terms.backward_working_set_bytes(tokens, b, model.hidden, widest_ffn(model), sp, tp), 0.0)
    present = [n > 0 for n in kind_counts]
    full_max = np.max(np.broadcast_arrays(*(np.where(p, f, -np.inf) for p, f in zip(present, full))), axis=0)
    if titan:
        sac_max = np.max(np.broadcast_arrays(*(np.where(p, f - x, -np.inf) for p, f, x in zip(present, full, stored))),
                         axis=0)
        selective = np.where(np.equal(recompute, RecomputeCode.SELECTIVE), tokens * sac_max, 0.0)
    else:
        selective = 0.0
    rematerialised = np.where(np.equal(recompute, RecomputeCode.FULL), full_max * tokens, selective)
    rematerialised = np.where(has_layers, rematerialised, 0.0)
    loss = np.where(is_last, terms.logits_bytes(tokens, model.vocab, tp, _loss_bytes(proto, tp), model.mtp_layers, b,
                                                model.hidden, sp), 0.0)
    kind_of_last = layer_kinds(model)[0][-1]
    out["mtp_layers"] = np.where(is_last, terms.mtp_activation_bytes(
        model.mtp_layers, stored[kind_of_last], b, model.hidden, sp, tokens), 0.0) if model.mtp_layers > 0 else 0.0
    # the fp32 logits a loop holds through backward (loss_memory.held_logits_bytes_per_vocab_entry)
    held_per_entry = held_logits_bytes_per_vocab_entry(proto)
    held = np.where(is_last, tokens * model.vocab / tp * held_per_entry, 0.0) if held_per_entry else 0.0
    loss_wins = loss > backward + rematerialised + held
    out["logits"] = np.where(loss_wins, loss, 0.0)
    out["backward_working_set"] = np.where(loss_wins, 0.0, backward)
    out["recompute_working_set"] = np.where(loss_wins, 0.0, rematerialised)
    out["held_logits"] = np.where(loss_wins, 0.0, held) if held_per_entry else 0.0

    # other
    gathered = (sharding >= ShardingCode.ZERO3) & ~fsdp2_pp if fsdp2 else sharding >= ShardingCode.ZERO3
    out["zero3_gather_buffer"] = np.where(gathered, terms.zero3_gather_bytes(biggest, tp, b), 0.0)
    out["fsdp_root_unsharded"] = np.where(gathered, terms.fsdp_root_bytes(dense, block_dense, b), 0.0) if titan else 0.0
    quantised = proto.precision.low_precision_matmul and not titan
    bytes_per_element = number_format(proto.precision.value).bytes_per_element if quantised else 0.0
    out["fp8_weight_cache"] = np.where(has_layers, terms.fp8_weight_cache_bytes(
        bytes_per_element, block_dense, experts), 0.0) if quantised else 0.0
    out["cuda_context"], out["nccl_buffers"] = outside_allocator_bytes(tp, cp, dp, pp, ep, proto.cuda_lazy_loading)
    if fine_tuning_rules(proto):
        _fine_tuning_terms(model, proto, out, last, tp=tp, pp=pp, vpp=vpp, dp=dp, cp=cp, ep=ep, etp=etp,
                           sharding=sharding, recompute=recompute, m=m, backward=backward, rematerialised=rematerialised,
                           held=held)
    # summed by group, as training_memory does: each group stays on the axes it depends on, and only
    # the last two additions are the size of the whole grid
    states = out["weights"] + out["gradients"] + out["optimizer"]
    acts = sum(out[k] for k in _ACTIVATION_TERMS)
    other = sum(out[k] for k in ("zero3_gather_buffer", "fsdp_root_unsharded", "fp8_weight_cache", "cuda_context",
                                 "nccl_buffers", *FINE_TUNING_OTHER[2:]) if k in out)
    total = states + acts  # (states + acts) + other, the second addition in place where the sum is an array
    out["total"] = np.add(total, other, out=total) if _holds(total, other) else total + other
    return out


#: the activation terms of `rank_memory_arrays` (memory._rank_memory's `acts` keys)
_ACTIVATION_TERMS = ("layers", "embedding_dropout_masks", "mtp_layers", "logits", "backward_working_set",
                     "recompute_working_set", "held_logits")
#: the "other" terms of a fine-tuning plan's model states (`finetune_memory.rank_fine_tuning_states`);
#: the first two replace ordinary training's
FINE_TUNING_OTHER = ("zero3_gather_buffer", "fsdp_root_unsharded", "dequant_workspace", "offload_grad_bucket",
                     "autocast_weight_copies")


def _fine_tuning_states(model: ModelSpec, proto: TrainPlan, last: bool, tp, pp, vpp, dp, cp, ep, etp, sharding,
                        recompute) -> tuple[float, ...]:
    """(weights, gradients, optimizer, host, paged optimizer, largest one gradient, *FINE_TUNING_OTHER) bytes of the first or
    last pipeline rank of one layout: `finetune_memory.rank_fine_tuning_states` itself."""
    plan = proto.model_copy(update={
        "tp": int(tp), "pp": int(pp), "vpp": int(vpp), "dp": float(dp), "cp": int(cp), "ep": int(ep), "etp": int(etp),
        "sharding": SHARDING_OF_CODE[int(sharding)], "recompute": RECOMPUTE_OF_CODE[int(recompute)]})
    rank = int(pp) - 1 if last else 0
    layers = pipeline_layer_split(model.layers, int(pp), int(vpp))[rank]
    ft = rank_fine_tuning_states(model, plan, layers, rank == 0, rank == int(pp) - 1)
    return (ft.weights, ft.gradients, ft.optimizer, ft.host, ft.paged_optimizer, ft.largest_gradient,
            *(ft.other.get(k, 0.0) for k in FINE_TUNING_OTHER))


def _fine_tuning_terms(model: ModelSpec, proto: TrainPlan, out: dict[str, np.ndarray], last, *, tp, pp, vpp, dp,
                       cp, ep, etp, sharding, recompute, m, backward, rematerialised, held) -> None:
    """`memory._rank_memory`'s fine-tuning rules on the grid, in place on `out` (module docstring):
    the model states of `rank_fine_tuning_states`, activation offloading (the stored layers to the
    host) and a PyTorch loop's gradient lifetime (`gradient_lifetime`: with one micro-batch the peak
    holds either the forward's activations and no gradient, or every gradient and only the backward
    working set: `backward`, `rematerialised` and the `held` logits, as the plan keeps them before the
    loss phase is weighed against them). `last`: as `rank_memory_arrays`'."""
    states = _per_distinct(lambda *a: _fine_tuning_states(model, proto, bool(a[-1]), *a[:-1]),
                           tp, pp, vpp, dp, cp, ep, etp, sharding, recompute, last)
    out["weights"], gradients, out["optimizer"], out["host"], out["paged_optimizer"], largest = states[:6]
    out.update(zip(FINE_TUNING_OTHER, states[6:]))
    if proto.fine_tuning.offload_activations:
        out["host"] = out["host"] + out["layers"]
        out["layers"] = np.zeros_like(out["layers"])
    acts = _ACTIVATION_TERMS
    in_backward = pytorch_loop(proto) and proto.fine_tuning.optimizer_in_backward
    kept, at_backward_end = gradient_lifetime(gradients, sum(out[k] for k in acts), backward + rematerialised + held,
                                              in_backward | (gradients_freed_between_steps(proto) & np.equal(m, 1)),
                                              largest if in_backward else None)
    out["gradients"] = kept
    for k in acts:  # at the end of backward only the working sets are alive
        out[k] = np.where(at_backward_end, 0.0, out[k])
    out["backward_working_set"] = np.where(at_backward_end, backward, out["backward_working_set"])
    out["recompute_working_set"] = np.where(at_backward_end, rematerialised, out["recompute_working_set"])
    out["held_logits"] = np.where(at_backward_end, held, out["held_logits"])


def _loss_bytes(proto: TrainPlan, tp):
    """`memory.loss_bytes_per_vocab_entry` for every tp (it depends on tp > 1 only)."""
    one, many = (loss_bytes_per_vocab_entry(proto.model_copy(update={"tp": t})) for t in (1, 2))
    return np.where(np.greater(tp, 1), many, one)


def screen_bytes(model: ModelSpec, proto: TrainPlan, memo: dict | None = None, **axes) -> tuple[np.ndarray, np.ndarray]:
    """(total, memory outside PyTorch's allocator) bytes of the larger of the first and the last
    pipeline rank (`rank_memory_arrays`; module docstring): a lower bound of `training_memory`.
    `memo`: a dict the caller keeps for one `model` and `proto` (a plan search's blocks): the layer
    kinds' bytes per token of each (tp, sp, recompute, etp, cp) are then computed once per search."""
    per_kind = per_kind_bytes_per_token(model, proto, memo=None if memo is None else memo.setdefault("per_kind", {}),
                                        **axes)
    ndim = max(np.ndim(a) for a in axes.values())
    both = rank_memory_arrays(model, proto, per_kind=per_kind, last=BOTH_RANKS.reshape((2,) + (1,) * ndim), **axes)
    # the first rank's total and the last's are the two halves of the leading axis: the larger of each pair
    total = np.max(both["total"], axis=0)
    return total, both["cuda_context"] + both["nccl_buffers"]


#: `rank_memory_arrays`' `last` for the first and the last pipeline rank in one call (one leading axis:
#: every term of both ranks is one numpy operation, not two; the memory outside the allocator is the
#: same on every rank and stays without it)
BOTH_RANKS = np.array([False, True])


def _holds(array, other) -> bool:
    """Whether `array` can take the result of an elementwise operation with `other` in place: a float
    array of the broadcast shape."""
    return (isinstance(array, np.ndarray) and array.dtype == np.float64
            and array.shape == np.broadcast_shapes(array.shape, np.shape(other))
            and np.result_type(array, other) == np.float64)


__all__ = ["RankLayers", "layer_kinds", "per_kind_bytes_per_token", "rank_layers", "rank_memory_arrays", "screen_bytes"]
