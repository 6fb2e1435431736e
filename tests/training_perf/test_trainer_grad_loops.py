"""The HF Trainer's per-tensor gradient loops on PyTorch < 2.0 (`step.trainer_grad_loops`): clip_grad_norm_'s
norm and scale and zero_grad's zero_ per gradient tensor. Expected values derived by hand."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.interfaces.validation.training import plan_from_row
from gpuplan.models import model_from_arch_row
from gpuplan.workloads.training.step import trainer_grad_loops
from gpuplan.workloads.training.step.assembly import estimate_step_time

#: PR #45299: 51.38 ms for 314 tensors x 9 kernels (optimizer_impl.EAGER_KERNEL_S)
KERNEL_S = 51.38e-3 / (314 * 9)


def _ctx(on: bool):
    return SimpleNamespace(fine_tuning=SimpleNamespace(zero_grad_keeps_buffers=on))


def test_issue_bound_loops_of_bert_large():
    # bert-large-uncased as the Trainer steps it: 24 layers x 16 tensors (q, k, v, o, intermediate, output
    # weights and biases: 12; two LayerNorms: 4) + 3 embedding tables + the embedding LayerNorm (2) + pooler (2)
    # + classifier (2) = 393 tensors; 3 kernels each + 5 per step = 1,184 kernels x 18.18 us = 21.53 ms, above
    # the memory time of 335 M fp32 gradients x 16 B / 720 GB/s = 7.4 ms
    assert trainer_grad_loops.seconds(_ctx(True), 393, 335e6, 720e9) == pytest.approx(1184 * KERNEL_S, rel=1e-9)
    assert 1184 * KERNEL_S == pytest.approx(21.53e-3, rel=1e-3)


def test_memory_bound_when_tensors_are_few():
    # one 1e9-element gradient: 8 kernels (0.15 ms) against 16 GB at 1 TB/s = 16 ms
    assert trainer_grad_loops.seconds(_ctx(True), 1, 1e9, 1e12) == pytest.approx(16e-3)


def test_off_after_pytorch_2():
    assert trainer_grad_loops.seconds(_ctx(False), 393, 335e6, 720e9) == 0.0


@given(tensors=st.integers(min_value=1, max_value=10_000), elements=st.floats(min_value=1.0, max_value=1e12))
def test_at_least_the_issue_time_and_monotone(tensors, elements):
    t = trainer_grad_loops.seconds(_ctx(True), tensors, elements, 1e12)
    assert t >= (3 * tensors + 5) * KERNEL_S * (1 - 1e-12)
    assert trainer_grad_loops.seconds(_ctx(True), tensors + 1, elements, 1e12) >= t


def test_hf1gpu_row_pays_the_loops_once_per_step():
    # hf1gpu-2 (HF Trainer, 2022: PyTorch 1.x): the step's optimizer time grows by the loops over the
    # inventory's 389 tensors (393 less the pooler and classifier, which gpuplan's encoder has not):
    # (3 x 389 + 5) x 18.18 us = 21.31 ms; with zero_grad_keeps_buffers off (PyTorch 2 loop) it is absent
    row = next(r for r in csv.DictReader(open(_validation_csv())) if r["id"] == "hf1gpu-2")
    c = load_catalog()
    system = c.system(row["system"])
    gpu = c.gpu(system.gpu)
    model = model_from_arch_row(row)
    plan, _ = plan_from_row(row, gpu.architecture)
    assert plan.fine_tuning.zero_grad_keeps_buffers
    later = plan.model_copy(update={"fine_tuning": plan.fine_tuning.model_copy(update={"zero_grad_keeps_buffers": False})})
    with_loops = estimate_step_time(model, system, plan, gpu).breakdown_s["optimizer_s"]
    without = estimate_step_time(model, system, later, gpu).breakdown_s["optimizer_s"]
    assert with_loops - without == pytest.approx((3 * 389 + 5) * KERNEL_S, rel=1e-6)


def _validation_csv():
    from pathlib import Path

    import gpuplan

    here = Path(gpuplan.__file__).parent / "catalog" / "data" / "validation" / "training.csv"
    return here if here.exists() else Path(__file__).parents[3] / "shared" / "validation" / "training.csv"
