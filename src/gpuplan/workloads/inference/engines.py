"""Serving engines: each engine's documented defaults that change what the simulator schedules.

An `EngineProfile` is what TensorRT-LLM, vLLM, SGLang, lmdeploy (TurboMind) or TGI does by default:
its KV-cache budget rule and memory fraction (memory.memory_plan), its KV block size, its batch
scheduler (schedulers.SchedulerKind) and admission policy (no-evict), its per-step sequence and
token limits, the CUDA-graph batch sizes it pads generation steps to, how it runs the
tensor-parallel all-reduce (tp_allreduce), and the versions where its kernels changed (grouped
decode attention, first token sampled by the prefill, TP all-reduce algorithm). Each default
carries its source in the comment above its profile.

`gpuplan serve run|plan --engine NAME` simulates a deployment as that engine's current version runs
it (`EngineProfile.scheduler_config`, `EngineProfile.memory_plan`, `EngineProfile.deployment_options`,
`EngineProfile.cuda_graph_batch_sizes`); `GENERIC` is gpuplan's own default when no engine is named
(vLLM-like scheduling and paged KV, the memory headroom knob `memory.usable_fraction`, TensorRT-LLM's
TP all-reduce). The validation harness (interfaces.validation.inference) gives each inference.csv row
its `engine` column's profile, at the engine version the row states.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from gpuplan.errors import InputError
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import (
    DEFAULT_MAX_BATCH_SEQS, DEFAULT_MAX_BATCH_TOKENS, TRTLLM_BLOCK_SIZE, VLLM_BLOCK_SIZE, VLLM_GPU_MEMORY_UTILIZATION,
    KvBudgetRule, MemoryPlan, memory_plan,
)
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.cost.tp_allreduce import TpAllReduce


@dataclass(frozen=True)
class EngineProfile:
    """Documented defaults of a serving engine that change what the simulator schedules.

    memory_fraction None: the memory headroom knob of KvBudgetRule.TOTAL (`memory.usable_fraction`,
    workloads.memory_headroom) or the TensorRT-LLM free-memory knob of KvBudgetRule.FREE
    (memory.memory_plan), so a calibration or `--set usable_memory_fraction=` reaches it."""

    rule: KvBudgetRule
    memory_fraction: float | None
    block_size: int
    scheduler: SchedulerKind
    no_evict: bool
    max_batch_seqs: int
    max_batch_tokens: int
    bench_limits: bool = False  # max-load runs size max_batch_size / max_num_tokens as trtllm-bench does
    cuda_graph_batch_sizes: tuple[int, ...] = ()  # padded CUDA-graph batch sizes of generation-only steps
    #: first version whose generation kernel loads a KV head once for its query-head group
    #: (Deployment.grouped_decode_attention); rows stating an older version get the per-query-head
    #: kernel. None: grouped in every version a row may state.
    grouped_decode_from: tuple[int, int] | None = None
    #: first version whose prefill step samples the request's first output token; rows stating an
    #: older version get the FasterTransformer behaviour of workloads.inference.sim.deferred_first_token
    #: (the last prompt token runs in the first decode step, which samples the first token). None:
    #: the prefill samples it in every version a row may state.
    first_token_in_prefill_from: tuple[int, int] | None = None
    #: names of the engine in free text (a row's source / notes), for the harness's `stated_engine_version`
    aliases: tuple[str, ...] = ()
    #: how the engine runs the tensor-parallel all-reduce (Deployment.tp_allreduce)
    tp_allreduce: TpAllReduce = TpAllReduce.TENSORRT_LLM
    #: first version with `tp_allreduce`; rows stating an older version get `tp_allreduce_before`
    #: (the harness's `tp_allreduce_for`). None: `tp_allreduce` in every version.
    tp_allreduce_from: tuple[int, int] | None = None
    tp_allreduce_before: TpAllReduce = TpAllReduce.NCCL
    #: whether the engine's per-request step work runs in Python on the step's critical path
    #: (Deployment.python_step_loop; cost/operators.HOST_SECONDS_PER_SEQUENCE)
    python_step_loop: bool = False
    #: (max_batch_seqs, max_batch_tokens) the engine picks on a GPU, offline (an in-process
    #: benchmark: True) or serving, from `batch_limits_from` on (`for_gpu`); None: the fields above
    batch_limits: Callable[..., tuple[int, int]] | None = None
    batch_limits_from: tuple[int, int] | None = None
    #: weight formats whose pre-quantized checkpoints the engine runs with an FP8 KV cache when the
    #: user states no KV dtype (`default_kv_dtype`); empty: the engine never picks one itself
    checkpoint_fp8_kv_weights: tuple[str, ...] = ()
    #: the profile's name (`gpuplan serve --engine NAME`; filled in by ENGINES / GENERIC)
    name: str = ""

    def overridden(self, *, scheduler: SchedulerKind | str | None = None,
                   memory_fraction: float | None = None) -> "EngineProfile":
        """This profile with a user's explicit choices in place of its defaults (None keeps the
        default): the scheduler kind (`--scheduler`), the KV memory fraction of its budget rule
        (`--memory-fraction`). The name stays the engine's."""
        out = self
        if scheduler is not None:
            out = replace(out, scheduler=SchedulerKind(scheduler))
        if memory_fraction is not None:
            out = replace(out, memory_fraction=float(memory_fraction))
        return out

    def for_gpu(self, gpu, *, offline: bool = False, version: tuple[int, int] | None = None) -> "EngineProfile":
        """This profile with the per-step limits the engine at `version` (None: its current version)
        picks on `gpu` (`batch_limits`), offline or serving; the profile itself when it has no such
        rule or the version predates it. The result has no rule left, so a second call keeps it."""
        if self.batch_limits is None:
            return self
        out = replace(self, batch_limits=None)
        if _older(version, self.batch_limits_from):
            return out
        seqs, tokens = self.batch_limits(gpu, offline)
        return replace(out, max_batch_seqs=seqs, max_batch_tokens=tokens)

    def scheduler_config(self) -> SchedulerConfig:
        """The engine's step scheduler: its kind, sequence and token limits per step and admission
        policy (schedulers.SchedulerConfig)."""
        return SchedulerConfig(kind=self.scheduler, max_batch_seqs=self.max_batch_seqs,
                               max_batch_tokens=self.max_batch_tokens, no_evict=self.no_evict)

    def memory_plan(self, dep: Deployment, *, max_batch_tokens: int, max_batch_seqs: int) -> MemoryPlan:
        """memory.memory_plan under the engine's KV budget rule, memory fraction and block size,
        with the activation workspace of `max_batch_tokens` / `max_batch_seqs` per step."""
        return memory_plan(dep, rule=self.rule, memory_fraction=self.memory_fraction, block_size=self.block_size,
                           max_batch_tokens=max_batch_tokens, max_batch_seqs=max_batch_seqs)

    def deployment_options(self, version: tuple[int, int] | None = None) -> dict:
        """Deployment fields of the engine at `version` (None: its current version): its TP
        all-reduce (`tp_allreduce_before` before `tp_allreduce_from`), whether its generation
        kernel reads a KV head once per query-head group (not before `grouped_decode_from`) and
        whether its per-request step work runs in Python (`python_step_loop`)."""
        return {"tp_allreduce": self.tp_allreduce_before if _older(version, self.tp_allreduce_from) else self.tp_allreduce,
                "grouped_decode_attention": not _older(version, self.grouped_decode_from),
                "python_step_loop": self.python_step_loop}

    def default_kv_dtype(self, weight_dtype: str) -> str | None:
        """The KV-cache dtype the engine runs when the user states none, for `weight_dtype`
        weights: "fp8" when the engine follows a pre-quantized checkpoint's FP8 KV recipe for that
        weight format (`checkpoint_fp8_kv_weights`), else None (the caller's own default)."""
        return "fp8" if str(weight_dtype).strip().lower() in self.checkpoint_fp8_kv_weights else None

    def kv_dtype_for(self, weight_dtype: str, kv_dtype: str | None = None) -> str:
        """The KV-cache dtype a serving run uses: `kv_dtype` when the user states one (not None), else the
        engine's own choice for `weight_dtype` weights (`default_kv_dtype`), else "bf16". Every
        serving entry point (serve run / plan / frontier, the disaggregated plan, deploy --emit and
        imports, the web Serve page) resolves an unset KV dtype through this one function."""
        if kv_dtype is not None:  # stated, even malformed: the caller's format check names it
            return kv_dtype
        return self.default_kv_dtype(weight_dtype) or "bf16"

    def defers_first_token(self, version: tuple[int, int] | None = None) -> bool:
        """Whether the engine at `version` samples the first output token in a decode step, not in
        the prefill (before `first_token_in_prefill_from`; workloads.inference.sim.deferred_first_token)."""
        return _older(version, self.first_token_in_prefill_from)


