"""The AdamW step by implementation (workloads.training.step.optimizer_impl): loop, foreach, fused.

Hand derivations (sources in the module docstring):
- kernels per tensor of the loop: torch `_single_tensor_adamw` runs param.mul_, exp_avg.lerp_,
  exp_avg_sq.mul_, .addcmul_, .sqrt(), / bias_correction2_sqrt, .add_(eps), param.addcdiv_: 8.
- bytes per fp32 element: 8 (mul_) + 12 (lerp_) + 8 (mul_) + 12 (addcmul_) + 8 (sqrt) + 8 (div)
  + 8 (add_) + 16 (addcdiv_) = 80; the fused pass is the model's 30 B.
- per-kernel issue time: PR #45299, AdamW on ResNet-101: 51.38 ms / (314 tensors x 9 kernels).
- tensor counts as Hugging Face builds the modules:
  Llama-2-7B: 32 x (q, k, v, o, gate, up, down + 2 RMSNorm weights = 9) + embed + final norm + lm_head
  = 291 (the number of tensors in its safetensors checkpoint);
  GPT-3 125M (biases, LayerNorm, learned positions, tied head): 12 x (6 linears x 2 + 2 norms x 2 =
  16) + token and position tables 2 + final LayerNorm 2 = 196;
  Mixtral 8x7B: 32 x (q, k, v, o 4 + router 1 + 8 experts x 3 + 2 norms = 31) + 3 = 995;
  BERT-large from the hf1gpu rows' architecture columns (biases, LayerNorm, learned positions, untied
  vocabulary head): 24 x 16 + 2 tables + 2 (final LayerNorm) + 1 head = 389.
"""

from __future__ import annotations

import csv
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.errors import InputError
from gpuplan.models import load_model, model_from_arch_row
from gpuplan.specs import Precision
from gpuplan.specs.choices import OptimizerImpl
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.specs.finetune import FineTuning
from gpuplan.workloads.training.plan_codes import RecomputeCode, ShardingCode
from gpuplan.workloads.training.step import optimizer_impl as oi
from gpuplan.workloads.training.step.inputs import PlanAxes, StepContext
from gpuplan.workloads.training.step.optimizer import ADAM_BYTES_PER_PARAM, optimizer_seconds

EAGER_KERNEL = 51.38e-3 / (314 * 9)  # PR #45299: ~18.18 us


def test_sourced_constants():
    assert oi.LOOP_KERNELS_PER_TENSOR == 8
    assert oi.EAGER_ADAMW_BYTES_PER_ELEMENT == 8 + 12 + 8 + 12 + 8 + 8 + 8 + 16  # 80
    assert oi.EAGER_KERNEL_S == pytest.approx(18.18e-6, rel=1e-3)
    assert oi.MAX_ELEMENTS_PER_LAUNCH == 320 * 65536


@pytest.mark.parametrize("name, tensors", [("llama-2-7b", 291), ("gpt3-125m", 196), ("mixtral-8x7b", 995)])
def test_parameter_tensor_counts(name, tensors):
    assert oi.parameter_tensor_count(load_model(name)) == tensors


def _hf1gpu_rows(shared_dir):
    with open(shared_dir / "validation" / "training.csv", newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f) if r["id"].startswith("hf1gpu-")}


def test_bert_large_tensor_count(shared_dir):
    row = _hf1gpu_rows(shared_dir)["hf1gpu-2"]
    assert oi.parameter_tensor_count(model_from_arch_row(row)) == 389


def test_foreach_launches_by_hand():
    # 389 tensors, 1e6 elements (one chunk group): per op ceil(389 / limit) with limits 110, 64, 110,
    # 48, 64, 96 (scalar list), 110, 48 (scalar list): 4 + 7 + 4 + 9 + 7 + 5 + 4 + 9 = 49
    assert float(oi.foreach_launches(389, 1e6)) == 49
    # one tensor of 1e9 elements: per op ceil(1e9 / 20,971,520) = 48 launches, 8 ops: 384
    assert float(oi.foreach_launches(1, 1e9)) == 8 * 48


