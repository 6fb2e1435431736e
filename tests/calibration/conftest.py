"""Synthetic rows for the fitter: real-format training rows (SCHEMA.md columns) whose measured value
is what the model itself predicts with a chosen knob value, so the value to recover is known by
construction."""

from __future__ import annotations

import pytest

from gpuplan import knobs

SGF = "training.sustained_gemm_fraction"


def gpt_row(rid: str, layers: int, hidden: int, heads: int, tp: int, pp: int, dp: int, mb: int, gb: int,
            system: str = "dgx-a100-80gb", metric: str = "tflops_per_gpu_model") -> dict[str, str]:
    return {
        "id": rid, "source": "synthetic", "confidence": "high", "model": f"gpt-{hidden}",
        "layers": str(layers), "hidden": str(hidden), "heads": str(heads), "kv_heads": str(heads),
        "ffn": str(4 * hidden), "vocab": "51200", "seq_len": "2048", "ffn_kind": "gelu", "system": system,
        "num_gpus": str(tp * pp * dp), "tp": str(tp), "pp": str(pp), "dp": str(dp), "micro_batch": str(mb),
        "global_batch": str(gb), "recompute": "selective", "sequence_parallel": "true" if tp > 1 else "false",
        "precision": "bf16", "sharding": "none", "framework": "megatron", "metric": metric, "value": "1",
    }


def synthetic_training_rows() -> list[dict[str, str]]:
    """Twelve GPT-style Megatron runs on DGX A100 / H100 (1.3B .. 175B shapes, TP/PP/DP mixes)."""
    shapes = [  # layers, hidden, heads, tp, pp, dp, micro_batch, global_batch
        (24, 2048, 16, 1, 1, 8, 4, 256), (32, 2560, 32, 2, 1, 8, 4, 256), (32, 4096, 32, 4, 1, 8, 2, 256),
        (40, 5120, 40, 8, 1, 4, 2, 256), (48, 6144, 48, 8, 2, 4, 1, 512), (64, 8192, 64, 8, 4, 4, 1, 512),
        (96, 12288, 96, 8, 8, 4, 1, 1024), (24, 2048, 16, 2, 2, 4, 8, 512), (40, 5120, 40, 4, 2, 8, 1, 512),
        (48, 6144, 48, 4, 4, 4, 2, 512), (32, 4096, 32, 2, 2, 8, 4, 1024), (64, 8192, 64, 8, 8, 2, 1, 256),
    ]
    rows = []
    for i, (layers, hidden, heads, tp, pp, dp, mb, gb) in enumerate(shapes, start=1):
        system = "dgx-h100" if i % 3 == 0 else "dgx-a100-80gb"
        rows.append(gpt_row(f"synth-{i}", layers, hidden, heads, tp, pp, dp, mb, gb, system=system))
    return rows


def training_predictor():
    from gpuplan.interfaces.validation.cross_validation import row_predictor

    return row_predictor()


def measured_at(rows: list[dict[str, str]], values: dict[str, float], scale: float = 1.0) -> list[dict[str, str]]:
    """Copies of `rows` whose `value` is the model's prediction with `values` (x `scale`)."""
    from gpuplan.interfaces.fitting.knob_catalog import load_all

    load_all()
    predict = training_predictor()
    out = []
    with knobs.overridden(values):
        for r in rows:
            out.append({**r, "value": repr(float(predict(r).value) * scale)})
    return out


@pytest.fixture(scope="module")
def rows_at_075() -> list[dict[str, str]]:
    return measured_at(synthetic_training_rows(), {SGF: 0.75})
