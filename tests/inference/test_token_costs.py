"""Serving cost per request and per million input / output tokens (workloads/inference/plan/token_costs.py),
split between prefill and decode by the engine-step time each phase takes (kernels.prefill_seconds_of_step)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.errors import InputError
from gpuplan.models import load_model
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.memory import memory_plan
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.kernels import StepCoefficients, prefill_seconds_of_step, step_seconds
from gpuplan.workloads.inference.plan.token_costs import pools_token_costs, token_costs
from gpuplan.workloads.inference.sim.arrivals import ArrivalKind, LengthDistribution, make_workload
from gpuplan.workloads.inference.sim.schedulers import SchedulerConfig
from gpuplan.workloads.inference.sim.simulator import simulate

# round numbers chosen for the hand derivations below: overhead 1 ms; decode attention 1e6 B per
# context token over 1e12 B/s HBM (1 ms per 1,000 context tokens); prefill attention 1e6 FLOPs per
# causal pair at 1e15 FLOP/s (1 ms per 1e6 pairs); the prefill KV read term is zero
COEF = StepCoefficients(overhead_s=1e-3, decode_bytes_global=1e6, decode_bytes_window=0.0, decode_flops_global=0.0,
                        decode_flops_window=0.0, hbm_bytes_per_s=1e12, attention_flops_per_s=1e15,
                        prefill_flops_global=1e6, prefill_flops_window=0.0, prefill_bytes_per_token=0.0,
                        step_scale=1.0, verify_tokens=1, drafting=False, draft_ctx_s=0.0)


def test_step_split_by_hand():
    # a mixed step: 3 ms of linear layers, 1 ms of LM head, 8 decoders with 4,000 context tokens
    # (decode attention 4,000 x 1e6 / 1e12 = 4 ms) and a 92-token prompt chunk of 5e6 pairs
    # (5e6 x 1e6 / 1e15 = 5 ms). dt = 1 + 3 + 1 + 4 + 5 = 14 ms.
    dt = step_seconds(COEF, 3e-3, 1e-3, 0.0, 4000, 0, 5e6, 0.0, 0)
    assert dt == pytest.approx(14e-3)
    # shared = 14 - 5 - 4 = 5 ms, split by tokens 92 / (92 + 8): prefill = 5 + 5 x 0.92 = 9.6 ms
    assert prefill_seconds_of_step(COEF, dt, 0.0, 4000, 0, 5e6, 0.0, 0, 92, 100) == pytest.approx(9.6e-3)
    # an all-prefill step is all prefill; an all-decode step none of it
    only_prefill = step_seconds(COEF, 3e-3, 1e-3, 0.0, 0, 0, 5e6, 0.0, 0)
    assert prefill_seconds_of_step(COEF, only_prefill, 0.0, 0, 0, 5e6, 0.0, 0, 92, 92) == only_prefill
    only_decode = step_seconds(COEF, 3e-3, 1e-3, 0.0, 4000, 0, 0.0, 0.0, 0)
    assert prefill_seconds_of_step(COEF, only_decode, 0.0, 4000, 0, 0.0, 0.0, 0, 0, 8) == 0.0
    # attention-DP step scale 2: every term doubles, so does the prefill share (19.2 ms of 28 ms)
    scaled = COEF._replace(step_scale=2.0)
    dt2 = step_seconds(scaled, 3e-3, 1e-3, 0.0, 4000, 0, 5e6, 0.0, 0)
    assert prefill_seconds_of_step(scaled, dt2, 0.0, 4000, 0, 5e6, 0.0, 0, 92, 100) == pytest.approx(19.2e-3)


def test_token_costs_by_hand():
    # 8 GPUs at $2/GPU-hour: C = 16 / 3600 $/s; 4 req/s of 1,000 prompt + 250 output tokens; f = 0.25
    t = token_costs(8, 2.0, 4.0, 1000, 250, 0.25)
    c = 16 / 3600
    assert t.usd_per_request == pytest.approx(c / 4)                                   # 0.001111 $
    assert t.usd_per_million_input_tokens == pytest.approx(0.25 * c / 4000 * 1e6)      # 0.2778 $
    assert t.usd_per_million_output_tokens == pytest.approx(c / 1000 * 1e6)            # 4.444 $ (all-in)
    assert t.usd_per_million_output_tokens_decode == pytest.approx(0.75 * c / 1000 * 1e6)  # 3.333 $
    # the parts add back to the request: 1,000 x 0.2778 + 250 x 3.333 = 1,111.1 = 1e6 x 0.001111
    assert 1000 * t.usd_per_million_input_tokens + 250 * t.usd_per_million_output_tokens_decode == \
        pytest.approx(1e6 * t.usd_per_request)


@given(f=st.floats(0, 1), gpus=st.integers(1, 4096), price=st.floats(0.01, 100), rate=st.floats(0.01, 1e4),
       i=st.integers(1, 1 << 20), o=st.integers(1, 1 << 16))
def test_parts_add_to_the_whole(f, gpus, price, rate, i, o):
    t = token_costs(gpus, price, rate, i, o, f)
    assert i * t.usd_per_million_input_tokens + o * t.usd_per_million_output_tokens_decode == \
        pytest.approx(1e6 * t.usd_per_request, rel=1e-9)
    # total GPU-seconds x price: requests/s x $/request x 3600 s = GPUs x $/GPU-hour
    assert rate * t.usd_per_request * 3600 == pytest.approx(gpus * price, rel=1e-9)


@pytest.mark.parametrize("bad", [dict(gpus=0), dict(usd_per_gpu_hour=-1.0), dict(requests_per_s=0.0),
                                 dict(prefill_time_fraction=1.5), dict(input_tokens=0)])
def test_bad_input_names_the_field(bad):
    args = dict(gpus=1, usd_per_gpu_hour=1.0, requests_per_s=1.0, input_tokens=1, output_tokens=1,
                prefill_time_fraction=0.5) | bad
    with pytest.raises(InputError) as exc:
        token_costs(**args)
    assert exc.value.field == next(iter(bad))


def test_disaggregated_split_is_the_prefill_pools_share():
    # 2 prefill GPUs at $2 + 6 decode GPUs at $3: $22/hour, f = 4 / 22
    pools = [SimpleNamespace(role="prefill", gpus=2, usd_per_gpu_hour=2.0),
             SimpleNamespace(role="decode", gpus=6, usd_per_gpu_hour=3.0)]
    t = pools_token_costs(pools, 1.0, 1000, 100)
    assert t.prefill_time_fraction == pytest.approx(4 / 22)
    assert t.usd_per_request == pytest.approx(22 / 3600)
    assert t.usd_per_million_input_tokens == pytest.approx(4 / 3600 / 1000 * 1e6)
    assert pools_token_costs(pools[:1] + [SimpleNamespace(role="decode", gpus=6, usd_per_gpu_hour=None)], 1, 1, 1) is None


@pytest.fixture(scope="module")
def replica():
    cat = load_catalog()
    g = cat.gpu("h100-sxm5-80gb")
    dep = Deployment(load_model("llama-3-8b"), g, cat.system(g.id))
    return step_time_model(dep), memory_plan(dep)


@pytest.mark.parametrize("event_driven", [True, False])
def test_a_replica_that_only_prefills_spends_every_step_on_prefill(replica, event_driven):
    # one output token per request: the prefill step samples it and the request finishes, so no step
    # decodes and the prefill share of the step time is exactly 1
    steps, mem = replica
    wl = make_workload(np.random.default_rng(0), 200, ArrivalKind.POISSON, input_len=LengthDistribution(1024),
                       output_len=LengthDistribution(1), rate=20.0)
    res = simulate(steps, mem, wl, SchedulerConfig(), event_driven=event_driven)
    assert res.busy_s > 0 and res.prefill_busy_s == res.busy_s and res.prefill_time_fraction == 1.0
    assert res.busy_s <= res.duration_s + 1e-12  # engine steps fit inside the run


def test_longer_outputs_shift_the_cost_to_decode(replica):
    # the same prompts with 1, 64 and 1,024 output tokens: decode's share of the step time grows
    steps, mem = replica
    fractions = []
    for out in (1, 64, 1024):
        wl = make_workload(np.random.default_rng(0), 300, ArrivalKind.POISSON, input_len=LengthDistribution(1024),
                           output_len=LengthDistribution(out), rate=4.0)
        fractions.append(simulate(steps, mem, wl, SchedulerConfig()).prefill_time_fraction)
    assert fractions[0] == 1.0 and fractions[0] > fractions[1] > fractions[2] > 0


def test_serve_run_json_costs_agree_with_the_price(runner):
    from gpuplan.cli.main import app

    r = runner.invoke(app, ["serve", "run", "llama-3-8b", "--rate", "2", "--input-len", "1024", "--output-len", "128",
                            "--usd-per-gpu-hour", "3.6", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    # 1 GPU at $3.6/hour = $0.001/s: $ per request x requests/s = 0.001
    assert d["usd_per_request"] * d["requests_per_s"] == pytest.approx(0.001)
    assert d["usd_per_million_output_tokens"] == pytest.approx(0.001 / (d["requests_per_s"] * 128) * 1e6)
    assert 1024 * d["usd_per_million_input_tokens"] + 128 * d["usd_per_million_output_tokens_decode"] == \
        pytest.approx(1e6 * d["usd_per_request"])
    assert 0 < d["prefill_time_fraction"] < 1
