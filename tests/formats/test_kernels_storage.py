"""The compiled single-pass kernel equals the numpy reference bit for bit; packing and the
gpt-oss-style safetensors storage round-trip exactly; malformed files raise InputError."""

from __future__ import annotations

import json
import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan import formats as F
from gpuplan.errors import InputError
from gpuplan.formats import block, kernels

from .extreme_inputs import extreme_blocks

MX = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8"]


@pytest.fixture(scope="module")
def hard_input() -> np.ndarray:
    x = extreme_blocks(0)
    x[7, :32] = np.uint32(0x42FFFFFF).view(np.float32)  # 127.99999 (formats.md 7.3 #43)
    return x


@pytest.mark.parametrize("fmt", MX)
def test_kernel_equals_numpy_reference(hard_input, fmt):
    bf = F.block_format(fmt)
    blocks = hard_input.reshape(-1, 32)
    for rule in F.ScaleRule:
        kc, ks = kernels.quantize_mx_rows(blocks, bf, rule)
        nc, ns = block.quantize_mx_blocks(blocks, bf, rule)
        np.testing.assert_array_equal(ks, ns, err_msg=f"{fmt} {rule}")
        np.testing.assert_array_equal(kc, nc, err_msg=f"{fmt} {rule}")


def test_floor_scale_code_equals_the_general_rule_on_every_exponent_and_subnormal():
    # the branch-free FLOOR code against `_scale_code`'s loop (exact floor(log2)) on: zero, every
    # subnormal mantissa power of two and its neighbours, every exponent field with mantissa 0, 1 and
    # all ones, Inf and NaN magnitudes (0x7F800000, 0x7FC00000), for every MX element emax
    subnormals = [m for e in range(23) for m in ((1 << e) - 1, 1 << e, (1 << e) + 1, (2 << e) - 1)]
    normals = [(f << 23) | m for f in range(1, 255) for m in (0, 1, 0x7FFFFF)]
    patterns = np.array(sorted(set([0] + subnormals + normals + [0x7F800000, 0x7FC00000])), dtype=np.int64)
    for fmt in ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4"]:
        el = F.block_format(fmt).element
        for ab in patterns:
            amax = np.float32(np.uint32(ab).view(np.float32)) if ab < 0x7F800000 else np.float32(0.0)
            want = kernels._scale_code(ab, amax, 0, el.emax, el.mbits, np.float32(el.max_value))
            assert kernels._floor_scale_code(np.int32(ab), el.emax) == want, (fmt, hex(ab))


