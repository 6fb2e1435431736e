"""TensorRT-LLM: one serving instance as a `trtllm-serve` command with its extra LLM-API options
file, and such a script read back (options.TRTLLM: tensorrt_llm/commands/serve.py click options and
tensorrt_llm/llmapi/llm_args.py KvCacheConfig / CudaGraphConfig / BaseLlmArgs, TensorRT-LLM 1.1).

The script writes the options file with a here-document and starts the server:

    cat > extra-llm-api-options.yaml <<'EOF'
    {...JSON, which YAML reads as flow style...}
    EOF
    trtllm-serve MODEL --backend pytorch --tp_size ... --extra_llm_api_options extra-llm-api-options.yaml

Instance -> options (the tensorrt-llm EngineProfile's limits are what the simulator ran):
  tp, pp, ep             --tp_size, --pp_size, --ep_size (moe_expert_parallel_size)
  attention DP           enable_attention_dp: true (attention data parallel over the tp ranks; TensorRT-LLM's
                         attention DP spans all tp ranks: attention_dp = tp); with the balance scheduler
                         attention_dp_config.enable_balance: true (its other keys are read as unmodelled)
  step limits            --max_batch_size, --max_num_tokens
  scheduler              chunked: --enable_chunked_prefill; continuous: without it (GUARANTEED_NO_EVICT
                         is trtllm-serve's capacity scheduler either way, serve.py get_llm_args)
  KV memory              --kv_cache_free_gpu_memory_fraction (the free-memory rule's fraction);
                         kv_cache_config.tokens_per_block (llm_args.py default 32: gpuplan states the
                         profile's), kv_cache_config.dtype auto | fp8
  CUDA graphs            cuda_graph_config.batch_sizes with enable_padding: true; `cuda_graph_config: null` when
                         the profile pads to none
  weights                bf16 / fp16 checkpoints as given; fp8 and nvfp4 are checkpoint formats (a ModelOpt
                         checkpoint): the command names that checkpoint, gpuplan reads --from with --weight-dtype
"""

from __future__ import annotations

import json

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.commandline import (
    find_command,
    here_documents,
    parse_args,
    render_command,
)
from gpuplan.interfaces.deploy.launch import (
    ServingLaunch,
    memory_fraction_of,
    model_from_id,
    profile_for,
    refuse,
    weight_name,
)
from gpuplan.interfaces.deploy.options import TRTLLM

T = TRTLLM
ENGINE = "tensorrt-llm"
EXTRA_FILE = "extra-llm-api-options.yaml"


def extra_options(launch: ServingLaunch) -> dict:
    """The extra LLM-API options (llm_args.py keys) of `launch`."""
    prof = launch.engine
    kv = weight_name(launch.kv_dtype)
    act = "bf16" if weight_name(launch.weight_dtype) not in ("fp16", "fp32") else weight_name(launch.weight_dtype)
    if kv not in ("fp8", act):
        raise refuse("kv_dtype", f"TensorRT-LLM keeps the KV cache in the model dtype ({act}) or fp8", f"{act}, fp8")
    if launch.attention_dp not in (1, launch.tp):
        raise refuse("attention_dp", f"TensorRT-LLM's attention DP spans every tp rank; allowed: 1, {launch.tp}",
                     f"1, {launch.tp}")
    out: dict = {"kv_cache_config": {"tokens_per_block": T.key("kv_cache_config.tokens_per_block", prof.block_size),
                                     "dtype": T.key("kv_cache_config.dtype", "fp8" if kv == "fp8" else "auto")},
                 "enable_attention_dp": T.key("enable_attention_dp", launch.attention_dp > 1)}
    if launch.attention_dp > 1 and launch.attention_dp_balance:
        out["attention_dp_config"] = {"enable_balance": T.key("attention_dp_config.enable_balance", True)}
    if not prof.cuda_graph_batch_sizes:
        out["cuda_graph_config"] = T.key("cuda_graph_config", None)
    else:
        out["cuda_graph_config"] = {"batch_sizes": T.key("cuda_graph_config.batch_sizes", list(prof.cuda_graph_batch_sizes)),
                                    "enable_padding": T.key("cuda_graph_config.enable_padding", True)}
    return out


