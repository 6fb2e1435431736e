"""One serving replica (workloads.inference.replica): `serve plan` = `serve run` = `serve frontier` =
`validate` on the same replica and load.

Each test compares two commands' own outputs, so the expected value is the other path's figure, not a
number typed here: what is asserted is that the paths agree (the issue "one path from question to
number": before replica.py, serve plan sized a Llama-3-70B service at 28 H100 where 12 met the
objectives, and serve frontier reported TTFT 1,602 ms where serve run said 408 ms).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.workloads.inference import replica as replica_module
from gpuplan.workloads.inference.replica import BENCHMARK_RUN, STEADY_STATE, Load, LoadKind

H100 = "h100-sxm5-80gb"


def _cli_json(*args: str) -> dict:
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def test_window_rules():
    # STEADY_STATE: a closed loop of 32 simulates max(2000, 4 x 32) = 2000 requests and leaves out its
    # initial burst of 32; of 600 slots it simulates 4 x 600 = 2400. A Poisson loop: 2000 requests, the
    # first 10% (200) left out. A static batch and a burst are measured whole.
    assert STEADY_STATE.simulated_requests(Load.closed(32)) == 2000
    assert STEADY_STATE.simulated_requests(Load.closed(600)) == 2400
    assert STEADY_STATE.warmup_requests(Load.closed(32), 2000) == 32
    assert STEADY_STATE.simulated_requests(Load.poisson(3.0)) == 2000
    assert STEADY_STATE.warmup_requests(Load.poisson(3.0), 2000) == 200
    assert STEADY_STATE.simulated_requests(Load.static(64)) == 64
    assert STEADY_STATE.warmup_requests(Load.burst(500), 500) == 0
    # BENCHMARK_RUN: vLLM / SGLang benchmark scripts count every request of a Poisson run (1,500 when
    # the row states no count); a stated count replaces the rule
    assert BENCHMARK_RUN.simulated_requests(Load.poisson(2.0)) == 1500
    assert BENCHMARK_RUN.warmup_requests(Load.poisson(2.0), 1500) == 0
    assert BENCHMARK_RUN.with_requests(300).simulated_requests(Load.poisson(2.0)) == 300
    assert BENCHMARK_RUN.simulated_requests(Load.closed(8)) == 200


def test_load_splits_over_attention_dp_groups():
    # rate / a; ceil(concurrency / a), ceil(batch / a): 10 req/s over 4 groups is 2.5 each, 10 in flight 3
    assert Load.poisson(10).per_group(4).value == 2.5
    assert Load.closed(10).per_group(4) == Load(LoadKind.CONCURRENCY, 3)
    assert Load.static(9).per_group(2).value == 5


def test_serve_plan_replica_reproduced_by_serve_run():
    # the example: Llama-3-70B at 10 req/s, TTFT <= 1000 ms, TPOT <= 50 ms on H100s
    plan = _cli_json("serve", "plan", "llama-3-70b", "--gpu", H100, "--rate", "10", "--ttft-ms", "1000",
                     "--tpot-ms", "50")
    best = plan["best"]
    per_replica = 10 / best["replicas"]
    run = _cli_json("serve", "run", "llama-3-70b", "--gpu", H100, "--tp", str(best["tp"]), "--rate", repr(per_replica))
    assert run["ttft_p90_ms"] <= 1000 and run["tpot_p90_ms"] <= 50
    assert run["ttft_p90_ms"] == pytest.approx(best["open_loop_ttft_p90_ms"], rel=0.02)
    assert run["tpot_p90_ms"] == pytest.approx(best["open_loop_tpot_p90_ms"], rel=0.02)
    # one replica fewer misses an objective (the count is the fewest for this layout)
    if best["replicas"] > 1:
        fewer = _cli_json("serve", "run", "llama-3-70b", "--gpu", H100, "--tp", str(best["tp"]),
                          "--rate", repr(10 / (best["replicas"] - 1)))
        assert fewer["ttft_p90_ms"] > 1000 or fewer["tpot_p90_ms"] > 50


@pytest.mark.parametrize("tp", [1, 2])
def test_serve_frontier_point_is_serve_run_at_that_concurrency(tp):
    # the frontier's grid: each tp at concurrency 1, 2, 4, ... 256 (the scheduler's sequence cap)
    pts = [p for p in api.serve_frontier("llama-3-8b", H100, input_len=1024, output_len=256).to_dict()["points"]
           if p["tp"] == tp]
    assert sorted(p["concurrency"] for p in pts) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    for p in pts:
        run = api.serve_run("llama-3-8b", H100, tp=tp, concurrency=p["concurrency"], input_len=1024,
                            output_len=256).to_dict()
        assert p["ttft_p90_ms"] == pytest.approx(run["ttft_p90_ms"], rel=1e-12)
        assert p["tokens_per_s_per_gpu"] == pytest.approx(run["output_tokens_per_s"] / tp, rel=1e-12)
        assert p["tokens_per_s_per_user"] == pytest.approx(1e3 / run["tpot_ms"], rel=1e-12)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tensorrt-llm"])
def test_serve_frontier_runs_the_engine_serve_run_runs(engine):
    # one path: `serve frontier --engine E` is `serve run --engine E --concurrency c` at each point (its
    # step limits, memory rule and scheduler), not the generic engine's
    pts = {(p["tp"], p["concurrency"]): p for p in
           api.serve_frontier("llama-3-8b", H100, input_len=1024, output_len=256, engine=engine).to_dict()["points"]}
    for tp, conc in ((1, 8), (2, 64)):
        run = api.serve_run("llama-3-8b", H100, tp=tp, concurrency=conc, input_len=1024, output_len=256,
                            engine=engine).to_dict()
        assert pts[(tp, conc)]["ttft_p90_ms"] == pytest.approx(run["ttft_p90_ms"], rel=1e-12)
        assert pts[(tp, conc)]["tokens_per_s_per_gpu"] == pytest.approx(run["output_tokens_per_s"] / tp, rel=1e-12)


def _brute_force_fewest_gpus(model: str, rate: float, ttft_ms: float, tpot_ms: float, tps, max_replicas: int,
                             **lens) -> int:
    """Every tp and replica count n: `serve run --rate rate / n` meets both p90 objectives?"""
    best = None
    for tp in tps:
        for n in range(1, max_replicas + 1):
            try:
                r = api.serve_run(model, H100, tp=tp, rate=rate / n, **lens).to_dict()
            except Exception:  # the layout does not fit (e.g. 70B on one GPU)
                break
            if r["ttft_p90_ms"] <= ttft_ms and r["tpot_p90_ms"] <= tpot_ms:
                best = min(best or 1 << 30, n * tp)
                break
    assert best is not None
    return best


@pytest.mark.parametrize("model, rate, ttft_ms, tpot_ms, max_replicas, lens", [
    ("llama-3-8b", 12.0, 500.0, 25.0, 8, dict(input_len=1024, output_len=256)),
    ("llama-3-70b", 10.0, 1000.0, 50.0, 6, dict(input_len=1024, output_len=256)),
])
def test_capacity_plan_is_the_brute_force_minimum(model, rate, ttft_ms, tpot_ms, max_replicas, lens):
    tps = (1, 2, 4)
    plan = api.serve_plan(model, H100, rate=rate, ttft_ms=ttft_ms, tpot_ms=tpot_ms, **lens).to_dict()
    plan_tps = {c["tp"] for c in plan["candidates"]}
    brute = _brute_force_fewest_gpus(model, rate, ttft_ms, tpot_ms, sorted(plan_tps & set(tps)) or tps,
                                     max_replicas, **lens)
    searched = [c["gpus"] for c in plan["candidates"] if c["meets_slo"] and c["tp"] in tps]
    assert min(searched) == brute
    assert plan["best"]["gpus"] <= brute


def test_validate_runs_the_same_replica(monkeypatch):
    # a Poisson validation row goes through Replica.run (replica.simulate) with the BENCHMARK_RUN window
    from gpuplan.interfaces.validation.inference import predict_row

    seen = []
    real = replica_module.simulate

    def spy(steps, mem, wl, sched, **kw):
        seen.append((wl.arrival_s.shape[0], kw.get("warmup_requests")))
        return real(steps, mem, wl, sched, **kw)

    monkeypatch.setattr(replica_module, "simulate", spy)
    row = {"id": "x-1", "model": "llama-3-8b", "layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "8",
           "ffn": "14336", "ffn_kind": "swiglu", "vocab": "128256", "system": H100, "num_gpus": "1", "tp": "1",
           "engine": "vllm", "request_rate": "2", "input_len": "512", "output_len": "128", "metric": "ttft_ms",
           "value": "50", "confidence": "high", "source": "test", "notes": ""}
    predict_row(row)
    assert seen == [(1500, 0)]  # BENCHMARK_RUN: 1,500 Poisson requests, all counted
