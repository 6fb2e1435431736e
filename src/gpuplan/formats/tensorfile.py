"""Minimal safetensors tensor-data reader/writer with numpy (for quantised weights).

File layout (huggingface/safetensors README): 8-byte little-endian unsigned header length N,
N bytes of UTF-8 JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{str: str}}, then the data buffer; offsets are relative to the buffer, little-endian, C order.

Parsing is bounded (gpuplan.safetensors_header.parse_header: a header longer than the file or
than 100 MB, invalid JSON, offsets outside the buffer); an unknown dtype or offsets not matching
the shape also raise InputError. (Model-level
header counting lives in gpuplan.models; this module only moves tensor data.)
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np

from gpuplan.errors import InputError
from gpuplan.output_files import atomic_output
from gpuplan.validation_rules import MAX_ARRAY_ELEMENTS
from gpuplan.safetensors_header import MAX_HEADER_BYTES, parse_header  # noqa: F401 - MAX_HEADER_BYTES stays a public name here

DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16), "I64": np.dtype("<i8"), "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U64": np.dtype("<u8"), "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"), "U8": np.dtype("u1"), "BOOL": np.dtype("?"),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "F8_E8M0": np.dtype(ml_dtypes.float8_e8m0fnu),
}
NAMES = {v: k for k, v in DTYPES.items()}


def read_header(path: str | Path) -> tuple[dict, int]:
    """(header dict, data-buffer start offset) of a safetensors file, validated: the bounded
    gpuplan.safetensors_header.parse_header, then every dtype known here and every tensor's
    data_offsets spanning exactly shape x itemsize bytes."""
    parsed = parse_header(path, field="file")
    p = parsed.path
    for name, info in parsed.tensors().items():
        dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES:
            raise InputError(f"{p}: tensor '{name}' has unsupported dtype {dtype}; allowed: {', '.join(DTYPES)}", field="file")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * DTYPES[dtype].itemsize:
            raise InputError(f"{p}: tensor '{name}' data_offsets do not match shape {shape} x {dtype}", field="file")
    return parsed.entries, parsed.data_start


def read_safetensors(path: str | Path, names: list[str] | None = None) -> dict[str, np.ndarray]:
    """Tensors of a safetensors file (all, or `names`) as numpy arrays (BF16/FP8 via ml_dtypes)."""
    header, start = read_header(path)
    known = [k for k in header if k != "__metadata__"]
    wanted = known if names is None else list(names)
    for name in wanted:
        if name not in header or name == "__metadata__":
            raise InputError(f"{path}: no tensor '{name}'; tensors: {', '.join(known[:20])}", field="tensor")
    out = {}
    with Path(path).open("rb") as fh:
        for name in wanted:
            info = header[name]
            begin, end = info["data_offsets"]
            count = (end - begin) // DTYPES[info["dtype"]].itemsize
            if count > MAX_ARRAY_ELEMENTS:  # before reading: arrays are held in memory
                raise InputError(f"{path}: tensor '{name}' has {count:,} elements; the limit is {MAX_ARRAY_ELEMENTS:,} "
                                 f"(arrays are held in memory)", field="file", allowed=f"<= {MAX_ARRAY_ELEMENTS} elements")
            fh.seek(start + begin)
            data = fh.read(end - begin)
            if len(data) != end - begin:
                raise InputError(f"{path}: tensor '{name}' is truncated: {end - begin} bytes declared, "
                                 f"{len(data)} in the file", field="file")
            out[name] = np.frombuffer(data, dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).copy()
    return out


def write_safetensors(path: str | Path, tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` as a safetensors file (written to a temporary name, then renamed)."""
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    arrays = []
    for name, arr in tensors.items():
        a = np.ascontiguousarray(arr)
        if a.dtype.newbyteorder("<") in NAMES and a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        dtype = NAMES.get(a.dtype)
        if dtype is None:
            raise InputError(f"tensor '{name}': dtype {a.dtype} cannot be stored; allowed: {', '.join(DTYPES)}", field="tensors")
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        arrays.append(a)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # align the data buffer to 8 bytes, as the reference writer does
    with atomic_output(path, "output") as tmp, tmp.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for a in arrays:
            fh.write(a.tobytes())


def read_tensor(path: str | Path, tensor: str | None = None) -> np.ndarray:
    """One array from a .npy file, or tensor `tensor` of a .safetensors file (the first if None)."""
    from gpuplan.input_files import regular_input_file

    p, _ = regular_input_file(path, "file", "tensor file")
    if p.suffix == ".npy":
        return _read_npy(p)
    if p.suffix == ".safetensors":
        if tensor is None:
            header, _ = read_header(p)
            names = [k for k in header if k != "__metadata__"]
            if not names:
                raise InputError(f"{p}: holds no tensors", field="file")
            tensor = names[0]
        return read_safetensors(p, [tensor])[tensor]
    raise InputError(f"{p}: unsupported file type '{p.suffix}'; allowed: .npy, .safetensors", field="file")


def _read_npy(p: Path) -> np.ndarray:
    """A .npy array, its header checked first (numpy format spec, `numpy.lib.format`): a numeric
    dtype, at least one element and at most MAX_ARRAY_ELEMENTS, and the file long enough, so a
    crafted shape never allocates and an empty or truncated file is a one-line InputError."""
    from numpy.lib import format as npy

    try:
        with p.open("rb") as fh:
            version = npy.read_magic(fh)
            read = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, fortran, dtype = read(fh, max_header_size=10_000)
            header_end = fh.tell()
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as exc:
        raise InputError(f"{p}: not a readable .npy file ({one_line(exc)})", field="file") from None
    if dtype.hasobject or dtype.kind == "b" or dtype.kind not in "iuf" and dtype not in NAMES:
        raise InputError(f"{p}: .npy dtype {dtype} is not numeric; allowed: integer or floating-point", field="file")
    count = 1
    for dim in shape:
        count *= dim
    if count == 0:
        raise InputError(f"{p}: .npy array is empty (shape {shape}); give at least one element", field="file",
                         allowed="at least one element")
    if count > MAX_ARRAY_ELEMENTS:
        raise InputError(f"{p}: .npy array has {count:,} elements; the limit is {MAX_ARRAY_ELEMENTS:,} "
                         f"(arrays are held in memory)", field="file", allowed=f"<= {MAX_ARRAY_ELEMENTS} elements")
    if p.stat().st_size - header_end < count * dtype.itemsize:
        raise InputError(f"{p}: .npy file is truncated: shape {shape} x {dtype} needs {count * dtype.itemsize} bytes",
                         field="file")
    try:
        return np.load(p, allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise InputError(f"{p}: not a readable .npy file ({one_line(exc)})", field="file") from None


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]