def options(launch: ServingLaunch, extra_file: str = EXTRA_FILE) -> list[list[str]]:
    from gpuplan.workloads.inference.sim.schedulers import SchedulerKind

    prof = launch.engine
    if prof.scheduler not in (SchedulerKind.CHUNKED, SchedulerKind.CONTINUOUS):
        raise refuse("scheduler", f"TensorRT-LLM schedules chunked or continuous (in-flight), not {prof.scheduler.value}",
                     "chunked, continuous")
    if weight_name(launch.weight_dtype) not in ("bf16", "fp16", "fp32", "fp8", "nvfp4"):
        raise refuse("weight_dtype", f"{weight_name(launch.weight_dtype)} is not a TensorRT-LLM checkpoint format gpuplan "
                     "states; allowed: bf16, fp16, fp32, fp8, nvfp4", "bf16, fp16, fp32, fp8, nvfp4")
    g = [T.arg("--backend", "pytorch"), T.arg("--tp_size", launch.tp), T.arg("--pp_size", launch.pp)]
    if launch.ep > 1:
        g.append(T.arg("--ep_size", launch.ep))
    g += [T.arg("--max_batch_size", prof.max_batch_seqs), T.arg("--max_num_tokens", prof.max_batch_tokens),
          T.arg("--kv_cache_free_gpu_memory_fraction", memory_fraction_of(prof)),
          T.flag("--enable_chunked_prefill", prof.scheduler is SchedulerKind.CHUNKED),
          T.arg("--extra_llm_api_options", extra_file)]
    return [x for x in g if x]


def emit(launch: ServingLaunch, header: str = "") -> str:
    body = json.dumps(extra_options(launch), separators=(", ", ": "))
    return (f"# written for {T.written_for} ({T.source}){header}\n"
            f"cat > {EXTRA_FILE} <<'EOF'\n{body}\nEOF\n"
            + render_command(["trtllm-serve", launch.model_id], options(launch)))


def command_words(launch: ServingLaunch, extra_file: str) -> list[str]:
    """The container's command and arguments (Kubernetes manifests; the options file mounted at `extra_file`)."""
    return ["trtllm-serve", launch.model_id] + [w for g in options(launch, extra_file) for w in g]


def _is_program(word: str, _nxt: str) -> bool:
    return word.endswith("trtllm-serve")


