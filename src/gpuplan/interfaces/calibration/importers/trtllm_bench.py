"""TensorRT-LLM serving benchmark results -> inference rows (serving_result.py maps the keys).

Input: the JSON file that `python -m tensorrt_llm.serve.scripts.benchmark_serving ... --save-result
--result-filename F` writes against a `trtllm-serve` endpoint. TensorRT-LLM's script is adopted from
vLLM's benchmark_serving.py (NVIDIA/TensorRT-LLM tensorrt_llm/serve/scripts/benchmark_dataset.py
header: "Adopted from vllm-project/vllm benchmarks/benchmark_dataset.py"), and its result JSON has
vLLM's keys (`request_rate`, `max_concurrency`, `completed`, `total_input_tokens`,
`output_throughput`, `mean_ttft_ms`, `mean_tpot_ms`, `mean_e2el_ms`, ...), so the rows are those of
the `vllm` importer with engine `tensorrt-llm`.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuplan.interfaces.calibration.importers.serving_result import (
    check,
    load_results,
    result_rows,
)

EXPECTED = "a tensorrt_llm.serve.scripts.benchmark_serving result JSON with output_throughput, mean_ttft_ms, ..."


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check(config, "trtllm")
    rows: list[dict[str, str]] = []
    for result in load_results(text, filename, "trtllm"):
        rows += result_rows(result, config, "tensorrt-llm", "TensorRT-LLM benchmark_serving", filename, prefix,
                            len(rows) + 1)
    return rows
