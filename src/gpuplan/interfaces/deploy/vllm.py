"""vLLM: one serving instance as a `vllm serve` command, and such a command read back
(options.VLLM: vllm/engine/arg_utils.py EngineArgs.add_cli_args, vLLM 0.11).

Instance -> options (the vllm EngineProfile's limits are what the simulator ran; each is stated):
  tp, attention DP, ep   dense: --tensor-parallel-size tp. MoE with attention data parallelism a:
                         --data-parallel-size a --tensor-parallel-size tp / a (vLLM's DP attention);
                         ep > 1 needs ep = tp: --enable-expert-parallel (vLLM's expert-parallel group
                         is its tensor x data parallel ranks)
  pp                     --pipeline-parallel-size
  weights, KV            --dtype bfloat16 | float16 | float32; fp8 weights: --quantization fp8; KV in the
                         activation dtype: --kv-cache-dtype auto; fp8 KV: --kv-cache-dtype fp8
  step limits            --max-num-seqs, --max-num-batched-tokens
  scheduler              chunked: --enable-chunked-prefill; continuous: --no-enable-chunked-prefill
  KV memory              --gpu-memory-utilization (the total-memory rule's fraction), --block-size
  CUDA graphs            --cudagraph-capture-sizes (only when the profile pads to sizes)
"""

from __future__ import annotations

from gpuplan.interfaces.deploy.commandline import (
    find_command,
    parse_args,
    render_command,
)
from gpuplan.interfaces.deploy.launch import (
    TORCH_DTYPE_NAMES,
    ServingLaunch,
    memory_fraction_of,
    model_from_id,
    profile_for,
    refuse,
    weight_name,
)
from gpuplan.interfaces.deploy.options import VLLM

T = VLLM
ENGINE = "vllm"
DTYPES = TORCH_DTYPE_NAMES


