"""Early-stopped recompute by the run's era and stack (`TrainPlan.checkpoint_early_stop`,
`workloads.training.step.checkpoint_early_stop`, `interfaces.validation.training.checkpoint_early_stop_from_row`).

torchtitan's full AC was `ptd_checkpoint_wrapper(module, preserve_rng_state=False)` (non-reentrant, early stop on)
until its PR #1580 (commit 25413d2, 2025-08-29) passed `early_stop=ac_config.early_stop` (default False). Shapes:
Llama-3-8B (hidden 4096, SwiGLU ffn 14336, 32 layers: Meta's config.json), one sequence of 8192 tokens per
micro-batch: the down projection is one GEMM of t x h x f = 8192 x 4096 x 14336 per layer.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from typer.testing import CliRunner

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.errors import InputError
from gpuplan.interfaces.api.checkpoint_early_stop_option import checkpoint_early_stop_fields
from gpuplan.interfaces.api.deploy import read_training
from gpuplan.interfaces.deploy import torchtitan
from gpuplan.interfaces.validation.training import checkpoint_early_stop_from_row
from gpuplan.models import load_model
from gpuplan.specs import Precision, Recompute, Sharding, TrainPlan
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.plan_search import SearchSpace, search_plans
from gpuplan.workloads.training.step import checkpoint_early_stop
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.compute import gemm_seconds, layer_compute
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext

H, F, LAYERS, SEQ = 4096, 14336, 32, 8192
runner = CliRunner()


@pytest.fixture(scope="module")
def h100():
    c = load_catalog()
    system = c.system("dgx-h100")
    return system, c.gpu(system.gpu)


@pytest.fixture(scope="module")
def llama():
    return load_model("llama-3-8b")


def _ctx(h100, llama, early_stop=None, precision=Precision.BF16, framework=Framework.TORCHTITAN):
    system, gpu = h100
    return StepContext.build(llama, system, gpu, SEQ, precision=precision, framework=framework,
                             checkpoint_early_stop=early_stop)


def _skipped(ctx, mb=1):
    g = PlanAxes.build(ctx, 1, 1, 8, 1, 1, 1, mb, 1, RecomputeCode.FULL, False, ShardingCode.ZERO3)
    lc = layer_compute(ctx, g)
    return float(lc.layer_fwd - lc.layer_recompute), lc


def test_llama_shape(llama):
    assert (llama.hidden, llama.ffn, llama.layers) == (H, F, LAYERS)


def test_torchtitan_default_recomputes_whole_forward(h100, llama):
    # since PR #1580 torchtitan passes early_stop=False: nothing of the forward is skipped
    ctx = _ctx(h100, llama)
    assert not ctx.checkpoint_early_stop
    assert _skipped(ctx)[0] == 0.0


def test_pre_1580_torchtitan_skips_the_down_projection(h100, llama):
    # early stop: the recompute ends at the last saved tensor, w2's input -> one t x h x f GEMM skipped per layer
    ctx = _ctx(h100, llama, early_stop=True)
    assert checkpoint_early_stop.stops_before_down_projection(ctx)
    skipped, lc = _skipped(ctx)
    down = float(gemm_seconds(ctx, SEQ, H, F))
    assert skipped == pytest.approx(down, rel=1e-12)
    # SwiGLU: down f h of the forward GEMMs q h^2 + kv 2 x h x 1024 (8 KV heads of 128) + out h^2 + up/gate 2 f h
    # + down f h = 2 h^2 + 2048 h + 3 f h per token: 14336 / (8192 + 2048 + 43008) = 0.2706 of the GEMM FLOPs
    gemm_fwd = float(lc.qkv + lc.out + lc.dense_up + lc.dense_down)
    assert skipped / gemm_fwd == pytest.approx(14336 / (8192 + 2048 + 3 * 14336), rel=0.03)


def test_step_recompute_term_of_a_pre_1580_plan(h100, llama):
    # 8 GPUs FSDP, 1 x 8192 tokens, global batch 16 -> 2 micro-batches of 32 layers:
    # recompute_s = 2 x 32 x (layer forward - down projection), against 2 x 32 x layer forward by default
    system, gpu = h100
    base = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, seq_len=SEQ, recompute=Recompute.FULL,
                sharding=Sharding.FSDP, framework=Framework.TORCHTITAN)
    early = estimate_step_time(llama, system, TrainPlan(**base, checkpoint_early_stop=True), gpu)
    late = estimate_step_time(llama, system, TrainPlan(**base), gpu)
    ctx = _ctx(h100, llama)
    down = float(gemm_seconds(ctx, SEQ, H, F))
    assert late.breakdown_s["recompute_s"] - early.breakdown_s["recompute_s"] == pytest.approx(2 * LAYERS * down,
                                                                                                rel=1e-9)
    assert sum(early.breakdown_s.values()) == pytest.approx(early.step_time_s)


def test_fp8_down_projection_reruns(h100, llama):
    # torchao Float8Linear is an autograd.Function: its saves are packed after its GEMM ran (python_function.cpp
    # THPFunction_apply), so early stop cuts nothing of the fp8 GEMM
    ctx = _ctx(h100, llama, early_stop=True, precision=Precision.FP8)
    assert ctx.low_precision and not checkpoint_early_stop.stops_before_down_projection(ctx)
    assert _skipped(ctx)[0] == 0.0


def test_compiled_blocks_never_recompute_the_down_projection(h100, llama):
    # torch.compile'd blocks: AOTAutograd's backward graph holds only what the gradients read (partitioners.py
    # `_extract_fwd_bwd_modules`); fc2's output feeds no backward, so its GEMM is not recomputed, whatever
    # early_stop says and in fp8 too: one t x h x f GEMM per layer
    system, gpu = h100
    for precision in (Precision.BF16, Precision.FP8):
        ctx = StepContext.build(llama, system, gpu, SEQ, precision=precision, framework=Framework.TORCHTITAN,
                                compiled_model=True, checkpoint_early_stop=False)
        assert checkpoint_early_stop.stops_before_down_projection(ctx)
        skipped, _ = _skipped(ctx)
        assert skipped == pytest.approx(float(gemm_seconds(ctx, SEQ, H, F)), rel=1e-12)


def test_plan_field_defaults_and_refusals():
    assert TrainPlan(framework=Framework.FSDP).checkpoint_stops_early
    assert not TrainPlan(framework=Framework.TORCHTITAN).checkpoint_stops_early
    assert TrainPlan(framework=Framework.TORCHTITAN, checkpoint_early_stop=True).execution.checkpoint_early_stop
    assert not TrainPlan(framework=Framework.FSDP, checkpoint_early_stop=False).checkpoint_stops_early
    # the dump leaves the field out when unset (hashes of older plans unchanged) and round-trips when set
    assert "checkpoint_early_stop" not in TrainPlan(framework=Framework.TORCHTITAN).model_dump()
    p = TrainPlan(framework=Framework.TORCHTITAN, checkpoint_early_stop=True)
    assert TrainPlan.model_validate(p.model_dump()) == p
    for framework in (Framework.MEGATRON, Framework.DEEPSPEED, Framework.MAXTEXT):
        with pytest.raises(ValidationError, match="checkpoint_early_stop true needs"):
            TrainPlan(framework=framework, checkpoint_early_stop=True)
        assert TrainPlan(framework=framework, checkpoint_early_stop=False).checkpoint_stops_early is False


def _row(source="", notes="", framework="torchtitan"):
    return {"source": source, "notes": notes, "framework": framework}


@pytest.mark.parametrize("row, stops", [
    # torchtitan benchmark document of 2024-12, before PR #1580 (2025-08-29)
    (_row("pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Table 2"), True),
    (_row("pytorch/torchtitan@b5bcd76c66d0:benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md"), True),
    # an August 2025 document may postdate the merge of the 29th: the default holds
    (_row("benchmarks/x_2025-08_y.md"), False),
    (_row("benchmarks/x_202510_y.md"), False),
    # no date: the default (the current release)
    (_row("pytorch/torchtitan docs/performance.md"), False),
    # PyTorch 2.8 lacks checkpoint's early_stop argument (pytorch PR #160781, first in 2.9): before the PR
    (_row("benchmarks/x_202510_y.md", "torch 2.8 nightly"), True),
    (_row("", "PyTorch 2.9, torchao 0.14"), False),
    # other stacks keep their framework's default
    (_row("benchmarks/x_202412_y.md", framework="fsdp"), False),
])
def test_validation_rule_reads_the_run_date(row, stops):
    framework = Framework(row["framework"])
    assert checkpoint_early_stop_from_row(row, framework) is stops


def test_option_fields_and_errors():
    assert checkpoint_early_stop_fields(None, Framework.MEGATRON) == {}
    assert checkpoint_early_stop_fields(True, Framework.TORCHTITAN) == {"checkpoint_early_stop": True}
    assert checkpoint_early_stop_fields(False, Framework.FSDP) == {"checkpoint_early_stop": False}
    with pytest.raises(InputError) as e:
        checkpoint_early_stop_fields(True, Framework.DEEPSPEED)
    assert e.value.field == "checkpoint_early_stop"


def test_search_refuses_early_stop_on_reentrant_stacks(h100, llama):
    system, gpu = h100
    with pytest.raises(InputError) as e:
        search_plans(llama, system, gpu, 8, SearchSpace(seq_len=SEQ, checkpoint_early_stop=True),
                     framework=Framework.MEGATRON)
    assert e.value.field == "checkpoint_early_stop"


TRAIN = ["train", "llama-3-8b", "--gpus", "8", "--system", "dgx-h100", "--framework", "torchtitan", "--tp", "1",
         "--pp", "1", "--dp", "8", "--cp", "1", "--micro-batch", "1", "--seq-len", "8192", "--sharding", "fsdp",
         "--recompute", "full", "--json"]


def test_cli_option_changes_the_recompute_term():
    out = {}
    for opt in ("", "--checkpoint-early-stop", "--no-checkpoint-early-stop"):
        r = runner.invoke(app, TRAIN + ([opt] if opt else []))
        assert r.exit_code == 0, r.output
        out[opt] = json.loads(r.stdout)
    assert [out[k]["best_plan"]["checkpoint_early_stop"] for k in out] == [False, True, False]
    assert (out["--checkpoint-early-stop"]["step_breakdown_s"]["recompute_s"]
            < out[""]["step_breakdown_s"]["recompute_s"])


def test_cli_refuses_early_stop_on_megatron():
    r = runner.invoke(app, ["train", "llama-3-8b", "--gpus", "8", "--framework", "megatron", "--checkpoint-early-stop"])
    assert r.exit_code == 2
    assert "--checkpoint-early-stop" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_torchtitan_config_round_trip():
    # torchtitan v0.2.2 ActivationCheckpoint.early_stop (job_config.py): read from a config and written back
    text = ('[model]\nname = "llama3"\nflavor = "8B"\n[parallelism]\ndata_parallel_shard_degree = 8\n'
            '[activation_checkpoint]\nmode = "full"\nearly_stop = true\n')
    launch = read_training(text)
    assert launch.plan.checkpoint_early_stop is True and launch.plan.recompute is Recompute.FULL
    assert "early_stop = true" in torchtitan.emit(launch)
    plain = read_training(text.replace("early_stop = true\n", ""))
    assert plain.plan.checkpoint_early_stop is None and "early_stop" not in torchtitan.emit(plain)


@settings(max_examples=20, deadline=None)
@given(mb=st.integers(1, 8), seq_choice=st.sampled_from([2048, 4096, 8192]), early=st.sampled_from([None, True, False]),
       fp8=st.booleans(), compiled=st.booleans())
def test_skipped_is_the_down_projection_or_nothing(h100, llama, mb, seq_choice, early, fp8, compiled):
    system, gpu = h100
    ctx = StepContext.build(llama, system, gpu, seq_choice, precision=Precision.FP8 if fp8 else Precision.BF16,
                            framework=Framework.TORCHTITAN, checkpoint_early_stop=early, compiled_model=compiled)
    skipped, lc = _skipped(ctx, mb)
    expected = float(lc.dense_down) if (compiled or (early and not fp8)) else 0.0
    assert skipped == pytest.approx(expected, abs=1e-15)
    assert 0.0 < float(lc.layer_recompute) <= float(lc.layer_fwd)


def test_web_api_takes_the_option_and_answers_4xx():
    from fastapi.testclient import TestClient

    from gpuplan.web.app import create_app

    client = TestClient(create_app("127.0.0.1", 8000), base_url="http://127.0.0.1:8000", raise_server_exceptions=False)
    body = {"model": "llama-3-8b", "gpus": 8, "framework": "torchtitan", "tp": 1, "pp": 1, "dp": 8, "cp": 1,
            "micro_batch": 1, "seq_len": 8192, "sharding": "fsdp", "recompute": "full"}
    on = client.post("/api/v1/train", json={**body, "checkpoint_early_stop": True}).json()
    off = client.post("/api/v1/train", json=body).json()
    assert on["best_plan"]["checkpoint_early_stop"] and not off["best_plan"]["checkpoint_early_stop"]
    assert on["step_breakdown_s"]["recompute_s"] < off["step_breakdown_s"]["recompute_s"]
    r = client.post("/api/v1/train", json={"model": "llama-3-8b", "gpus": 8, "framework": "megatron",
                                           "checkpoint_early_stop": True})
    assert r.status_code == 400 and r.json()["error"]["field"] == "checkpoint_early_stop"
