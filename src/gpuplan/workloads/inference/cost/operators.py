"""Per-operator time of one engine step (prefill, decode, or a mixed continuous-batching step).

One step runs every layer once over the step's tokens. Each operator costs a roofline with
achievable (not peak) rates:

    t_op = max(flops_op / F_achievable(m), bytes_op / B_achievable) + PER_KERNEL_LATENCY_S

- F_achievable(m, n, k) = dense peak x serving_matmul_efficiency: the MAMF-sourced ceiling of
  primitives.efficiency.matmul_ceiling x m / (m + 32) (small token counts run below the ceiling).
- B_achievable: primitives.op_cost.memory_bandwidth_bytes_s (aiconfigurator's 0.8 of peak HBM).

The step splits into pieces that depend on different batch statistics, which is what makes the
simulator fast (tables + a few multiply-adds per step, no per-op work):

    T_step = STEP_OVERHEAD_S
           + linear(n_tokens)            GEMMs (QKV, O, FFN / routed experts, router), norms,
                                          activations, TP all-reduce, MoE token exchange (attention DP), PP send
           + logits(n_seqs)              LM head over the tokens that sample (one per sequence), and
                                          a Python engine's host time per sequence (HOST_SECONDS_PER_SEQUENCE)
           + attention_decode            memory-bound: KV bytes read, sum over decoding sequences
           + attention_prefill           compute-bound FlashAttention: causal query-key pairs (or its softmax exps)

Attention data parallelism (Deployment.attention_dp = a > 1): the step is that of one attention
group (its own requests; `n_tokens`, `n_seqs`, KV sums are the group's), with attention, dense
GEMMs, norms, LM head and the TP all-reduce over the group's attention_tp = tp / a GPUs. The routed
experts run once for the tokens of all a groups in lock-step (TensorRT-LLM pads idle attention-DP
ranks with dummy requests so every rank enters each MoE layer together; balanced groups assumed):

    MoE tokens = a x n_tokens;  per MoE layer: dispatch + combine all-to-all over ep, each rank
    sending its a x n_tokens / tp tokens x top_k x hidden activations (ep > 1), or an all-gather +
    reduce-scatter of the a x n_tokens x hidden activations over tp (ep = 1, experts TP-sharded).

Without attention DP (a = 1) every tensor-parallel rank already holds all the step's tokens, so
expert parallelism moves no tokens: each rank runs its E / ep experts on the tokens routed to them
and the layer's tensor-parallel all-reduce sums the partial outputs (TensorRT-LLM
`CommunicationFactory.create_strategy`: "If attention does not use data parallelism ... no MoE
communication is needed"; vLLM and SGLang without DP attention likewise reduce expert outputs with
the TP all-reduce).

The attention core's math runs at `attention_math_precision`: fp8 with an fp8 KV cache, except MLA
before Blackwell, which computes in bf16 (see that function).

Attention-DP ranks step in lock-step, so each step lasts as long as the most loaded rank's
(TensorRT-LLM tech blog 10, "ADP Balance Strategy": time_i = max over ranks of time_i,m; the
balance ratio avg_tokens / max_tokens measures the loss). The simulated group is the average one;
with a > 1 every step is scaled by 1 / `attention_dp_balance` (`StepTimeModel.step_scale`): the mean
over the expected maximum of a ranks' loads, from blog 10's measured loss at a = 8 with and without
the engine's balance scheduler (Deployment.attention_dp_balance).

Sources of the constants are on each constant. Weight, KV and activation formats are independent
(gpuplan.specs.dtypes.StoredFormat); the GEMMs run at specs.dtypes.gemm_compute_dtype of the weight
and activation formats with the weights a stored checkpoint (Weights.STORED). MoE layers read only the experts the step's tokens touch:
with B tokens each choosing top-k of E experts uniformly, the expected number of distinct experts
is E x (1 - (1 - k/E)^B) (each expert is missed by one token with probability 1 - k/E).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpuplan import knobs
from gpuplan.layers.inventory import local_gemm_shape, model_ops, refuse_hybrid
from gpuplan.layers.operators import Linear, Norm, ResidualAdd, Shard, attention_flops
from gpuplan.primitives.collectives import Collective, collective_time_array
from gpuplan.primitives.attention_head_dim import attention_head_dim
from gpuplan.primitives.efficiency import attention_ceiling, matmul_ceiling
from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s
from gpuplan.specs import Gpu, System
from gpuplan.specs.dtypes import Weights, bytes_per_element
from gpuplan.workloads.inference.cost.attention_softmax import attention_exp_per_s, softmax_bound_pair_flops
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.layout_cache import LayoutCache
from gpuplan.workloads.inference.cost.tp_allreduce import tp_allreduce_seconds
from gpuplan.workloads.inference.cost.weights import matrix_format
from gpuplan.workloads.inference.kernels import (StepCoefficients, StepTables, causal_pairs_upto, graph_token_table,
                                                 step_seconds, table_lookup)

#: Minimum duration of one kernel (launch + tail), s: aiconfigurator h100_sxm/h200_sxm system YAML
#: `mem_empirical_constant_latency: 3 us` (ai-dynamo/aiconfigurator @095f58a).
PER_KERNEL_LATENCY_S = knobs.register(
    "serving.per_kernel_latency_s", unit="s", default=3e-6, low=1e-7, high=1e-4,
    source="aiconfigurator h100_sxm/h200_sxm system YAML mem_empirical_constant_latency: 3 us (ai-dynamo/aiconfigurator @095f58a)",
    scales="every serving kernel launch (kernels_per_step per step: kernels_per_layer over the layers, head and sampling)")
#: Kernels of a dense GQA layer after the usual fusions (norm, QKV GEMM, RoPE+KV write, attention,
#: O GEMM, norm, gate-up GEMM, activation, down GEMM): TensorRT-LLM / vLLM decode traces show 8-12.
#: `kernels_per_layer` gives this count from the operator inventory (9 for a Llama layer).
KERNELS_PER_LAYER = 9
#: Kernels a routed-expert layer adds beyond its GEMMs and activation: top-k routing, the token
#: permute (expand) and the finalize (un-permute + weighted sum of the top-k outputs):
#: TensorRT-LLM CUTLASS fused MoE (cpp/tensorrt_llm/kernels/cutlass_kernels/moe_gemm/moe_kernels.cu:
#: expandInputRowsKernel, finalizeMoeRoutingKernel); DeepSeek's group-limited top-k fused into
#: "as few as 2 kernels" (TensorRT-LLM tech blog 3, "Top-K Kernels Fusions"), counted as 1.
MOE_ROUTING_KERNELS = 3
#: Host-side cost per engine step not hidden behind GPU work (scheduling, sampling, input prep,
#: output processing), s. vidur's profiled CPU overheads (microsoft/vidur data/profiling/cpu_overhead)
#: total a few ms per step for Python engines (vLLM V0); C++ runtimes (TensorRT-LLM, TurboMind) overlap
#: most of it. 0.4 ms is an estimate for the latter, overridable.
STEP_OVERHEAD_S = knobs.register(
    "serving.step_overhead_s", unit="s", default=4e-4, low=0.0, high=0.05,
    source="estimate for C++ runtimes (TensorRT-LLM, TurboMind); vidur's profiled CPU overheads are a few ms for Python engines",
    scales="host time per engine step not hidden behind GPU work",
    fitted_on=("trtllm017", "lmdeploy"))
#: Host time each running sequence adds to an engine step of a Python-driven engine
#: (Deployment.python_step_loop: vLLM, SGLang, TGI), s. Those engines walk their running requests in
#: Python every step on the step's critical path: vLLM V1's EngineCore.step runs Scheduler.schedule(),
#: then the worker's _prepare_inputs, the forward and sampling, copies the sampled ids to the host,
#: then Scheduler.update_from_output(), each a loop over the running requests (vllm/v1/engine/core.py,
#: vllm/v1/core/sched/scheduler.py; --async-scheduling, which overlaps them, is opt-in through v0.11).
#: So a step of n sequences costs n x this on top of STEP_OVERHEAD_S; C++ batch managers
#: (TensorRT-LLM, TurboMind) keep it off the GPU's path. The magnitude of older vLLM (V0): vidur's
#: profiled CPU overheads (microsoft/vidur data/profiling/a100/cpu_overheads.csv, Llama-2-7B TP1:
#: schedule + sampler + prepare_inputs + process_model_outputs means 2.98 ms at batch 8, 12.6 ms at
#: batch 64, i.e. 172 us per sequence) and vLLM RFC #6801 ("When BS is 200, all this together can be
#: 20ms", 100 us per sequence, the prior). V1 and SGLang are lighter; the value is fitted on the
#: public rows of the Python engines (all rows: 81 +- 8 us, 78 after TensorRT-LLM's XQA-from-v0.7 rule;
#: `validate --cv family`). Large
#: batches show it: offline throughput at 256-3200 sequences (vllmci max-load rows, rocmvllm-mi300x,
#: dcrh200 max-load) was predicted 1.2-1.7x too high without it, on A100, H100, H200 and MI300X alike.
HOST_SECONDS_PER_SEQUENCE = knobs.register(
    "serving.host_seconds_per_sequence", unit="s", default=8.1e-5, low=0.0, high=5e-4, prior=1e-4,
    source="fitted on the public rows of Python-driven engines (vLLM, SGLang); vLLM V0 measured 100-172 us per "
           "sequence (vLLM RFC #6801, the prior 100 us; microsoft/vidur data/profiling/a100/cpu_overheads.csv)",
    scales="host time each running sequence adds to a step of vLLM / SGLang / TGI (Deployment.python_step_loop)",
    fitted_on=("vllmci", "rocmvllm-mi300x", "dcrh200", "nim", "aic"))
#: Bytes of an activation element moved between kernels and over TP all-reduces (bf16/fp16).
ACTIVATION_IO_BYTES = 2.0
#: Tile-occupancy term: a GEMM with m token rows reaches m / (m + 32) of its large-shape ceiling.
#: Serving engines run small-m (decode) GEMMs with small-row / split-K kernels that keep them
#: memory-bound (lmdeploy A100 Llama-2-7B batch-1 TPOT 10 ms = 13.5 GB of weights at 0.8 x 2.04
#: TB/s + launch costs), so the 128-row tile / wave model of primitives.efficiency.shape_factor
#: (right for training GEMMs) is not used here; only its MAMF-sourced ceiling is. Estimate.
GEMM_HALF_EFFICIENCY_TOKENS = knobs.register(
    "serving.gemm_half_efficiency_tokens", unit="tokens", default=32.0, low=1.0, high=512.0,
    source="estimate from lmdeploy A100 Llama-2-7B batch-1 TPOT (13.5 GB of weights at 0.8 x 2.04 TB/s + launches)",
    scales="serving GEMM efficiency m / (m + this) for m token rows",
    fitted_on=("lmdeploy",))


#: Fraction of the shorter of a serving GEMM's math and memory times hidden under the longer one.
#: The roofline's max(math, memory) assumes perfect overlap and is a bound, not a prediction
#: (Williams, Waterman & Patterson 2009, "Roofline: an insightful visual performance model", CACM
#: 52(4): attaining the roof needs the computation fully overlapped with the memory traffic); a
#: tiled GEMM exposes its first K-tile loads and last tile's math (software-pipeline prologue and
#: epilogue), most visibly near the ridge point, where serving's prefill and large-batch decode
#: GEMMs sit (m = 100-2000 token rows). Prior 1 (the roofline); the value is fitted on the public
#: serving rows, whose latencies the roofline put 13-16% short on average (TTFT, TPOT) while it put
#: throughput 6% high.
GEMM_OVERLAP = knobs.register(
    "serving.gemm_overlap", unit="fraction", default=0.6, low=0.0, high=1.0, prior=1.0,
    source="fitted on the public serving rows (all families); prior 1 = the roofline's perfect overlap "
           "(Williams et al. 2009)",
    scales="serving GEMM time max(math, memory) + (1 - this) x min(math, memory)",
    fitted_on=("trtllm017", "lmdeploy", "trtllm10", "trtllm014", "trtllm061", "mlperf40", "vllmci", "nim", "aic",
               "trtllm1x-po"))


def gemm_roofline_seconds(math_s, memory_s):
    """Time of a GEMM from its math and memory times (numpy arrays):
    max(math, memory) + (1 - o) x min(math, memory), o = knob `serving.gemm_overlap` (GEMM_OVERLAP):
    o = 1 is the roofline (perfect overlap), o = 0 their sum (none)."""
    o = knobs.value("serving.gemm_overlap")
    return np.maximum(math_s, memory_s) + (1.0 - o) * np.minimum(math_s, memory_s)


def serving_matmul_efficiency(gpu: Gpu, precision: str, m) -> np.ndarray:
    """Achievable fraction of dense peak of a serving GEMM with m token rows (numpy array):
    primitives.efficiency.matmul_ceiling(gpu, dtype) (MAMF-sourced) x m / (m + GEMM_HALF_EFFICIENCY_TOKENS),
    m clamped to >= 1; `precision` is the tensor-core precision the GEMM runs at (StepTimeModel.precision)."""
    rows = np.maximum(np.asarray(m, dtype=float), 1.0)
    return float(matmul_ceiling(gpu, precision)) * rows / (rows + knobs.value("serving.gemm_half_efficiency_tokens"))


def attention_math_precision(dep: Deployment) -> str:
    """Tensor-core format the attention core (prefill and decode) computes in.

    - An fp8 KV cache on a part with fp8 tensor cores: fp8 (FP8 context FMHA and FP8 generation
      kernels; TensorRT-LLM tech blog 3, "FP8 KV cache": "In the generation phase, both Q and KV are
      quantized to FP8, and FP8 Multi-Query Attention (MQA) is used" -- MLA on Blackwell).
    - MLA (DeepSeek-V2/V3 latent attention) on parts before Blackwell: 16-bit, whatever the cache
      format. The Hopper MLA decode kernel (deepseek-ai/FlashMLA, vendored by TensorRT-LLM as
      cpp/tensorrt_llm/kernels/flashMLA and used by SGLang and vLLM) is BF16/FP16 only (README:
      "Currently released: BF16, FP16"; 660 TFLOP/s compute-bound on H800 = 0.67 of the 989 BF16
      peak); its FP8-cache variant dequantises the latent to BF16 on CUDA cores and runs both GEMMs
      in BF16 ("A Deep Dive Into The Flash MLA FP8 Decoding Kernel on Hopper", FlashMLA
      docs/20250929: "we perform the MQA calculation using ... MMA operations in bfloat16
      precision"; Hopper cannot cast e4m3 to bf16 directly).
    - Otherwise the activation format (fp16 or bf16)."""
    gpu, m = dep.gpu, dep.model
    sixteen = "fp16" if dep.activation_dtype.value == "fp16" else "bf16"
    if dep.kv_dtype.value != "fp8" or "fp8" not in gpu.peak_tflops:
        return sixteen
    if m.mla is not None and gpu.family != "blackwell":
        return sixteen
    return "fp8"


def kernels_per_layer(layer) -> int:
    """Kernels one layer launches per step, from the operator inventory (layers.inventory.LayerOps):
    one per operator (GEMM, attention core, activation, norm), the residual adds fused into the
    following norm (TensorRT-LLM / vLLM fused add + RMSNorm), + 1 RoPE + KV-cache write, + the
    MOE_ROUTING_KERNELS of a routed-expert layer. A Llama layer: qkv, core, out, fc1, act, fc2, 2 norms
    + RoPE = 9 (KERNELS_PER_LAYER); a DeepSeek-V3 MoE layer: q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b,
    core, out, router, expert fc1 / act / fc2, shared fc1 / act / fc2, 2 norms + RoPE + 3 = 21."""
    # a Norm entry stands for its `instances` norms (the layer's two hidden norms); a routed-expert
    # Linear's instances are the E experts of one grouped GEMM: one launch
    launches = sum(op.instances if isinstance(op, Norm) else 1 for op in layer.ops if not isinstance(op, ResidualAdd))
    return int(launches) + 1 + (MOE_ROUTING_KERNELS if layer.moe else 0)


def collective_seconds(op: Collective, sizes_bytes, system: System, num_gpus: int, gpu: Gpu) -> np.ndarray:
    """Collective time, s, for an array of message sizes: primitives.collectives.collective_time_array
    on the positive sizes; 0 for empty messages or a group of one GPU (nothing is exchanged)."""
    sizes = np.asarray(sizes_bytes, dtype=float)
    out = np.zeros_like(sizes)
    pos = sizes > 0
    if num_gpus <= 1 or not pos.any():
        return out
    out[pos] = collective_time_array(op, sizes[pos], system, num_gpus, gpu=gpu)
    return out


def expected_distinct_experts(num_experts: int, top_k: int, tokens) -> np.ndarray:
    """E x (1 - (1 - k/E)^B): expected distinct experts B tokens touch, each choosing k of E
    uniformly (a uniform-routing approximation; real routers are somewhat skewed, which touches fewer)."""
    b = np.asarray(tokens, dtype=float)
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** b)


@lru_cache(maxsize=64)
def expected_max_standard_normal(n: int) -> float:
    """Expected largest of n independent standard normal draws (0 for n = 1):
    E[max] = integral of x n phi(x) Phi(x)^(n-1) dx, by the trapezoid rule on [-10, 10], with
    Phi(x) = (1 + erf(x / sqrt 2)) / 2 (statistics.NormalDist().cdf's formula, without importing
    `statistics`: this runs at import for the attention-DP knob's default)
    (0.5642, 1.0294, 1.4236 for n = 2, 4, 8: the order-statistics tables of Harter 1961)."""
    if n <= 1:
        return 0.0
    x = np.linspace(-10.0, 10.0, 8001)
    root2 = math.sqrt(2.0)
    cdf = np.array([0.5 * (1.0 + math.erf(v / root2)) for v in x.tolist()])
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    f = x * n * pdf * cdf ** (n - 1)
    return float(np.sum((f[1:] + f[:-1]) * np.diff(x)) / 2.0)


def busiest_ep_rank(num_experts: int, top_k: int, ep: int, tokens) -> tuple[np.ndarray, np.ndarray]:
    """(distinct experts, routed token copies) of the most loaded of `ep` expert-parallel ranks when
    B = `tokens` tokens each choose k of E experts uniformly (E/ep experts per rank). Expert-parallel
    ranks meet at the combine, so the busiest one sets every MoE layer's time (lock-step, as the
    attention-DP ranks: TensorRT-LLM tech blog 10, time_i = max over ranks). Normal approximation of
    each rank's counts, the maximum over ep ranks at mean + z_ep x sd (expected_max_standard_normal):

        experts: E/ep Bernoulli(p) with p = 1 - (1 - k/E)^B -> mean (E/ep) p, var (E/ep) p (1 - p),
                 capped at E/ep;
        copies:  B tokens each put a hypergeometric k-of-E draw on the rank's E/ep experts ->
                 mean B k / ep, var B k (1/ep)(1 - 1/ep)(E - k)/(E - 1).

    ep = 1: the means (one rank holds every expert)."""
    b = np.asarray(tokens, dtype=float)
    per_rank = num_experts / ep
    p = 1.0 - (1.0 - top_k / num_experts) ** b
    z = expected_max_standard_normal(ep)
    experts = np.minimum(per_rank, per_rank * p + z * np.sqrt(per_rank * p * (1.0 - p)))
    hyper = (num_experts - top_k) / (num_experts - 1) if num_experts > 1 else 0.0
    copies = b * top_k / ep + z * np.sqrt(b * top_k * (1.0 / ep) * (1.0 - 1.0 / ep) * hyper)
    return experts, copies


#: Coefficient of variation of one attention-DP rank's step load (tokens) under TensorRT-LLM's
#: default scheduling of new requests (round-robin over the ranks, no waiting), derived from the
#: one published measurement of the step loss: DeepSeek-V3 DEP8 on 8 x GB200, actual / SOL TPS
#: 25,664 / 39,552 (TensorRT-LLM docs/source/blogs/tech_blog/blog10_ADP_Balance_Strategy.md,
#: "Performance Summary", baseline), so c = (39,552 / 25,664 - 1) / E[max of 8 normals]
#: = 0.5411 / 1.4236 = 0.380 (`attention_dp_balance`).
ATTENTION_DP_LOAD_CV = knobs.register(
    "serving.attention_dp_load_cv", unit="fraction", default=(39552 / 25664 - 1) / expected_max_standard_normal(8),
    low=0.0, high=2.0,
    source="TensorRT-LLM tech blog 10 (ADP Balance Strategy), DeepSeek-V3 DEP8 GB200, round-robin baseline: "
           "actual / SOL TPS 25,664 / 39,552 -> (39,552 / 25,664 - 1) / E[max of 8 standard normals] = 0.380",
    scales="attention-DP step loss without the engine's balance scheduler: step / (mean rank step) = 1 + z_a x this")
#: The same with TensorRT-LLM's ADP balance scheduler on (`attention_dp_config.enable_balance`,
#: context wait, `timeout_iters` 50): actual / SOL TPS 33,499 / 38,312 (blog 10, "ADP Balance
#: (Context Wait)"), c = (38,312 / 33,499 - 1) / 1.4236 = 0.101.
ATTENTION_DP_LOAD_CV_BALANCED = knobs.register(
    "serving.attention_dp_load_cv_balanced", unit="fraction",
    default=(38312 / 33499 - 1) / expected_max_standard_normal(8), low=0.0, high=2.0,
    source="TensorRT-LLM tech blog 10 (ADP Balance Strategy), DeepSeek-V3 DEP8 GB200, context wait: "
           "actual / SOL TPS 33,499 / 38,312 -> (38,312 / 33,499 - 1) / E[max of 8 standard normals] = 0.101",
    scales="attention-DP step loss with the engine's balance scheduler on (Deployment.attention_dp_balance)")


def attention_dp_balance(groups: int, balanced: bool) -> float:
    """Mean / expected-maximum step load of `groups` attention-DP ranks that step in lock-step (the
    slowest rank sets each step: TensorRT-LLM tech blog 10, time_i = max over ranks of time_i,m;
    its balance ratio avg_tokens / max_tokens). Each rank's load is taken as independent normal
    with coefficient of variation c, so the busiest of a ranks carries mean x (1 + z_a c), z_a =
    expected_max_standard_normal(a) (0, 0.564, 1.029, 1.424 for a = 1, 2, 4, 8):

        balance(a) = 1 / (1 + z_a c),  c = ATTENTION_DP_LOAD_CV, or ATTENTION_DP_LOAD_CV_BALANCED
                                           with the engine's balance scheduler on (`balanced`).

    At a = 8 this is blog 10's measured actual / SOL throughput (0.649 round-robin, 0.874 context
    wait), from which c is derived; fewer ranks lose less (a = 2: 0.823, a = 4: 0.719 round-robin).
    Lock-step ranks each stepping their own requests is the same whichever engine runs attention DP
    (SGLang pads idle DP ranks with idle batches likewise); TensorRT-LLM's measurement stands for all."""
    if groups <= 1:
        return 1.0
    c = knobs.value("serving.attention_dp_load_cv_balanced" if balanced else "serving.attention_dp_load_cv")
    return 1.0 / (1.0 + expected_max_standard_normal(int(groups)) * c)


@dataclass(frozen=True)
class LinearOp:
    """One GEMM per layer on one GPU: (m tokens x k_in) @ (k_in x n_out)."""

    name: str
    n_out: int
    k_in: int
    layers: int  # how many layers of the model have it
    weight_bytes_per_element: float = 2.0  # its weight matrix's storage (weights.matrix_format)


def dense_linear_ops_key(dep: Deployment) -> tuple:
    """Every field of `dep` that `compute_dense_linear_ops` reads (attention_tp from tp and attention_dp;
    matrix_format from the weight and activation formats): the cache key of `dense_linear_ops`."""
    return (dep.model, dep.tp, dep.attention_dp, dep.weight_dtype, dep.activation_dtype)


def dense_linear_ops(dep: Deployment) -> tuple[LinearOp, ...]:
    """`compute_dense_linear_ops`, remembered per `dense_linear_ops_key` (layout_cache; no knob read)."""
    return _DENSE_LINEAR_OPS(dep)


def compute_dense_linear_ops(dep: Deployment) -> tuple[LinearOp, ...]:
    """The per-GPU shapes of the non-expert GEMMs of every layer: the operator inventory's
    (layers.inventory) sequence-mixer projections of each layer (attention; the recurrent mixers'
    projections of a hybrid model), the dense FFN of dense layers, and the router and shared experts
    of MoE layers, each split by `layers.inventory.local_gemm_shape` at the deployment's attention_tp
    (= tp without attention data parallelism; replicated down-projections whole, as vLLM's
    ReplicatedLinear), each with its weight matrix's storage bytes per element
    (workloads.inference.cost.weights.matrix_format: the router unquantised). Equal shapes are one
    LinearOp counting the layers that have it, listed mixer GEMMs first, then dense FFN, then MoE (the
    order the step time sums them in)."""
    layers = model_ops(dep.model).layers
    groups: dict[tuple[str, int, int, float], int] = {}
    passes = ((lambda lo: lo.attention, lambda lo: True), (lambda lo: lo.ffn, lambda lo: not lo.moe),
              (lambda lo: lo.ffn, lambda lo: lo.moe))
    for ops_of, takes in passes:
        for lo in layers:
            if not takes(lo):
                continue
            for op in ops_of(lo):
                if isinstance(op, Linear) and op.shard is not Shard.EXPERT:
                    n, k = local_gemm_shape(op, dep.attention_tp)
                    key = (op.name, int(n), int(k), bytes_per_element(matrix_format(dep, op)))
                    groups[key] = groups.get(key, 0) + 1
    return tuple(LinearOp(name, n, k, count, bpe) for (name, n, k, bpe), count in groups.items())


_DENSE_LINEAR_OPS: LayoutCache[tuple[LinearOp, ...]] = LayoutCache(dense_linear_ops_key, compute_dense_linear_ops)


class StepTimeModel:
    """Closed-form step time of one deployment, split by the batch statistic each piece depends on.

    Build once per deployment (vectorised over token counts), then `step_time(...)` or the
    simulator's arrays cost a few multiply-adds per step.
    """

    def __init__(self, dep: Deployment, table_tokens: int = 16384):
        self.dep = dep
        m = dep.model
        refuse_hybrid(m, "serving step time")  # the coefficients below model attention + FFN layers only
        gpu = dep.gpu
        #: the tensor-core precision of the layer GEMMs (specs.dtypes.gemm_compute_dtype, weights from a checkpoint)
        self.precision = gpu.gemm_compute_dtype(dep.weight_dtype, dep.activation_dtype, weights=Weights.STORED)
        self.peak_flops_per_s = gpu.matmul_peak_tflops(self.precision) * 1e12
        self.hbm_bytes_per_s = memory_bandwidth_bytes_s(gpu)
        #: attention-core FLOP/s: peak of attention_math_precision x FlashAttention-class ceiling at the model's head dim
        attention_precision = attention_math_precision(dep)
        self.attention_flops_per_s = (gpu.matmul_peak_tflops(attention_precision) * 1e12
                                      * attention_ceiling(gpu, attention_precision, attention_head_dim(m)))
        self.weight_bytes = bytes_per_element(dep.weight_dtype)
        self.head_weight_bytes = bytes_per_element(matrix_format(dep, model_ops(m).head))
        self.act_in_bytes = min(bytes_per_element(dep.activation_dtype), ACTIVATION_IO_BYTES)
        self.kv_bytes = bytes_per_element(dep.kv_dtype)
        self.ops = dense_linear_ops(dep)
        self.layers = m.layers
        #: kernels of one step's layers (kernels_per_layer summed over the inventory's layers)
        self.kernels_per_step = sum(kernels_per_layer(layer) for layer in model_ops(m).layers)
        #: multiplier of every step's time: 1 / attention_dp_balance with attention DP (module docstring), else 1
        self.step_scale = 1.0 / attention_dp_balance(dep.attention_dp, dep.attention_dp_balance)
        #: host seconds each sampled sequence adds to a step (HOST_SECONDS_PER_SEQUENCE; 0 for C++ engines)
        self.host_seconds_per_sequence = (float(knobs.value("serving.host_seconds_per_sequence"))
                                          if dep.python_step_loop else 0.0)
        # --- attention coefficients (whole model, one GPU) --------------------------------------
        windows = [m.window(i) for i in range(m.layers)]
        self.window = max((w for w in windows if w is not None), default=0)
        self.window_layers = sum(1 for w in windows if w is not None)
        self.global_layers = m.layers - self.window_layers
        heads_pg = m.heads // dep.attention_tp
        if m.mla is not None:
            a = m.mla
            kv_token_layer = (a.kv_lora_rank + a.qk_rope_head_dim) * self.kv_bytes  # latent, replicated
            # absorbed decode (DeepSeek-V2 sec. 2.1.2): scores over the latent + rope, values from the latent
            self.decode_pair_flops = attention_flops(1, heads_pg, a.kv_lora_rank + a.qk_rope_head_dim, a.kv_lora_rank, 1)
            self.prefill_pair_flops = attention_flops(1, heads_pg, a.qk_nope_head_dim + a.qk_rope_head_dim, a.v_head_dim, 1)
        else:
            kv_token_layer = 2.0 * dep.kv_heads_per_gpu * m.head_dim * self.kv_bytes
            self.decode_pair_flops = attention_flops(1, heads_pg, m.head_dim, m.head_dim, 1)
            self.prefill_pair_flops = self.decode_pair_flops
        # each pair and query head also costs one softmax exponential (attention_softmax: max(FLOPs / F, exps / X))
        exp_s = attention_exp_per_s(gpu)
        self.decode_pair_flops = softmax_bound_pair_flops(self.decode_pair_flops, heads_pg, self.attention_flops_per_s, exp_s)
        self.prefill_pair_flops = softmax_bound_pair_flops(self.prefill_pair_flops, heads_pg, self.attention_flops_per_s, exp_s)
        #: KV bytes one GPU holds per token per layer
        self.kv_bytes_per_token_layer = kv_token_layer
        #: KV bytes a decode step reads per cached token per layer: the held bytes x
        #: Deployment.decode_kv_reads (1 with a grouped decode kernel)
        self.decode_kv_bytes_per_token_layer = kv_token_layer * dep.decode_kv_reads
        # --- tables over token count and sequence count ----------------------------------------
        self.table_tokens = int(table_tokens)
        n = np.arange(self.table_tokens + 1, dtype=float)
        self.linear_table = self.linear_time(n)
        self.logits_table = self.logits_time(n)

    # -------------------------------------------------------------------------------------------
    def _gemm_seconds(self, tokens: np.ndarray, flops, bytes_) -> np.ndarray:
        """One GEMM with `tokens` rows: `gemm_roofline_seconds` of its math time flops / (peak x
        efficiency) and its memory time bytes / HBM."""
        eff = serving_matmul_efficiency(self.dep.gpu, self.precision, tokens)
        return gemm_roofline_seconds(flops / (self.peak_flops_per_s * eff), bytes_ / self.hbm_bytes_per_s)

    def linear_time(self, tokens) -> np.ndarray:
        """Seconds for every non-attention operator of one step over `tokens` tokens (array):
        GEMMs (per-op roofline), routed experts, elementwise passes, kernel latencies, TP all-reduce
        (2 per layer), with attention DP the MoE token exchange (2 per MoE layer), and PP activation sends."""
        dep, m = self.dep, self.dep.model
        tok = np.asarray(tokens, dtype=float)
        total = np.zeros_like(tok)
        for op in self.ops:
            flops = 2.0 * tok * op.n_out * op.k_in
            bytes_ = op.n_out * op.k_in * op.weight_bytes_per_element + tok * (op.k_in * self.act_in_bytes + op.n_out * ACTIVATION_IO_BYTES)
            total += op.layers * self._gemm_seconds(tok, flops, bytes_)
        f_eff = m.ffn / dep.attention_tp
        ffn_tok = tok
        inventory = model_ops(m)
        moe_layers = inventory.num_moe_layers
        if moe_layers and m.moe is not None:
            moe = m.moe
            a = dep.attention_dp
            moe_tok = tok * a  # the experts see the tokens of every attention-DP group (module docstring)
            # weights of one routed expert: its fc1 + fc2 of the inventory (3 h f gated, 2 h f otherwise)
            expert_params = sum(op.in_features * op.out_features for op in inventory.moe_layer.linears
                                if op.shard is Shard.EXPERT)
            # E/ep experts per GPU, each split over expert_tp GPUs (Deployment.expert_tp); the busiest
            # expert-parallel rank's touched experts and routed token copies set the time (busiest_ep_rank)
            shards = dep.ep * dep.expert_tp
            touched, copies = busiest_ep_rank(moe.num_experts, moe.top_k, dep.ep, moe_tok)
            bytes_w = touched * expert_params / dep.expert_tp * self.weight_bytes
            routed_tokens = copies / dep.expert_tp
            flops = 2.0 * copies * expert_params / dep.expert_tp
            # per-expert GEMMs see tokens / touched rows each (the average): their tile efficiency follows that
            mean_touched = expected_distinct_experts(moe.num_experts, moe.top_k, moe_tok)
            rows_per_expert = np.where(mean_touched > 0, moe_tok * moe.top_k / np.maximum(mean_touched, 1e-9), 1.0)
            bytes_a = routed_tokens * m.hidden * (self.act_in_bytes + ACTIVATION_IO_BYTES) * 2
            eff = serving_matmul_efficiency(dep.gpu, self.precision, rows_per_expert)
            t_exp = gemm_roofline_seconds(flops / (self.peak_flops_per_s * eff), (bytes_w + bytes_a) / self.hbm_bytes_per_s)
            total += moe_layers * t_exp
            f_eff = moe.expert_ffn * moe.top_k / shards
            ffn_tok = moe_tok
            if dep.ep > 1 and a > 1:  # dispatch + combine: each rank sends its own tokens' top-k copies
                a2a = collective_seconds(
                    Collective.ALL_TO_ALL, moe_tok * moe.top_k * m.hidden * ACTIVATION_IO_BYTES / dep.tp,
                    dep.system, dep.ep, gpu=dep.gpu)
                total += 2 * moe_layers * a2a
            elif a > 1:  # TP-sharded experts: gather every group's tokens, reduce-scatter the outputs
                # (a = 1: the tokens are on every rank already; the TP all-reduce below combines; module docstring)
                gathered = moe_tok * m.hidden * ACTIVATION_IO_BYTES
                total += moe_layers * (collective_seconds(Collective.ALL_GATHER, gathered, dep.system, dep.tp, gpu=dep.gpu)
                                       + collective_seconds(Collective.REDUCE_SCATTER, gathered, dep.system, dep.tp, gpu=dep.gpu))
        # the inventory's norm + residual-add bytes (no dropout at inference) and activation bytes per
        # FFN element (layers.inventory.LayerOps), 16-bit activations
        layer = model_ops(m).layers[0]
        elementwise_bytes = (tok * layer.hidden_elementwise_bytes(ACTIVATION_IO_BYTES, training=False)
                             + ffn_tok * layer.activation_bytes_per_ffn_element(ACTIVATION_IO_BYTES) * f_eff)
        total += m.layers * elementwise_bytes / self.hbm_bytes_per_s
        total += self.kernels_per_step * knobs.value("serving.per_kernel_latency_s")
        if dep.attention_tp > 1:  # 2 all-reduces per layer over the attention group, as the engine runs them
            ar = tp_allreduce_seconds(tok * m.hidden * ACTIVATION_IO_BYTES, dep.attention_tp, dep.system, dep.gpu,
                                      dep.tp_allreduce, hidden=m.hidden)
            total += 2 * m.layers * ar
        if dep.pp > 1:
            send = collective_seconds(Collective.ALL_GATHER, tok * m.hidden * ACTIVATION_IO_BYTES * 2, dep.system, 2, gpu=dep.gpu)
            total += (dep.pp - 1) * send
        return np.where(tok > 0, total, 0.0)

    def logits_time(self, seqs) -> np.ndarray:
        """Seconds for the LM head (vocab/attention_tp x hidden GEMM, its weights unquantised: weights.matrix_format)
        over one sampled token per sequence, plus the final norm and sampling kernels, plus the host
        time per sampled sequence (HOST_SECONDS_PER_SEQUENCE x seqs)."""
        m, dep = self.dep.model, self.dep
        s = np.asarray(seqs, dtype=float)
        n_out = m.vocab / dep.attention_tp
        flops = 2.0 * s * n_out * m.hidden
        bytes_ = n_out * m.hidden * self.head_weight_bytes + s * (m.hidden * self.act_in_bytes + n_out * 4.0)
        t = (self._gemm_seconds(s, flops, bytes_) + 3 * knobs.value("serving.per_kernel_latency_s")
             + s * self.host_seconds_per_sequence)
        return np.where(s > 0, t, 0.0)

    def attention_decode_time(self, ctx_global_sum, ctx_window_sum) -> np.ndarray:
        """Memory-bound decode attention: every decoding sequence reads its KV cache once per layer
        (Deployment.decode_kv_reads times with a per-query-head kernel).
        bytes = decode_kv_bytes_per_token_layer x (global_layers x sum(ctx) + window_layers x sum(min(ctx, w)))."""
        tokens_layers = self.global_layers * np.asarray(ctx_global_sum, float) + self.window_layers * np.asarray(ctx_window_sum, float)
        bytes_ = tokens_layers * self.decode_kv_bytes_per_token_layer
        flops = tokens_layers * self.decode_pair_flops
        return np.maximum(bytes_ / self.hbm_bytes_per_s, flops / self.attention_flops_per_s)

    def attention_prefill_time(self, pairs_global, pairs_window, kv_tokens) -> np.ndarray:
        """Compute-bound FlashAttention prefill: causal (query, key) pairs x FLOPs per pair, against
        reading the K/V of `kv_tokens` once per layer."""
        flops = self.prefill_pair_flops * (self.global_layers * np.asarray(pairs_global, float)
                                           + self.window_layers * np.asarray(pairs_window, float))
        bytes_ = self.layers * np.asarray(kv_tokens, float) * self.kv_bytes_per_token_layer
        return np.maximum(flops / self.attention_flops_per_s, bytes_ / self.hbm_bytes_per_s)

    # -------------------------------------------------------------------------------------------
    def step_coefficients(self, verify_tokens: int = 1, draft_ctx_s: float | None = None) -> StepCoefficients:
        """The scalar coefficients of `kernels.step_seconds` (the one step-time formula the simulator
        loops and `step_time` share): this model's attention terms, the step overhead knob in effect,
        positions verified per decoding sequence (k + 1 with speculative decoding) and the draft
        model's seconds per context token (None: no draft model)."""
        return StepCoefficients(
            float(knobs.value("serving.step_overhead_s")),
            float(self.global_layers * self.decode_kv_bytes_per_token_layer),
            float(self.window_layers * self.decode_kv_bytes_per_token_layer),
            float(self.global_layers * self.decode_pair_flops), float(self.window_layers * self.decode_pair_flops),
            float(self.hbm_bytes_per_s), float(self.attention_flops_per_s),
            float(self.global_layers * self.prefill_pair_flops), float(self.window_layers * self.prefill_pair_flops),
            float(self.layers * self.kv_bytes_per_token_layer), float(self.step_scale),
            int(verify_tokens), draft_ctx_s is not None, float(draft_ctx_s or 0.0),
        )

    def step_tables(self, cuda_graph_batch_sizes=(), draft_table=None) -> StepTables:
        """The tables of `kernels.step_seconds`: linear_table, logits_table, the draft model's table
        (None: no draft model) and the CUDA graph padding of `cuda_graph_batch_sizes` (engine
        captures with padding on; empty: none)."""
        return StepTables(self.linear_table, self.logits_table,
                          np.ascontiguousarray(draft_table if draft_table is not None else np.zeros(0), dtype=float),
                          graph_token_table(cuda_graph_batch_sizes))

    def lookup_linear(self, tokens: int) -> float:
        """linear_time of `tokens` tokens from the table, extended linearly past it (compute-bound,
        so linear): kernels.table_lookup."""
        return float(table_lookup(self.linear_table, int(tokens)))

    def step_time(self, *, prefill_tokens: int = 0, prefill_seqs: int = 0, prefill_pairs: float = 0,
                  prefill_pairs_window: float | None = None, prefill_kv_tokens: float = 0,
                  decode_seqs: int = 0, decode_ctx_sum: float = 0, decode_ctx_window_sum: float | None = None) -> float:
        """Seconds of one engine step with `prefill_tokens` prompt tokens (of `prefill_seqs`
        sequences, `prefill_pairs` causal query-key pairs) and `decode_seqs` decoding sequences
        whose contexts sum to `decode_ctx_sum` tokens: kernels.step_seconds, the simulator's step
        (the formula of the module docstring)."""
        n_tokens = int(prefill_tokens) + int(decode_seqs)
        if n_tokens <= 0:
            return 0.0
        pw = prefill_pairs if prefill_pairs_window is None else prefill_pairs_window
        dw = decode_ctx_sum if decode_ctx_window_sum is None else decode_ctx_window_sum
        # the simulator's step (no CUDA graphs, no draft model): kernels.table_lookup, kernels.step_seconds
        linear_s = table_lookup(self.linear_table, n_tokens)
        logits_s = table_lookup(self.logits_table, int(prefill_seqs) + int(decode_seqs))
        return float(step_seconds(self.step_coefficients(), linear_s, logits_s, 0.0, float(decode_ctx_sum), float(dw),
                                  float(prefill_pairs), float(pw), float(prefill_kv_tokens)))

    # -------------------------------------------------------------------------------------------
    def prefill_time(self, batch: int, input_len: int) -> float:
        """TTFT of a static batch: one step over batch x input_len prompt tokens (causal pairs
        L(L+1)/2 per sequence; window layers see at most kernels.causal_pairs_upto(L, w))."""
        L = int(input_len)
        pairs = batch * causal_pairs_upto(L, 0)
        pairs_w = batch * causal_pairs_upto(L, self.window)
        return self.step_time(prefill_tokens=batch * L, prefill_seqs=batch, prefill_pairs=pairs,
                              prefill_pairs_window=pairs_w, prefill_kv_tokens=batch * L)

    def decode_step_time(self, batch: int, context: float) -> float:
        """One decode step of `batch` sequences each with `context` tokens of KV cache."""
        w = self.window
        ctx_w = min(context, w) if w else context
        return self.step_time(decode_seqs=batch, decode_ctx_sum=batch * context, decode_ctx_window_sum=batch * ctx_w)


def step_time_model(dep: Deployment, table_tokens: int = 16384) -> StepTimeModel:
    """Build the closed-form step-time model of a deployment."""
    return StepTimeModel(dep, table_tokens=table_tokens)