def read(text: str, weight_dtype: str | None = None) -> ServingLaunch:
    """A trtllm-serve command (with its options file as a here-document, or a file on this machine)."""
    from gpuplan.input_files import MAX_SETTINGS_BYTES, path_kind, read_input_bytes

    from gpuplan.workloads.inference.sim.schedulers import SchedulerKind

    _, bodies = here_documents(text)
    _, words = find_command(text, _is_program, expected="trtllm-serve")
    if words and words[0] == "serve":
        words = words[1:]
    args = parse_args(words, T)
    name = args.positionals[0] if args.positionals else ""
    args.unmodelled += [f"(positional) {p}" for p in args.positionals[1:]]
    model = model_from_id(name)
    extra: dict = {}
    path = args.text("--extra_llm_api_options")
    if path is not None:
        raw = bodies.get(path)
        if raw is None and path_kind(path) in ("file", "pipe"):  # gpuplan.input_files: bounded, never a device
            raw = read_input_bytes(path, "extra_llm_api_options", max_bytes=MAX_SETTINGS_BYTES,
                                   what="options file").decode("utf-8", errors="replace")
        if raw is None:
            raise InputError(f"--extra_llm_api_options: '{path}' is neither a here-document of the script nor a file "
                             "here", field="extra_llm_api_options")
        extra = _yaml_or_json(raw)
    kv_cfg = extra.pop("kv_cache_config", {}) or {}
    graphs_off = "cuda_graph_config" in extra and extra["cuda_graph_config"] is None
    graphs = extra.pop("cuda_graph_config", None) or {}
    adp = bool(extra.pop("enable_attention_dp", False))
    adp_cfg = extra.pop("attention_dp_config", None) or {}
    if not isinstance(adp_cfg, dict):
        raise InputError("attention_dp_config: give a mapping (enable_balance, timeout_iters, batching_wait_iters)",
                         field="attention_dp_config")
    balance = adp_cfg.get("enable_balance", False)
    if not isinstance(balance, bool):
        raise InputError(f"attention_dp_config.enable_balance: {balance!r} is not true or false", field="enable_balance")
    unmodelled = list(args.unmodelled) + [f"{k}: {json.dumps(v)}" for k, v in extra.items()]
    unmodelled += [f"attention_dp_config.{k}: {json.dumps(v)}" for k, v in adp_cfg.items() if k != "enable_balance"]
    unmodelled += [f"kv_cache_config.{k}: {json.dumps(v)}" for k, v in kv_cfg.items() if k not in ("tokens_per_block", "dtype")]
    unmodelled += [f"cuda_graph_config.{k}: {json.dumps(v)}" for k, v in graphs.items()
                   if k not in ("batch_sizes", "enable_padding")]
    block = kv_cfg.get("tokens_per_block")
    if block is not None and (not isinstance(block, int) or isinstance(block, bool) or block < 1):
        raise InputError(f"kv_cache_config.tokens_per_block: {block!r} is not a positive integer", field="tokens_per_block")
    sizes = graphs.get("batch_sizes")
    if sizes is not None and (not isinstance(sizes, list) or any(not isinstance(s, int) or s < 1 for s in sizes)):
        raise InputError("cuda_graph_config.batch_sizes: give a list of positive integers", field="batch_sizes")
    if sizes and not graphs.get("enable_padding", False):
        unmodelled.append("cuda_graph_config.enable_padding: false (modelled as padded)")
    tp = args.integer("--tp_size", 1)
    profile = profile_for(
        ENGINE, max_batch_seqs=args.integer("--max_batch_size"), max_batch_tokens=args.integer("--max_num_tokens"),
        memory_fraction=args.fraction("--kv_cache_free_gpu_memory_fraction"), block_size=block,
        cuda_graph_batch_sizes=() if graphs_off else (tuple(sizes) if sizes else None),
        scheduler=SchedulerKind.CHUNKED if args.values.get("--enable_chunked_prefill") else SchedulerKind.CONTINUOUS)
    act = weight_dtype if weight_dtype in ("fp16", "fp32") else "bf16"
    # kv_cache_config.dtype "auto" (TensorRT-LLM's default) follows the checkpoint: the engine's choice
    # for these weights (EngineProfile.kv_dtype_for: FP8 for a ModelOpt fp8 / nvfp4 checkpoint), else the model dtype
    kv_dtype = "fp8" if kv_cfg.get("dtype") == "fp8" else (profile.default_kv_dtype(weight_dtype or "bf16") or act)
    return ServingLaunch(ENGINE, model, name, profile, tp=tp, pp=args.integer("--pp_size", 1),
                         ep=args.integer("--ep_size", 1), attention_dp=tp if adp else 1,
                         weight_dtype=weight_dtype or "bf16",
                         kv_dtype=kv_dtype, unmodelled=tuple(unmodelled),
                         attention_dp_balance=adp and balance)


def _yaml_or_json(raw: str) -> dict:
    try:
        out = json.loads(raw)
    except ValueError:
        try:
            import yaml  # optional: a hand-written block-style YAML file
        except ImportError:
            raise InputError("--extra_llm_api_options: not JSON (flow-style YAML), and PyYAML is not installed to read "
                             "block YAML", field="extra_llm_api_options") from None
        try:
            out = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise InputError(f"--extra_llm_api_options: not YAML ({str(exc).splitlines()[0]})",
                             field="extra_llm_api_options") from None
    if not isinstance(out, dict):
        raise InputError("--extra_llm_api_options: the file must hold a mapping", field="extra_llm_api_options")
    return out
