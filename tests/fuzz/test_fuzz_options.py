"""Fuzz every option of every command with malformed values (hypothesis, in-process CliRunner).

Property (issue 20): whatever the value, the CLI exits 0 or 2, prints no traceback and no
"internal error", and its --json output (result or error object) holds no NaN / Infinity.
Example counts scale with GPUPLAN_FUZZ_SCALE (default 1; 10 for a deep local run).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_cases import MALFORMED
from harness import command_options, judge, run_case, with_option

SCALE = int(os.environ.get("GPUPLAN_FUZZ_SCALE", "1"))
OPTIONS = command_options()

#: malformed text: the fixed list, numbers hypothesis picks (edges included), and short junk
VALUES = st.one_of(
    st.sampled_from(MALFORMED),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(alphabet="0123456789.eE+-[]/ bk", max_size=8),
)


@settings(max_examples=150 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(OPTIONS), value=VALUES)
def test_any_value_of_any_option_exits_0_or_2_cleanly(case, value):
    path, option = case
    args = with_option(path, option, value)
    result = run_case(args)
    why = judge(args, result)
    assert why is None, f"gpuplan {' '.join(args)}: {why}"


def test_every_command_is_fuzzed():
    # every command with options in the live CLI has a base invocation (cli_cases.BASE)
    paths = {p for p, _ in OPTIONS}
    assert len(paths) >= 30 and len(OPTIONS) >= 150
