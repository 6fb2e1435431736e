"""SGLang: one serving instance as a `python -m sglang.launch_server` command, and such a command
read back (options.SGLANG: python/sglang/srt/server_args.py ServerArgs.add_cli_args, SGLang 0.5.3).

Instance -> options (the sglang EngineProfile's limits are what the simulator ran; each is stated):
  tp, pp, ep             --tp-size tp, --pp-size, --ep-size
  attention DP a         --dp-size a --enable-dp-attention (attention over tp / a GPUs per group)
  weights, KV            --dtype bfloat16 | float16 | float32; fp8 weights: --quantization fp8;
                         KV in the activation dtype: --kv-cache-dtype auto; fp8 KV: fp8_e4m3
  step limits            --max-running-requests, --chunked-prefill-size (tokens per step)
  scheduler              prefill-first (SGLang's default: prefill batches apart from decode) or chunked
                         (--enable-mixed-chunk: prefill chunks ride with decodes)
  KV memory              --mem-fraction-static (the total-memory rule's fraction), --page-size
  CUDA graphs            --cuda-graph-bs (only when the profile pads to sizes)
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
from gpuplan.interfaces.deploy.options import SGLANG

T = SGLANG
ENGINE = "sglang"
DTYPES = TORCH_DTYPE_NAMES


def options(launch: ServingLaunch) -> list[list[str]]:
    """The server options of `launch` (module docstring)."""
    from gpuplan.workloads.inference.sim.schedulers import SchedulerKind

    prof = launch.engine
    g = [T.arg("--tp-size", launch.tp), T.arg("--pp-size", launch.pp)]
    if launch.ep > 1:
        g.append(T.arg("--ep-size", launch.ep))
    if launch.attention_dp_balance and launch.attention_dp > 1:
        raise refuse("attention_dp_balance", "SGLang has no attention-DP balance scheduler (TensorRT-LLM's "
                     "attention_dp_config.enable_balance); leave it off", "off")
    if launch.attention_dp > 1:
        g += [T.arg("--dp-size", launch.attention_dp), T.flag("--enable-dp-attention")]
    w, kv = weight_name(launch.weight_dtype), weight_name(launch.kv_dtype)
    if w == "fp8":
        g += [T.arg("--dtype", "bfloat16"), T.arg("--quantization", "fp8")]
        act = "bf16"
    elif w in DTYPES:
        g.append(T.arg("--dtype", DTYPES[w]))
        act = w
    else:
        raise refuse("weight_dtype", f"{w} weights are a checkpoint's own quantization in SGLang; allowed: bf16, fp16, "
                     "fp32, fp8", "bf16, fp16, fp32, fp8")
    if kv == "fp8":
        g.append(T.arg("--kv-cache-dtype", "fp8_e4m3"))
    elif kv == act:
        g.append(T.arg("--kv-cache-dtype", "auto"))
    else:
        raise refuse("kv_dtype", f"SGLang keeps the KV cache in the activation dtype ({act}) or fp8; allowed: {act}, fp8",
                     f"{act}, fp8")
    if prof.scheduler not in (SchedulerKind.PREFILL_FIRST, SchedulerKind.CHUNKED):
        raise refuse("scheduler", f"SGLang schedules prefill-first or chunked (mixed chunk), not {prof.scheduler.value}",
                     "prefill-first, chunked")
    g += [T.arg("--max-running-requests", prof.max_batch_seqs), T.arg("--chunked-prefill-size", prof.max_batch_tokens),
          T.flag("--enable-mixed-chunk", prof.scheduler is SchedulerKind.CHUNKED),
          T.arg("--mem-fraction-static", memory_fraction_of(prof)), T.arg("--page-size", prof.block_size)]
    if prof.cuda_graph_batch_sizes:
        g.append(T.arg("--cuda-graph-bs", list(prof.cuda_graph_batch_sizes)))
    return [x for x in g if x]


def emit(launch: ServingLaunch, header: str = "") -> str:
    return f"# written for {T.written_for} ({T.source}){header}\n" + render_command(
        ["python", "-m", "sglang.launch_server", *T.arg("--model-path", launch.model_id)], options(launch))


def command_words(launch: ServingLaunch) -> list[str]:
    """The container's command and arguments (Kubernetes manifests)."""
    return ["python", "-m", "sglang.launch_server", *T.arg("--model-path", launch.model_id)] + [
        w for g in options(launch) for w in g]


def _is_program(word: str, _nxt: str) -> bool:
    return word in ("sglang.launch_server", "sglang.launch_server.py") or word.endswith("sglang/launch_server.py")


def read(text: str) -> ServingLaunch:
    """A `python -m sglang.launch_server` command as a ServingLaunch."""
    from gpuplan.workloads.inference.sim.schedulers import SchedulerKind

    _, words = find_command(text, _is_program, expected="python -m sglang.launch_server")
    args = parse_args(words, T)
    args.unmodelled += [f"(positional) {p}" for p in args.positionals]
    name = args.text("--model-path") or ""
    model = model_from_id(name, "model-path")
    dtype = args.choice("--dtype", ("auto", "half", "float16", "bfloat16", "float", "float32"), "auto")
    act = {"half": "fp16", "float16": "fp16", "bfloat16": "bf16", "float": "fp32", "float32": "fp32"}.get(dtype, "bf16")
    kv = args.choice("--kv-cache-dtype", ("auto", "fp8_e5m2", "fp8_e4m3"), "auto")
    adp = args.integer("--dp-size", 1) if args.values.get("--enable-dp-attention") else 1
    if not args.values.get("--enable-dp-attention") and args.integer("--dp-size", 1) > 1:
        args.unmodelled.append(f"--dp-size {args.integer('--dp-size')} (replicas; serve run predicts one)")
    profile = profile_for(
        ENGINE, max_batch_seqs=args.integer("--max-running-requests"),
        max_batch_tokens=args.integer("--chunked-prefill-size"), memory_fraction=args.fraction("--mem-fraction-static"),
        block_size=args.integer("--page-size"), cuda_graph_batch_sizes=args.integers("--cuda-graph-bs"),
        scheduler=SchedulerKind.CHUNKED if args.values.get("--enable-mixed-chunk") else SchedulerKind.PREFILL_FIRST)
    return ServingLaunch(ENGINE, model, name, profile, tp=args.integer("--tp-size", 1), pp=args.integer("--pp-size", 1),
                         ep=args.integer("--ep-size", 1), attention_dp=adp,
                         weight_dtype="fp8" if args.choice("--quantization", ("fp8",)) == "fp8" else act,
                         kv_dtype="fp8" if kv != "auto" else act, unmodelled=tuple(args.unmodelled))