def test_step_seconds_issue_and_memory_bound():
    hbm = 2.0e12
    # GPT-3 125M-sized step: 196 tensors x 8 kernels x 18.18 us = 28.5 ms to issue; 125e6 x 80 B at
    # 2 TB/s = 5 ms on the GPU: issue-bound
    assert float(oi.adamw_step_seconds(OptimizerImpl.LOOP, 125e6, 196, hbm)) == pytest.approx(196 * 8 * EAGER_KERNEL, rel=1e-12)
    # the same with foreach: per op the tensor limits give ceil(196 / 110, 64, 110, 48, 64, 96, 110,
    # 48) = 2, 4, 2, 5, 4, 3, 2, 5 launches, the chunk limit ceil(125e6 / 20,971,520) = 6: 6 per op,
    # 48 launches -> 0.9 ms to issue: memory-bound, 5 ms
    assert float(oi.foreach_launches(196, 125e6)) == 48
    assert float(oi.adamw_step_seconds(OptimizerImpl.FOREACH, 125e6, 196, hbm)) == pytest.approx(125e6 * 80 / hbm, rel=1e-12)
    with pytest.raises(ValueError):
        oi.adamw_step_seconds(OptimizerImpl.FUSED, 1.0, 1, hbm)


@settings(max_examples=60, deadline=None)
@given(tensors=st.integers(1, 5000), per_tensor=st.floats(1.0, 1e8), impl=st.sampled_from([OptimizerImpl.LOOP, OptimizerImpl.FOREACH]))
def test_eager_step_never_beats_its_memory_or_the_fused_pass(tensors, per_tensor, impl):
    hbm = 3.35e12
    elements = tensors * per_tensor
    t = float(oi.adamw_step_seconds(impl, elements, tensors, hbm))
    assert t >= elements * 80 / hbm * (1 - 1e-12)
    assert t > elements * ADAM_BYTES_PER_PARAM / hbm  # 80 B > the fused 30 B
    assert float(oi.adamw_step_seconds(impl, elements, tensors + 1, hbm)) >= t  # more tensors: never faster


@pytest.fixture(scope="module")
def a100():
    c = load_catalog()
    system = c.system("a100-sxm4-80gb")
    return system, c.gpu(system.gpu)


def _optimizer(a100, model="llama-2-7b", impl=None, precision=Precision.BF16, pp=1):
    system, gpu = a100
    ctx = StepContext.build(load_model(model), system, gpu, 2048, precision=precision, framework=Framework.OTHER,
                            attention_kernel=AttentionKernel.FLASH, fine_tuning=FineTuning(optimizer_impl=impl))
    g = PlanAxes.build(ctx, 1, pp, 1, 1, 1, 1, 1, 1, RecomputeCode.NONE, False, ShardingCode.NONE)
    params = float(ctx.body_params + ctx.input_embedding_params + ctx.output_head_params) / pp
    return ctx, float(optimizer_seconds(ctx, g, params, 0.0)), params


def test_default_and_fused_are_the_one_pass(a100):
    ctx, default, params = _optimizer(a100)
    _, fused, _ = _optimizer(a100, impl=OptimizerImpl.FUSED)
    assert default == fused == params * ADAM_BYTES_PER_PARAM / ctx.hbm_bytes_s


def test_loop_on_a_7b_model_is_memory_bound(a100):
    ctx, loop, params = _optimizer(a100, impl=OptimizerImpl.LOOP)
    # 291 x 8 x 18.2 us = 42 ms to issue < 6.7e9 x 80 B / ~1.6 TB/s ~ 0.33 s: 80 / 30 of the fused pass
    assert 291 * 8 * EAGER_KERNEL < params * 80 / ctx.hbm_bytes_s
    assert loop == pytest.approx(params * 80 / ctx.hbm_bytes_s, rel=1e-12)
    _, default, _ = _optimizer(a100)
    assert loop / default == pytest.approx(80 / 30, rel=1e-12)


