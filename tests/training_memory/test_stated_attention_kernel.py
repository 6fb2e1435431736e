"""A training row that states its attention kernel is modelled with it (validation_training.stated_attention_kernel).

Megatron-LM's `--attention-backend unfused` (core_attention.DotProductAttention) materialises the
b x a x s x s scores; Korthikanti et al. 2022 (sec. 4) count 5 a s^2 b bytes per layer for them
with attention dropout (2-byte scores, 1-byte mask, 2-byte dropout output), where a fused kernel
keeps only the fp32 softmax statistics (4 a bytes per token)."""

from __future__ import annotations

import pytest

from gpuplan.interfaces.validation.training import predict_row, stated_attention_kernel
from gpuplan.interfaces.row_types import SkipRow
from gpuplan.specs.execution import AttentionKernel

ROW = {"id": "x-1", "model": "m", "layers": "4", "hidden": "1024", "heads": "16", "kv_heads": "16", "ffn": "4096",
       "ffn_kind": "gelu", "vocab": "32000", "seq_len": "2048", "system": "dgx-h100", "num_gpus": "1", "tp": "1",
       "pp": "1", "dp": "1", "micro_batch": "1", "global_batch": "1", "recompute": "none", "precision": "bf16",
       "framework": "megatron", "metric": "peak_mem_gib", "notes": ""}


@pytest.mark.parametrize(("cells", "expected"), [
    ({"notes": "alltoall dispatcher, unfused attention backend, deterministic mode"}, AttentionKernel.UNFUSED),
    ({"notes": "--attention-backend unfused"}, AttentionKernel.UNFUSED),
    ({"notes": "attention_backend: unfused"}, AttentionKernel.UNFUSED),
    ({"notes": "fused attention (cuDNN)"}, None),
    ({"notes": ""}, None),
    ({"attention_kernel": "flash_v1", "notes": "unfused attention"}, AttentionKernel.FLASH_V1),  # the column wins
])
def test_stated_kernel(cells, expected):
    assert stated_attention_kernel(cells) is expected


def test_bad_kernel_cell_names_the_allowed_values():
    with pytest.raises(SkipRow, match=r"attention_kernel: 'sdpa' is not one of flash, flash_v1, flash2, unfused"):
        stated_attention_kernel({"attention_kernel": "sdpa"})


def test_unfused_backend_stores_the_scores():
    # H100 bf16 Megatron row: FlashAttention by default. Stated unfused: every layer also keeps the
    # 5 a s^2 b score bytes and no longer the 4 a bytes of fp32 softmax statistics per token:
    # delta = L x mb x s x a x (5 s - 4) / tp = 4 x 1 x 2048 x 16 x (5 x 2048 - 4) bytes.
    flash = predict_row(ROW)
    unfused = predict_row(dict(ROW, notes="unfused attention backend"))
    expected = 4 * 1 * 2048 * 16 * (5 * 2048 - 4)
    assert (unfused.value - flash.value) * 2**30 == pytest.approx(expected, rel=1e-9)
    # a stated unfused kernel does not imply the legacy recipes' full recompute (the row says none)
    assert "recompute=full" not in unfused.notes


def test_unfused_backend_is_slower():
    # the unfused core runs two batched GEMMs over s x s and moves the scores through HBM, where
    # FlashAttention keeps them on chip: a step can only get longer
    row = dict(ROW, metric="iteration_time_s")
    assert predict_row(dict(row, notes="unfused attention backend")).value > predict_row(row).value
