"""Predict one inference.csv row (../shared/validation/SCHEMA.md) with the serving simulator.

Load given by the row:
- `batch`: a static batch of that many requests (one batch: prefill, then decode to the end);
- `concurrency`: a closed loop with that many requests in flight (latency means over its steady state:
  the initial burst of `concurrency` requests, all arriving at t = 0, is left out);
- `max_load`: every request at t = 0 (infinite rate), the engine's own batch limits and memory; as
  many requests as the run had (`run_requests`: stated in the row, else the benchmark's default);
- `request_rate`: a Poisson open loop.
Poisson and closed-loop rows are measured by a load generator through a serving API, whose front-end
latency (workloads.inference.sim.frontend) the first token and the request's end pay; static-batch and
max-load rows are offline benchmarks that call the engine in-process.
The engine column picks the engine's documented scheduler and memory defaults
(workloads.inference.engines: EngineProfile, ENGINES; vLLM's for any other engine), at the version
the row states (`stated_engine_version`);
`num_gpus / (tp x pp)` replicas serve together (throughput metrics scale by replicas). With
`attention_dp` = a, each replica is a attention groups that each serve their own requests (the
load splits evenly over them: concurrency / a, rate / a, batch / a; TensorRT-LLM's attention-DP
balance), simulated as one group whose MoE layers carry all a groups' tokens
(workloads.inference.cost.operators); throughput metrics scale by replicas x a.
Latency metrics are means over requests (`ttft_ms`, `tpot_ms`, `e2e_latency_ms`).
"""

from __future__ import annotations

import math
import re


from gpuplan.errors import GpuplanError, InputError
from gpuplan.interfaces.row_types import Prediction, SkipRow
from gpuplan.models import model_from_arch_row
from gpuplan.workloads.inference.sim.lengths import RequestLengths, dataset_lengths
from gpuplan.workloads.inference.sim.lengths import fixed as lengths_fixed
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.engines import ENGINES, EngineProfile
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig, SchedulerKind
from gpuplan.workloads.inference.sim.simulator import SimResult
from gpuplan.workloads.inference.replica import BENCHMARK_RUN, Load, Replica, ServingFeatures, static_scheduler
from gpuplan.workloads.inference.cost.tp_allreduce import TpAllReduce
from gpuplan.validation_rules import parse_row_cell

#: Seed of the validation simulations (fixed so `gpuplan validate` is reproducible).
VALIDATION_SEED = 20240601
#: Requests simulated for max-load / Poisson rows: trtllm-bench throughput runs use thousands of
#: requests (TensorRT-LLM perf-overview.md: 1,000-3,000 per dataset); the mean settles well before.
MAX_LOAD_REQUESTS = 1500


#: rows whose engine is not one of ENGINES ("other", or none) run as vLLM does
FALLBACK_ENGINE = "vllm"


def stated_engine_version(row: dict[str, str], engine: EngineProfile) -> tuple[int, int] | None:
    """(major, minor) of the engine version the row states: an `engine_version` column ("0.6.1"),
    else, when the source or notes name the engine (`EngineProfile.aliases`), the first version
    written there as "vMAJOR.MINOR" or right after the engine's name ("TensorRT-LLM ~0.5",
    "updated for v0.6.1"); None when nothing states it (the engine's current kernels apply)."""
    raw = (row.get("engine_version") or "").strip().lower()
    if raw:
        m = re.fullmatch(r"v?(\d{1,4})\.(\d{1,4})(?:\.\d{1,6})?", raw)
        if m is None:
            raise SkipRow(f"engine_version: '{raw}' is not a version (MAJOR.MINOR or MAJOR.MINOR.PATCH)")
        return int(m.group(1)), int(m.group(2))
    if not engine.aliases:
        return None
    names = "|".join(re.escape(a) for a in engine.aliases)
    # a bare "vMAJOR.MINOR" is the engine's only where a preposition or punctuation introduces it
    # ("updated for v0.6.1", "generated with v0.17", "(fp16), v0.5"); after any other word it is that
    # word's version ("LLaMA v3.3 70B", "MLPerf Inference v4.0")
    stated = re.compile(r"(?:(?:" + names + r")\s+~?v?"
                        r"|(?:^|[(\[,;:'\"]\s*|\b(?:for|with|from|in|on|by|using)\s+)v)(\d+)\.(\d+)")
    for text in ((row.get("source") or "").lower(), (row.get("notes") or "").lower()):
        if not any(a in text for a in engine.aliases):
            continue
        m = stated.search(text)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def grouped_decode_for(row: dict[str, str], engine: EngineProfile) -> bool:
    """Deployment.grouped_decode_attention of a row: False when it states an engine version older
    than the engine's `grouped_decode_from`, else True (EngineProfile.deployment_options)."""
    return engine.deployment_options(stated_engine_version(row, engine))["grouped_decode_attention"]


