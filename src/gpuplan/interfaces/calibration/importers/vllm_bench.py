"""vLLM serving benchmark results -> inference rows (serving_result.py maps the keys).

Input: the JSON file that `python benchmarks/benchmark_serving.py ... --save-result` (vLLM
benchmarks/benchmark_serving.py) or `vllm bench serve ... --save-result` (vllm/benchmarks/serve.py)
writes: one object with the run's arguments (`backend`, `model_id`, `num_prompts`, `request_rate`,
`max_concurrency`, ...) and its results (`duration`, `completed`, `total_input_tokens`,
`total_output_tokens`, `request_throughput`, `output_throughput`, `total_token_throughput`,
`mean_ttft_ms`, `median_ttft_ms`, `p99_ttft_ms`, `mean_tpot_ms`, ..., `mean_itl_ms`, ...,
`mean_e2el_ms`, ...). A JSON list of such objects, or JSON lines, is accepted too.
"""

from __future__ import annotations

from typing import Mapping

from gpuplan.interfaces.calibration.importers.serving_result import check, load_results, result_rows

EXPECTED = "a benchmark_serving / vllm bench serve result JSON with output_throughput, mean_ttft_ms, ..."


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check(config, "vllm")
    rows: list[dict[str, str]] = []
    for result in load_results(text, filename, "vllm"):
        rows += result_rows(result, config, "vllm", "vLLM benchmark_serving", filename, prefix, len(rows) + 1)
    return rows
