"""Serving weight bytes per GPU: the sum over the model's operator inventory (layers.inventory, the
one `gpuplan model show` counts exactly), each tensor in the format the checkpoint stores it in and
divided over the replica's layout as the engines shard it.

    bytes(GPU of stage s) = sum over the stage's operators of
        matrix elements on the GPU x bytes_per_element(matrix_format)
      + bias / norm / sink / table elements on the GPU x bytes_per_element(unquantised_format)

Formats (`matrix_format`, `unquantised_format`; bytes with block scales: specs.dtypes):
- every layer GEMM's weight matrix (attention projections, MLA projections, dense FFN, routed and
  shared experts) in the deployment's weight format;
- the MoE router, biases, norms, attention sinks, embeddings and the LM head unquantised: 16-bit
  (fp16 with fp16 activations), or the weight format when it is wider (fp32). Quantisers touch
  Linear weights only and skip the output head (ModelOpt / AWQ / GPTQ); vLLM builds every router
  unquantised (mixtral.py, llama4.py, jamba.py: `ReplicatedLinear(..., quant_config=None)`).

Shares per GPU, with t = attention_tp (the tensor-parallel degree of every non-expert tensor; the
attention-DP groups each hold a copy):
- COLUMN GEMM: out / t x in (a grouped QKV keeps at least one KV head per rank:
  layers.inventory.local_gemm_shape), its bias out / t;
- ROW GEMM: out x in / t, its bias whole (vLLM RowParallelLinear allocates the bias on every rank
  and adds it on rank 0: `bias_ = None if (self.tp_rank > 0 or self.skip_bias_add) else self.bias`);
- REPLICATED GEMM (MLA down-projections, router), norms, learned positions: whole on every rank;
- routed experts: E / ep experts per GPU, each split over expert_tp (Deployment.expert_tp): fc1
  and its bias out / expert_tp, fc2 in / expert_tp with its bias whole (vLLM FusedMoE w13 / w2);
- attention sinks: heads / t (vLLM gpt_oss.py: one sink per local head);
- token embedding and LM head: vocab-parallel, V / t rows (vLLM VocabParallelEmbedding /
  ParallelLMHead; the engines' vocabulary padding to a multiple of 64 is not modelled).
Pipeline stages (Deployment.stage_layers, vLLM get_pp_indices): the first stage holds the token and
position embeddings, the last the final norm and the LM head, and with tied embeddings and pp > 1
its own copy of the embedding table (vLLM llama.py builds `embed_tokens` on the first rank "or
(config.tie_word_embeddings and get_pp_group().is_last_rank)"). MTP modules are not loaded.

The result depends only on the model, tp, pp, ep, attention_dp and the weight and activation formats
(`weights_key`) and reads no knob, so `stage_weights` remembers it per key (layout_cache).

The summed bytes of every GPU of a tp = 1, pp = 1 replica in 16-bit are exactly `model show`'s
parameter count x 2 B (tests check GPT-3 125M and gpt-oss-120b).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.layers.inventory import local_gemm_shape, model_ops
from gpuplan.layers.operators import AttentionCore, Embedding, Linear, MatmulClass, Shard
from gpuplan.specs.dtypes import StoredFormat, bytes_per_element
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.layout_cache import LayoutCache


def unquantised_format(dep: Deployment) -> StoredFormat:
    """The format of the tensors a quantiser leaves alone (module docstring): the weight format when
    it is 16-bit or wider, else fp16 with fp16 activations and bf16 otherwise."""
    if bytes_per_element(dep.weight_dtype) >= 2.0:
        return dep.weight_dtype
    return StoredFormat.FP16 if dep.activation_dtype is StoredFormat.FP16 else StoredFormat.BF16


def matrix_format(dep: Deployment, op: Linear) -> StoredFormat:
    """The storage format of a GEMM's weight matrix: the LM head and the MoE router unquantised, every
    other layer GEMM in the deployment's weight format (module docstring)."""
    if op.matmul_class is MatmulClass.HEAD or op.name == "router":
        return unquantised_format(dep)
    return dep.weight_dtype


