"""Megatron's deterministic mode and `--no-gradient-accumulation-fusion` as step-time inputs
(workloads.training.step.deterministic / .grad_accumulation), the row rules that read them from the
notes, and the `train` / `plan` options (api.megatron_modes)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.cli.main import app
from gpuplan.interfaces.validation.training import (
    deterministic_stated, grad_accum_fusion_off_stated, plan_from_row, predict_row,
)
from gpuplan.models import load_model, model_from_arch_row
from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s
from gpuplan.specs import TrainPlan
from gpuplan.specs.execution import Framework
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.deterministic import collective_system
from gpuplan.workloads.training.step.inputs import StepContext

#: a 4-layer GPT-7B-shaped model (the megft rows' layer: GQA 32 / 8, 4h GeLU MLP), untied 32000 vocabulary
ROW = {"id": "x-1", "model": "m", "layers": "4", "hidden": "4096", "heads": "32", "kv_heads": "8", "ffn": "16384",
       "ffn_kind": "gelu", "vocab": "32000", "seq_len": "8192", "system": "dgx-h100", "num_gpus": "8", "tp": "1",
       "pp": "1", "dp": "8", "micro_batch": "1", "global_batch": "16", "recompute": "none", "precision": "bf16",
       "framework": "megatron", "metric": "iteration_time_s",
       "notes": "CI golden values. Deterministic mode, NCCL_ALGO=Ring, --no-gradient-accumulation-fusion, TransformerEngine."}
PLAIN_NOTES = "CI golden values. NCCL_ALGO=Ring, TransformerEngine."


def _step(model, system_id, plan):
    cat = load_catalog()
    system = cat.system(system_id)
    return estimate_step_time(model, system, plan, cat.gpu(system.gpu))


def _plan(**kw):
    base = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=16, seq_len=8192, sharding="zero1")
    return TrainPlan(**{**base, **kw})


def test_deterministic_dense_operators_take_the_catalogs_four_percent_longer():
    # Megatron-LM docs/developer/determinism/op-catalog.md "Performance Notes": "approximately four
    # percent on a large dense model"; compute (forward + backward + head) x 1.04, the collectives of a
    # DGX H100 (no NVLS) unchanged
    model = model_from_arch_row(ROW)
    plain = _step(model, "dgx-h100", _plan())
    det = _step(model, "dgx-h100", _plan(deterministic=True))
    assert det.breakdown_s["compute_s"] == pytest.approx(1.04 * plain.breakdown_s["compute_s"], rel=1e-12)
    assert det.breakdown_s["dp_comm_s"] == pytest.approx(plain.breakdown_s["dp_comm_s"], rel=1e-12)
    assert det.breakdown_s["optimizer_s"] == plain.breakdown_s["optimizer_s"]


def test_deterministic_moe_operators_take_the_catalogs_seventeen_percent_longer():
    # op-catalog.md: "approximately 17% on a hybrid MoE model" (MoE-heavy models pay more): a model with
    # MoE layers gets the MoE class's figure
    model = load_model("mixtral-8x7b")
    kw = dict(tp=1, pp=1, dp=8, ep=8, micro_batch=1, global_batch=8, seq_len=4096, sharding="zero1")
    plain = _step(model, "dgx-h100", TrainPlan(**kw))
    det = _step(model, "dgx-h100", TrainPlan(**kw, deterministic=True))
    assert det.breakdown_s["compute_s"] == pytest.approx(1.17 * plain.breakdown_s["compute_s"], rel=1e-12)


def test_deterministic_collectives_run_without_nvls():
    # megatron/training/determinism.py admits NCCL_ALGO only from {Ring, CollnetDirect, CollnetChain, ^NVLS}
    cat = load_catalog()
    gb200 = cat.system("gb200-nvl72")
    assert gb200.nvls
    assert collective_system(gb200, True).nvls is False
    assert collective_system(gb200, False) is gb200
    ctx = StepContext.build(model_from_arch_row(ROW), gb200, cat.gpu(gb200.gpu), 8192, deterministic=True)
    assert ctx.system.nvls is False and ctx.deterministic


def test_unfused_accumulation_adds_the_separate_gradients_write_and_read():
    # per linear weight element and micro-batch: the bf16 wgrad written (2 B) and read back by the DDP
    # hook's main_grad.add_ (2 B); fused, the GEMM epilogue reads / writes main_grad in both cases.
    # Linear weights of the 4-layer model: QKV 4096 x (4096 + 2 x 1024) = 25,165,824, output 4096^2 =
    # 16,777,216, MLP 2 x 4096 x 16384 = 134,217,728 -> 176,160,768 a layer; untied head 32000 x 4096 =
    # 131,072,000; 4 x 176,160,768 + 131,072,000 = 835,715,072 (norm weights, 4 x 8192 + 4096, are < 1e-4
    # of it). ZeRO-1 on 8 GPUs, global batch 16: 2 micro-batches, pp 1 (no bubble).
    model = model_from_arch_row(ROW)
    assert not model.tied_embeddings
    cat = load_catalog()
    hbm = memory_bandwidth_bytes_s(cat.gpu(cat.system("dgx-h100").gpu))
    expected = 2 * (2.0 + 2.0) * 835_715_072 / hbm
    fused = _step(model, "dgx-h100", _plan())
    unfused = _step(model, "dgx-h100", _plan(grad_accum_fusion=False))
    assert unfused.step_time_s - fused.step_time_s == pytest.approx(expected, rel=1e-3)
    # only Megatron accumulates through main_grad this way: another stack is unchanged
    fsdp = dict(framework="fsdp", sharding="fsdp")
    assert _step(model, "dgx-h100", _plan(grad_accum_fusion=False, **fsdp)).step_time_s == pytest.approx(
        _step(model, "dgx-h100", _plan(**fsdp)).step_time_s, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), mb=st.sampled_from([1, 2]), recompute=st.sampled_from(["none", "selective", "full"]),
       deterministic=st.booleans(), fusion=st.booleans())
def test_neither_mode_makes_a_step_faster(tp, mb, recompute, deterministic, fusion):
    model = model_from_arch_row(ROW)
    kw = dict(tp=tp, dp=8 // tp, micro_batch=mb, global_batch=16 * mb, recompute=recompute)
    base = _step(model, "gb200-nvl72", _plan(**kw)).step_time_s
    moded = _step(model, "gb200-nvl72", _plan(**kw, deterministic=deterministic, grad_accum_fusion=fusion)).step_time_s
    assert moded >= base * (1 - 1e-12)
    if deterministic or not fusion:
        assert moded > base


def test_plan_dumps_leave_the_defaults_out():
    # the dumps (and hashes) of plans written before the fields existed are unchanged
    assert "deterministic" not in TrainPlan().model_dump() and "grad_accum_fusion" not in TrainPlan().model_dump()
    p = TrainPlan(deterministic=True, grad_accum_fusion=False)
    assert p.model_dump()["deterministic"] is True and p.model_dump()["grad_accum_fusion"] is False
    assert TrainPlan.model_validate(p.model_dump()) == p


@pytest.mark.parametrize(("cells", "det", "unfused"), [
    ({}, True, True),
    ({"notes": PLAIN_NOTES}, False, False),
    ({"notes": "--deterministic-mode, NCCL_ALGO=Ring"}, True, False),
    ({"framework": "torchtitan"}, False, False),  # Megatron-LM options
])
def test_the_row_rules_read_the_notes(cells, det, unfused):
    row = dict(ROW, **cells)
    framework = Framework(row["framework"])
    assert deterministic_stated(row, framework) is det
    assert grad_accum_fusion_off_stated(row, framework) is unfused


def test_a_row_stating_both_is_predicted_with_both():
    stated, plain = predict_row(ROW), predict_row(dict(ROW, notes=PLAIN_NOTES))
    assert "deterministic mode" in stated.notes and "no gradient-accumulation fusion" in stated.notes
    model = model_from_arch_row(ROW)
    plan, _ = plan_from_row(ROW, "Hopper GH100")
    both = _step(model, "dgx-h100", plan.model_copy(update={"deterministic": True, "grad_accum_fusion": False}))
    assert stated.value == pytest.approx(both.step_time_s, rel=1e-12)
    assert stated.value > plain.value


def test_train_options_and_their_json(runner):
    one = ["train", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8",
           "--micro-batch", "1", "--seq-len", "8192", "--global-batch", "16", "--sharding", "zero1", "--json"]
    plain = json.loads(runner.invoke(app, one).stdout)
    assert plain["best_plan"]["deterministic"] is False and plain["best_plan"]["grad_accum_fusion"] is True
    res = runner.invoke(app, [*one, "--deterministic", "--no-grad-accum-fusion"])
    assert res.exit_code == 0, res.output
    moded = json.loads(res.stdout)
    assert moded["best_plan"]["deterministic"] is True and moded["best_plan"]["grad_accum_fusion"] is False
    assert moded["step_time_s"] > plain["step_time_s"]


def test_the_options_are_megatrons(runner):
    res = runner.invoke(app, ["train", "gpt3-125m", "--gpus", "8", "--framework", "fsdp", "--deterministic"])
    assert res.exit_code == 2
    assert "--deterministic: a Megatron-LM option; the framework is fsdp" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["plan", "gpt3-125m", "--tokens", "1B", "--gpus", "8", "--framework", "torchtitan",
                              "--no-grad-accum-fusion"])
    assert res.exit_code == 2 and "--no-grad-accum-fusion: a Megatron-LM option" in res.output


def test_plan_search_carries_the_modes(runner):
    res = runner.invoke(app, ["plan", "gpt3-125m", "--tokens", "1B", "--gpus", "8", "--deterministic", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["deterministic"] is True and d["grad_accum_fusion"] is True


def test_megatron_command_line_round_trip(runner):
    one = ["train", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8",
           "--micro-batch", "1", "--seq-len", "8192", "--global-batch", "16", "--sharding", "zero1",
           "--deterministic", "--no-grad-accum-fusion"]
    cmd = runner.invoke(app, [*one, "--emit", "megatron"]).stdout
    # megatron/training/arguments.py at core_v0.15.0: --deterministic-mode (2122), --no-gradient-accumulation-fusion (2226)
    assert "--deterministic-mode" in cmd and "--no-gradient-accumulation-fusion" in cmd
    back = json.loads(runner.invoke(app, ["train", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--from", cmd,
                                          "--json"]).stdout)
    plan = back.get("train", back)["best_plan"]
    assert plan["deterministic"] is True and plan["grad_accum_fusion"] is False


def test_nemo_emitter_refuses_what_it_cannot_write(runner):
    res = runner.invoke(app, ["train", "llama-3-8b", "--gpus", "8", "--deterministic", "--emit", "nemo"])
    assert res.exit_code == 2 and "deterministic: the NeMo emitter writes no override for it" in res.output
