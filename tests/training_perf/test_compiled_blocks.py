"""torchtitan with torch.compile'd transformer blocks (`TrainPlan.compiled_model`): the step model counts
the elementwise kernels Inductor fuses, checked against a hand count, and the validation rule."""

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.interfaces.validation.training import compiled_model_from_row
from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.plan import Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.step.assembly import estimate_step_time
from gpuplan.workloads.training.step.inputs import StepContext

TITAN = Framework.TORCHTITAN


def test_compiled_blocks_llama3_8b_elementwise_hand_count():
    # Llama 3 8B layer (h 4096, q 4096, kv 1024, SwiGLU f 14336), bf16, forward bytes per token:
    # eager torchtitan: RMSNorm x2 + residual x2 = 84 h = 344,064; rotary 20 (q + kv) = 102,400; attention
    # output copy 4 q = 16,384; repeat_kv 2 (2 kv + 2 q) = 20,480; SwiGLU 10 f = 143,360 -> 626,688 B.
    # compiled blocks: norms + residuals fused 20 h = 81,920; rotary 4 (q + kv) = 20,480; copy 16,384;
    # repeat_kv 20,480; SwiGLU 6 f = 86,016 -> 225,280 B.
    # Without recompute the step runs each layer's elementwise forward once and backward twice (3x), so
    # the step differs by 8192 tokens x 32 layers x 3 x (626,688 - 225,280) B at the model's HBM rate.
    catalog = load_catalog()
    system = catalog.system("dgx-h100")
    gpu = catalog.gpu(system.gpu)
    model = load_model("llama-3-8b")
    plan = TrainPlan(dp=8, micro_batch=1, global_batch=8, seq_len=8192, recompute=Recompute.NONE,
                     sharding=Sharding.FSDP, framework=TITAN)
    eager = estimate_step_time(model, system, plan, gpu).step_time_s
    compiled = estimate_step_time(model, system, plan.model_copy(update={"compiled_model": True}), gpu).step_time_s
    hbm_bytes_s = StepContext.build(model, system, gpu, 8192, framework=TITAN).hbm_bytes_s
    assert (eager - compiled) * hbm_bytes_s == pytest.approx(8192 * 32 * 3 * (626_688 - 225_280), rel=1e-9)


def test_compiled_blocks_only_change_torchtitan():
    # the flag describes torchtitan's per-block compile; Megatron's kernels are fused already
    catalog = load_catalog()
    system = catalog.system("dgx-h100")
    gpu = catalog.gpu(system.gpu)
    model = load_model("llama-3-8b")
    plan = TrainPlan(dp=8, micro_batch=1, global_batch=8, seq_len=8192)
    assert estimate_step_time(model, system, plan, gpu).step_time_s == estimate_step_time(
        model, system, plan.model_copy(update={"compiled_model": True}), gpu).step_time_s


def test_compiled_model_rule():
    row = {"framework": "torchtitan", "notes": "FSDP + torch.compile. TPS/GPU read at iteration 90.", "source": ""}
    assert compiled_model_from_row(row, TITAN)
    assert compiled_model_from_row(dict(row, notes="2D + AsyncTP + compile + Float8"), TITAN)
    assert compiled_model_from_row(dict(row, notes="vanilla TP", source="'... FSDP=8, torch.compile' table"), TITAN)
    assert not compiled_model_from_row(dict(row, notes="FSDP. TPS/GPU read at iteration 90."), TITAN)
    assert not compiled_model_from_row(row, Framework.MEGATRON)
