"""Parameter counts and bytes from safetensors headers, never reading tensor data.

File layout (safetensors format spec, huggingface/safetensors README "Format"): 8 bytes
little-endian u64 N, then N bytes of UTF-8 JSON {name: {"dtype", "shape", "data_offsets":
[begin, end]}, "__metadata__": {...}}, then the data; offsets are relative to the byte after the
header. A sharded checkpoint has `model.safetensors.index.json` with a `weight_map`
{tensor name: shard file}.

Parsing is bounded (gpuplan.safetensors_header.parse_header): a header length above the file size
or above MAX_HEADER_BYTES, invalid JSON, a malformed entry, or offsets outside the data section
raise InputError; nothing larger than the header is ever allocated.

Logical parameter counting for quantized checkpoints (ecosystem.md 2.2; huggingface.js PRs
#1770, #2323):
- MXFP4 (gpt-oss): `*_blocks` U8 hold two FP4 values per byte -> 2 params per element; the
  sibling `*_scales` (U8 E8M0, one per 32 values) are quantization metadata, not parameters.
- GPTQ / AWQ: `qweight` (and AWQ `qzeros`) I32 pack 32 / bits values per element -> qweight counts
  numel * 32 / bits; `qzeros`, `scales`, `g_idx` are metadata.
- FP8 checkpoints (DeepSeek-V3): `*_scale_inv`, `*weight_scale`, `*input_scale` are metadata.
- F4 / FP4 dtypes: the shape counts logical FP4 elements (0.5 byte each).
Every tensor's bytes are reported per dtype whether or not it counts as a parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpuplan.errors import InputError
from gpuplan.safetensors_header import MAX_HEADER_BYTES, parse_header
from gpuplan.validation_rules import decode_utf8, load_json_text

#: bytes per element of each safetensors dtype (safetensors Dtype enum; F4/F6 are sub-byte).
DTYPE_BYTES: dict[str, float] = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2,
    "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "E8M0": 1, "UE8": 1,
    "F6_E3M2": 0.75, "F6_E2M3": 0.75, "F4": 0.5, "FP4": 0.5,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1,
}

_METADATA_SUFFIXES = ("_scale_inv", "weight_scale", "input_scale", "activation_scale", ".absmax", ".quant_map", "nested_absmax", "nested_quant_map")


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def numel(self) -> int:
        n = 1
        for dim in self.shape:
            n *= dim
        return n


@dataclass(frozen=True)
class DtypeTotals:
    tensors: int
    elements: int
    bytes: int


@dataclass(frozen=True)
class CheckpointSummary:
    """Counts over every tensor of a checkpoint (one file or all shards)."""

    params: int  # logical parameters (packed quantized weights unpacked, quantization metadata skipped)
    bytes: int  # data bytes of all tensors
    tensors: int
    metadata_tensors: int  # scales / zeros / g_idx ... skipped from `params`
    by_dtype: dict[str, DtypeTotals] = field(default_factory=dict)
    files: tuple[str, ...] = ()
    quantization: str = ""  # mxfp4, gptq, awq, fp8, bitsandbytes, or ""


def read_header(path: Path) -> list[TensorInfo]:
    """The tensors of one .safetensors file, from its header only (bounded and validated by
    gpuplan.safetensors_header.parse_header; dtypes are kept even when unknown)."""
    header = parse_header(path, field="path")
    return [
        TensorInfo(name=name, dtype=info["dtype"].upper(), shape=tuple(info["shape"]),
                   nbytes=info["data_offsets"][1] - info["data_offsets"][0])
        for name, info in header.tensors().items()
    ]


def _quant_bits(config: dict | None) -> int:
    q = (config or {}).get("quantization_config") or {}
    if not isinstance(q, dict):
        raise InputError("config field `quantization_config` must be an object", field="quantization_config")
    bits = q.get("bits") or q.get("w_bit") or 4
    if not isinstance(bits, int) or isinstance(bits, bool) or bits <= 0 or 32 % bits:
        raise InputError(f"quantization_config.bits must divide 32, got {bits!r}", field="quantization_config.bits")
    return bits


def summarise(tensors: list[TensorInfo], config: dict | None = None, files: tuple[str, ...] = ()) -> CheckpointSummary:
    """Logical parameter count and bytes per dtype (see module docstring for the packing rules)."""
    names = {t.name for t in tensors}
    bits = _quant_bits(config)
    params = 0
    metadata = 0
    by_dtype: dict[str, list[int]] = {}
    kinds: set[str] = set()
    for t in tensors:
        totals = by_dtype.setdefault(t.dtype, [0, 0, 0])
        totals[0] += 1
        totals[1] += t.numel
        totals[2] += t.nbytes
        module, _, leaf = t.name.rpartition(".")
        prefix = module + "." if module else ""
        if leaf.endswith("_scales") and (t.name[: -len("_scales")] + "_blocks") in names:
            metadata += 1
            kinds.add("mxfp4")
            continue
        if leaf.endswith("_blocks") and t.dtype == "U8":
            params += 2 * t.numel  # two FP4 (E2M1) values per byte
            kinds.add("mxfp4")
            continue
        if leaf == "qweight" and t.dtype in ("I32", "U32"):
            params += t.numel * (32 // bits)
            kinds.add("gptq/awq")
            continue
        if leaf in ("qzeros", "scales", "g_idx") and (prefix + "qweight") in names:
            metadata += 1
            continue
        if t.name.endswith(_METADATA_SUFFIXES) or ".quant_state." in t.name:
            metadata += 1
            kinds.add("fp8" if "scale" in leaf else "bitsandbytes")
            continue
        params += t.numel
    return CheckpointSummary(
        params=params,
        bytes=sum(t.nbytes for t in tensors),
        tensors=len(tensors),
        metadata_tensors=metadata,
        by_dtype={k: DtypeTotals(*v) for k, v in sorted(by_dtype.items())},
        files=files,
        quantization=",".join(sorted(kinds)),
    )


def _read_json(path: Path, what: str) -> dict:
    from gpuplan.input_files import read_input_bytes

    raw = read_input_bytes(path, "path", max_bytes=MAX_HEADER_BYTES, what=what)
    data = load_json_text(decode_utf8(raw, f"{what} '{path}'", "path"), f"{what} '{path}'", "path")
    if not isinstance(data, dict):
        raise InputError(f"{what} '{path}' must hold a JSON object", field="path")
    return data


def checkpoint_params(path: str | Path) -> CheckpointSummary:
    """Counts from a .safetensors file, a model.safetensors.index.json, or a directory holding either."""
    from gpuplan.input_files import input_stat, path_kind

    p = Path(path).expanduser()
    if path_kind(p) != "folder":
        input_stat(p, "path", "file or folder")  # says why nothing readable is there
    config = None
    if path_kind(p) == "folder":
        if path_kind(p / "config.json") == "file":
            config = _read_json(p / "config.json", "config")
        index = p / "model.safetensors.index.json"
        if path_kind(index) == "file":
            p = index
        else:
            shards = sorted(p.glob("*.safetensors"))
            if not shards:
                raise InputError(f"path: directory '{p}' holds no .safetensors file or index", field="path")
            tensors = [t for s in shards for t in read_header(s)]
            return summarise(tensors, config, tuple(s.name for s in shards))
    elif path_kind(p.parent / "config.json") == "file":
        config = _read_json(p.parent / "config.json", "config")
    input_stat(p, "path")
    if p.name.endswith(".json"):
        index = _read_json(p, "safetensors index")
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise InputError(f"safetensors index '{p}' has no weight_map of tensor -> shard file", field="weight_map")
        shards = sorted(set(weight_map.values()))
        tensors = []
        for shard in shards:
            shard_path = p.parent / shard
            if Path(shard).name != shard:
                raise InputError(f"safetensors index '{p}': shard name '{shard}' must be a file name", field="weight_map")
            if path_kind(shard_path) != "file":
                raise InputError(f"safetensors index '{p}': shard '{shard}' is missing", field="weight_map")
            tensors.extend(read_header(shard_path))
        return summarise(tensors, config, tuple(shards))
    return summarise(read_header(p), config, (p.name,))
