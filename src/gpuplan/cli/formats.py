"""CLI: `gpuplan formats table|compare|encode|decode|matmul` (parses, calls `gpuplan.api.formats_*`, renders)."""

from __future__ import annotations

from typing import List, Optional

import typer

from gpuplan import api
from gpuplan.cli.render import console, fmt, print_json, table
from gpuplan.interfaces.api.defaults import DEFAULT_COMPARE, DEFAULT_MATMUL


def register(app: typer.Typer) -> None:
    """Add `gpuplan formats ...` to the root app."""
    sub = typer.Typer(help="Bit-exact low-precision formats: OFP8, MXFP8/6/4, MXINT8, NVFP4, BF16/FP16/TF32.",
                      no_args_is_help=True)

    @sub.command("table")
    def table_cmd(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
        """Each format's bias, emax, largest normal, smallest normal/subnormal, and the value tables of the 4/6-bit types."""
        result = api.formats_table()
        if json_out:
            print_json(result.to_dict())
            return
        rows, values = result.formats, result.value_tables
        console.print(table("Formats", ["format", "bits", "E", "M", "bias", "emax", "max normal", "min normal",
                                        "min subnormal", "Inf", "NaN", "bits/elem", "block", "scale"],
                            [[r.name, r.bits, r.exponent_bits, r.mantissa_bits, r.bias, r.emax, r.max_normal,
                              r.min_normal, r.min_subnormal, r.has_inf, r.has_nan, r.bits_per_element,
                              r.block_size, r.scale] for r in rows], keep_whole=1, name="formats",
                            secondary=["min subnormal", "NaN", "Inf", "emax", "bias"]))
        for name, vt in values.items():
            console.print(table(f"{name} values", ["code", "bits", "value"],
                                [[f"0x{v['code']:02X}", v["bits"], repr(v["value"])] for v in vt], name=name))

    @sub.command("compare")
    def compare_cmd(
        file: Optional[str] = typer.Argument(None, help=".npy or .safetensors file (or use --random)."),
        tensor: Optional[str] = typer.Option(None, "--tensor", help="Tensor name in a .safetensors file (default: the first)."),
        formats: str = typer.Option(DEFAULT_COMPARE, "--formats", help="Comma-separated format names."),
        random: Optional[str] = typer.Option(None, "--random", help="Synthetic input KIND:COUNT, e.g. normal:1048576."),
        seed: int = typer.Option(0, "--seed", help="Seed of --random."),
        scale_rule: str = typer.Option("floor", "--scale-rule", help="MX shared-scale rule: floor, rceil, ceil, even."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Quantisation error of one tensor in each format (MSE, SNR, max errors, saturation, bits, bytes)."""
        result = api.formats_compare(file, tensor=tensor, formats=formats, random=random, seed=seed, scale_rule=scale_rule)
        if json_out:
            print_json(result.to_dict())
            return
        source, shape, rule, reports = result.source, list(result.shape), result.scale_rule, result.reports
        console.print(table(f"Quantisation error: {source}, shape {shape}, scale rule {rule.value}",
                            ["format", "SNR dB", "MSE", "max abs err", "max rel err", "saturated", "flushed to 0",
                             "bits/elem", "MB", "MB saved"],
                            [[r.format, r.snr_db, r.mse, r.max_abs_error, r.max_rel_error,
                              f"{r.fraction_saturated:.3%}", f"{r.fraction_flushed_to_zero:.3%}", r.bits_per_element,
                              r.storage_bytes / 1e6, r.bytes_saved / 1e6] for r in reports]))

    @sub.command("encode")
    def encode_cmd(
        values: List[str] = typer.Argument(..., help="Numbers to encode (nan, inf allowed)."),
        format_name: str = typer.Option("e4m3", "--format", "-f", help="e4m3, e5m2, e3m2, e2m3, e2m1, e4m3fnuz, e5m2fnuz, int8, e8m0, bf16, fp16, tf32."),
        no_saturate: bool = typer.Option(False, "--no-saturate", help="OFP8 non-saturating mode (overflow -> NaN/Inf)."),
        rounding: str = typer.Option("rne", "--rounding", help="rne (ties to even) or rna (ties away, PTX cvt.rna)."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Codes of numbers in an element format, and the values they decode to."""
        result = api.formats_encode(values, format_name, saturate=not no_saturate, rounding=rounding)
        if json_out:
            print_json(result.to_dict())
            return
        rows = result.rows
        console.print(table(f"encode {format_name}", ["input", "code", "value"],
                            [[repr(r["input"]), r["code_hex"], repr(r["value"])] for r in rows]))

    @sub.command("decode")
    def decode_cmd(
        codes: List[str] = typer.Argument(..., help="Codes, decimal or 0x-hex."),
        format_name: str = typer.Option("e4m3", "--format", "-f", help="Element format name."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Values of codes in an element format."""
        result = api.formats_decode(codes, format_name)
        if json_out:
            print_json(result.to_dict())
            return
        rows = result.rows
        console.print(table(f"decode {format_name}", ["code", "value"], [[r["code_hex"], repr(r["value"])] for r in rows]))

    @sub.command("matmul")
    def matmul_cmd(
        m: int = typer.Option(128, "--m", help="Rows of A."),
        k: int = typer.Option(4096, "--k", help="Reduction length."),
        n: int = typer.Option(128, "--n", help="Columns of B."),
        formats: str = typer.Option(DEFAULT_MATMUL, "--formats", help="Block formats."),
        seed: int = typer.Option(0, "--seed"),
        scale_rule: str = typer.Option("floor", "--scale-rule", help="floor, rceil, ceil, even."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Error of an MX matmul (scaled block products, FP32 accumulation) on random normal operands."""
        result = api.formats_matmul(m, k, n, formats=formats, seed=seed, scale_rule=scale_rule)
        if json_out:
            print_json(result.to_dict())
            return
        results = result.results
        console.print(table(f"MX matmul error, A {m}x{k} @ B {k}x{n} (normal), vs float64",
                            ["format", "rel. Frobenius err", "SNR dB", "max abs err"],
                            [[r.format, r.relative_frobenius_error, r.snr_db, r.max_abs_error] for r in results]))

    app.add_typer(sub, name="formats")


__all__ = ["register", "fmt"]
