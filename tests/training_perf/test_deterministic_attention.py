"""Deterministic Megatron on Blackwell runs flash-attn's FlashAttention-2 (AttentionKernel.FLASH2).

`--deterministic-mode` sets NVTE_ALLOW_NONDETERMINISTIC_ALGO=0; TransformerEngine then admits its cuDNN
backend for training on sm100 only with attention dropout 0 (fused_attn.cpp, "determinism on
Blackwell"), Megatron-core's attention dropout defaults to 0.1, FlashAttention-4 refuses dropout and
FlashAttention-3 is sm90-only: FlashAttention-2 remains (interfaces.validation.training docstring)."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.errors import InputError
from gpuplan.interfaces.validation.training import attention_kernel_from_row, deterministic_flash2, predict_row
from gpuplan.specs.execution import AttentionKernel, Framework
from gpuplan.workloads.training.step.compute import training_attention_ceiling

ROW = {"id": "x-1", "model": "m", "layers": "4", "hidden": "4096", "heads": "32", "kv_heads": "8", "ffn": "16384",
       "ffn_kind": "gelu", "vocab": "32000", "seq_len": "8192", "system": "gb200-nvl72", "num_gpus": "8", "tp": "1",
       "pp": "1", "dp": "8", "micro_batch": "1", "global_batch": "8", "recompute": "none", "precision": "bf16",
       "framework": "megatron", "metric": "iteration_time_s",
       "notes": "CI golden values. Deterministic mode, NCCL_ALGO=Ring, TransformerEngine."}


def test_flash2_ceiling_on_b200_is_flash_attns_measured_rate():
    # cudnn-frontend sdpa_benchmark_training B200 artifact, backend flash_attention, forward / backward
    # TFLOP/s at 16k / 32k / 64k / 128k: 425.128 / 336.635, 435.762 / 345.634, 441.285 / 348.981,
    # 443.738 / 348.253; forward + backward at 1 : 2.5 FLOPs = 3.5 / (1/f + 2.5/b) = 357.92, 367.34,
    # 371.16, 371.07; mean 366.87 of 2250 = 0.16305
    cat = load_catalog()
    for gpu_id in ("b200", "gb200"):
        assert training_attention_ceiling(cat.gpu(gpu_id), AttentionKernel.FLASH2) == pytest.approx(0.16305, abs=1e-5)
    # elsewhere the training ceiling is FlashAttention-2's already: FLASH2 changes nothing (H100 335 / 989)
    h100 = cat.gpu("h100-sxm5-80gb")
    assert training_attention_ceiling(h100, AttentionKernel.FLASH2) == pytest.approx(335.0 / 989.0)
    assert training_attention_ceiling(h100, AttentionKernel.FLASH2) == training_attention_ceiling(h100)


@pytest.mark.parametrize(("cells", "arch", "expected"), [
    ({}, "Blackwell GB100", True),
    ({"notes": "--deterministic-mode on"}, "Blackwell GB100", True),
    ({}, "Hopper GH100", False),  # TE keeps cuDNN deterministic attention on sm90
    ({}, "Ampere GA100", False),  # TE runs FlashAttention-2 there anyway (the default rule's kernel)
    ({"framework": "torchtitan"}, "Blackwell GB100", False),  # a TE / Megatron rule
    ({"notes": "CI golden values, NCCL_ALGO=Ring"}, "Blackwell GB100", False),  # not stated
])
def test_the_rule_reads_framework_generation_and_notes(cells, arch, expected):
    row = dict(ROW, **cells)
    framework = Framework(row["framework"])
    assert deterministic_flash2(row, framework, arch) is expected
    kernel = attention_kernel_from_row(row, framework, arch)
    assert kernel is (AttentionKernel.FLASH2 if expected else AttentionKernel.FLASH)


def test_a_stated_kernel_wins_over_the_rule():
    row = dict(ROW, notes="Deterministic mode, unfused attention backend")
    assert attention_kernel_from_row(row, Framework.MEGATRON, "Blackwell GB100") is AttentionKernel.UNFUSED


def test_deterministic_blackwell_step_is_slower_by_the_attention_core_only():
    # same row without the statement runs cuDNN (0.5097 of peak): FlashAttention-2's 0.16305 makes only
    # the attention core longer, so the step grows and the memory (both kernels keep s x s off HBM) does not
    plain = dict(ROW, notes="CI golden values, NCCL_ALGO=Ring, TransformerEngine.")
    assert predict_row(ROW).value > predict_row(plain).value
    assert "attention=flash2" in predict_row(ROW).notes
    mem = dict(metric="peak_mem_gib")
    assert predict_row(dict(ROW, **mem)).value == pytest.approx(predict_row(dict(plain, **mem)).value, rel=1e-12)


def test_maxtext_refuses_flash2():
    from gpuplan.interfaces.deploy.maxtext import _check_plan
    from gpuplan.models import load_model
    from gpuplan.specs import TrainPlan

    plan = TrainPlan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=8, seq_len=2048, attention_kernel="flash2",
                     sequence_parallel=False)
    with pytest.raises(InputError, match=r"attention_kernel: MaxText runs no flash-attn library kernel \(flash2\)"):
        _check_plan(plan, load_model("llama-3-8b"))