def _older(version: tuple[int, int] | None, first: tuple[int, int] | None) -> bool:
    """True when a stated `version` predates `first`, the version where a behaviour began; False
    when either is None (no version stated: the current engine; no such change)."""
    return version is not None and first is not None and version < first


#: CUDA-graph batch sizes of TensorRT-LLM's perf-overview runs (llm_options `cuda_graph_config:
#: enable_padding: true, batch_sizes: [...]`, docs/source/developer-guide/perf-overview.md)
TRTLLM_CUDA_GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)

#: TGI launcher defaults (launcher/src/main.rs @009c4e0): `--cuda-graphs` "1,2,4,8,16,32",
#: `--max-concurrent-requests` 128, `--max-batch-prefill-tokens` max_input_tokens (4095) + 50;
#: flashinfer's one-token KV pages (models/globals.py BLOCK_SIZE).
TGI_CUDA_GRAPH_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
TGI_MAX_CONCURRENT_REQUESTS = 128
TGI_MAX_BATCH_PREFILL_TOKENS = 4095 + 50
TGI_BLOCK_SIZE = 1

#: vLLM V1's per-step limits on parts of at least this much memory (other than A100): vllm/engine/
#: arg_utils.py `get_batch_defaults` ("device_memory >= 70 * GiB_bytes and 'a100' not in device_name")
VLLM_LARGE_GPU_BYTES = 70 * 2**30


