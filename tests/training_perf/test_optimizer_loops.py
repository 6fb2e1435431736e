"""Per-tensor loops of Adafactor and bitsandbytes 8-bit Adam (workloads.training.step.optimizer_impl
`LOOP_OPTIMIZERS`, `loop_step_seconds`), as the Hugging Face Trainer runs them.

Hand derivations (sources in the module docstring):
- transformers `Adafactor.step` with the Trainer's optim="adafactor" (beta1 None, weight decay 0),
  per 2-D tensor: _rms(p) 2 (norm, divide), grad**2 + eps 2, row statistic mul_/mean/add_ 3, column
  3, _approx_sq_grad 5 (row mean, divide, rsqrt_, column rsqrt, torch.mul), update.mul_(grad) 1, RMS
  clip 5 (norm, divide, / clip_threshold, clamp_, div_), mul_(lr) 1, p.add_(-update) 2 (neg, add_):
  24. Per 1-D tensor: 2 + 2 + 2 (mul_, add_) + 2 (rsqrt, mul_) + 5 + 1 + 2 = 16. Bytes per fp32
  element of a factored tensor: 4 + 8 + 8 + 4 + 4 + 4 + 12 + 4 + 8 + 8 + 8 + 12 = 84.
- bitsandbytes `Optimizer8bit.step` -> `Optimizer2State.update_step` -> functional
  `optimizer_update_8bit_blockwise`: one kernel per tensor; bytes per element: fp32 parameter read
  and written 8 + fp32 gradient 4 + two uint8 states read and written 4 = 16.
- BERT-large from the hf1gpu rows' architecture columns: 389 tensors (test_optimizer_impl), of them
  2-D: 24 layers x 6 linears (q, k, v, o, up, down) + word and position tables 2 + the untied head 1
  = 147; 1-D: 389 - 147 = 242 (24 x (6 biases + 2 LayerNorms x 2) + final LayerNorm 2).
"""

from __future__ import annotations

import csv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.catalog import load_catalog
from gpuplan.layers.params import parameter_counts
from gpuplan.models import model_from_arch_row
from gpuplan.primitives.op_cost import memory_bandwidth_bytes_s
from gpuplan.specs.choices import Optimizer, OptimizerImpl
from gpuplan.specs.finetune import FineTuning
from gpuplan.workloads.training.step import optimizer_impl as oi

EAGER_KERNEL = 51.38e-3 / (314 * 9)  # PR #45299: ~18.18 us
ADAFACTOR_MATRIX_KERNELS = 2 + 2 + 3 + 3 + 5 + 1 + 5 + 1 + 2  # 24
ADAFACTOR_VECTOR_KERNELS = 2 + 2 + 2 + 2 + 5 + 1 + 2  # 16
ADAFACTOR_BYTES = 4 + 8 + 8 + 4 + 4 + 4 + 12 + 4 + 8 + 8 + 8 + 12  # 84
BNB_8BIT_BYTES = 8 + 4 + 4  # 16


def _hf1gpu_rows(shared_dir):
    with open(shared_dir / "validation" / "training.csv", newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f) if r["id"].startswith("hf1gpu-")}


def test_sourced_loop_constants():
    assert oi.LOOP_OPTIMIZERS[Optimizer.ADAFACTOR] == (ADAFACTOR_MATRIX_KERNELS, ADAFACTOR_VECTOR_KERNELS, ADAFACTOR_BYTES)
    assert oi.LOOP_OPTIMIZERS[Optimizer.ADAMW_8BIT] == (1, 1, BNB_8BIT_BYTES)


def test_bert_large_matrix_count(shared_dir):
    model = model_from_arch_row(_hf1gpu_rows(shared_dir)["hf1gpu-6"])
    assert oi.parameter_matrix_count(model) == 147
    assert oi.parameter_tensor_count(model) - oi.parameter_matrix_count(model) == 242


def test_loop_step_by_hand():
    hbm = 0.9e12
    # Adafactor over BERT-large: (147 x 24 + 242 x 16) = 7400 kernels x 18.18 us = 134.5 ms, against
    # 335e6 x 84 B / 0.9 TB/s = 31 ms: issue-bound
    t = float(oi.loop_step_seconds(Optimizer.ADAFACTOR, 335e6, 389, 147, hbm))
    assert t == pytest.approx(7400 * EAGER_KERNEL, rel=1e-12)
    assert t == pytest.approx(0.1345, rel=1e-3)
    # 8-bit Adam: 389 x 18.18 us = 7.07 ms against 335e6 x 16 B / 0.9 TB/s = 5.96 ms: issue-bound;
    # at 0.5 TB/s the 10.7 ms memory pass wins
    assert float(oi.loop_step_seconds(Optimizer.ADAMW_8BIT, 335e6, 389, 147, hbm)) == pytest.approx(389 * EAGER_KERNEL)
    assert float(oi.loop_step_seconds(Optimizer.ADAMW_8BIT, 335e6, 389, 147, 0.5e12)) == pytest.approx(335e6 * 16 / 0.5e12)
    with pytest.raises(ValueError, match="sgd"):
        oi.loop_step_seconds(Optimizer.SGD, 1.0, 1, 1, hbm)


