"""Error analysis (hand-derived figures), the MX matmul, and the `gpuplan formats` commands."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from gpuplan import formats as F
from gpuplan.errors import InputError


def test_error_report_hand_derived():
    # E2M1 cast of [0.25, 7, 1] -> [0 (tie to even), 6 (saturated), 1]
    r = F.error_report(np.float32([0.25, 7, 1]), "e2m1")
    assert r.mse == pytest.approx((0.25**2 + 1.0) / 3)
    assert r.max_abs_error == 1.0 and r.max_rel_error == 1.0
    assert r.fraction_saturated == pytest.approx(1 / 3) and r.fraction_flushed_to_zero == pytest.approx(1 / 3)
    # storage ceil(3 x 4 / 8) = 2 bytes; input 3 x 4 = 12 bytes
    assert (r.storage_bytes, r.input_bytes, r.bytes_saved, r.bits_per_element) == (2, 12, 10, 16 / 3)
    # SNR = 10 log10(mean(x^2) / mse) = 10 log10((0.0625 + 49 + 1) / 1.0625)
    assert r.snr_db == pytest.approx(10 * np.log10(50.0625 / 1.0625))


def test_bits_per_element_include_scales():
    x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    reps = {r.format: r for r in F.compare(x, ["mxfp4", "nvfp4", "mxfp8_e4m3", "fp8_e4m3", "bf16"])}
    assert reps["mxfp4"].bits_per_element == 4.25  # (512 + 32) bytes x 8 / 1024
    assert reps["nvfp4"].bits_per_element == (512 + 64 + 4) * 8 / 1024  # + FP32 tensor scale
    assert reps["mxfp8_e4m3"].bits_per_element == 8.25
    assert reps["fp8_e4m3"].bits_per_element == (1024 + 4) * 8 / 1024
    assert reps["bf16"].bits_per_element == 16
    # more bits -> less error on the same normal data
    assert reps["mxfp4"].snr_db < reps["mxfp8_e4m3"].snr_db < reps["bf16"].snr_db


def test_compare_rejects_unknown_format():
    with pytest.raises(InputError, match="allowed"):
        F.compare(np.ones(4), ["mxfp4", "fp3"])


def test_mx_matmul_matches_dequantised_product():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 96)).astype(np.float32)
    b = rng.standard_normal((96, 5)).astype(np.float32)
    for fmt in ("mxfp8_e4m3", "mxfp4", "mxint8", "nvfp4"):
        da = F.quantize(a, fmt, axis=1).dequantize().astype(np.float64)
        db = F.quantize(b, fmt, axis=0).dequantize().astype(np.float64)
        np.testing.assert_allclose(F.mx_matmul(a, b, fmt), da @ db, rtol=1e-5, atol=1e-4)


def test_mx_matmul_nan_block_and_no_fp32_overflow():
    a = np.ones((2, 32), np.float32)
    b = np.ones((32, 2), np.float32)
    a[0, 3] = np.nan  # formats.md 7.6 step 5: a NaN-scale block makes its dot products NaN
    out = F.mx_matmul(a, b, "mxfp8_e4m3")
    assert np.isnan(out[0]).all() and (out[1] == 32).all()
    # 2^-127-scale blocks (all zero) contribute exactly 0
    assert (F.mx_matmul(np.zeros((1, 32)), b, "mxfp4") == 0).all()


def test_matmul_error_reports_relative_error():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 256)).astype(np.float32)
    b = rng.standard_normal((256, 16)).astype(np.float32)
    e8 = F.matmul_error(a, b, "mxfp8_e4m3")
    e4 = F.matmul_error(a, b, "mxfp4")
    assert 0 < e8.relative_frobenius_error < e4.relative_frobenius_error < 0.5


# ---- CLI ---------------------------------------------------------------------------------

def _app() -> typer.Typer:
    from gpuplan.cli.main import app

    return app


def run(*args):
    return CliRunner().invoke(_app(), list(args))


def is_input_error(result) -> bool:
    return result.exit_code == 2 and "error:" in result.output


def test_cli_table_json():
    r = run("formats", "table", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    rows = {row["name"]: row for row in data["formats"]}
    assert rows["e4m3"]["max_normal"] == 448 and rows["e5m2"]["max_normal"] == 57344
    assert rows["e2m3"]["bias"] == 1 and rows["e3m2"]["emax"] == 4
    assert [v["value"] for v in data["value_tables"]["e2m1"][:8]] == [0, 0.5, 1, 1.5, 2, 3, 4, 6]


def test_cli_compare_random_json():
    r = run("formats", "compare", "--random", "normal:4096", "--formats", "mxfp4,bf16", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [x["format"] for x in data["results"]] == ["mxfp4", "bf16"]
    assert data["results"][0]["bits_per_element"] == 4.25


def test_cli_compare_file(tmp_path):
    p = tmp_path / "w.safetensors"
    F.write_safetensors(p, {"w": np.linspace(-1, 1, 64, dtype=np.float32)})
    r = run("formats", "compare", str(p), "--tensor", "w", "--formats", "mxfp8_e4m3", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["shape"] == [64]


def test_cli_encode_decode():
    r = run("formats", "encode", "464", "465", "--format", "e4m3", "--no-saturate", "--json")
    assert [c["code"] for c in json.loads(r.output)["codes"]] == [0x7E, 0x7F]  # formats.md 7.1 #3, #4
    r = run("formats", "decode", "0x7E", "0x01", "--format", "e4m3", "--json")
    assert [v["value"] for v in json.loads(r.output)["values"]] == [448.0, 2.0**-9]


def test_cli_bad_input_is_an_input_error():
    assert is_input_error(run("formats", "compare", "--random", "normal:100", "--formats", "mxfp3"))
    assert is_input_error(run("formats", "compare", "--random", "gauss:100"))
    assert is_input_error(run("formats", "compare", "/nonexistent.npy"))
