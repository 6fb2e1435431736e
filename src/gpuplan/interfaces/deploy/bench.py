"""The benchmark that measures a serving prediction's own workload, and the way its result comes back
(`serve run|plan ... --emit vllm-bench|sglang-bench|trtllm-bench`; docs/deploy.md "The loop").

The script has three parts:
  1. the benchmark client's command against the engine the prediction ran (started with `--emit
     vllm|sglang|trtllm`), with the prediction's load and lengths: a Poisson open loop at the
     replica's rate (`--request-rate`, finite: Poisson arrivals) or a closed loop (`--max-concurrency`
     at an infinite rate); fixed input / output lengths (vLLM: `--random-range-ratio 0`, lengths drawn
     in [len x (1 - r), len x (1 + r)]; SGLang: `--random-range-ratio 1`, drawn in [len x r, len];
     TensorRT-LLM's script: fixed by default), every output run to its length (`--ignore-eos`; SGLang
     ignores EOS by default); the request count gpuplan simulated (Window.simulated_requests of
     workloads.inference.replica.STEADY_STATE: 2,000 for an open loop, max(2,000, 4 x concurrency)
     closed; gpuplan leaves the first 10% / the first burst out of its statistics, the benchmark
     counts every request);
  2. the run configuration `gpuplan calibrate import` needs (the model's shape, the GPU, tp / ep /
     attention DP, formats; SCHEMA.md inference columns) as a TOML here-document;
  3. `gpuplan calibrate import KIND RESULT --config TOML --out rows.csv`, whose rows `gpuplan
     calibrate fit` turns into a profile that the next `serve plan --profile` runs with.

Only the fixed-length, no-speculation, no-prefix-cache workloads the benchmarks' random datasets
state are written; anything else is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.interfaces.deploy.commandline import render_command
from gpuplan.interfaces.deploy.launch import ServingLaunch
from gpuplan.interfaces.deploy.options import SGLANG_BENCH, TRTLLM_BENCH, VLLM_BENCH

#: bench target -> (option table, the engine it measures, calibrate import KIND, program words, result file)
BENCHES = {
    "vllm-bench": (VLLM_BENCH, "vllm", "vllm", ["vllm", "bench", "serve"], "gpuplan-bench.json"),
    "sglang-bench": (SGLANG_BENCH, "sglang", "sglang", ["python", "-m", "sglang.bench_serving"], "gpuplan-bench.jsonl"),
    "trtllm-bench": (TRTLLM_BENCH, "tensorrt-llm", "trtllm",
                     ["python", "-m", "tensorrt_llm.serve.scripts.benchmark_serving"], "gpuplan-bench.json"),
}
CONFIG_FILE = "gpuplan-bench.toml"


@dataclass(frozen=True)
class Workload:
    """The load one replica ran in the prediction: `rate` (requests/s, Poisson) or `concurrency`."""

    input_len: int
    output_len: int
    requests: int
    rate: float | None = None
    concurrency: int | None = None


def workload(rate: float | None, concurrency: int | None, input_len: int, output_len: int) -> Workload:
    """The Workload of a prediction's load, with the request count it simulated (module docstring)."""
    from gpuplan.workloads.inference.replica import STEADY_STATE, Load, LoadKind

    if rate is not None:
        load = Load(LoadKind.RATE, float(rate))
    elif concurrency is not None:
        load = Load(LoadKind.CONCURRENCY, int(concurrency))
    else:
        raise InputError("load: the benchmarks measure a rate or a concurrency; give --rate or --concurrency",
                         field="load", allowed="rate, concurrency")
    return Workload(int(input_len), int(output_len), STEADY_STATE.simulated_requests(load), rate,
                    None if rate is not None else int(concurrency))


def command_groups(target: str, w: Workload, model_id: str) -> tuple[list[str], list[list[str]]]:
    """(program words, option groups) of the benchmark command (module docstring)."""
    T, _, _, program, result = BENCHES[target]
    g = [T.arg("--backend", T.option("--backend").choices[0]), T.arg("--model", model_id),
         T.arg("--dataset-name", "random"), T.arg("--random-input-len", w.input_len),
         T.arg("--random-output-len", w.output_len)]
    if target == "vllm-bench":
        g.append(T.arg("--random-range-ratio", 0.0))
    elif target == "sglang-bench":
        g.append(T.arg("--random-range-ratio", 1.0))
    else:
        g.append(T.flag("--random-ids"))
    g.append(T.arg("--num-prompts", w.requests))
    if w.rate is not None:
        g.append(T.arg("--request-rate", w.rate))
    else:
        g.append(T.arg("--max-concurrency", w.concurrency))
    if target == "sglang-bench":
        g.append(T.arg("--output-file", result))
    else:
        g += [T.flag("--ignore-eos"), T.arg("--percentile-metrics", "ttft,tpot,itl,e2el"), T.flag("--save-result"),
              T.arg("--result-filename", result)]
    return program, g


def run_config(launch: ServingLaunch, system: str) -> dict[str, object]:
    """The SCHEMA.md inference columns `calibrate import` needs for the measured instance (`system`: the
    catalog system id of its node, which sets the TP all-reduce path)."""
    m = launch.model
    cfg: dict[str, object] = {"model": m.name, "layers": m.layers, "hidden": m.hidden, "heads": m.heads,
                              "kv_heads": m.kv_heads, "ffn": m.ffn, "ffn_kind": m.ffn_kind.value, "vocab": m.vocab}
    if m.moe is not None:
        cfg.update(moe_experts=m.moe.num_experts, moe_topk=m.moe.top_k, moe_ffn=m.moe.expert_ffn)
    cfg.update(system=system, num_gpus=launch.gpus, tp=launch.tp, pp=launch.pp, ep=launch.ep,
               attention_dp=launch.attention_dp, weight_dtype=launch.weight_dtype, kv_dtype=launch.kv_dtype)
    return cfg


def _toml(cfg: dict[str, object]) -> str:
    return "\n".join(f"{k} = {v!r}" if isinstance(v, (int, float)) else f'{k} = "{v}"' for k, v in cfg.items())


def emit(target: str, w: Workload, launch: ServingLaunch, system: str, header: str = "") -> str:
    """The benchmark script of `target` for one replica (module docstring)."""
    T, engine, kind, _, result = BENCHES[target]
    if launch.target != engine:
        raise InputError(f"--emit {target}: measures {engine}; the prediction ran {launch.target}", field="emit",
                         allowed=engine)
    program, groups = command_groups(target, w, launch.model_id)
    load = f"Poisson {w.rate:g} requests/s" if w.rate is not None else f"closed loop of {w.concurrency}"
    return (f"# written for {T.written_for} ({T.source}){header}\n"
            f"# measures one replica under the prediction's load: {load}, {w.input_len} -> {w.output_len} tokens, "
            f"{w.requests} requests (start the server first: --emit {kind})\n"
            + render_command(program, groups)
            + f"# the run configuration of the measured instance, for calibrate import\n"
            f"cat > {CONFIG_FILE} <<'EOF'\n{_toml(run_config(launch, system))}\nEOF\n"
            f"# the measurement as rows, fitted into a profile the next plan runs with (docs/calibration.md)\n"
            f"gpuplan calibrate import {kind} {result} --config {CONFIG_FILE} --out gpuplan-measured.csv\n")
