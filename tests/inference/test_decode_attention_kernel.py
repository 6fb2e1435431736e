"""Per-query-head decode attention (Deployment.grouped_decode_attention = False).

TensorRT-LLM's masked multi-head attention, its only generation kernel before the XQA kernel
(v0.7), runs one thread block per (query head, sequence) (`mmha_launch_kernel_ex`: grid
{num_heads, batch_size}), each reading its KV head's cache: a GQA model's cache is read
heads / kv_heads times per decode step. The XQA blog measured 2.4x Llama-70B throughput on one H200
at 128/2048 tokens from removing that."""

from __future__ import annotations

import pytest

from gpuplan.catalog import load_catalog
from gpuplan.interfaces.validation.inference import grouped_decode_for, stated_engine_version
from gpuplan.workloads.inference.engines import ENGINES
from gpuplan.models import load_model
from gpuplan.workloads.inference.cost.deployment import Deployment
from gpuplan.workloads.inference.cost.operators import step_time_model

TRT = ENGINES["tensorrt-llm"]


def _dep(model: str, tp: int = 1, grouped: bool = True) -> Deployment:
    cat = load_catalog()
    gpu = cat.gpu("h100-sxm5-80gb")
    return Deployment(load_model(model), gpu, cat.system("dgx-h100"), tp=tp, weight_dtype="fp8", kv_dtype="fp8",
                      grouped_decode_attention=grouped)


@pytest.mark.parametrize(("model", "tp", "expected"), [
    ("llama-2-70b", 1, 8.0),   # 64 query heads / 8 KV heads
    ("llama-2-70b", 2, 8.0),   # 32 / 4 per GPU
    ("llama-2-70b", 8, 8.0),   # 8 / 1 per GPU
    ("llama-3-8b", 1, 4.0),    # 32 / 8
    ("llama-2-7b", 1, 1.0),    # MHA: 32 / 32, one read per head either way
    ("deepseek-v3", 8, 1.0),   # MLA: one latent per token shared by every head
])
def test_kv_reads_per_decode_step(model, tp, expected):
    assert _dep(model, tp, grouped=False).decode_kv_reads == expected
    assert _dep(model, tp, grouped=True).decode_kv_reads == 1.0


def test_decode_attention_reads_the_cache_once_per_query_head():
    # Llama-2-70B tp2, 64 sequences x 3072 cached tokens: 80 layers x 64 x 3072 tokens x 2 (K, V) x
    # 4 KV heads x 128 x 1 byte = 16.1 GB per GPU, memory-bound (2 FLOP per byte per query head
    # pair is far below the ridge); the per-query-head kernel reads it 8 times.
    grouped = step_time_model(_dep("llama-2-70b", 2, grouped=True))
    per_head = step_time_model(_dep("llama-2-70b", 2, grouped=False))
    ctx = 64 * 3072
    t1 = float(grouped.attention_decode_time(ctx, 0))
    t8 = float(per_head.attention_decode_time(ctx, 0))
    assert t1 == pytest.approx(80 * ctx * 2 * 4 * 128 * 1 / grouped.hbm_bytes_per_s, rel=1e-9)
    assert t8 == pytest.approx(8 * t1, rel=1e-9)
    # the KV the GPU holds (memory capacity) is the same
    assert per_head.kv_bytes_per_token_layer == grouped.kv_bytes_per_token_layer


@pytest.mark.parametrize(("cells", "expected"), [
    ({"source": "NVIDIA/TensorRT-LLM docs/source/performance.md @138f96d (data 'updated for v0.6.1')"}, (0, 6)),
    ({"source": "perf-overview.md (TensorRT-LLM v0.14 backend for Triton, 500 requests)"}, (0, 14)),
    ({"notes": "TensorRT-LLM ~0.5 benchmark.py, FP8 + FP8 KV."}, (0, 5)),
    ({"engine_version": "1.0.0", "source": "TensorRT-LLM v0.5"}, (1, 0)),   # the column wins
    # a version that does not belong to the engine: MLPerf's round, in a text that never names it
    ({"source": "MLPerf Inference v4.0 closed, NVIDIA submission 'H200-SXM-141GBx8_TRT'"}, None),
    ({"source": "NVIDIA/TensorRT-LLM perf-overview.md"}, None),
    # a "vX.Y" after another word is that word's version: perf-overview's table 'LLaMA v3.3 70B'
    # names the model (trtllm1x-po-14 was read as TensorRT-LLM 3.3), MLPerf's round likewise
    ({"source": "NVIDIA/TensorRT-LLM docs perf-overview.md, table 'LLaMA v3.3 70B'"}, None),
    ({"source": "TensorRT-LLM submission to MLPerf Inference v4.0"}, None),
    ({"notes": "TensorRT-LLM table 'low latency a100 (fp16), v0.5'"}, (0, 5)),   # punctuation introduces it
    ({"notes": "TensorRT-LLM data generated with v0.17"}, (0, 17)),              # a preposition does
])
def test_stated_engine_version(cells, expected):
    assert stated_engine_version(cells, TRT) == expected


def test_xqa_arrives_in_v0_7():
    # TensorRT-LLM blogs/Falcon180B-H200.md: the improved GQA generation kernels measured on
    # "TensorRT-LLM v0.7a vs TensorRT-LLM v0.6a" (2.4x on Llama-70B), "included in the v0.7 & v0.8 releases"
    assert grouped_decode_for({"engine_version": "0.6.1"}, TRT) is False
    assert grouped_decode_for({"engine_version": "0.7.1"}, TRT) is True
    assert grouped_decode_for({"engine_version": "0.8.0"}, TRT) is True
    assert grouped_decode_for({}, TRT) is True                     # unstated: today's kernels
    assert grouped_decode_for({"engine_version": "0.1"}, ENGINES["vllm"]) is True  # no rule for vLLM


@pytest.mark.parametrize("cell", ["abc", "0.x", "1.2.3.4", "99999.1"])
def test_bad_engine_version_cell_skips_the_row(cell):
    from gpuplan.interfaces.row_types import SkipRow

    with pytest.raises(SkipRow, match=r"engine_version: '.*' is not a version \(MAJOR.MINOR or MAJOR.MINOR.PATCH\)"):
        stated_engine_version({"engine_version": cell}, TRT)