@pytest.mark.parametrize("fmt", MX)
@settings(max_examples=30, deadline=None)
@given(words=st.lists(st.integers(0, 2**32 - 1), min_size=32, max_size=32 * 6).map(lambda w: w[: len(w) // 32 * 32]),
       exponent_shift=st.integers(-40, 40))
def test_kernel_equals_numpy_reference_on_any_bit_patterns(fmt, words, exponent_shift):
    # any float32 bit patterns (NaN payloads, Inf, subnormals, both zeros), half of them moved towards one
    # binade so that blocks also hold values close together; every scale rule, and FP4 packed
    bits = np.array(words, dtype=np.uint32)
    field = (bits >> 23) & 0xFF
    near = np.clip(field.astype(np.int64) % 8 + 127 + exponent_shift, 1, 254).astype(np.uint32)
    bits[::2] = (bits[::2] & np.uint32(0x807FFFFF)) | (near[::2] << np.uint32(23))
    blocks = bits.view(np.float32).reshape(-1, 32)
    bf = F.block_format(fmt)
    for rule in F.ScaleRule:
        with np.errstate(all="ignore"):
            nc, ns = block.quantize_mx_blocks(blocks, bf, rule)
        kc, ks = kernels.quantize_mx_rows(blocks, bf, rule)
        np.testing.assert_array_equal(ks, ns, err_msg=f"{fmt} {rule}")
        np.testing.assert_array_equal(kc, nc, err_msg=f"{fmt} {rule}")
        if fmt == "mxfp4":
            pc, ps = kernels.quantize_mx_rows(blocks, bf, rule, pack4=True)
            np.testing.assert_array_equal(ps, ns)
            np.testing.assert_array_equal(pc, F.pack_fp4(nc))


def test_fp4_value_bits_equal_the_e2m1_table():
    # OCP MX 5.3.3 E2M1 values of codes 0..15, as gpt-oss weights.py's FP4_VALUES lists them
    table = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
    got = np.array([kernels._fp4_value_bits(np.int32(c)) for c in range(16)], np.int32).view(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), np.array(table, np.float32).view(np.uint32))


def test_every_minifloat_element_decodes_from_its_bits():
    # the dequantize kernels build FP8/FP6/FP4 values from the code bits; `_decoder_for` falls back to
    # the value table when its decoder differs from the table on any code: none may fall back
    for name in ["e4m3", "e5m2", "e3m2", "e2m3", "e2m1"]:
        assert kernels._decoder_for(F.ELEMENTS[name]) is not None, name
    assert kernels._decoder_for(F.block_format("mxint8").element) is None  # INT8 reads the table


@pytest.mark.parametrize("fmt", MX)
@pytest.mark.parametrize("packed4", [False, True])
def test_compiled_dequantize_equals_numpy_reference_on_every_code_and_scale(fmt, packed4):
    # every element code in every E8M0 scale (0..255, 255 = NaN block), blocks of 32 (OCP MX); the
    # reference is QuantizedTensor.dequantize's numpy path: ldexp(values, scale - 127) in float64,
    # rounded once to float32
    bf = F.block_format(fmt)
    if packed4 and bf.element_bits != 4:
        pytest.skip("packing two codes per byte is FP4 only")
    per_scale = max(32, 1 << bf.element_bits)  # every code at least once under each scale
    codes = np.tile(np.arange(per_scale) % (1 << bf.element_bits), 256).astype(np.uint8).reshape(-1, 32)
    scales = np.repeat(np.arange(256), per_scale // 32).astype(np.uint8)
    with np.errstate(over="ignore"):
        ref = np.ldexp(bf.element.values[codes].astype(np.float64), scales.astype(np.int64)[:, None] - 127).astype(np.float32)
    stored = F.pack_fp4(codes) if packed4 else codes
    got = kernels.dequantize_mx_rows(stored, scales, bf, packed4=packed4).reshape(-1, 32)
    np.testing.assert_array_equal(got.view(np.uint32)[scales != 255], ref.view(np.uint32)[scales != 255])
    assert np.isnan(got[scales == 255]).all()


def test_quantize_uses_same_result_above_fast_path_threshold(hard_input):
    big = np.tile(hard_input, (1, 1))  # 131072 elements >= FAST_PATH_MIN_ELEMENTS
    assert big.size >= block.FAST_PATH_MIN_ELEMENTS
    q = F.quantize(big, "mxfp4", scale_rule="rceil")
    ref_c, ref_s = block.quantize_mx_blocks(big.reshape(-1, 32), F.block_format("mxfp4"), F.ScaleRule.RCEIL)
    np.testing.assert_array_equal(q.codes.reshape(-1, 32), ref_c)
    np.testing.assert_array_equal(q.scales.reshape(-1), ref_s)


def test_quantize_packed_mxfp4_equals_pack_of_codes(hard_input):
    p = F.quantize_packed(hard_input, "mxfp4")
    q = F.quantize(hard_input, "mxfp4")
    assert p.blocks.shape == (256, 16, 16) and p.scales.shape == (256, 16)  # gpt-oss layout
    np.testing.assert_array_equal(p.blocks.reshape(256, -1), F.pack_fp4(q.codes))
    np.testing.assert_array_equal(p.dequantize(), q.dequantize())


def test_fp4_low_nibble_first():
    # gpt-oss weights.py: even element = blk & 0xF, odd = blk >> 4 -> codes [1, 2] pack to 0x21
    assert F.pack_fp4(np.array([1, 2], np.uint8)).tolist() == [0x21]
    assert F.unpack_fp4(np.array([0x21], np.uint8)).tolist() == [1, 2]


def test_fp6_four_codes_in_three_bytes():
    # word = 1 | 2<<6 | 3<<12 | 4<<18 = 1 + 128 + 12288 + 1048576 = 1060993 = 0x103081
    assert F.pack_fp6(np.array([1, 2, 3, 4], np.uint8)).tolist() == [0x81, 0x30, 0x10]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 63), min_size=1, max_size=40).map(lambda v: v * 4))
def test_pack_round_trips(values):
    c6 = np.array(values, np.uint8)
    np.testing.assert_array_equal(F.unpack_fp6(F.pack_fp6(c6)), c6)
    c4 = c6 & 0xF
    np.testing.assert_array_equal(F.unpack_fp4(F.pack_fp4(c4)), c4)


def test_pack_rejects_bad_codes():
    with pytest.raises(InputError):
        F.pack_fp4(np.array([1, 16], np.uint8))
    with pytest.raises(InputError):
        F.pack_fp6(np.array([1, 2, 3], np.uint8))


def test_safetensors_round_trip_and_layout(tmp_path):
    path = tmp_path / "t.safetensors"
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1.5, -2], dtype=ml_dtypes.bfloat16),
               "c": np.array([7], np.uint8)}
    F.write_safetensors(path, tensors, metadata={"k": "v"})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    assert header["a"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}
    assert header["b"]["dtype"] == "BF16" and header["__metadata__"] == {"k": "v"}
    back = F.read_safetensors(path)
    for k, v in tensors.items():
        np.testing.assert_array_equal(back[k], v)
        assert back[k].dtype == v.dtype


