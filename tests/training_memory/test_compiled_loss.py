"""torch.compile'd cross entropy (`TrainPlan.compiled_loss`): its memory, its HBM traffic and the
validation rule that tells a torchtitan row ran it (torchtitan PR #1033, 2025-04-02), each checked
against a hand derivation.

Llama 3 8B (h 4096, vocab 128256, untied) comes from the catalog.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.interfaces.validation.training import compiled_loss_from_row, torchtitan_run_month
from gpuplan.models import load_model
from gpuplan.specs.execution import Framework
from gpuplan.specs.plan import Precision, Recompute, Sharding, TrainPlan
from gpuplan.workloads.training.loss_memory import loss_bytes_per_vocab_entry
from gpuplan.workloads.training.memory import training_memory
from gpuplan.workloads.training.step.compute import loss_bytes_per_logit

TITAN = Framework.TORCHTITAN


@pytest.fixture(scope="module")
def llama8b():
    return load_model("llama-3-8b")


def test_compiled_loss_keeps_logits_and_their_gradient():
    # compiled CE: the bf16 logits (2) and the bf16 gradient its backward writes (2) = 4 B per entry
    # (PyTorch compiler team, Dao-AILab/quack#48: "~0 for just fwd and ~d_input for fw+bw");
    # eager: saved fp32 log-softmax 4 + its gradient 4 + the input gradient in fp32 4 = 12
    assert loss_bytes_per_vocab_entry(TrainPlan(framework=TITAN, compiled_loss=True)) == 2 + 2
    assert loss_bytes_per_vocab_entry(TrainPlan(framework=TITAN)) == 12.0
    # fp32 runs: the logits and their gradient in fp32, 4 + 4
    assert loss_bytes_per_vocab_entry(TrainPlan(framework=TITAN, compiled_loss=True, precision=Precision.FP32)) == 8
    # tp > 1: torchtitan's loss-parallel path stays counted as eager (16: module docstring of loss_memory)
    assert loss_bytes_per_vocab_entry(TrainPlan(tp=2, framework=TITAN, compiled_loss=True)) == 16.0


def test_compiled_loss_traffic_per_logit():
    # forward: a max pass and a sum-of-exponentials pass over the bf16 logits (2 + 2); backward: read
    # the logits 2, write their bf16 gradient 2 -> 8 B; eager PyTorch / Megatron op by op: 52
    assert loss_bytes_per_logit(TITAN, compiled=True) == 2 + 2 + 2 + 2
    assert loss_bytes_per_logit(TITAN) == 52.0


def test_tth200_config_loss_phase_shrinks_by_8_bytes_per_logit(llama8b):
    # Llama 3.1 8B, torchtitan FSDP over 32 H200, local batch 2 x 8192, per-op SAC, float8 (the tth200
    # runs). The loss phase is the peak's larger phase in both plans (it holds t V x 4 B = 8.4 GB
    # compiled against a layer backward's b t (h + 2 f) = 2 x 16384 x (4096 + 28672) = 1.07 GB), so
    # the activations differ by exactly the loss's bytes: 16384 tokens x 128256 x (12 - 4) B.
    plan = TrainPlan(dp=32, micro_batch=2, global_batch=64, seq_len=8192, recompute=Recompute.SELECTIVE,
                     sharding=Sharding.FSDP, framework=TITAN, precision=Precision.FP8)
    eager = training_memory(llama8b, plan)
    compiled = training_memory(llama8b, plan.model_copy(update={"compiled_loss": True}))
    drop = eager.per_gpu_bytes["activations"] - compiled.per_gpu_bytes["activations"]
    assert drop == pytest.approx(2 * 8192 * 128256 * (12 - 4), rel=1e-12)
    assert eager.per_gpu_bytes["total"] - compiled.per_gpu_bytes["total"] == pytest.approx(drop, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(mb=st.sampled_from([1, 2, 4]), seq=st.sampled_from([1024, 4096, 8192]), tp=st.sampled_from([1, 2, 4]),
       rc=st.sampled_from(list(Recompute)))
def test_compiled_loss_never_adds_memory(llama8b, mb, seq, tp, rc):
    plan = TrainPlan(tp=tp, dp=8, micro_batch=mb, global_batch=8 * mb, seq_len=seq, recompute=rc,
                     sharding=Sharding.FSDP, framework=TITAN, sequence_parallel=tp > 1)
    eager = training_memory(llama8b, plan).per_gpu_bytes["total"]
    compiled = training_memory(llama8b, plan.model_copy(update={"compiled_loss": True})).per_gpu_bytes["total"]
    assert compiled <= eager
    if tp > 1:  # loss parallel: unchanged
        assert compiled == eager


def _row(**cells):
    row = {"framework": "torchtitan", "notes": "FSDP2, torch.compile, per-op SAC", "source": ""}
    row.update(cells)
    return row


def test_run_month_from_torch_version_then_source_name():
    # PyTorch 2.8 / 2.9 builds postdate torchtitan PR #1033 (2025-04): the month of the change itself
    assert torchtitan_run_month(_row(notes="torch 2.9.0.dev+rocm6.4, torchao 0.13")) == (2025, 4)
    # 2.7.0a0 (pre-release of 2.7, released 2025-04-23) predates it
    assert torchtitan_run_month(_row(notes="torch 2.7.0a0, torchao 0.10")) == (2025, 3)
    # torchtitan's benchmark files carry their month in the name, with or without a dash
    assert torchtitan_run_month(_row(source="pytorch/torchtitan@b5bcd76c66d0:benchmarks/llama3-8b_h200_202506_x.md")) == (2025, 6)
    assert torchtitan_run_month(_row(source="benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md, table")) == (2025, 6)
    assert torchtitan_run_month(_row(source="pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md")) == (2024, 12)
    # a commit hash is not a date; no version, no dated name: unknown
    assert torchtitan_run_month(_row(source="pytorch/ao@36027d82d1ad:docs/source/workflows/training.md")) is None
    # the stated PyTorch version wins over the document's month
    assert torchtitan_run_month(_row(notes="torch 2.7.0a0", source="benchmarks/x_202506_y.md")) == (2025, 3)


def test_compiled_loss_rule():
    dated = "benchmarks/llama3-8b_h200_202506_x.md"
    assert compiled_loss_from_row(_row(source=dated), TITAN)
    # compile stated in the source's table title instead of the notes
    assert compiled_loss_from_row(_row(notes="FSDP=8, TP=8", source=dated + ", 'with torch.compile' table"), TITAN)
    assert not compiled_loss_from_row(_row(notes="FSDP=8, eager", source=dated), TITAN)  # no compile
    assert not compiled_loss_from_row(_row(source="benchmarks/llama3_h100_202412_torchtitan.md"), TITAN)  # before
    assert not compiled_loss_from_row(_row(), TITAN)  # undated: torchtitan's documented eager loss
    assert not compiled_loss_from_row(_row(source=dated, framework="megatron"), Framework.MEGATRON)


def test_compiled_loss_step_time_saves_44_bytes_per_logit(llama8b):
    # one micro-batch of 8192 tokens on the last (only) stage of an 8-GPU FSDP2 run: the step differs by
    # the loss's HBM traffic alone, 8192 x 128256 logits x (52 - 8) B at the step model's HBM rate
    from gpuplan.catalog import load_catalog
    from gpuplan.workloads.training.step.assembly import estimate_step_time
    from gpuplan.workloads.training.step.inputs import StepContext

    catalog = load_catalog()
    system = catalog.system("dgx-h100")
    gpu = catalog.gpu(system.gpu)
    plan = TrainPlan(dp=8, micro_batch=1, global_batch=8, seq_len=8192, recompute=Recompute.SELECTIVE,
                     sharding=Sharding.FSDP, framework=TITAN)
    eager = estimate_step_time(llama8b, system, plan, gpu)
    compiled = estimate_step_time(llama8b, system, plan.model_copy(update={"compiled_loss": True}), gpu)
    hbm_bytes_s = StepContext.build(llama8b, system, gpu, 8192, framework=TITAN).hbm_bytes_s
    saved = eager.step_time_s - compiled.step_time_s
    assert saved * hbm_bytes_s == pytest.approx(8192 * 128256 * (52 - 8), rel=1e-9)
    assert eager.breakdown_s["compute_s"] - compiled.breakdown_s["compute_s"] == pytest.approx(saved, rel=1e-12)
    # tp > 1: the loss-parallel path, unchanged
    tp2 = plan.model_copy(update={"tp": 2, "dp": 4, "global_batch": 4, "sequence_parallel": True})
    assert estimate_step_time(llama8b, system, tp2, gpu).step_time_s == estimate_step_time(
        llama8b, system, tp2.model_copy(update={"compiled_loss": True}), gpu).step_time_s