def vllm_batch_limits(gpu, offline: bool) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM V1 defaults to on `gpu` (vllm/engine/arg_utils.py
    get_batch_defaults, from PR #17073 "Use larger batch sizes for A100/B100/B200/MI300x" and PR
    #17885, which took A100 back out: "Setting large max_num_batched_tokens for A100 reduces
    throughput"): parts of >= 70 GiB other than A100, the LLM class (offline benchmarks:
    benchmark_throughput / benchmark_latency) 1024 sequences and 16384 tokens, the API server 1024
    and 8192; every other part 256 sequences and 8192 tokens offline, 256 and 2048 serving."""
    large = (getattr(gpu, "memory_bytes", 0) or 0) >= VLLM_LARGE_GPU_BYTES and \
        "a100" not in f"{getattr(gpu, 'id', '')} {getattr(gpu, 'name', '')}".lower()
    if large:
        return (1024, 16384) if offline else (1024, 8192)
    return (256, 8192) if offline else (256, 2048)


def sglang_batch_limits(gpu, offline: bool) -> tuple[int, int]:
    """(max running requests, chunked_prefill_size) of SGLang on `gpu`: its prefill chunk by the
    part's memory (python/sglang/srt/server_args.py `_handle_chunked_prefill_size`, gpu_mem in MiB:
    below 35 GiB "A10, L40, 4090" 2048; below 160 GiB "H100, H200, A100, H20" 8192; else "B200,
    MI300" 16384), the same offline and serving; the profile's 512 running requests."""
    mib = (getattr(gpu, "memory_bytes", 0) or 0) / 2**20
    chunk = 2048 if mib < 35 * 1024 else 8192 if mib < 160 * 1024 else 16384
    return 512, chunk