def deferred_first_token_for(row: dict[str, str], engine: EngineProfile) -> bool:
    """True when the row states an engine version older than the engine's
    `first_token_in_prefill_from` (EngineProfile.defers_first_token); False otherwise."""
    return engine.defers_first_token(stated_engine_version(row, engine))


def tp_allreduce_for(row: dict[str, str], engine: EngineProfile) -> TpAllReduce:
    """Deployment.tp_allreduce of a row: the engine's `tp_allreduce_before` when the row states a
    version older than its `tp_allreduce_from`, else its `tp_allreduce` (EngineProfile.deployment_options)."""
    return engine.deployment_options(stated_engine_version(row, engine))["tp_allreduce"]


#: How a row states that the engine's attention-DP balance scheduler ran: TensorRT-LLM's llm_options
#: key (`attention_dp_config: enable_balance: true`) or the notes' words for it ("attention-DP balance on")
_ADP_BALANCE_STATED = re.compile(r"enable_balance\W{0,3}true|attention[- ]dp balance on")


def stated_attention_dp_balance(row: dict[str, str]) -> bool:
    """Deployment.attention_dp_balance of a row: True when its source or notes state the engine's
    attention-DP balance scheduler on (`_ADP_BALANCE_STATED`: TensorRT-LLM perf-overview.md's
    DeepSeek R1 llm_options set `attention_dp_config: enable_balance: true`), else False, the
    engine's default (TensorRT-LLM `AttentionDpConfig.enable_balance = False`)."""
    text = f"{row.get('source') or ''} {row.get('notes') or ''}".lower()
    return _ADP_BALANCE_STATED.search(text) is not None


def trtllm_bench_requests(input_len: int, output_len: int) -> int:
    """Requests of the synthetic dataset of TensorRT-LLM's max-load benchmark for these lengths
    (docs/source/developer-guide/perf-overview.md, "Preparing a Dataset": 3000 for 1024/1024, 1500
    for 8192/1024 and 1024/8192, 1000 for 32768/1024 and 1024/32768): 3000 while the longer of the
    two is below 8192 tokens, 1500 below 32768, else 1000."""
    longest = max(input_len, output_len)
    return 3000 if longest < 8192 else (1500 if longest < 32768 else 1000)


#: bytes per weight / KV element by quantisation algorithm in trtllm-bench's estimate
#: (tensorrt_llm/bench/build/tuning.py BYTES_PER_ELEM: FP8 and FP8 block scales 1, NVFP4 0.5; any
#: other algorithm, W4A16 / W4A8 MXFP4 and INT4 AWQ included, falls back to 2)
TRTLLM_BENCH_BYTES_PER_ELEM = {"fp8": 1.0, "nvfp4": 0.5}


def trtllm_bench_kv_max_requests(dep: Deployment, input_len: int, output_len: int, memory_fraction: float) -> float:
    """Requests of input_len + output_len tokens that `trtllm-bench` estimates fit in the KV cache
    (tensorrt_llm/bench/build/tuning.py `calc_engine_setting`, from the Hugging Face config fields of
    bench/build/dataclasses.py `ModelConfig`), the input of its max_batch_size / max_num_tokens rule:

        engine_gib = stored parameters x BYTES_PER_ELEM[weight algorithm] / 2^30
        cache_gib = (device memory x tp x pp - engine_gib) x kv_cache_free_gpu_mem_fraction
        gib_per_token = 2 x layers x max(tp, num_key_value_heads) x head_size x BYTES_PER_ELEM[KV] / 2^30
        kv_max_requests = cache_gib / (gib_per_token x (input_len + output_len))

    Its KV estimate is the GQA formula of the config fields: head_size is the config's `head_dim`, or
    hidden / heads where the config has none (MLA configs: DeepSeek-V3's num_key_value_heads 128 and
    7168 / 128 = 56), so for MLA it is ~25x the latent cache. The stored parameter count is what the
    safetensors metadata counts: packed 4-bit checkpoints store one uint8 per two elements plus their
    block scales, i.e. bytes_per_element of the format per quantised weight."""
    from gpuplan.layers.params import parameter_counts
    from gpuplan.specs.dtypes import bytes_per_element

    m = dep.model
    counts = parameter_counts(m)
    quantised = counts.total - counts.embedding - counts.components.get("norms", 0)
    wd = dep.weight_dtype.value
    stored = quantised * bytes_per_element(wd) + (counts.total - quantised) if wd in ("mxfp4", "nvfp4", "int4") \
        else counts.total
    engine_gib = stored * TRTLLM_BENCH_BYTES_PER_ELEM.get(wd, 2.0) / 2**30
    total_gib = dep.gpu.memory_bytes / 2**30 * dep.tp * dep.pp
    head_size = m.hidden // m.heads if m.mla is not None else m.head_dim
    kv_elem = TRTLLM_BENCH_BYTES_PER_ELEM.get(dep.kv_dtype.value, 2.0)
    gib_per_token = 2 * m.layers * max(dep.tp, m.kv_heads) * head_size * kv_elem / 2**30
    cache_gib = (total_gib - engine_gib) * memory_fraction
    return max(cache_gib / (gib_per_token * (input_len + output_len)), 1.0)


