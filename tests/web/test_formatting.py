"""The web app's number formatting (static/format.js), run in Chromium: a unit from the key, thousands
separators, about four significant digits, words for keys; never raw bytes or 15-digit floats."""

from __future__ import annotations

import pytest

from .test_browser import browser, chromium, server  # noqa: F401 - fixtures


@pytest.fixture(scope="module")
def fmt(server, browser):  # noqa: F811
    context = browser.new_context()
    pg = context.new_page()
    pg.goto(server + "/static/style.css")  # any same-origin document: format.js is imported into it
    pg.evaluate(f"async () => {{ window.F = await import('{server}/static/format.js'); }}")
    yield lambda expr: pg.evaluate(expr)
    context.close()


CASES = [
    # (key, value, shown); each expected text derived by hand from the rule in format.js
    ("ttft_p90_ms", 1234.5, "1,235 ms"),  # >= 1000: no decimals, thousands separator
    ("tpot_p90_ms", 62.087609649512174, "62.09 ms"),  # 10..100: two decimals (four significant digits)
    ("e2e_p50_ms", 396.7250578710774, "396.7 ms"),  # 100..1000: one decimal
    ("kv_cache_bytes_per_token", 131072, "128 KiB"),  # 131072 = 2^17 B = 128 KiB
    ("allocated_bytes", 61137337344.0, "56.94 GiB"),  # 61137337344 / 2^30 = 56.938...
    ("kv_cache_gib_per_gpu", 54.92015838623047, "54.92 GiB"),
    ("mfu_pct", 41.23456, "41.23%"),
    ("capex_usd", 12345678.9, "$12,345,679"),  # whole dollars from $100 up
    ("usd_per_million_output_tokens", 0.3456, "$0.35"),  # cents below $100
    ("output_tokens_per_s", 3085.78523825858, "3,086 tok/s"),
    ("facility_power_kw", 1234.567, "1,235 kW"),
    ("step_time_s", 0.000123, "123 µs"),  # below 1 ms: microseconds
    ("min_time_s", 0.0123456, "12.35 ms"),  # below 1 s: milliseconds
    ("mse", 0.000123, "1.23e-4"),  # below 1e-3: scientific, three significant digits
    ("capex_breakdown_usd.gpus", 8640000, "$8,640,000"),  # the container's unit
    ("grid_kg_co2_per_kwh", 0.39, "0.39 kg CO₂/kWh"),
    ("gpus", 1024, "1,024"),  # no unit: an integer with separators
    ("fits", True, "yes"),
]


@pytest.mark.parametrize("key,value,shown", CASES)
def test_value_shows_with_the_unit_its_key_names(fmt, key, value, shown):
    v = "true" if value is True else repr(value)
    assert fmt(f"F.withUnit('{key}', {v})") == shown


def test_a_band_shows_as_a_range(fmt):
    assert fmt("F.withUnit('band_80pct.ttft_ms', [224.2064, 317.5386])") == "224.2 ms – 317.5 ms"


@pytest.mark.parametrize("key,words", [
    ("kv_cache_gib_per_gpu", "KV cache per GPU"), ("ttft_p90_ms", "TTFT p90"),
    ("usd_per_million_output_tokens", "$ per million output tokens"), ("output_tokens_per_s", "Output tokens/s"),
    ("kv_cache_bytes_per_token", "KV cache per token"), ("capex_breakdown_usd.gpus", "Capex breakdown · GPUs"),
    ("on_prem_usd_per_gpu_hour", "On-prem $ per GPU-hour"), ("mape_pct", "MAPE"),
    ("grid_kg_co2_per_kwh", "Grid carbon intensity"),
])
def test_keys_read_as_words(fmt, key, words):
    assert fmt(f"F.label('{key}')") == words
