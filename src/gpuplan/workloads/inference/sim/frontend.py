"""Latency of the serving front-end: what a request spends outside the engine's GPU steps.

A client that measures TTFT through a serving API (vLLM's and SGLang's OpenAI servers with
benchmark_serving / bench_serving, Triton's TensorRT-LLM backend, NIM with genai-perf) times from
sending the request to receiving the first streamed chunk. Beyond the engine steps the simulator
times, that path holds, once per request: HTTP / gRPC parsing, chat templating and tokenisation of
the prompt (10-21 us per token in a C++ server: tenstorrent/tt-inference-server issue #2173, 131
tokens in 1.3-2.8 ms; vLLM, SGLang and Triton's preprocessing model tokenise in Python), the hand-off
to the engine process or thread (vLLM V1's ZMQ between the API server and EngineCore; Triton's
ensemble of preprocessing, engine and postprocessing models), detokenising the first token (vLLM
primes its incremental detokeniser with the prompt: 0.5-1.5 us per prompt token, vLLM PR #51281)
and writing the server-sent event. The first token's latency pays all of it; the later tokens
stream behind the engine steps, so inter-token latency does not:

    TTFT = TTFT_engine + t_frontend;  e2e = e2e_engine + t_frontend;  TPOT and throughput unchanged

t_frontend is the knob `serving.frontend_latency_s`: a prior of 3 ms (a few hundred prompt tokens at
~10 us each plus a millisecond of parsing, IPC and streaming), fitted on the public TTFT rows
measured through a serving API. Offline benchmarks (trtllm-bench, gptSessionBenchmark, vLLM's
benchmark_latency / benchmark_throughput, lmdeploy's profile_generation, MLPerf LoadGen) call the
engine in-process and pay none of it.
"""

from __future__ import annotations

from dataclasses import replace

from gpuplan import knobs
from gpuplan.workloads.inference.sim.simulator import Percentiles, SimResult

FRONTEND_LATENCY_S = knobs.register(
    "serving.frontend_latency_s", unit="s", default=3e-3, low=0.0, high=0.05, prior=3e-3,
    source="fitted on the public TTFT rows measured through a serving API (Triton TensorRT-LLM backend, vLLM "
           "benchmark_serving, NIM genai-perf, SGLang); prior 3 ms: tokenisation at ~10 us per prompt token "
           "(tt-inference-server #2173) + parsing, IPC and streaming",
    scales="TTFT and e2e latency of requests measured through a serving API (HTTP / gRPC front-end)",
    fitted_on=("trtllm014", "vllmci", "nim", "aic"))


def frontend_latency_s() -> float:
    """Seconds a request spends in the serving front-end (the knob serving.frontend_latency_s)."""
    return knobs.value("serving.frontend_latency_s")


def with_frontend_latency(res: SimResult, seconds: float | None = None) -> SimResult:
    """`res` as a client of the serving API sees it (module docstring): TTFT and e2e percentiles
    later by `seconds` (default: the knob serving.frontend_latency_s); TPOT and throughputs unchanged."""
    ms = 1e3 * (frontend_latency_s() if seconds is None else float(seconds))

    def shifted(p: Percentiles) -> Percentiles:
        return Percentiles(p.p50 + ms, p.p90 + ms, p.p99 + ms, p.mean + ms)

    return replace(res, ttft_ms=shifted(res.ttft_ms), e2e_ms=shifted(res.e2e_ms))
