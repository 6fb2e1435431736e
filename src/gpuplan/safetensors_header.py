"""The one bounded parser of a safetensors file header (shared by gpuplan.formats and gpuplan.models).

File layout (safetensors format spec, huggingface/safetensors README "Format"): 8 bytes
little-endian u64 N, then N bytes of UTF-8 JSON {name: {"dtype", "shape", "data_offsets":
[begin, end]}, "__metadata__": {...}}, then the data buffer; offsets are relative to the byte
after the header.

Parsing is bounded: nothing larger than the header is ever read, and a file shorter than 8 bytes,
a header length above the file size or above MAX_HEADER_BYTES, a header that is not a UTF-8 JSON
object, or a tensor entry lacking a string dtype, a shape of non-negative integers or two integer
data_offsets inside the data buffer raise InputError naming the file and what is wrong; so do
JSON nested deeper than MAX_JSON_DEPTH (a deep `__metadata__` would crash Python's recursive
parser), a shape whose element count exceeds int64, and two tensors whose byte ranges overlap
(the format requires disjoint ranges; overlapping ones would be counted twice). For a dtype of
`DTYPE_BYTES` the byte range must hold exactly elements x bytes per element (the reference
implementation's `TensorInvalidInfo` check: safetensors/src/tensor.rs `Metadata::validate`), so a
shape cannot claim more (or fewer) parameters than the file stores; an unknown dtype is left to
the caller (a reader of tensor data refuses it; a parameter counter accepts dtypes it has never seen).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from gpuplan.errors import InputError
from gpuplan.validation_rules import INT64_MAX, decode_utf8, load_json_text

#: headers above this are refused (real checkpoints: a few MB; the reference implementation caps at 100 MB).
MAX_HEADER_BYTES = 100_000_000
#: the key of the free-form {str: str} metadata entry, which is not a tensor
METADATA_KEY = "__metadata__"
#: bytes per element of the safetensors dtypes with a whole-byte size (safetensors/src/tensor.rs `Dtype::size`)
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
               "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


@dataclass(frozen=True)
class SafetensorsHeader:
    """A validated header: the JSON object as written (metadata included), where the data buffer
    starts in the file (8 + N) and how many bytes it holds (file size - 8 - N)."""

    path: Path
    entries: dict
    data_start: int
    data_bytes: int

    def tensors(self) -> dict[str, dict]:
        """{tensor name: {"dtype", "shape", "data_offsets"}}, metadata left out, in file order."""
        return {name: info for name, info in self.entries.items() if name != METADATA_KEY}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_header(path: str | Path, field: str = "file") -> SafetensorsHeader:
    """Read and validate the header of the safetensors file `path` (bounded, see module doc).
    `field` is the caller's name for the path argument, carried by every InputError."""
    from gpuplan.input_files import regular_input_file

    p, st = regular_input_file(path, field, "safetensors file")
    try:
        size = st.st_size
        with p.open("rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise InputError(f"{p}: too short for a safetensors file (needs an 8-byte header length)", field=field)
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise InputError(f"{p}: safetensors header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit", field=field)
            if n > size - 8:
                raise InputError(f"{p}: safetensors header length {n} is larger than the file ({size} bytes)", field=field)
            raw = fh.read(n)
    except OSError as exc:
        raise InputError(f"cannot read safetensors file '{p}': {exc.strerror}", field=field) from None
    entries = load_json_text(decode_utf8(raw, f"{p}: safetensors header", field), f"{p}: safetensors header", field)
    if not isinstance(entries, dict):
        raise InputError(f"{p}: safetensors header must be a JSON object", field=field)
    data_bytes = size - 8 - n
    for name, info in entries.items():
        if name != METADATA_KEY:
            _check_entry(p, name, info, data_bytes, field)
    _check_disjoint(p, entries, field)
    return SafetensorsHeader(path=p, entries=entries, data_start=8 + n, data_bytes=data_bytes)


def _check_entry(p: Path, name: str, info: object, data_bytes: int, field: str) -> None:
    where = f"{p}: tensor '{name}'"
    if not isinstance(info, dict):
        raise InputError(f"{where} entry must be an object with dtype, shape and data_offsets", field=field)
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str):
        raise InputError(f"{where} needs a string dtype", field=field)
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise InputError(f"{where} shape must be a list of non-negative integers", field=field)
    if any(d > INT64_MAX for d in shape):
        raise InputError(f"{where} shape {shape!r} has a dimension past int64", field=field,
                         allowed="dimensions within int64")
    numel = 1
    for d in shape:
        numel *= d
        if numel > INT64_MAX:
            raise InputError(f"{where} shape {shape!r} holds more than 2^63-1 elements", field=field,
                             allowed="element count within int64")
    if (
        not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets)
        or not 0 <= offsets[0] <= offsets[1] <= data_bytes
    ):
        raise InputError(f"{where} data_offsets {offsets!r} fall outside the data section ({data_bytes} bytes)", field=field)
    size = DTYPE_BYTES.get(dtype)
    if size is not None and offsets[1] - offsets[0] != numel * size:
        raise InputError(f"{where}: shape {shape!r} of {dtype} is {numel * size:,} bytes but data_offsets {offsets!r} "
                         f"span {offsets[1] - offsets[0]:,}", field=field, allowed="data_offsets spanning elements x dtype bytes")


def _check_disjoint(p: Path, entries: dict, field: str) -> None:
    """InputError when two non-empty tensors share bytes of the data section (sorted sweep)."""
    spans = sorted(
        (info["data_offsets"][0], info["data_offsets"][1], name)
        for name, info in entries.items()
        if name != METADATA_KEY and info["data_offsets"][1] > info["data_offsets"][0]
    )
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise InputError(f"{p}: tensors '{n0}' [{b0}, {e0}) and '{n1}' [{b1}, {e1}) overlap in the data section",
                             field=field, allowed="disjoint data_offsets")
