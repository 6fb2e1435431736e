"""What the step-time formulas read: `StepContext`, everything about (model, system, seq_len,
precision, framework) derived once, and `PlanAxes`, the plan axes as broadcastable arrays with the
token counts every term uses. A plan search builds one context and varies only the axes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuplan.layers.flops import flops_per_token
from gpuplan.layers.inventory import ModelOps, model_ops, refuse_hybrid
from gpuplan.layers.params import parameter_counts
from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s
from gpuplan.specs import Gpu, ModelSpec, Precision, System
from gpuplan.specs.dtypes import Weights
from gpuplan.specs.execution import AttentionKernel, DeepSpeedRelease, Framework
from gpuplan.specs.finetune import FineTuning
from gpuplan.specs.plan import default_expert_tp
from gpuplan.workloads.training.lora import lora_parameter_count
from gpuplan.workloads.training.step import hf_eager
from gpuplan.workloads.training.step.deterministic import collective_system


def model_flops_per_token(model: ModelSpec, seq_len: int, fine_tuning: FineTuning) -> float:
    """The FLOPs one token's training step needs, the numerator of MFU (Megatron's convention: full
    s x s scores, recompute excluded, Narayanan et al. 2021 eq. 3): 3 x (2 N + attention) for ordinary
    training (forward, input-gradient and weight-gradient GEMMs). A frozen base (LoRA / QLoRA) computes
    no weight gradients, so its matmuls count twice, not three times: 4 N + 3 x attention, plus 6 FLOPs
    per adapter parameter (`lora.lora_parameter_count`: all of them, an upper bound for adapted routed
    experts, of which a token uses top_k of E). Counting LoRA at 6 N would report an MFU about 1.5 x the
    work the GPU does."""
    f = flops_per_token(model, int(seq_len), causal=False)
    if not fine_tuning.adapters:
        return f.total
    return f.total - f.matmul_forward + 6.0 * lora_parameter_count(model, fine_tuning.targets, fine_tuning.rank)


@dataclass(frozen=True)
class StepContext:
    """Everything about (model, system, seq_len, precision, framework) the step formulas need,
    derived once so that a plan search only varies the plan axes."""

    model: ModelSpec
    system: System
    gpu: Gpu
    seq_len: int
    precision: Precision
    framework: Framework
    attention_kernel: AttentionKernel
    gemm_dtype: str  # dtype of the GEMMs (fp8 only where the GPU has it)
    tp_comm_overlap: bool  # TransformerEngine TP comm overlap (applies where sequence parallelism is on)
    low_precision: bool  # GEMM inputs cast per GEMM (fp8 / mxfp8 / nvfp4 on a part that runs them)
    p2p_overlap: bool  # Megatron-core interleaved schedule overlaps pipeline sends with compute
    act_dtype: str  # bf16 or fp16: attention, elementwise, communication
    hbm_bytes_s: float
    # shape
    hidden: int
    q_dim: int
    kv_dim: int
    head_dim: int
    heads: int
    vocab: int
    layers: int
    dense_layers: int
    moe_layers: int
    # parameters
    body_params: int  # transformer layers (all experts)
    expert_params: int  # routed experts, all layers (sharded by ep)
    input_embedding_params: int  # token (+ position) table: first stage
    output_head_params: int  # untied head: last stage (0 when tied; then the table is shared)
    model_flops_per_token: float  # Megatron definition, recompute excluded
    ops: ModelOps  # the operator inventory (layers.inventory.model_ops)
    attention_flops_per_token: float  # causal attention-core forward FLOPs per token, mean over layers
    #: fine-tuning choices (LoRA / QLoRA, optimizer, offload, master weights): `finetune_time`'s terms
    fine_tuning: FineTuning = FineTuning()
    grad_fp32: bool = True  # gradients kept in fp32 (plan.grad_precision), read by the optimizer step
    #: DeepSpeed engine of a deepspeed plan (plan.deepspeed_release): V0_5 runs ZeRO-3 as
    #: `step.deepspeed_zero3` models the 2021 engine, CURRENT as `step.data` (coalesced gathers)
    deepspeed_release: DeepSpeedRelease = DeepSpeedRelease.CURRENT
    compiled_loss: bool = False  # the cross-entropy under torch.compile (plan.compiled_loss)
    compiled_model: bool = False  # each transformer block under torch.compile (plan.compiled_model)
    #: Megatron's deterministic mode (plan.deterministic): `step.deterministic`; `system` is then the
    #: system without NVLink SHARP (`deterministic.collective_system`)
    deterministic: bool = False
    #: weight-gradient GEMMs accumulate into the fp32 main_grad (plan.grad_accum_fusion): `step.grad_accumulation`
    grad_accum_fusion: bool = True
    #: full activation checkpointing stops its recompute early (plan.checkpoint_stops_early):
    #: `step.checkpoint_early_stop`
    checkpoint_early_stop: bool = False
    #: Megatron training CUDA graphs (plan.cuda_graph_scope): `step.cuda_graphs`
    cuda_graph_scope: frozenset = frozenset()

    def layer_mix(self) -> list[tuple[int, float]]:
        """(inventory layer index, weight) of the dense and MoE layers: the layer mean of a per-layer
        term is the sum of the representative layer's value times its share of the layers."""
        out = []
        if self.dense_layers:
            out.append((self.ops.dense_layer.index, self.dense_layers / self.layers))
        if self.moe_layers:
            out.append((self.ops.moe_layer.index, self.moe_layers / self.layers))
        return out

    @classmethod
    def build(
        cls,
        model: ModelSpec,
        system: System,
        gpu: Gpu,
        seq_len: int,
        precision: Precision = Precision.BF16,
        framework: Framework = Framework.MEGATRON,
        attention_kernel: AttentionKernel = AttentionKernel.FLASH,
        tp_comm_overlap: bool = False,
        fine_tuning: FineTuning | None = None,
        grad_precision: Precision = Precision.FP32,
        deepspeed_release: DeepSpeedRelease = DeepSpeedRelease.CURRENT,
        compiled_loss: bool = False,
        compiled_model: bool = False,
        deterministic: bool = False,
        grad_accum_fusion: bool = True,
        checkpoint_early_stop: bool | None = None,
        cuda_graph_scope=frozenset(),
    ) -> "StepContext":
        refuse_hybrid(model, "training step time")  # the terms below model attention + FFN layers only
        system = collective_system(system, bool(deterministic))
        if model.mla is not None:
            q_dim = model.heads * (model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim)
            kv_dim = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
            head_dim = model.mla.qk_nope_head_dim + model.mla.qk_rope_head_dim
        else:
            q_dim, kv_dim, head_dim = model.heads * model.head_dim, model.kv_heads * model.head_dim, model.head_dim
        precision = Precision(precision)
        # the tensor-core precision of the layers' GEMMs (specs.dtypes.gemm_compute_dtype, a training
        # recipe casting both operands: mxfp8 runs at the fp8 rate, nvfp4 at fp4; a part without it
        # falls back to the nearest recipe it has); fp32 / tf32 runs are modelled on bf16 GEMMs
        gemm_dtype = (gpu.gemm_compute_dtype(precision.value, weights=Weights.CAST) if precision.low_precision_matmul
                      else {Precision.FP16: "fp16"}.get(precision, "bf16"))
        act_dtype = "fp16" if precision is Precision.FP16 else "bf16"
        counts = parameter_counts(model)
        ops = model_ops(model)
        moe_layers = sum(1 for i in range(model.layers) if model.is_moe_layer(i))
        expert_params = counts.components.get("moe_routed_experts", 0)
        pos = counts.components.get("position_embedding", 0)
        head = counts.components.get("lm_head", 0)
        return cls(
            model=model, system=system, gpu=gpu, seq_len=int(seq_len), precision=precision,
            framework=Framework(framework), attention_kernel=AttentionKernel(attention_kernel),
            gemm_dtype=gemm_dtype, tp_comm_overlap=bool(tp_comm_overlap), act_dtype=act_dtype,
            low_precision=gemm_dtype in ("fp8", "fp6", "fp4"),
            p2p_overlap=(Framework(framework) in (Framework.MEGATRON, Framework.OTHER, Framework.MAXTEXT, Framework.TRANSFORMERS)
                         and AttentionKernel(attention_kernel) is not AttentionKernel.UNFUSED),
            hbm_bytes_s=memory_bandwidth_bytes_s(gpu),
            hidden=model.hidden, q_dim=q_dim, kv_dim=kv_dim, head_dim=head_dim, heads=model.heads,
            vocab=model.vocab, layers=model.layers, dense_layers=model.layers - moe_layers, moe_layers=moe_layers,
            body_params=counts.non_embedding, expert_params=expert_params,
            input_embedding_params=counts.components.get("embedding", 0) + pos,
            output_head_params=head,
            model_flops_per_token=model_flops_per_token(model, int(seq_len), fine_tuning or FineTuning()),
            ops=ops,
            attention_flops_per_token=(hf_eager.masked_attention_flops_per_token(ops.layers, int(seq_len))
                                       if Framework(framework) is Framework.TRANSFORMERS
                                       else sum(lo.core.forward_flops(int(seq_len), True) for lo in ops.layers)) / model.layers,
            fine_tuning=fine_tuning or FineTuning(),
            grad_fp32=Precision(grad_precision) in (Precision.FP32, Precision.TF32),
            deepspeed_release=DeepSpeedRelease(deepspeed_release),
            compiled_loss=bool(compiled_loss), compiled_model=bool(compiled_model),
            deterministic=bool(deterministic), grad_accum_fusion=bool(grad_accum_fusion),
            checkpoint_early_stop=(Framework(framework).checkpoint_stops_early if checkpoint_early_stop is None
                                   else bool(checkpoint_early_stop)),
            cuda_graph_scope=frozenset(cuda_graph_scope or ()),
        )