def options(launch: ServingLaunch) -> list[list[str]]:
    """The engine options of `launch` (module docstring)."""
    from gpuplan.workloads.inference.sim.schedulers import SchedulerKind

    prof, moe = launch.engine, launch.model.moe is not None
    g = []
    if launch.attention_dp_balance and launch.attention_dp > 1:
        raise refuse("attention_dp_balance", "vLLM has no attention-DP balance scheduler (TensorRT-LLM's "
                     "attention_dp_config.enable_balance); leave it off", "off")
    if launch.attention_dp > 1:
        if not moe:
            raise refuse("attention_dp", "vLLM's data parallelism of a dense model runs separate replicas, not "
                         "attention data parallelism; allowed: 1")
        g += [T.arg("--data-parallel-size", launch.attention_dp)]
    g.append(T.arg("--tensor-parallel-size", launch.tp // launch.attention_dp))
    if launch.ep > 1:
        if launch.ep != launch.tp:
            raise refuse("ep", f"vLLM's expert parallelism spans its tensor x data parallel ranks; allowed: 1, {launch.tp}",
                         f"1, {launch.tp}")
        g.append(T.flag("--enable-expert-parallel"))
    g.append(T.arg("--pipeline-parallel-size", launch.pp))
    w, kv = weight_name(launch.weight_dtype), weight_name(launch.kv_dtype)
    if w == "fp8":
        g += [T.arg("--dtype", "bfloat16"), T.arg("--quantization", "fp8")]
        act = "bf16"
    elif w in DTYPES:
        g.append(T.arg("--dtype", DTYPES[w]))
        act = w
    else:
        raise refuse("weight_dtype", f"{w} weights are a checkpoint's own quantization in vLLM; allowed: bf16, fp16, "
                     "fp32, fp8", "bf16, fp16, fp32, fp8")
    if kv == "fp8":
        g.append(T.arg("--kv-cache-dtype", "fp8"))
    elif kv == act:
        g.append(T.arg("--kv-cache-dtype", "auto"))
    else:
        raise refuse("kv_dtype", f"vLLM keeps the KV cache in the activation dtype ({act}) or fp8; allowed: {act}, fp8",
                     f"{act}, fp8")
    if prof.scheduler not in (SchedulerKind.CHUNKED, SchedulerKind.CONTINUOUS):
        raise refuse("scheduler", f"vLLM schedules chunked or continuous, not {prof.scheduler.value}",
                     "chunked, continuous")
    g += [T.arg("--max-num-seqs", prof.max_batch_seqs), T.arg("--max-num-batched-tokens", prof.max_batch_tokens),
          T.flag("--enable-chunked-prefill", prof.scheduler is SchedulerKind.CHUNKED),
          T.arg("--gpu-memory-utilization", memory_fraction_of(prof)), T.arg("--block-size", prof.block_size)]
    if prof.cuda_graph_batch_sizes:
        g.append(T.arg("--cudagraph-capture-sizes", list(prof.cuda_graph_batch_sizes)))
    return g


def emit(launch: ServingLaunch, header: str = "") -> str:
    return f"# written for {T.written_for} ({T.source}){header}\n" + render_command(
        ["vllm", "serve", *T.value_text("--model", launch.model_id).split(" ")], options(launch))


def command_words(launch: ServingLaunch) -> list[str]:
    """The container's command and arguments (Kubernetes manifests)."""
    return ["vllm", "serve", launch.model_id] + [w for g in options(launch) for w in g]


def _is_program(word: str, nxt: str) -> bool:
    return (word.endswith("vllm") and nxt == "serve") or word.endswith("vllm.entrypoints.openai.api_server")


def read(text: str) -> ServingLaunch:
    """A `vllm serve` (or api_server) command as a ServingLaunch."""
    from gpuplan.workloads.inference.sim.schedulers import SchedulerKind

    _, words = find_command(text, _is_program, expected="vllm serve")
    if words and words[0] == "serve":
        words = words[1:]
    args = parse_args(words, T)
    name = args.text("--model") or (args.positionals[0] if args.positionals else "")
    model = model_from_id(name)
    args.unmodelled += [f"(positional) {p}" for p in args.positionals[1:]]
    tp_v = args.integer("--tensor-parallel-size", 1)
    dp = args.integer("--data-parallel-size", 1)
    moe = model.moe is not None
    if dp > 1 and not moe:
        args.unmodelled.append(f"--data-parallel-size {dp} ({dp} replicas; serve run predicts one)")
        dp = 1
    tp = tp_v * dp
    ep = tp if args.values.get("--enable-expert-parallel") and moe else 1
    kv_choice = args.choice("--kv-cache-dtype", ("auto", "fp8"), "auto")
    quant = args.choice("--quantization", ("fp8",))
    dtype = args.choice("--dtype", ("auto", "half", "float16", "bfloat16", "float", "float32"), "auto")
    act = {"half": "fp16", "float16": "fp16", "bfloat16": "bf16", "float": "fp32", "float32": "fp32"}.get(dtype, "bf16")
    chunked = args.values.get("--enable-chunked-prefill", True)
    profile = profile_for(
        ENGINE, max_batch_seqs=args.integer("--max-num-seqs"), max_batch_tokens=args.integer("--max-num-batched-tokens"),
        memory_fraction=args.fraction("--gpu-memory-utilization"), block_size=args.integer("--block-size"),
        cuda_graph_batch_sizes=args.integers("--cudagraph-capture-sizes"),
        scheduler=SchedulerKind.CHUNKED if chunked else SchedulerKind.CONTINUOUS)
    return ServingLaunch(ENGINE, model, name, profile, tp=tp, pp=args.integer("--pipeline-parallel-size", 1), ep=ep,
                         attention_dp=dp, weight_dtype="fp8" if quant == "fp8" else act,
                         kv_dtype="fp8" if kv_choice == "fp8" else act, unmodelled=tuple(args.unmodelled))

