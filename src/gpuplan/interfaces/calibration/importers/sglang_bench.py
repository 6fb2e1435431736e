"""SGLang `python -m sglang.bench_serving --output-file out.jsonl` results -> inference rows
(serving_result.py maps the keys).

Input: JSON lines, one object appended per benchmark run (sglang python/sglang/bench_serving.py:
`fout.write(json.dumps(result) + "\\n")`), with `backend`, `dataset_name`, `request_rate`,
`max_concurrency`, `random_input_len`, `random_output_len`, `duration`, `completed`,
`total_input_tokens`, `total_output_tokens`, `request_throughput`, `input_throughput`,
`output_throughput`, `mean_e2e_latency_ms`, `mean_ttft_ms`, `mean_tpot_ms`, `mean_itl_ms`,
`concurrency`, ... Each line gives its own set of rows (a sweep over rates or concurrencies).
"""

from __future__ import annotations

from typing import Mapping

from gpuplan.interfaces.calibration.importers.serving_result import check, load_results, result_rows

EXPECTED = "sglang bench_serving JSON lines with output_throughput, mean_ttft_ms, ..."


def parse(text: str, config: Mapping[str, str], prefix: str, filename: str) -> list[dict[str, str]]:
    check(config, "sglang")
    rows: list[dict[str, str]] = []
    for result in load_results(text, filename, "sglang"):
        rows += result_rows(result, config, "sglang", "SGLang bench_serving", filename, prefix, len(rows) + 1)
    return rows
