"""gpuplan.validation_rules, units parsing, spec number rules and the atomic writer."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gpuplan.errors import InputError
from gpuplan.output_files import write_atomic
from gpuplan.specs import TrainPlan
from gpuplan.units import parse_bytes, parse_count
from gpuplan.validation_rules import INT64_MAX, check_number, json_depth, load_json_text
from gpuplan.workloads.training.plan_search import _divisors


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_is_refused_naming_the_field(value):
    with pytest.raises(InputError, match=r"^--pue: must be a finite number > 0, got") as exc:
        check_number(value, "--pue", gt=0)
    assert exc.value.field == "--pue" and exc.value.allowed == "a finite number > 0"


def test_int64_bound_and_range():
    assert check_number(INT64_MAX, "n", integer=True) == INT64_MAX  # 2^63 - 1 is the largest int64
    with pytest.raises(InputError, match="int64"):
        check_number(INT64_MAX + 1, "n", integer=True)
    with pytest.raises(InputError, match=r">= 0 and <= 1"):
        check_number(1.5, "u", ge=0, le=1)
    assert check_number(4.0, "n", integer=True) == 4  # an integral float is an integer


@pytest.mark.parametrize("text", ["1e400", "inf", "nan", "-1", "9223372036854775808", "1e19"])
def test_sizes_out_of_range(text):
    with pytest.raises(InputError, match="^size"):
        parse_bytes(text, "size")


def test_sizes_in_range():
    assert parse_bytes("1GiB") == 2**30
    assert parse_bytes("48KiB") == 49152  # 48 x 1024
    assert parse_bytes("2GB") == 2 * 10**9  # decimal GB
    with pytest.raises(InputError, match="finite count"):
        parse_count("1e400", "tokens")
    assert parse_count("15T") == 1.5e13


def test_specs_reject_nan_inf_and_huge_ints():
    with pytest.raises(ValidationError):
        TrainPlan(tp=2**63)
    with pytest.raises(ValidationError):
        TrainPlan(tp=0)
    from gpuplan.specs.gpu import PeakTflops

    with pytest.raises(ValidationError):
        PeakTflops(dense=math.inf)
    with pytest.raises(ValidationError):
        PeakTflops(dense=math.nan)


def test_json_depth_limit_and_constants():
    assert json_depth({"a": [1, {"b": []}]}) == 4  # dict > list > dict > list
    with pytest.raises(InputError, match="deeper than 64"):
        load_json_text("[" * 65 + "]" * 65, "f", "file")
    assert load_json_text("[" * 64 + "]" * 64, "f", "file") is not None
    with pytest.raises(InputError, match="not valid JSON"):
        load_json_text('{"a": NaN}', "f", "file")  # NaN is not JSON (RFC 8259), Python accepts it


@settings(max_examples=300, deadline=None)
@given(n=st.integers(min_value=1, max_value=5000))
def test_divisors_by_factorisation_match_brute_force(n):
    assert _divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


def test_divisors_of_large_numbers():
    # 2^62 has exactly 63 divisors (2^0 .. 2^62); 9,999,991 is prime
    assert len(_divisors(2**62)) == 63 and _divisors(9_999_991) == [1, 9_999_991]
    # 10^7 = 2^7 5^7: (7+1)(7+1) = 64 divisors
    assert len(_divisors(10**7)) == 64


def test_atomic_write_replaces_whole_and_refuses_folders(tmp_path):
    path = tmp_path / "r.json"
    write_atomic(path, json.dumps({"a": 1}), "--out")
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
    with pytest.raises(InputError, match="is a folder"):
        write_atomic(tmp_path, "x", "--out")
    with pytest.raises(InputError, match="does not exist"):
        write_atomic(tmp_path / "missing" / "r.json", "x", "--out")
