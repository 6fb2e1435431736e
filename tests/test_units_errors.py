import pytest

from gpuplan.errors import InputError
from gpuplan.units import GIB, parse_bytes, parse_count


def test_parse_bytes_binary_and_decimal():
    assert parse_bytes("1GiB") == 2**30  # binary prefix
    assert parse_bytes("48KiB") == 48 * 1024
    assert parse_bytes("2GB") == 2 * 10**9  # decimal prefix
    assert parse_bytes("4096") == 4096
    assert GIB == 1073741824


def test_parse_count_suffixes():
    assert parse_count("15T") == 15e12
    assert parse_count("300B") == 300e9
    assert parse_count("1e12") == 1e12


@pytest.mark.parametrize("bad", ["1 GiBs", "abc", "", "1XB"])
def test_parse_bytes_rejects_with_field(bad):
    with pytest.raises(InputError) as exc:
        parse_bytes(bad, field="--size")
    assert "--size" in str(exc.value)