def test_loop_issue_bound_with_pipeline_stages(a100):
    ctx, loop, params = _optimizer(a100, model="gpt3-125m", impl=OptimizerImpl.LOOP, pp=2)
    # pp 2: ceil(196 / 2) = 98 tensors on the stage, 98 x 8 kernels x 18.18 us = 14.3 ms, more than
    # the stage's ~62e6 x 80 B / ~1.6 TB/s ~ 3 ms
    assert loop == pytest.approx(98 * 8 * EAGER_KERNEL, rel=1e-12)
    assert loop > params * 80 / ctx.hbm_bytes_s


def test_adapters_count_their_a_and_b(a100):
    system, gpu = a100
    ft = FineTuning(method="lora", lora_rank=16, lora_targets="all_linear", optimizer_impl="loop")
    ctx = StepContext.build(load_model("llama-2-7b"), system, gpu, 2048, framework=Framework.FSDP, fine_tuning=ft)
    # 32 layers x 7 adapted projections x (A, B) = 448 tensors, the whole model on one stage
    assert oi.adapter_tensor_count(ctx.model, ft.targets, 32) == 448
    g = PlanAxes.build(ctx, 1, 1, 1, 1, 1, 1, 1, 1, RecomputeCode.NONE, False, ShardingCode.NONE)

    class Stage:
        layers_per_stage = 32.0
        stage_bwd = 0.0
        recompute_mb = 0.0
    # 448 x 8 x 18.18 us = 65 ms to issue; the ~40e6 adapter elements move in ~2 ms: issue-bound
    t = float(optimizer_seconds(ctx, g, 6.7e9, 0.0, Stage()))
    assert t == pytest.approx(448 * 8 * EAGER_KERNEL, rel=1e-12)


@pytest.mark.parametrize("kw, field", [
    (dict(optimizer="sgd", optimizer_impl="loop"), "optimizer"),
    (dict(optimizer_impl="foreach", offload="optimizer"), "offload"),
    (dict(optimizer_impl="loop", master_weights="none"), "master_weights"),
])
def test_impossible_combinations_refused(kw, field):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=field):
        FineTuning(**kw)
    FineTuning(**{**kw, "optimizer_impl": "fused"})  # the fused pass is any optimizer's step


def test_api_names_the_field():
    from gpuplan import api

    with pytest.raises(InputError) as exc:
        api.fit_train("gpt3-125m", "h100-sxm5-80gb", 8, fine_tuning={"optimizer_impl": "bogus"})
    assert "optimizer_impl" in str(exc.value) or "optimizer-impl" in str(exc.value)


def test_train_states_the_implementation_assumed():
    from gpuplan import api

    d = api.train("gpt3-125m", "dgx-h100", 8, tp=1, pp=1, dp=8, cp=1, micro_batch=1, recompute="none",
                  sharding="none", fine_tuning={"optimizer_impl": "foreach"}).to_dict()
    assert d["framework_defaults_assumed"][-1].startswith("optimizer step: torch.optim.AdamW foreach")
    assert d["best_plan"]["fine_tuning"]["optimizer_impl"] == "foreach"
    default = api.train("gpt3-125m", "dgx-h100", 8, tp=1, pp=1, dp=8, cp=1, micro_batch=1, recompute="none",
                        sharding="none").to_dict()
    assert default["framework_defaults_assumed"][-1].startswith("optimizer step: one fused memory-bound AdamW pass")
    # foreach moves 80 B per parameter instead of 30: a longer optimizer step, the rest unchanged
    assert d["step_breakdown_s"]["optimizer_s"] > default["step_breakdown_s"]["optimizer_s"]
    assert d["step_breakdown_s"]["compute_s"] == default["step_breakdown_s"]["compute_s"]


@pytest.mark.parametrize("extra", [["--optimizer-impl", "bogus"], ["--optimizer-impl", "loop", "--optimizer", "sgd"]])
def test_cli_bad_value_exits_2_with_one_line(runner, extra):
    from gpuplan.cli.main import app

    res = runner.invoke(app, ["fit", "train", "gpt3-125m", "--gpu", "h100-sxm5-80gb", "--gpus", "8", *extra])
    assert res.exit_code == 2
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--optimizer-impl" in lines[0] and "Traceback" not in res.output


