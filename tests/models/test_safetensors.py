"""safetensors headers: tiny files built here; quantized packing; bounded, clean errors."""

import json
import struct

import pytest

from gpuplan.errors import InputError
from gpuplan.models.safetensors import checkpoint_params

BYTES = {"BF16": 2, "F32": 4, "U8": 1, "I32": 4, "F8_E4M3": 1, "F8_E8M0": 1, "F4": 0.5, "F16": 2}


def write(path, tensors, pad_data=True, header_override=None):
    """tensors: {name: (dtype, shape)}; data laid out back to back (zeros)."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        size = int(n * BYTES[dtype])
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = header_override if header_override is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + (b"\0" * offset if pad_data else b""))
    return path


def test_plain_file(tmp_path):
    p = write(tmp_path / "m.safetensors", {"a.weight": ("BF16", [4, 8]), "b.bias": ("F32", [8])})
    s = checkpoint_params(p)
    assert s.params == 40 and s.bytes == 4 * 8 * 2 + 8 * 4 and s.by_dtype["BF16"].elements == 32


def test_mxfp4_blocks_and_scales(tmp_path):
    # gpt-oss stores an expert weight of 32 x 2880 values as U8 blocks [32, 90, 16] (2 FP4 per byte)
    # and scales U8 [32, 90] (one E8M0 per 32 values): 92,160 parameters, scales not counted.
    p = write(tmp_path / "m.safetensors", {
        "mlp.experts.down_proj_blocks": ("U8", [32, 90, 16]),
        "mlp.experts.down_proj_scales": ("U8", [32, 90]),
        "mlp.experts.down_proj_bias": ("BF16", [32]),
    })
    s = checkpoint_params(p)
    assert s.params == 32 * 2880 + 32 and s.metadata_tensors == 1 and "mxfp4" in s.quantization


def test_gptq_int32_packing(tmp_path):
    # GPTQ 4-bit: qweight I32 [in/8, out] packs 8 values per int32; qzeros/scales/g_idx are metadata.
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "gptq", "bits": 4}}))
    write(tmp_path / "model.safetensors", {
        "l.qweight": ("I32", [512, 4096]), "l.qzeros": ("I32", [32, 512]), "l.scales": ("F16", [32, 4096]),
        "l.g_idx": ("I32", [4096]),
    })
    s = checkpoint_params(tmp_path)
    assert s.params == 4096 * 4096 and s.metadata_tensors == 3


def test_fp8_scales_and_f4(tmp_path):
    # DeepSeek-V3 FP8: weight F8_E4M3 [256, 256] + weight_scale_inv F32 [2, 2] (128x128 blocks)
    p = write(tmp_path / "m.safetensors", {
        "w.weight": ("F8_E4M3", [256, 256]), "w.weight_scale_inv": ("F32", [2, 2]),
        "e.weight": ("F4", [64, 64]), "e.weight_scale": ("F8_E8M0", [64, 4]),
    })
    s = checkpoint_params(p)
    assert s.params == 256 * 256 + 64 * 64
    assert s.by_dtype["F4"].bytes == 64 * 64 // 2  # half a byte per FP4 element


def test_sharded_index(tmp_path):
    write(tmp_path / "model-00001-of-00002.safetensors", {"a": ("BF16", [10, 10])})
    write(tmp_path / "model-00002-of-00002.safetensors", {"b": ("BF16", [5])})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 210}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    s = checkpoint_params(tmp_path)
    assert s.params == 105 and s.bytes == 210 and len(s.files) == 2


def test_missing_shard(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "gone.safetensors"}}))
    with pytest.raises(InputError, match="gone.safetensors"):
        checkpoint_params(tmp_path / "model.safetensors.index.json")


def test_header_length_larger_than_file(tmp_path):
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", 10_000) + b"{}")
    with pytest.raises(InputError, match="larger than the file"):
        checkpoint_params(p)


def test_header_length_above_limit(tmp_path):
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", 2**60) + b"{}")
    with pytest.raises(InputError, match="limit"):
        checkpoint_params(p)


def test_invalid_json_and_bad_offsets(tmp_path):
    with pytest.raises(InputError, match="JSON"):
        checkpoint_params(write(tmp_path / "a.safetensors", {}, header_override=b"{nope"))
    with pytest.raises(InputError, match="outside"):
        checkpoint_params(write(tmp_path / "b.safetensors", {"a": ("BF16", [1000])}, pad_data=False))
    with pytest.raises(InputError, match="short"):
        (tmp_path / "c.safetensors").write_bytes(b"\x01\x02")
        checkpoint_params(tmp_path / "c.safetensors")


def test_unknown_dtype_does_not_crash(tmp_path):
    raw = json.dumps({"x": {"dtype": "F8_E3M4_NEW", "shape": [3], "data_offsets": [0, 3]}}).encode()
    p = tmp_path / "m.safetensors"
    p.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0\0\0")
    assert checkpoint_params(p).params == 3
