"""How many requests a max-load / Poisson validation row's run had (validation_inference.run_requests).

A max-load benchmark sends every request at t = 0, so its throughput is total output over the
whole run (ramp-up, steady state, drain) and its batch is min(requests, what the engine admits):
the request count is part of the measurement's description, read from the row."""

from __future__ import annotations

import pytest

from gpuplan.catalog.datasets import get_dataset
from gpuplan.interfaces.validation.inference import predict_row, run_requests

# TensorRT-LLM perf-overview.md @258c754, 'Online Serving Measurements': "All data in the table
# below was generated using version 0.14.0, with 500 requests and BF16 precision."
TRITON_SOURCE = ("NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @258c754, 'Online Serving "
                 "Measurements' (TensorRT-LLM v0.14 backend for Triton, 500 requests, BF16)")


@pytest.mark.parametrize(("notes", "source", "expected"), [
    ("QPS=INF (max load).", TRITON_SOURCE, 500),                       # stated in the source
    ("trtllm-bench throughput, 1,500 requests queued at once", "", 1500),  # thousands separator
    ("Load: Poisson arrivals at 16 requests/s", "", None),             # a rate, not a count
    ("2 requests per second", "", None),                               # a rate, not a count
    ("0.5 requests", "", None),                                        # not a whole count
    ("no count here", "perf table", None),
])
def test_count_stated_in_notes_or_source(notes, source, expected):
    assert run_requests({"notes": notes, "source": source}) == expected


def test_requests_column_and_dataset_count_take_precedence():
    share = get_dataset("sharegpt")
    # a `requests` column beats any text
    assert run_requests({"requests": "64", "notes": "500 requests"}) == 64
    # a count beside the dataset's name beats a generic one ("200 ShareGPT prompts", vLLM issue 12315)
    assert run_requests({"notes": "ShareGPT 200 prompts; the server saw 900 requests"}, share) == 200
    # nothing stated: the dataset's own sample count (None for ShareGPT, which states none)
    assert run_requests({"notes": ""}, share) == share.requests


def _row(**over) -> dict[str, str]:
    row = {"id": "t-1", "model": "Llama-3.1-8B", "layers": "32", "hidden": "4096", "heads": "32", "kv_heads": "8",
           "ffn": "14336", "ffn_kind": "swiglu", "vocab": "128256", "system": "h100-sxm5-80gb", "num_gpus": "1",
           "tp": "1", "pp": "1", "weight_dtype": "bf16", "kv_dtype": "bf16", "engine": "tensorrt-llm",
           "input_len": "467", "output_len": "256", "metric": "e2e_latency_ms", "notes": "", "source": ""}
    row.update(over)
    return row


def test_max_load_run_of_one_request_is_a_batch_of_one():
    # Derivation: one request arriving at t = 0 on an idle engine is exactly a static batch of one
    # (prefill, then 255 decode steps alone), whatever the engine's batch limits are.
    one = predict_row(_row(max_load="true", requests="1"))
    batch1 = predict_row(_row(batch="1"))
    assert one.value == pytest.approx(batch1.value, rel=1e-6)
    assert "1 requests in the run" in one.notes


def test_stated_count_sets_the_max_load_batch():
    # 500 requests of 723 tokens all fit a Llama-3.1-8B BF16 H100 KV cache (~60 GiB / 128 KiB per
    # token ~ 480k tokens > 361k), so all 500 decode together; 3000 (trtllm-bench's default count
    # for these lengths) keep the engine at its limit (768 sequences) for longer: a longer mean TPOT.
    few = predict_row(_row(max_load="true", metric="tpot_ms", source=TRITON_SOURCE))
    default = predict_row(_row(max_load="true", metric="tpot_ms"))
    assert "500 requests in the run" in few.notes
    assert few.value < default.value


@pytest.mark.parametrize(("cell", "message"), [
    ("0", "requests: must be a whole number from 1 to 1,000,000, got 0"),
    ("-5", "requests: must be a whole number from 1 to 1,000,000, got -5"),
    ("20000000", "requests: must be a whole number from 1 to 1,000,000, got 20000000"),
    ("1e400", "requests: must be a finite number, ASCII digits 0-9, got '1e400' (beyond the largest double"),
    ("many", "requests: must be a finite number, ASCII digits 0-9, got .many."),
])
def test_bad_requests_cell_skips_the_row_naming_the_column(cell, message):
    from gpuplan.interfaces.row_types import SkipRow

    with pytest.raises(SkipRow, match=message.replace("(", r"\(").replace(")", r"\)") if "|" not in message else message):
        run_requests({"requests": cell})


def test_a_count_beyond_the_simulators_limit_in_text_is_not_read():
    # "2,000,000 requests" in a source is beyond MAX_RUN_REQUESTS: the benchmark default applies
    assert run_requests({"notes": "2,000,000 requests served"}) is None