def trtllm_bench_limits(kv_max_requests: float, input_len: int, output_len: int, pp: int = 1) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) that `trtllm-bench throughput` picks when the run does not
    set them (TensorRT-LLM tensorrt_llm/bench/build/tuning.py, `finetune_setting`): from the number
    of requests of input_len + output_len tokens that fit in the KV cache,

        raw_bs = min(kv_max_requests, 4096) / pp;  raw_tokens = min(raw_bs x (1 + input_len / output_len), 32768)
        max_batch_size = max(64, 32 ceil(raw_bs / 32)) below 256, 128 ceil(raw_bs / 128) below 1024,
                         else 256 ceil(raw_bs / 256)
        max_num_tokens = max(2048, 256 ceil(raw_tokens / 256)) below 4096, 512 ceil(raw_tokens / 512)
                         below 8192, else 1024 ceil(raw_tokens / 1024)

    kv_max_requests: `trtllm_bench_kv_max_requests` (the engine's estimate over the memory of all the
    run's GPUs; with attention DP the limits apply per rank, so they are optimistic, as the engine
    intends, except where its GQA-formula KV estimate is far above the real cache, as for MLA)."""
    raw_bs = min(kv_max_requests, 4096) / pp
    raw_tokens = min(raw_bs * (1 + input_len / output_len), 32768)
    if raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return int(bs), int(tokens)

_METRICS = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "ttft_ms", "tpot_ms", "e2e_latency_ms")


def _int(row: dict[str, str], key: str, default: int | None = None) -> int | None:
    v = (row.get(key) or "").strip()
    if not v:
        return default
    try:  # ASCII digits, within the range of the CLI option of the same quantity (--concurrency ...)
        return int(parse_row_cell(key, v))
    except InputError as exc:
        raise SkipRow(str(exc)) from None


def _dataset_lengths(row: dict[str, str], in_len: int | None, out_len: int | None):
    """(RequestLengths, Dataset) of a row without input_len / output_len: the catalog dataset
    (catalog.datasets) named by a `dataset` column, else the first one its notes or source mention
    (e.g. "200 ShareGPT prompts", "OpenOrca 24,576 samples"); a stated length overrides its side."""
    from gpuplan.catalog.datasets import find_dataset_in_text, get_dataset

    name = (row.get("dataset") or "").strip()
    try:
        ds = get_dataset(name, field="dataset") if name else \
            find_dataset_in_text(" ".join((row.get("notes") or "", row.get("source") or "")))
    except GpuplanError as exc:
        raise SkipRow(str(exc)) from None
    if ds is None:
        raise SkipRow("input_len and output_len are needed (or a dataset with known lengths: a `dataset` column or "
                      "a catalog dataset named in the notes)")
    lengths = dataset_lengths(ds)
    return RequestLengths(lengths_fixed(in_len) if in_len else lengths.input,
                          lengths_fixed(out_len) if out_len else lengths.output, name=ds.id), ds


#: Most requests a validation run may simulate (a max-load run of this many takes seconds).
MAX_RUN_REQUESTS = 1_000_000
#: A request count stated for the run in a row's notes or source: "with 500 requests", "1,500
#: prompts" (a rate such as "2 requests/s" or "16 requests per second" is not a count).
_STATED_REQUESTS = re.compile(r"(?<![\d.,])(\d[\d,]*)\s+(?:requests|prompts)\b(?!\s*(?:/|per\b))")


def run_requests(row: dict[str, str], ds=None) -> int | None:
    """Requests of the row's benchmark run (max-load and Poisson rows): a `requests` column; else,
    for a dataset row, a count stated beside the dataset's name ("200 ShareGPT prompts"); else a
    count stated for the run in the notes or the source ("generated ... with 500 requests"; the
    first one, rates excluded); else the dataset's own sample count; None if nothing states it.

    A finite run matters at max load: every request arrives at t = 0, so the run's throughput is
    total output / (ramp-up + steady state + drain), and how many requests share the steady state
    (and so the batch and its step time) is min(N, what the engine admits)."""
    from gpuplan.catalog.datasets import requests_in_text

    n = _int(row, "requests")
    if n is not None:
        if not 1 <= n <= MAX_RUN_REQUESTS:
            raise SkipRow(f"requests: must be a whole number from 1 to {MAX_RUN_REQUESTS:,}, got {n}")
        return n
    if ds is not None:
        n = requests_in_text(row.get("notes") or "", ds)
        if n:
            return n
    for text in (row.get("notes") or "", row.get("source") or ""):
        m = _STATED_REQUESTS.search(text.lower())
        if m and 1 <= int(m.group(1).replace(",", "")) <= MAX_RUN_REQUESTS:
            return int(m.group(1).replace(",", ""))
    return ds.requests if ds is not None else None


def predict_row(row: dict[str, str]) -> Prediction:
    """Predicted value of one inference.csv row in its metric's unit (module docstring)."""
    from gpuplan.catalog import load_catalog

    metric = (row.get("metric") or "").strip()
    if metric not in _METRICS:
        raise SkipRow(f"metric '{metric}' is not an inference metric this model predicts ({', '.join(_METRICS)})")
    notes: list[str] = []
    dataset = None
    try:
        model = model_from_arch_row(row)
        cat = load_catalog()
        system = cat.system((row.get("system") or "").strip())
        gpu = cat.gpu(system.gpu)
    except GpuplanError as exc:
        raise SkipRow(str(exc)) from None
    tp = _int(row, "tp", 1) or 1
    pp = _int(row, "pp", 1) or 1
    ep = _int(row, "ep", 1) or 1
    adp = _int(row, "attention_dp", 1) or 1
    num_gpus = _int(row, "num_gpus", tp * pp) or tp * pp
    replicas = max(1, num_gpus // (tp * pp))
    groups = replicas * adp  # independent request streams: replicas x attention-DP groups
    wdt = (row.get("weight_dtype") or "").strip() or "bf16"
    engine_name = (row.get("engine") or "other").strip().lower()
    engine = ENGINES.get(engine_name, ENGINES[FALLBACK_ENGINE])
    if engine_name not in ENGINES:  # the assumption is visible in the row's notes
        notes.append(f"engine '{engine_name}' has no profile: assumed engine {FALLBACK_ENGINE}")
    kvdt = (row.get("kv_dtype") or "").strip()
    if not kvdt and (kvdt := engine.default_kv_dtype(wdt) or ""):
        notes.append(f"kv_dtype={kvdt} (engine default: {engine.name} follows the {wdt} checkpoint's KV recipe)")
    if not kvdt:
        kvdt = wdt if wdt in ("fp16", "bf16", "fp8") else "bf16"
        notes.append(f"kv_dtype={kvdt} (default: the weight format, or bf16 for 4-bit weights)")
    in_len, out_len = _int(row, "input_len"), _int(row, "output_len")
    lengths = RequestLengths(lengths_fixed(in_len), lengths_fixed(out_len)) if in_len and out_len else None
    if lengths is None:
        lengths, dataset = _dataset_lengths(row, in_len, out_len)
        in_len, out_len = round(lengths.input.mean), round(lengths.output.mean)
        notes.append(f"lengths of dataset {dataset.id}: input {lengths.input.describe()}, output {lengths.output.describe()}")
    batch, conc = _int(row, "batch"), _int(row, "concurrency")
    rate_text = (row.get("request_rate") or "").strip()
    try:
        rate = parse_row_cell("request_rate", rate_text, integer=False) if rate_text else None
    except InputError as exc:
        raise SkipRow(str(exc)) from None
    max_load = (row.get("max_load") or "").strip().lower() == "true"
    try:
        version = stated_engine_version(row, engine)  # read once: every version rule of the engine uses it
        balanced = adp > 1 and stated_attention_dp_balance(row)
        dep = Deployment(model, gpu, system, tp=tp, pp=pp, ep=ep, attention_dp=adp, weight_dtype=wdt, kv_dtype=kvdt,
                         attention_dp_balance=balanced, **engine.deployment_options(version))
        if dep.decode_kv_reads > 1:
            notes.append(f"per-query-head decode attention (engine version before XQA): KV read {dep.decode_kv_reads:g}x")
        if batch:
            batch = max(1, -(-batch // adp))
        if conc:
            conc = max(1, round(conc / adp))
        # the engine's per-step limits on this GPU, offline for an in-process benchmark (max load)
        engine = engine.for_gpu(gpu, offline=max_load and not (conc or rate), version=version)
        sched = static_scheduler(batch, in_len) if batch else engine.scheduler_config()
        workspace = None
        if max_load and not batch and not conc and not rate and engine.bench_limits:
            bs, tokens = trtllm_bench_limits(
                trtllm_bench_kv_max_requests(dep, in_len, out_len, engine.memory_fraction), in_len, out_len, pp)
            # chunked prefill off (trtllm-bench's enable_chunked_prefill default): whole prompts, and
            # max_num_tokens raised to max_isl + max_batch_size (bench/benchmark/utils/general.py get_settings)
            tokens = max(tokens, in_len + bs)
            sched = SchedulerConfig(kind=SchedulerKind.CONTINUOUS, max_batch_seqs=bs, max_batch_tokens=tokens,
                                    no_evict=engine.no_evict)
            workspace = tokens
            notes.append(f"trtllm-bench limits max_batch_size={bs} max_num_tokens={tokens}")
        deferred = engine.defers_first_token(version)
        if deferred:  # prefill of L - 1 tokens; the first output token from the first decode step
            notes.append("first token from a decode step (engine version before its prefill sampled it)")
        replica = Replica(dep, engine, sched, ServingFeatures(lengths=lengths), workspace_tokens=workspace,
                          deferred_first_token=deferred)
        stated = run_requests(row, dataset)
        window = BENCHMARK_RUN
        # the load one replica receives (loads split evenly over replicas; Replica splits them over
        # its attention-DP groups), given per group x adp so the row's own rounding stays
        if batch:
            load = Load.static(batch * adp)
        elif conc:
            load = Load.closed(conc * adp)
        elif rate:
            load = Load.poisson(rate / replicas)
            if stated:  # the run's / dataset's request count
                window = window.with_requests(max(1, -(-stated // groups)))
                notes.append(f"{stated} requests in the run")
        elif max_load:
            if stated:  # the run's / dataset's request count
                n = max(1, -(-stated // groups))
                notes.append(f"{stated} requests in the run")
            elif engine.bench_limits:  # trtllm-bench's documented request count, spread over the attention groups
                n = max(1, -(-trtllm_bench_requests(in_len, out_len) // adp))
            else:
                fit = replica.mem.max_concurrent_sequences(in_len + out_len)
                n = int(min(max(MAX_LOAD_REQUESTS, 3 * min(fit, replica.sched.max_batch_seqs)), 6000))
            load = Load.burst(n * adp)
        else:
            raise SkipRow("the row gives no load (batch, concurrency, max_load or request_rate)")
        run = replica.run(load, in_len, out_len, window=window, seed=VALIDATION_SEED)
        res: SimResult = run.result
    except SkipRow:
        raise
    except GpuplanError as exc:
        raise SkipRow(str(exc)) from None
    value = {
        "output_tokens_per_s": run.output_tokens_per_s * replicas,
        "total_tokens_per_s": run.total_tokens_per_s * replicas,
        "requests_per_s": run.requests_per_s * replicas,
        "ttft_ms": res.ttft_ms.mean,
        "tpot_ms": res.tpot_ms.mean,
        "e2e_latency_ms": res.e2e_ms.mean,
    }[metric]
    if replicas > 1:
        notes.append(f"{replicas} replicas of tp={tp} pp={pp}")
    if adp > 1:
        notes.append(f"{adp} attention-DP groups of {tp // adp} GPU(s), load split evenly"
                     + ("; the engine's attention-DP balance scheduler on (stated)" if balanced else ""))
    return Prediction(float(value), "; ".join(notes))