@dataclass(frozen=True)
class PlanAxes:
    """The plan axes as broadcastable float arrays, with the token counts every term uses:
    t = micro_batch x seq_len / cp tokens per micro-batch on one GPU; t_local = t / tp with sequence
    parallelism (the rank's sequence shard outside TP regions), else t; t_expert = the tokens an
    expert-TP rank holds after the all-gather over etp (t_local x etp with SP, else t). `flushes`
    = pipeline schedule runs per step (`TrainPlan.pipeline_flushes`), `dualpipe` = the plan runs
    DeepSeek's DualPipe schedule (`TrainPlan.pipeline_schedule`). `one_run` (every plan runs its
    schedule once per step) and `any_dualpipe` are those two decided once for all the plans, so the
    terms skip what cannot apply instead of evaluating it per plan."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    vpp: np.ndarray
    mb: np.ndarray
    m: np.ndarray
    rc: np.ndarray
    sp: np.ndarray
    shard: np.ndarray
    t: np.ndarray
    t_local: np.ndarray
    t_expert: np.ndarray
    flushes: np.ndarray = np.float64(1.0)
    dualpipe: np.ndarray = np.bool_(False)
    one_run: bool = True
    any_dualpipe: bool = False

    @classmethod
    def build(cls, ctx: StepContext, tp, pp, dp, cp, ep, vpp, micro_batch, num_micro_batches, recompute,
              sequence_parallel, sharding, etp=None, pipeline_flushes=1, dualpipe=False) -> "PlanAxes":
        f64 = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
        tp, pp, dp, cp, ep, vpp, mb, m = (f64(x) for x in (tp, pp, dp, cp, ep, vpp, micro_batch, num_micro_batches))
        sp = np.asarray(sequence_parallel, dtype=bool)
        etp = f64(default_expert_tp(tp, dp, cp, ep) if etp is None else etp)
        t = mb * float(ctx.seq_len) / cp
        t_local = t / np.where(sp, tp, 1.0)
        return cls(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, vpp=vpp, mb=mb, m=m, rc=np.asarray(recompute), sp=sp,
                   shard=np.asarray(sharding), t=t, t_local=t_local, t_expert=np.where(sp, t_local * etp, t),
                   flushes=f64(pipeline_flushes), dualpipe=np.asarray(dualpipe, dtype=bool),
                   one_run=(pipeline_flushes == 1 if isinstance(pipeline_flushes, int)
                            else bool(np.all(np.asarray(pipeline_flushes) == 1))),
                   any_dualpipe=dualpipe if isinstance(dualpipe, bool) else bool(np.any(dualpipe)))
