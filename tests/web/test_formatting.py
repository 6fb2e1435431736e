"""The web app's number formatting (static/format.js), run in Chromium: a unit from the key, thousands
separators, about four significant digits, words for keys; never raw bytes or 15-digit floats."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    ("weights_bytes", 1048575, "1 MiB"),  # 2^20 - 1 B = 1023.999 KiB: rounds to 1 MiB, not "1,024 KiB"
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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.floats(min_value=1e-3, max_value=1e12, allow_nan=False, allow_infinity=False), st.booleans())
def test_a_number_reads_back_within_its_last_shown_digit(fmt, x, negative):
    # invariant of num(): the text parses back (separators removed) to within half a unit of its last
    # shown digit, shows at most two decimals from 1 up (three significant digits below 1) and at least
    # three significant digits (rel. error <= 0.5%); integers are exact
    v = -x if negative else x
    text = fmt(f"F.num({v!r})")
    assert "e" not in text  # within 1e-3 .. 1e12 no exponent
    back = float(text.replace(",", ""))
    if v == int(v):
        assert back == v
        return
    decimals = len(text.split(".")[1]) if "." in text else 0
    assert decimals <= 2 or abs(v) < 1
    assert abs(back - v) <= 0.5 * 10.0**-decimals * (1 + 1e-9)
    assert back == pytest.approx(v, rel=5e-3)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.integers(min_value=0, max_value=2**60), st.sampled_from([2**20 - 1, 2**30 - 1, 2**40 - 1])))
def test_bytes_never_show_raw_past_a_kib(fmt, n):
    text = fmt(f"F.bytes({n})")
    unit = text.split()[-1]
    assert unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    assert float(text.split()[0].replace(",", "")) < 1024 or unit == "PiB"
    assert (unit == "B") == (n < 1024)
