"""The shared bounded safetensors header parser (gpuplan.safetensors_header), used by both
gpuplan.formats.tensorfile and gpuplan.models.safetensors."""

import json
import struct

import pytest

from gpuplan.errors import InputError
from gpuplan.safetensors_header import parse_header


def _write(path, header, data: bytes = b""):
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path, len(raw)


def test_offsets_and_metadata(tmp_path):
    hdr = {"__metadata__": {"k": "v"}, "w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}
    p, n = _write(tmp_path / "m.safetensors", hdr, b"\0" * 12)
    h = parse_header(p)
    # safetensors spec: data starts right after the 8-byte length and the N-byte JSON header
    assert h.data_start == 8 + n and h.data_bytes == 12
    assert list(h.tensors()) == ["w"] and h.entries["__metadata__"] == {"k": "v"}


@pytest.mark.parametrize(
    "header, data, wanted",
    [
        ({"w": 3}, b"", "must be an object"),
        ({"w": {"shape": [1], "data_offsets": [0, 1]}}, b"\0", "string dtype"),
        ({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}, b"", "non-negative"),
        ({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}, b"\0" * 4, "outside"),
        ([1, 2], b"", "JSON object"),
        (b"\xff\xfe", b"", "not UTF-8 text"),
    ],
)
def test_malformed_headers_name_the_file_and_field(tmp_path, header, data, wanted):
    p, _ = _write(tmp_path / "bad.safetensors", header, data)
    with pytest.raises(InputError, match=wanted) as exc:
        parse_header(p, field="path")
    assert str(p) in str(exc.value) and exc.value.field == "path"


def test_length_bounds(tmp_path):
    p = tmp_path / "big.safetensors"
    p.write_bytes(struct.pack("<Q", 100_000_001) + b"{}")  # one byte over the 100 MB cap
    with pytest.raises(InputError, match="limit"):
        parse_header(p)
    p.write_bytes(struct.pack("<Q", 3) + b"{}")  # 3 > 2 bytes left in the file
    with pytest.raises(InputError, match="larger than the file"):
        parse_header(p)