ENGINES: dict[str, EngineProfile] = {
    # TensorRT-LLM: trtllm-build max_batch_size 2048 / max_num_tokens 8192 defaults; in-flight
    # batching with the GUARANTEED_NO_EVICT capacity scheduler and chunked context; tokens_per_block 64;
    # trtllm-bench throughput runs use kv_cache_free_gpu_mem_fraction 0.95 (perf-overview.md
    # "Reproducing"). Max-load rows (bench_limits) take trtllm-bench's own settings instead:
    # max_batch_size / max_num_tokens from its heuristic, chunked prefill off (get_settings).
    # Its TP all-reduce (workloads.inference.cost.tp_allreduce): v1.x (PyTorch backend) the AUTO lookup
    # table of one-shot / two-shot / NCCL; v0.x (TensorRT engines) the AllReduce plugin's rule
    # (one-shot below a size, else NCCL).
    # Its grouped (XQA) generation kernel for MQA / GQA ran in v0.7: TensorRT-LLM blog
    # docs/source/blogs/Falcon180B-H200.md (Dec 2023, @3c44cb9): "TensorRT-LLM has improved its Group
    # Query Attention (GQA) kernels, in the generation phase, providing up to 2.4x improvement on
    # Llama-70B", measured "TensorRT-LLM v0.7a vs TensorRT-LLM v0.6a", "included in the v0.7 & v0.8
    # releases" (the later XQA-kernel blog names v0.8 only; a row stating v0.7 ran the kernel by its own
    # source); before it the masked multi-head attention kernel read each KV head once per query head.
    # Its KV dtype when none is stated (checkpoint_fp8_kv_weights, default_kv_dtype): KvCacheConfig.dtype
    # defaults to "auto" (tensorrt_llm/llmapi/llm_args.py; API reference: "Use 'auto' to follow
    # checkpoint metadata"), and ModelLoader._update_from_hf_quant_config (tensorrt_llm/llmapi/
    # llm_utils.py) copies a pre-quantized checkpoint's hf_quant_config.json `kv_cache_quant_algo` into
    # the run's quant_config when the user set none (tests/unittest/llmapi
    # test_update_from_hf_quant_config_*). NVFP4 and FP8 checkpoints in that format are ModelOpt exports
    # (NVIDIA's nvidia/*-FP4, *-FP8 on Hugging Face), whose hf_ptq.py `--kv_cache_qformat` defaults to
    # "fp8" (NVIDIA/TensorRT-Model-Optimizer examples/llm_ptq/hf_ptq.py), so the run keeps an FP8 KV
    # cache. Not MXFP4: OpenAI's gpt-oss checkpoints state `quant_method: mxfp4` in config.json, which
    # the same loader maps to the weight format alone (no KV algorithm), so "auto" stays bf16.
    "tensorrt-llm": EngineProfile(KvBudgetRule.FREE, 0.95, TRTLLM_BLOCK_SIZE, SchedulerKind.CHUNKED, True, 2048, 8192, True,
                                  TRTLLM_CUDA_GRAPH_BATCH_SIZES, grouped_decode_from=(0, 7),
                                  checkpoint_fp8_kv_weights=("fp8", "nvfp4"),
                                  aliases=("tensorrt-llm", "trt-llm", "tensorrt llm"),
                                  tp_allreduce_from=(1, 0), tp_allreduce_before=TpAllReduce.TENSORRT_LLM_PLUGIN,
                                  name="tensorrt-llm"),
    # vLLM V1: gpu_memory_utilization 0.9, block 16, chunked prefill, max_num_seqs 256, 8192 tokens
    # before v0.9; from v0.9 (PRs #17073, #17885) the limits of the GPU and the mode (vllm_batch_limits).
    # Its custom all-reduce below 8 MiB, pynccl above (Deployment.tp_allreduce). Its engine core
    # loop is Python and, without --async-scheduling (opt-in through v0.11: vllm/config
    # SchedulerConfig.async_scheduling default False), serial with the GPU: schedule(), then
    # execute_model (the worker's _prepare_inputs, the forward, sampling, the sampled ids copied to
    # the host), then update_from_output() (vllm/v1/engine/core.py EngineCore.step), each a loop
    # over the running requests (python_step_loop). Later versions overlap part of that work with
    # the GPU: V1 (the default engine from v0.8) detokenizes and streams in its front-end process
    # (vLLM V1 blog, 2025-01-27), and async scheduling is the default from v0.14 (v0.14.0 release
    # notes: "Async scheduling is now enabled by default", PR #27614). The step time keeps the host
    # time serial in every version all the same (docs/accuracy.md, "Engine physics, third pass": the
    # public rows of overlapping versions do not show it hidden). The alias reads a version stated in
    # a row's source or notes ("vLLM 0.6.6").
    "vllm": EngineProfile(KvBudgetRule.TOTAL, VLLM_GPU_MEMORY_UTILIZATION, VLLM_BLOCK_SIZE, SchedulerKind.CHUNKED, False, 256, 8192,
                          tp_allreduce=TpAllReduce.VLLM, python_step_loop=True,
                          batch_limits=vllm_batch_limits, batch_limits_from=(0, 9),
                          aliases=("vllm",), name="vllm"),
    # SGLang: mem_fraction_static ~0.88 (server_args.py default for 80 GB parts), chunked prefill 8192
    # (2048 on parts below 35 GiB, 16384 from 160 GiB: sglang_batch_limits),
    # page size 1 (token-level KV), cuda-graph max batch 256-512; its default scheduler runs prefill
    # batches apart from decode (enable_mixed_chunk off): SchedulerKind.PREFILL_FIRST (schedulers.py).
    # Its custom all-reduce is vLLM's (sgl-kernel custom_all_reduce, a port). Its scheduler is a
    # Python loop over the running requests each step (python/sglang/srt/managers/scheduler.py:
    # get_next_batch_to_run, process_batch_result), python_step_loop. Its "zero-overhead batch
    # scheduler" (default from v0.4, lmsys.org/blog/2024-12-04-sglang-v0-4) runs one batch ahead;
    # the host time stays serial here as for vLLM (above).
    "sglang": EngineProfile(KvBudgetRule.TOTAL, 0.88, 1, SchedulerKind.PREFILL_FIRST, False, 512, 8192,
                            tp_allreduce=TpAllReduce.VLLM, python_step_loop=True, batch_limits=sglang_batch_limits,
                            aliases=("sglang",), name="sglang"),
    # lmdeploy TurboMind: cache_max_entry_count 0.8 of free memory, block 64, continuous batching.
    # Its context decoder left the last prompt token to the first decode step until "Refactor
    # turbomind attention" (PR #1116, merged March 2024, in a v0.2.x patch release at the earliest):
    # rows stating a version before v0.3, the first minor release certainly after it, get that
    # (workloads.inference.sim.deferred_first_token; a row stating v0.2.5 or v0.2.6 may be misread).
    # TP all-reduce through NCCL (no custom kernels modelled for TurboMind).
    "lmdeploy": EngineProfile(KvBudgetRule.FREE, 0.80, 64, SchedulerKind.CONTINUOUS, False, 256, 8192,
                              first_token_in_prefill_from=(0, 3), aliases=("lmdeploy", "turbomind"),
                              tp_allreduce=TpAllReduce.NCCL, name="lmdeploy"),
    # TGI (text-generation-inference; launcher/src/main.rs @009c4e0 defaults): the router admits at
    # most `max_concurrent_requests` 128 requests; `max_batch_prefill_tokens` defaults to
    # max_input_tokens + 50 with max_input_tokens min(max_position_embeddings - 1, 4095): 4145 tokens
    # of prompt per step; CUDA graphs captured for batch sizes "1,2,4,8,16,32" (decode steps pad up
    # to them, larger batches run eagerly); its default attention is flashinfer with prefix caching
    # (resolve_attention), whose KV pages are one token (server/.../models/globals.py: BLOCK_SIZE = 1
    # for flashinfer). KV budget as vLLM's total-memory rule (its warmup sizes the cache from the free
    # memory after a max-prefill forward). Its Python model server builds each step's batch, samples
    # and checks every request's stopping criteria in a loop (python_step_loop); the Rust router does
    # not overlap that with the GPU (serial). TP all-reduce through NCCL (torch.distributed).
    "tgi": EngineProfile(KvBudgetRule.TOTAL, VLLM_GPU_MEMORY_UTILIZATION, TGI_BLOCK_SIZE, SchedulerKind.CHUNKED, False,
                         TGI_MAX_CONCURRENT_REQUESTS, TGI_MAX_BATCH_PREFILL_TOKENS, cuda_graph_batch_sizes=TGI_CUDA_GRAPH_BATCH_SIZES,
                         tp_allreduce=TpAllReduce.NCCL, python_step_loop=True,
                         aliases=("text-generation-inference", "tgi"), name="tgi"),
}