def test_gpt_oss_style_blocks_and_scales(tmp_path):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 96)).astype(np.float32)
    p = F.quantize_packed(w, "mxfp4")
    path = tmp_path / "w.safetensors"
    F.write_mx_tensors(path, {"mlp1_weight": p, "mlp2_weight": F.quantize(w[:, :64], "mxfp6_e2m3")})
    names = set(F.read_safetensors(path))
    assert {"mlp1_weight_blocks", "mlp1_weight_scales"} <= names
    got = F.read_mx_tensor(path, "mlp1_weight")
    assert got.blocks.shape == (4, 3, 16) and got.blocks.dtype == np.uint8
    np.testing.assert_array_equal(got.dequantize(), F.quantize(w, "mxfp4").dequantize())
    np.testing.assert_array_equal(F.read_mx_tensor(path, "mlp2_weight").dequantize(),
                                  F.quantize(w[:, :64], "mxfp6_e2m3").dequantize())
    # a file without gpuplan metadata and with the original '.blocks' naming reads as MXFP4
    plain = tmp_path / "plain.safetensors"
    F.write_safetensors(plain, {"block.0.mlp.mlp1_weight.blocks": p.blocks, "block.0.mlp.mlp1_weight.scales": p.scales})
    np.testing.assert_array_equal(F.read_mx_tensor(plain, "block.0.mlp.mlp1_weight").dequantize(), got.dequantize())


def test_gpt_oss_dequant_recipe_matches():
    # gpt-oss weights.py: values = lut[nibbles] then ldexp(values, scale - 127), per 32-element block
    lut = np.array([+0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)
    x = np.random.default_rng(6).standard_normal((2, 64)).astype(np.float32)
    p = F.quantize_packed(x, "mxfp4")
    vals = np.empty(p.blocks.shape[:-1] + (32,), np.float32)
    vals[..., 0::2] = lut[p.blocks & 0xF]
    vals[..., 1::2] = lut[p.blocks >> 4]
    ref = np.ldexp(vals, p.scales.astype(np.int32)[..., None] - 127).reshape(2, 64)
    np.testing.assert_array_equal(p.dequantize(), ref)


def _write_raw(path, header_len: int, header: bytes, data: bytes = b""):
    path.write_bytes(struct.pack("<Q", header_len) + header + data)


def test_malformed_safetensors_raise_input_error(tmp_path):
    p = tmp_path / "bad.safetensors"
    _write_raw(p, 10**12, b"{}")
    with pytest.raises(InputError, match="header length"):
        F.read_safetensors(p)
    _write_raw(p, 5, b"{nope")
    with pytest.raises(InputError, match="JSON"):
        F.read_safetensors(p)
    hdr = json.dumps({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    _write_raw(p, len(hdr), hdr, b"\0" * 8)
    with pytest.raises(InputError, match="outside"):
        F.read_safetensors(p)
    p.write_bytes(b"abc")
    with pytest.raises(InputError, match="too short"):
        F.read_safetensors(p)


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp4", "mxint8"])
def test_dequantize_kernel_equals_numpy(hard_input, fmt):
    q = F.quantize(hard_input, fmt)  # 131072 elements: fast dequantize path
    assert q.codes.size >= block.FAST_PATH_MIN_ELEMENTS
    bf = q.fmt
    vals = bf.element.values[q.codes.reshape(-1, 32)].astype(np.float64)
    se = q.scales.reshape(-1).astype(np.int64) - 127
    with np.errstate(over="ignore"):
        ref = np.ldexp(vals, se[:, None]).astype(np.float32)
    ref[q.scales.reshape(-1) == 255] = np.nan
    np.testing.assert_array_equal(q.dequantize().reshape(-1, 32), ref)
    if fmt == "mxfp4":
        np.testing.assert_array_equal(F.quantize_packed(hard_input, fmt).dequantize(), q.dequantize())


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8_e4m3", "mxint8", "nvfp4"])
@pytest.mark.parametrize("columns", [512, 500])  # whole blocks (the kernel writes into out) / a padded last block
def test_dequantize_into_out_equals_dequantize(hard_input, fmt, columns):
    x = np.ascontiguousarray(hard_input[:, :columns])
    q = F.quantize(x, fmt)
    want = q.dequantize()
    out = np.full(x.shape, 7.0, dtype=np.float32)
    assert q.dequantize(out=out) is out
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    strided = np.full((x.shape[0], 2 * columns), 7.0, dtype=np.float32)[:, ::2]  # not contiguous: copied into
    np.testing.assert_array_equal(q.dequantize(out=strided).view(np.uint32), want.view(np.uint32))
    if fmt == "mxfp4" and columns % 32 == 0:
        p = F.quantize_packed(x, fmt)
        out[...] = 7.0
        assert p.dequantize(out=out) is out
        np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("bad", [np.zeros((4, 64), np.float32), np.zeros((4, 32), np.float64), [[0.0] * 32] * 4])
def test_dequantize_rejects_a_bad_out(bad):
    q = F.quantize(np.ones((4, 32), np.float32), "mxfp4")
    with pytest.raises(InputError, match="out must be a writeable float32 array of shape \\(4, 32\\)") as e:
        q.dequantize(out=bad)
    assert e.value.field == "out"
    readonly = np.zeros((4, 32), np.float32)
    readonly.flags.writeable = False
    with pytest.raises(InputError):
        F.quantize_packed(np.ones((4, 32), np.float32)).dequantize(out=readonly)