def _linear_bytes(dep: Deployment, op: Linear) -> float:
    """One GPU's bytes of a GEMM's weight matrix and bias (module docstring)."""
    t = dep.attention_tp
    if op.shard is Shard.EXPERT:
        n, k = local_gemm_shape(op, 1, dep.expert_tp)
        bias = n if op.bias else 0.0
        matrix, bias = n * k * op.instances / dep.ep, bias * op.instances / dep.ep
    else:
        n, k = local_gemm_shape(op, t)
        matrix = n * k
        bias = (n if op.shard is Shard.COLUMN else op.out_features * op.instances) if op.bias else 0.0
    return matrix * bytes_per_element(matrix_format(dep, op)) + bias * bytes_per_element(unquantised_format(dep))


def operator_bytes(dep: Deployment, op) -> float:
    """One GPU's weight bytes of one inventory operator (0 for operators without parameters and for a
    tied head, whose weight is the embedding's)."""
    if not op.params:
        return 0.0
    if isinstance(op, Linear):
        return _linear_bytes(dep, op)
    elements = float(op.params)
    if isinstance(op, AttentionCore):  # sinks: one per local head
        elements = op.params / dep.attention_tp
    elif isinstance(op, Embedding) and op.name == "embedding":  # vocab-parallel
        elements = op.params / dep.attention_tp
    return elements * bytes_per_element(unquantised_format(dep))


@dataclass(frozen=True)
class StageWeights:
    """Weight bytes on one GPU of one pipeline stage: its layers, its vocabulary / position tables
    (embedding, positions, LM head) and the final norm. Sums to `total_bytes`."""

    layers: range
    layer_bytes: float
    table_bytes: float
    final_norm_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.layer_bytes + self.table_bytes + self.final_norm_bytes


def weights_key(dep: Deployment) -> tuple:
    """Every field of `dep` that `compute_stage_weights` reads, directly or through its properties
    (attention_tp, expert_tp, stage_layers): the cache key of `stage_weights`. Neither the GPU, the
    system, the KV format nor any engine option changes the weight bytes."""
    return (dep.model, dep.tp, dep.pp, dep.ep, dep.attention_dp, dep.weight_dtype, dep.activation_dtype)


def stage_weights(dep: Deployment) -> tuple[StageWeights, ...]:
    """Per-GPU weight bytes of each pipeline stage (module docstring), remembered per `weights_key`:
    a pure function of it that reads no knob (tests check both)."""
    return _STAGE_WEIGHTS(dep)


def compute_stage_weights(dep: Deployment) -> tuple[StageWeights, ...]:
    """Per-GPU weight bytes of each pipeline stage (module docstring), computed afresh."""
    ops = model_ops(dep.model)
    stages = dep.stage_layers
    out = []
    for s, layers in enumerate(stages):
        first, last = s == 0, s == len(stages) - 1
        layer_bytes = sum(operator_bytes(dep, op) for i in layers for op in ops.layers[i].ops)
        tables = sum(operator_bytes(dep, e) for e in ops.embeddings) if first else 0.0
        if last:
            tables += operator_bytes(dep, ops.head)
            if dep.model.tied_embeddings and not first:  # the head's own copy of the tied table
                tables += operator_bytes(dep, next(e for e in ops.embeddings if e.name == "embedding"))
        out.append(StageWeights(layers, layer_bytes, tables, operator_bytes(dep, ops.final_norm) if last else 0.0))
    return tuple(out)


_STAGE_WEIGHTS: LayoutCache[tuple[StageWeights, ...]] = LayoutCache(weights_key, compute_stage_weights)


def weights_bytes_per_gpu(dep: Deployment) -> float:
    """Weight bytes of the most loaded GPU: the largest stage of `stage_weights`."""
    return max(s.total_bytes for s in stage_weights(dep))


__all__ = ["StageWeights", "compute_stage_weights", "matrix_format", "operator_bytes", "stage_weights",
           "unquantised_format", "weights_bytes_per_gpu", "weights_key"]