#: gpuplan's default when no engine is named (`serve run` / `serve plan` without --engine): chunked
#: prefill with vLLM's per-step limits (max_num_seqs 256, max_num_batched_tokens 8192: memory.py
#: DEFAULT_MAX_BATCH_SEQS / DEFAULT_MAX_BATCH_TOKENS) and optimistic admission, vLLM's 16-token
#: blocks, the KV budget of the one memory headroom knob under the total-memory rule
#: (`memory.usable_fraction`, default 0.9, as vLLM's gpu_memory_utilization), TensorRT-LLM's TP
#: all-reduce (Deployment's default), no CUDA-graph padding.
GENERIC = EngineProfile(KvBudgetRule.TOTAL, None, VLLM_BLOCK_SIZE, SchedulerKind.CHUNKED, False,
                        DEFAULT_MAX_BATCH_SEQS, DEFAULT_MAX_BATCH_TOKENS, tp_allreduce=TpAllReduce.TENSORRT_LLM,
                        name="generic")

#: what `--engine` accepts: the default first, then the engines
ENGINE_NAMES = (GENERIC.name, *ENGINES)


def engine_profile(name: str | EngineProfile | None, field: str = "engine") -> EngineProfile:
    """The profile named `name` (None: GENERIC); InputError naming `field` and the allowed names."""
    if name is None:
        return GENERIC
    if isinstance(name, EngineProfile):
        return name
    key = str(name).strip().lower()
    if key == GENERIC.name:
        return GENERIC
    if key not in ENGINES:
        raise InputError(f"{field}: unknown engine '{name}'; allowed: {', '.join(ENGINE_NAMES)}", field=field,
                         allowed=", ".join(ENGINE_NAMES))
    return ENGINES[key]
