"""Front-end latency of a serving API (workloads.inference.sim.frontend): the first token and the end of
a request measured through the API pay it once; TPOT and throughput do not."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from gpuplan import knobs
from gpuplan.interfaces.validation.inference import predict_row
from gpuplan.workloads.inference.sim.frontend import with_frontend_latency
from gpuplan.workloads.inference.sim.simulator import Percentiles, SimResult


def _result() -> SimResult:
    return SimResult(requests=2, completed=2, duration_s=1.0,
                     ttft_ms=Percentiles(10.0, 12.0, 13.0, 11.0), tpot_ms=Percentiles(5.0, 6.0, 7.0, 5.5),
                     e2e_ms=Percentiles(100.0, 120.0, 130.0, 110.0), output_tokens_per_s=200.0,
                     total_tokens_per_s=400.0, requests_per_s=2.0, mean_in_flight=0.22, steps=40, preemptions=0,
                     kv_time_s=np.zeros(0), kv_bytes=np.zeros(0))


def test_shift_of_ttft_and_e2e_only():
    # 4 ms of front-end: every TTFT and e2e percentile + 4 ms; TPOT (later tokens stream behind the
    # engine steps) and the throughputs unchanged
    out = with_frontend_latency(_result(), 4e-3)
    assert (out.ttft_ms.p50, out.ttft_ms.p90, out.ttft_ms.p99, out.ttft_ms.mean) == pytest.approx((14, 16, 17, 15))
    assert (out.e2e_ms.p50, out.e2e_ms.mean) == pytest.approx((104, 114))
    assert out.tpot_ms == _result().tpot_ms
    assert (out.output_tokens_per_s, out.requests_per_s) == (200.0, 2.0)


def test_default_is_the_knob():
    with knobs.overridden({"serving.frontend_latency_s": 7e-3}):
        assert with_frontend_latency(_result()).ttft_ms.mean == pytest.approx(11.0 + 7.0)


def _rows(validation_dir):
    return {r["id"]: r for r in csv.DictReader(open(validation_dir / "inference.csv", encoding="utf-8"))}


def test_online_rows_pay_it_offline_rows_do_not(validation_dir):
    rows = _rows(validation_dir)
    # trtllm014-1: Triton TensorRT-LLM backend at Poisson 2 req/s: TTFT + 5 ms with a 5 ms front-end
    # (the simulation is seeded: the engine part is the same in both runs)
    online = rows["trtllm014-1"]
    with knobs.overridden({"serving.frontend_latency_s": 0.0}):
        engine_only = predict_row(online).value
    with knobs.overridden({"serving.frontend_latency_s": 5e-3}):
        assert predict_row(online).value == pytest.approx(engine_only + 5.0, rel=1e-9)
        # its TPOT row (trtllm014-2, same run) does not move
        tpot = predict_row(rows["trtllm014-2"]).value
    with knobs.overridden({"serving.frontend_latency_s": 0.0}):
        assert predict_row(rows["trtllm014-2"]).value == pytest.approx(tpot, rel=1e-12)
    # trtllm061-9: gptSessionBenchmark, a static batch in-process: no front-end
    offline = rows["trtllm061-9"]
    with knobs.overridden({"serving.frontend_latency_s": 0.0}):
        a = predict_row(offline).value
    with knobs.overridden({"serving.frontend_latency_s": 5e-3}):
        assert predict_row(offline).value == a


def test_serve_run_reports_what_an_api_client_sees():
    # `gpuplan serve` (service.serve_estimate) adds the front-end latency to TTFT and e2e of loads
    # served through an API (rate, concurrency), not to a static batch (an in-process run):
    # TTFT(knob 3 ms) - TTFT(knob 0) = 3 ms exactly, TPOT and throughput unchanged
    from gpuplan.catalog import load_catalog
    from gpuplan.models import load_model
    from gpuplan.workloads.inference.cost.deployment import Deployment
    from gpuplan.workloads.inference.plan.service import serve_estimate

    cat = load_catalog()
    gpu = cat.gpu("h100-sxm5-80gb")
    dep = Deployment(load_model("llama-3-8b"), gpu, cat.system(gpu.id))
    for load in ({"concurrency": 8}, {"rate": 2.0}):
        with knobs.overridden({"serving.frontend_latency_s": 0.0}):
            base = serve_estimate(dep, input_len=512, output_len=64, requests=200, **load)
        with knobs.overridden({"serving.frontend_latency_s": 3e-3}):
            api = serve_estimate(dep, input_len=512, output_len=64, requests=200, **load)
        assert api.ttft_ms - base.ttft_ms == pytest.approx(3.0)
        assert api.e2e_p90_ms - base.e2e_p90_ms == pytest.approx(3.0)
        assert api.tpot_ms == base.tpot_ms and api.output_tokens_per_s == base.output_tokens_per_s
        assert api.frontend_latency_ms == pytest.approx(3.0)
    batch = serve_estimate(dep, input_len=512, output_len=64, batch=4)
    assert batch.frontend_latency_ms == 0.0
