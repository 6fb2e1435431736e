"""Every test vector of ../shared/reference/formats.md section 7 (numbers quoted from there;
each row's `why` column is the hand derivation)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuplan import formats as F

NAN = float("nan")
INF = float("inf")


def f32(bits: int) -> float:
    return float(np.uint32(bits).view(np.float32))


def codes(x, fmt, saturate=True, **kw):
    return [int(c) for c in F.encode(np.asarray(x, dtype=np.float32), fmt, saturate=saturate, **kw)]


# ---- 7.1 FP32 -> FP8 ------------------------------------------------------------------------
E4M3_CASES = [  # (#, input, non-saturating code, saturating code)
    (1, 448, 0x7E, 0x7E),
    (2, 449, 0x7E, 0x7E), (2, 456, 0x7E, 0x7E), (2, 460, 0x7E, 0x7E), (2, 463.99, 0x7E, 0x7E),
    (3, 464, 0x7E, 0x7E),  # tie 448/480, even mantissa 110 -> 448
    (4, 464.0001, 0x7F, 0x7E), (4, 465, 0x7F, 0x7E), (4, 479.99, 0x7F, 0x7E), (4, 480, 0x7F, 0x7E), (4, 1e10, 0x7F, 0x7E),
    (5, INF, 0x7F, 0x7E), (5, -INF, 0xFF, 0xFE),
    (6, NAN, 0x7F, 0x7F),
    (7, -0.0, 0x80, 0x80), (7, 0.0, 0x00, 0x00),
    (8, 17, 0x58, 0x58), (9, 19, 0x5A, 0x5A), (10, 400, 0x7C, 0x7C),
    (11, 1.0625, 0x38, 0x38), (11, 1.1875, 0x3A, 0x3A),
    (12, 2.0**-6, 0x08, 0x08), (13, 0.875 * 2.0**-6, 0x07, 0x07), (14, 0.9375 * 2.0**-6, 0x08, 0x08),
    (15, 2.0**-9, 0x01, 0x01), (16, 2.0**-10, 0x00, 0x00), (17, 2.0**-10 * 1.0001, 0x01, 0x01),
    (18, 3 * 2.0**-10, 0x02, 0x02), (19, 5 * 2.0**-10, 0x02, 0x02),
]


@pytest.mark.parametrize("num,x,nonsat,sat", E4M3_CASES)
def test_e4m3_vectors(num, x, nonsat, sat):
    assert codes([x], "e4m3", saturate=False) == [nonsat], num
    assert codes([x], "e4m3", saturate=True) == [sat], num


def test_e4m3_nan_codes_decode_to_nan_not_480():
    # 7.1 #20 (mlx #4135): 0x7F / 0xFF are NaN, not +-480
    assert np.isnan(F.decode([0x7F, 0xFF], "e4m3")).all()


E5M2_CASES = [  # (#, input, non-saturating code, saturating code); 0x7E = our canonical quiet NaN
    (21, 57344, 0x7B, 0x7B), (21, 57345, 0x7B, 0x7B), (21, 61439, 0x7B, 0x7B),
    (22, 61440, 0x7C, 0x7B),  # tie 57344/65536 -> even 2^16 -> overflow
    (23, INF, 0x7C, 0x7B),
    (24, 2.0**-16, 0x01, 0x01), (24, 2.0**-17, 0x00, 0x00), (24, 3 * 2.0**-17, 0x02, 0x02),
    (25, 1.125, 0x3C, 0x3C), (25, 1.375, 0x3E, 0x3E),
]


@pytest.mark.parametrize("num,x,nonsat,sat", E5M2_CASES)
def test_e5m2_vectors(num, x, nonsat, sat):
    assert codes([x], "e5m2", saturate=False) == [nonsat], num
    assert codes([x], "e5m2", saturate=True) == [sat], num


def test_e5m2_nan_is_nan():
    # 7.1 #23: NaN payload implementation-defined; we emit ml_dtypes' quiet NaN 0x7E
    c = F.encode([NAN], "e5m2")
    assert c[0] == 0x7E and np.isnan(F.decode(c, "e5m2")[0])


def test_e4m3fnuz_vectors():
    # 7.1 FNUZ: 240 -> 0x7F, 247 -> 0x7F, 248 -> 0x80 (NaN, non-saturating), -0 -> 0x00, NaN -> 0x80
    assert codes([240, 247, 248, -0.0, NAN], "e4m3fnuz", saturate=False) == [0x7F, 0x7F, 0x80, 0x00, 0x80]
    assert codes([248, INF], "e4m3fnuz", saturate=True) == [0x7F, 0x7F]


# ---- 7.2 FP6/FP4 ---------------------------------------------------------------------------
def vals(x, fmt):
    return F.decode(F.encode(np.asarray(x, np.float32), fmt), fmt).tolist()


def test_e2m1_ties_to_even():
    # 7.2 #26: the 7 ties and one just above
    got = vals([0.25, 0.2500001, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.5], "e2m1")
    assert got == [0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0]


def test_e2m1_saturation_and_signed_zero():
    # 7.2 #27
    assert codes([7, 100, INF, -INF, -0.25, -5], "e2m1") == [0x7, 0x7, 0x7, 0xF, 0x8, 0xE]


def test_e2m3_vectors():
    # 7.2 #28
    assert vals([7.75, 8, 100, 0.0625, 0.0626, 0.1875], "e2m3") == [7.5, 7.5, 7.5, 0.0, 0.125, 0.25]


def test_e3m2_vectors():
    # 7.2 #29
    assert vals([30, 32, 0.03125, 0.0313, 0.09375], "e3m2") == [28.0, 28.0, 0.0, 0.0625, 0.125]


def test_fp4_fp6_nan_gives_sign_only_code():
    # 7.2 #30: implementation-defined; we follow ml_dtypes (0x8 / 0x20 = -0)
    assert codes([NAN], "e2m1") == [0x8]
    assert codes([NAN], "e2m3") == [0x20] and codes([NAN], "e3m2") == [0x20]


# ---- 7.3 MX blocks ---------------------------------------------------------------------------
def block(first, fill=0.0, k=32):
    x = np.full(k, fill, dtype=np.float32)
    x[: len(first)] = first
    return x


MX_CASES = [
    # (#, fmt, block, FLOOR scale, FLOOR out (first values), RCEIL scale, RCEIL out)
    (31, "mxfp8_e4m3", block([960, 957, 902.4, 832], fill=1), 0x80, [896, 896, 896, 832, 1], 0x81, [960, 960, 896, 832, 1]),
    (32, "mxfp8_e4m3", block([448, 17, 19, 400]), 0x7F, [448, 16, 20, 384], 0x7F, [448, 16, 20, 384]),
    (33, "mxfp8_e4m3", block([480, 1]), 0x7F, [448, 1], 0x80, [480, 1]),
    (34, "mxfp8_e4m3", block([150], fill=1), 0x7E, [144, 1], 0x7E, [144, 1]),
    (39, "mxfp8_e4m3", block([f32(0x7F7FFFFF), 1]), 0xF6, [448 * 2.0**119, 0], 0xF7, [INF, 0]),
    (40, "mxfp8_e4m3", block([2.0**-130, 2.0**-133]), 0x00, [2.0**-130, 2.0**-133], 0x00, [2.0**-130, 2.0**-133]),
    (41, "mxfp8_e4m3", block([2.0**-120, 2.0**-128]), 0x00, [2.0**-120, 2.0**-128], 0x00, [2.0**-120, 2.0**-128]),
    (42, "mxfp8_e4m3", block([256, 0.5, 0.375, 0.125, 0.1875]), 0x7F, [256, 0.5, 0.375, 0.125, 0.1875], 0x7F, [256, 0.5, 0.375, 0.125, 0.1875]),
    (43, "mxfp8_e4m3", block([f32(0x42FFFFFF), 64, 1]), 0x7D, [112, 64, 1], 0x7E, [128, 64, 1]),
    (44, "mxfp8_e5m2", np.append(np.arange(1, 32), f32(0x42FFFFFF)).astype(np.float32), 0x76, None, 0x77, None),
    (45, "mxfp8_e5m2", block([63078.4, 1]), 0x7F, [57344, 1], 0x80, [65536, 1]),
    (46, "mxfp4", block([6, .25, .75, 1.25, 1.75, 2.5, 3.5, 5]), 0x7F, [6, 0, 1, 1, 2, 2, 4, 4], 0x7F, [6, 0, 1, 1, 2, 2, 4, 4]),
    (47, "mxfp4", block([7, 1, -3]), 0x7F, [6, 1, -3], 0x80, [8, 1, -3]),  # 7/2 = 3.5 tie -> 4
    (49, "mxfp6_e2m3", block([7.9, 0.1, -0.0625]), 0x7F, [7.5, 0.125, -0.0], 0x80, [8, 0, -0.0]),
    (50, "mxfp6_e3m2", block([31, 0.3, 0.03125]), 0x7F, [28, 0.3125, 0], 0x80, [32, 0.25, 0]),
]


@pytest.mark.parametrize("num,fmt,x,fs,fo,rs,ro", MX_CASES)
def test_mx_block_vectors(num, fmt, x, fs, fo, rs, ro):
    for rule, scale, out in (("floor", fs, fo), ("rceil", rs, ro)):
        q = F.quantize(x, fmt, scale_rule=rule)
        assert q.scales.shape == (1,) and int(q.scales[0]) == scale, (num, rule)
        if out is not None:
            got = q.dequantize()[: len(out)]
            np.testing.assert_array_equal(got, np.asarray(out, np.float32), err_msg=f"#{num} {rule}")


def test_vector_44_last_element():
    # 7.3 #44 (ao #436): FLOOR clamps 127.99999 to 112 (scale 2^-9... element 57344 x 2^-9);
    # RCEIL gives 128.
    x = np.append(np.arange(1, 32), f32(0x42FFFFFF)).astype(np.float32)
    assert F.quantize(x, "mxfp8_e5m2").dequantize()[-1] == 112
    assert F.quantize(x, "mxfp8_e5m2", scale_rule="rceil").dequantize()[-1] == 128


def test_vector_34_ceil():
    # 7.3 #34 CEIL: ceil(log2 150) - 8 = 0 -> 0x7F
    assert F.quantize(block([150], fill=1), "mxfp8_e4m3", scale_rule="ceil").scales[0] == 0x7F


def test_vector_48_arange():
    # 7.3 #48: arange(32)/2 - 5: amax 10.5, floor(log2 10.5) = 3, 3 - 2 = 1 -> 0x80; CEIL 0x81
    x = (np.arange(32) / 2 - 5).astype(np.float32)
    q = F.quantize(x, "mxfp4")
    assert q.scales[0] == 0x80 and F.quantize(x, "mxfp4", scale_rule="rceil").scales[0] == 0x80
    assert F.quantize(x, "mxfp4", scale_rule="ceil").scales[0] == 0x81
    np.testing.assert_array_equal(q.dequantize()[:8], [-4, -4, -4, -4, -3, -2, -2, -2])


@pytest.mark.parametrize("fmt", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "mxint8"])
def test_zero_nan_inf_blocks(fmt):
    # 7.3 #35-38: all +0 -> 0x00 and zeros; all -0 -> 0x00 and -0 (FP elements); NaN / Inf -> 0xFF, all NaN
    for rule in ("floor", "rceil", "ceil", "even"):
        z = F.quantize(np.zeros(32, np.float32), fmt, scale_rule=rule)
        assert z.scales[0] == 0 and not z.dequantize().any()
        nz = F.quantize(np.full(32, -0.0, np.float32), fmt, scale_rule=rule)
        assert nz.scales[0] == 0 and not nz.dequantize().any()
        if fmt != "mxint8":
            assert np.signbit(nz.dequantize()).all()
        for bad in (NAN, INF, -INF):
            q = F.quantize(block([bad, 1, 2]), fmt, scale_rule=rule)
            assert q.scales[0] == 0xFF and np.isnan(q.dequantize()).all()


def test_scale_only_vectors():
    # 7.3 scale-only: FLOOR E4M3 amax 1.0 -> 0x77, 448 -> 0x7F, 2^127 -> 0xF6
    assert F.e8m0_from_amax(np.float32([1.0, 448.0, 2.0**127]), emax=8, max_value=448, mbits=3, rule=F.ScaleRule.FLOOR).tolist() == [0x77, 0x7F, 0xF6]


RCEIL_BOUNDARY = [  # torchao make_f32_to_e8m0_rceil_cases (formats.md 5.2), applied to the quotient
    (0x00000000, 0), (0x00000001, 0), (0x00400000, 0), (0x00400001, 1), (0x007FFFFF, 1), (0x00800000, 1),
    (0x3F7FFFFF, 127), (0x3F800000, 127), (0x3F800001, 128), (0x7F000000, 254),
]


@pytest.mark.parametrize("bits,code", RCEIL_BOUNDARY)
def test_rceil_boundaries(bits, code):
    # max_value 1.0 makes amax / max_value == amax exactly
    got = F.e8m0_from_amax(np.uint32([bits]).view(np.float32), emax=0, max_value=1.0, mbits=6, rule=F.ScaleRule.RCEIL)
    assert int(got[0]) == code


def test_rceil_saturates_and_nan():
    # torchao's software fallback gives 255 for 0x7F000001 / FLT_MAX; we saturate at 0xFE as
    # PTX cvt.rp.satfinite does and formats.md asks ("clamp scale exponents to [-127, 127]").
    got = F.e8m0_from_amax(np.uint32([0x7F000001, 0x7F7FFFFF, 0x7F800000, 0x7FC00000]).view(np.float32),
                           emax=0, max_value=1.0, mbits=6, rule=F.ScaleRule.RCEIL)
    assert got.tolist() == [254, 254, 255, 255]


def test_e8m0_min_scale_decodes_to_fp32_subnormal():
    # 7.3: 2^-127 must decode to FP32 bits 0x00400000, not 0
    assert F.decode([0], "e8m0").view(np.uint32)[0] == 0x00400000
    assert np.isnan(F.decode([255], "e8m0")[0])


# ---- 7.4 NVFP4 -------------------------------------------------------------------------------
def test_nvfp4_vectors():
    x = block([6, 5, 0.25, -3.5], k=16)
    single = F.quantize(x, "nvfp4", two_level=False)
    assert single.scales[0] == 0x38  # E4M3 1.0
    np.testing.assert_array_equal(single.dequantize()[:4], [6, 4, 0, -4])
    two = F.quantize(x, "nvfp4")  # pts = 6/2688, block scale 448; -3.5 tie broken by FP32 error
    assert two.scales[0] == 0x7E
    np.testing.assert_array_equal(two.dequantize()[:4], [6, 4, 0, -3])
    # [7, 1, 0.3]: scale 7/6 -> E4M3 1.125 (RNE down), block max clipped
    np.testing.assert_array_equal(F.quantize(block([7, 1, 0.3], k=16), "nvfp4", two_level=False).dequantize()[:3],
                                  np.float32([6.75, 1.125, 0.5625]))
    # all zeros: single-level scale 2^-6 (0x08); two-level guarded (no NaN)
    z = F.quantize(np.zeros(16, np.float32), "nvfp4", two_level=False)
    assert z.scales[0] == 0x08 and not z.dequantize().any()
    assert not np.isnan(F.quantize(np.zeros(16, np.float32), "nvfp4").dequantize()).any()
    # [1e4, 1] single level: scale saturates at 448 -> 6 * 448 = 2688
    assert F.quantize(block([1e4, 1], k=16), "nvfp4", two_level=False).dequantize()[0] == 2688


# ---- 7.5 BF16 / FP16 / TF32 ------------------------------------------------------------------
def test_bf16_vectors():
    x = [1 + 2**-8, 1 + 3 * 2**-8, f32(0x7F7FFFFF), f32(0x7F7F7FFF), f32(0x7F7F8000), 2.0**-134, 3 * 2.0**-134]
    assert codes(x, "bf16", saturate=False) == [0x3F80, 0x3F82, 0x7F80, 0x7F7F, 0x7F80, 0x0000, 0x0002]
    assert np.isnan(F.decode(F.encode([NAN], "bf16"), "bf16")[0])


def test_fp16_vectors():
    got = F.decode(F.encode(np.float32([65519, 65520, 2.0**-25, 3 * 2.0**-25, 1 + 2**-11, 1 + 3 * 2**-11]), "fp16", saturate=False), "fp16")
    assert got.tolist() == [65504, INF, 0, 2.0**-23, 1.0, 1 + 2**-9]


def test_tf32_vectors():
    rne = F.decode(F.encode(np.float32([1 + 2**-11, 1 + 3 * 2**-11, f32(0x7F7FFFFF)]), "tf32", saturate=False), "tf32")
    assert rne.tolist() == [1.0, 1 + 2**-9, INF]
    rna = F.decode(F.encode(np.float32([1 + 2**-11]), "tf32", rounding="rna"), "tf32")
    assert rna.tolist() == [1 + 2**-10]