@settings(max_examples=60, deadline=None)
@given(tensors=st.integers(1, 5000), share=st.floats(0.0, 1.0), per_tensor=st.floats(1.0, 1e8),
       optimizer=st.sampled_from([Optimizer.ADAFACTOR, Optimizer.ADAMW_8BIT]))
def test_loop_step_bounds(tensors, share, per_tensor, optimizer):
    hbm = 3.35e12
    matrices = round(tensors * share)
    elements = tensors * per_tensor
    per_matrix, per_vector, per_element = oi.LOOP_OPTIMIZERS[optimizer]
    t = float(oi.loop_step_seconds(optimizer, elements, tensors, matrices, hbm))
    assert t >= elements * per_element / hbm * (1 - 1e-12)
    assert t >= tensors * min(per_matrix, per_vector) * EAGER_KERNEL * (1 - 1e-12)
    assert float(oi.loop_step_seconds(optimizer, elements, tensors + 1, matrices, hbm)) >= t


def test_loop_allowed_for_the_trainer_loop_optimizers_only():
    from pydantic import ValidationError

    FineTuning(optimizer="adafactor", optimizer_impl="loop")
    FineTuning(optimizer="adamw_8bit", optimizer_impl="loop")
    for kw in (dict(optimizer="adafactor", optimizer_impl="foreach"), dict(optimizer="lion", optimizer_impl="loop")):
        with pytest.raises(ValidationError, match="optimizer"):
            FineTuning(**kw)


def test_rows_under_the_hf_trainer_are_loops(shared_dir):
    from gpuplan.interfaces.validation.fine_tuning_row import fine_tuning_from_row, trainer_loop_optimizer

    rows = _hf1gpu_rows(shared_dir)
    for rid in ("hf1gpu-5", "hf1gpu-6", "hf1gpu-7", "hf1gpu-8"):  # notes: "HF Trainer", optim=adafactor / Adam8bit
        assert fine_tuning_from_row(rows[rid])[0].optimizer_impl is OptimizerImpl.LOOP
    assert trainer_loop_optimizer("HF Trainer, optim adamw_bnb_8bit", Optimizer.ADAMW_8BIT)
    assert not trainer_loop_optimizer("torchtune, bitsandbytes AdamW8bit", Optimizer.ADAMW_8BIT)  # no Trainer
    assert not trainer_loop_optimizer("HF Trainer, optim=adafactor", Optimizer.ADAMW_8BIT)  # another optimizer
    assert not trainer_loop_optimizer("HF Trainer, optim=lion", Optimizer.LION)


def test_hf1gpu_adafactor_time_row_charges_its_loop(shared_dir):
    from gpuplan.interfaces.validation.training import predict_row

    row = _hf1gpu_rows(shared_dir)["hf1gpu-6"]
    unnamed = dict(row, notes=row["notes"].replace("HF Trainer", "a trainer"))
    tokens = 1 * 512 * 4  # micro-batch 1 x 512 tokens x 4 accumulation steps per optimizer step
    step_loop = tokens / predict_row(row).value
    step_pass = tokens / predict_row(unnamed).value
    system = load_catalog().system("v100-sxm2-16gb")
    hbm = memory_bandwidth_bytes_s(load_catalog().gpu(system.gpu))
    params = parameter_counts(model_from_arch_row(row)).total
    # the loop replaces the one memory pass of Adafactor: fp32 gradient 4 + fp32 master read and
    # written 8 + fp16 copy 2 + six fp32 temporaries written and read 48 = 62 B per parameter
    expected = max(7400 * EAGER_KERNEL, params * ADAFACTOR_BYTES / hbm) - params * 62 / hbm
    # naming the HF Trainer of 2022 (PyTorch 1.x) also charges its gradient clip and zero_grad loops
    # (step.trainer_grad_loops): 3 kernels per tensor over 389 tensors (24 layers x 16 + 3 embedding tables
    # + the embedding LayerNorm's 2) + 5 per step, issue-bound: 1,172 x EAGER_KERNEL = 21.3 ms
    expected += (3 * 389 + 5) * EAGER_KERNEL
    assert step_loop - step_pass == pytest.approx(expected, rel=1e-6)


def test_train_states_the_loop_assumed():
    from gpuplan import api

    ft = {"optimizer": "adafactor", "optimizer_impl": "loop"}
    d = api.train("gpt3-125m", "dgx-h100", 8, tp=1, pp=1, dp=8, cp=1, micro_batch=1, recompute="none",
                  sharding="none", fine_tuning=ft).to_dict()
    assert d["framework_defaults_assumed"][-1].startswith("optimizer step: per-tensor adafactor loop (24 eager kernels")
    # GPT-3 125M: 12 layers x 6 linears + 2 tables = 74 2-D tensors (tied head), 196 - 74 = 122 1-D:
    # (74 x 24 + 122 x 16) x 18.18 us = 67.8 ms, more than ~125e6 x 84 B / ~3 TB/s ~ 3.5 ms
    assert d["step_breakdown_s"]["optimizer_s"] == pytest.approx((74 * 24 + 122 * 16) * EAGER_KERNEL, rel=1e-9)
