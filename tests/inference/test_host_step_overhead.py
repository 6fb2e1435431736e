"""Host time per running sequence of the Python-driven engines (issue 30): vLLM, SGLang and TGI walk
their running requests in Python every step on the step's critical path
(Deployment.python_step_loop, cost/operators.HOST_SECONDS_PER_SEQUENCE); the C++ batch managers
(TensorRT-LLM, TurboMind) and gpuplan's generic engine do not pay it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import knobs
from gpuplan.catalog import load_catalog
from gpuplan.models import load_model
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.operators import step_time_model
from gpuplan.workloads.inference.engines import ENGINES, GENERIC

KNOB = "serving.host_seconds_per_sequence"


def _dep(python_step_loop: bool) -> Deployment:
    cat = load_catalog()
    return Deployment(load_model("llama-3-8b"), cat.gpu("h100-sxm5-80gb"), cat.system("dgx-h100"),
                      python_step_loop=python_step_loop)


def test_engines_that_drive_steps_from_python():
    """vLLM (EngineCore.step: schedule, execute, update_from_output in one Python loop), SGLang
    (scheduler.py's Python event loop) and TGI (its Python model server) pay host time per sequence;
    TensorRT-LLM, lmdeploy (C++ batch managers) and the generic engine do not."""
    flags = {name: p.deployment_options()["python_step_loop"] for name, p in ENGINES.items()}
    assert flags == {"tensorrt-llm": False, "vllm": True, "sglang": True, "lmdeploy": False, "tgi": True}
    assert GENERIC.deployment_options()["python_step_loop"] is False


def test_knob_is_fitted_from_a_sourced_prior():
    """Prior 100 us per sequence (vLLM RFC #6801: 20 ms of host work between steps at batch 200);
    default the fit on the public rows of the Python engines (81 us)."""
    k = knobs.REGISTRY[KNOB]
    assert k.prior == pytest.approx(1e-4)  # 20 ms / 200 sequences
    assert k.default == pytest.approx(8.1e-5)
    assert set(k.fitted_on) >= {"vllmci", "rocmvllm-mi300x", "dcrh200"}


def test_a_step_of_n_sequences_costs_n_times_the_knob_more():
    """Hand derivation: the same deployment with and without a Python step loop differs by
    n x HOST_SECONDS_PER_SEQUENCE in a decode step of n sequences (the term rides on the LM-head
    table, one entry per sampled sequence), and by nothing else."""
    with knobs.overridden({KNOB: 5e-5}):
        py, cpp = step_time_model(_dep(True)), step_time_model(_dep(False))
        for n in (1, 64, 256, 3200):
            extra = py.decode_step_time(n, 1000.0) - cpp.decode_step_time(n, 1000.0)
            assert extra == pytest.approx(n * 5e-5, rel=1e-9)  # 256 sequences: 12.8 ms
        np.testing.assert_array_equal(py.linear_table, cpp.linear_table)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=1, max_value=4096), st.floats(min_value=0.0, max_value=5e-4))
def test_host_time_is_linear_in_sequences_and_never_negative(n, per_seq):
    """Property: the host term is exactly n x value for any n and knob value in its range, so a
    Python engine's step is never faster than the C++ engine's."""
    with knobs.overridden({KNOB: per_seq}):
        py, cpp = step_time_model(_dep(True)), step_time_model(_dep(False))
        diff = float(py.logits_time(np.array([n]))[0] - cpp.logits_time(np.array([n]))[0])
    assert diff == pytest.approx(n * per_seq, rel=1e-9, abs=1e-15)
    assert diff >= 0.0


def test_serve_run_with_vllm_pays_it_and_tensorrt_llm_does_not():
    """The one path: `serve run --engine vllm` simulates the host time (a closed loop of 64 is
    slower per output token with the knob on), TensorRT-LLM's run is unchanged by the knob."""
    from gpuplan import api

    def tpot(engine, value):
        with knobs.overridden({KNOB: value}):
            return api.serve_run("llama-3-8b", input_len=128, output_len=128, concurrency=64,
                                 engine=engine).to_dict()["tpot_ms"]

    assert tpot("vllm", 1e-4) > tpot("vllm", 0.0) * 1.1  # 64 x 0.1 ms = 6.4 ms on a ~10-20 ms step
    assert tpot("tensorrt-llm", 1e-4) == tpot("tensorrt-llm", 0.0)