def test_rows_read_the_implementation_from_notes(shared_dir):
    from gpuplan.interfaces.validation.fine_tuning_row import fine_tuning_from_row, stated_optimizer_impl

    assert stated_optimizer_impl("Default optimizer adamw_hf (fp32 states).") is OptimizerImpl.LOOP
    assert stated_optimizer_impl("optim=adamw_torch") is OptimizerImpl.FOREACH
    assert stated_optimizer_impl("optim=adamw_torch_fused") is OptimizerImpl.FUSED
    assert stated_optimizer_impl("torch.optim.AdamW(foreach=False)") is OptimizerImpl.LOOP
    assert stated_optimizer_impl("AdamW, lr 3e-4") is None
    rows = _hf1gpu_rows(shared_dir)
    for rid in ("hf1gpu-1", "hf1gpu-2", "hf1gpu-3", "hf1gpu-4"):  # "Default optimizer adamw_hf"
        assert fine_tuning_from_row(rows[rid])[0].optimizer_impl is OptimizerImpl.LOOP
    # Adafactor, bitsandbytes Adam8bit under the HF Trainer: their own per-tensor loops
    # (test_optimizer_loops); outside the Trainer no implementation is named
    for rid in ("hf1gpu-5", "hf1gpu-7"):
        assert fine_tuning_from_row(rows[rid])[0].optimizer_impl is OptimizerImpl.LOOP
        plain = dict(rows[rid], notes=rows[rid]["notes"].replace("HF Trainer", "a trainer"))
        assert fine_tuning_from_row(plain)[0].optimizer_impl is None
    # an adafactor row whose notes mention adamw_hf keeps its optimizer (adamw_hf names AdamW's loop)
    odd = dict(rows["hf1gpu-5"], notes=rows["hf1gpu-5"]["notes"].replace("HF Trainer", "a trainer") + " Not adamw_hf.")
    ft = fine_tuning_from_row(odd)[0]
    assert ft.optimizer.value == "adafactor" and ft.optimizer_impl is None


def test_hf1gpu_time_row_adds_the_loop(shared_dir):
    from gpuplan.interfaces.validation.training import predict_row
    from gpuplan.layers.params import parameter_counts

    row = _hf1gpu_rows(shared_dir)["hf1gpu-2"]
    unnamed = dict(row, notes=row["notes"].replace("adamw_hf", "AdamW"))
    tokens = 4 * 512  # micro-batch 4 x 512 tokens, one step
    step_loop = tokens / predict_row(row).value
    step_fused = tokens / predict_row(unnamed).value
    system = load_catalog().system("v100-sxm2-16gb")
    gpu = load_catalog().gpu(system.gpu)
    from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s

    params = parameter_counts(model_from_arch_row(row)).total
    hbm = memory_bandwidth_bytes_s(gpu)
    # the loop replaces the 30 B pass: max(389 x 8 x 18.18 us = 56.6 ms, P x 80 B / HBM)
    expected = max(389 * 8 * EAGER_KERNEL, params * 80 / hbm) - params * 30 / hbm
    assert step_loop - step_fused == pytest.approx(expected, rel=1e-9)
    assert math.isclose(389 * 8 * EAGER_KERNEL, 0.0566, rel_tol=0.01)


def test_plan_search_carries_the_implementation():
    from gpuplan import api

    loop = api.train("gpt3-125m", "dgx-h100", 8, fine_tuning={"optimizer_impl": "loop"}).to_dict()
    plain = api.train("gpt3-125m", "dgx-h100", 8).to_dict()
    assert loop["best_plan"]["fine_tuning"]["optimizer_impl"] == "loop"
    # GPT-3 125M: ceil(196 / pp) tensors x 8 kernels x 18.18 us (28.5 ms at pp 1), issue-bound
    # (~125e6 / tp x 80 B moves in a few ms), against the fused pass's few milliseconds
    tensors = math.ceil(196 / loop["best_plan"]["pp"])
    assert loop["step_breakdown_s"]["optimizer_s"] == pytest.approx(tensors * 8 * EAGER_KERNEL, rel=1e-9)
    assert loop["step_breakdown_s"]["optimizer_s"] > plain["step_breakdown_s"]["optimizer_s"]
