"""CLI: `gpuplan formats table|compare|encode|decode|matmul` (parses, calls gpuplan.formats, renders)."""

from __future__ import annotations

from typing import List, Optional

import typer

from gpuplan.cli.render import console, fmt, print_json, table
from gpuplan.errors import InputError

DEFAULT_COMPARE = "mxfp4,nvfp4,mxfp6_e2m3,mxfp8_e4m3,fp8_e4m3,bf16"


def _random_input(spec: str, seed: int):
    """`normal:N`, `uniform:N`, `laplace:N` or `lognormal:N` -> float32 array of N elements."""
    import numpy as np

    from gpuplan.units import parse_count

    kind, _, count = spec.partition(":")
    allowed = ("normal", "uniform", "laplace", "lognormal")
    if kind not in allowed or not count:
        raise InputError(f"--random must be KIND:COUNT with KIND one of {', '.join(allowed)}", field="random")
    n = int(parse_count(count))
    if not 0 < n <= 1 << 28:
        raise InputError("--random COUNT must be between 1 and 268435456", field="random")
    rng = np.random.default_rng(seed)
    x = {"normal": lambda: rng.standard_normal(n), "uniform": lambda: rng.uniform(-1, 1, n),
         "laplace": lambda: rng.laplace(size=n), "lognormal": lambda: rng.lognormal(size=n) * rng.choice([-1, 1], n)}[kind]()
    return x.astype(np.float32)


def register(app: typer.Typer) -> None:
    """Add `gpuplan formats ...` to the root app."""
    sub = typer.Typer(help="Bit-exact low-precision formats: OFP8, MXFP8/6/4, MXINT8, NVFP4, BF16/FP16/TF32.",
                      no_args_is_help=True)

    @sub.command("table")
    def table_cmd(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
        """Each format's bias, emax, largest normal, smallest normal/subnormal, and the value tables of the 4/6-bit types."""
        from gpuplan.formats.tables import SMALL_TYPES, format_table, value_table

        rows = format_table()
        values = {name: value_table(name) for name in SMALL_TYPES}
        if json_out:
            print_json({"formats": rows, "value_tables": values})
            return
        console.print(table("Formats", ["format", "bits", "E", "M", "bias", "emax", "max normal", "min normal",
                                        "min subnormal", "Inf", "NaN", "bits/elem", "block", "scale"],
                            [[r.name, r.bits, r.exponent_bits, r.mantissa_bits, r.bias, r.emax, r.max_normal,
                              r.min_normal, r.min_subnormal, r.has_inf, r.has_nan, r.bits_per_element,
                              r.block_size, r.scale] for r in rows]))
        for name, vt in values.items():
            console.print(table(f"{name} values", ["code", "bits", "value"],
                                [[f"0x{v['code']:02X}", v["bits"], repr(v["value"])] for v in vt]))

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
        from gpuplan.formats.analysis import compare
        from gpuplan.formats.scale import scale_rule as parse_rule
        from gpuplan.formats.tensorfile import read_tensor

        rule = parse_rule(scale_rule)
        if (file is None) == (random is None):
            raise InputError("give exactly one input: FILE (.npy/.safetensors) or --random KIND:COUNT", field="file")
        x = _random_input(random, seed) if random is not None else read_tensor(file, tensor)
        reports = compare(x, formats.split(","), rule)
        source = random and f"random {random} seed {seed}" or f"{file}" + (f" [{tensor}]" if tensor else "")
        if json_out:
            print_json({"input": source, "shape": list(x.shape), "dtype": str(x.dtype), "scale_rule": rule.value,
                        "results": reports})
            return
        console.print(table(f"Quantisation error: {source}, shape {list(x.shape)}, scale rule {rule.value}",
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
        from gpuplan.formats.codec import decode, encode

        try:
            xs = [float(v) for v in values]
        except ValueError:
            raise InputError("values must be numbers (nan and inf allowed)", field="values") from None
        codes = encode(xs, format_name, saturate=not no_saturate, rounding=rounding)
        back = decode(codes, format_name)
        rows = [{"input": x, "code": int(c), "code_hex": f"0x{int(c):02X}", "value": float(v)} for x, c, v in zip(xs, codes, back)]
        if json_out:
            print_json({"format": format_name, "saturate": not no_saturate, "rounding": rounding, "codes": rows})
            return
        console.print(table(f"encode {format_name}", ["input", "code", "value"],
                            [[repr(r["input"]), r["code_hex"], repr(r["value"])] for r in rows]))

    @sub.command("decode")
    def decode_cmd(
        codes: List[str] = typer.Argument(..., help="Codes, decimal or 0x-hex."),
        format_name: str = typer.Option("e4m3", "--format", "-f", help="Element format name."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Values of codes in an element format."""
        from gpuplan.formats.codec import decode

        try:
            ints = [int(c, 0) for c in codes]
        except ValueError:
            raise InputError("codes must be integers (decimal or 0x-hex)", field="codes") from None
        vals = decode(ints, format_name)
        rows = [{"code": c, "code_hex": f"0x{c:02X}", "value": float(v)} for c, v in zip(ints, vals)]
        if json_out:
            print_json({"format": format_name, "values": rows})
            return
        console.print(table(f"decode {format_name}", ["code", "value"], [[r["code_hex"], repr(r["value"])] for r in rows]))

    @sub.command("matmul")
    def matmul_cmd(
        m: int = typer.Option(128, "--m", help="Rows of A."),
        k: int = typer.Option(4096, "--k", help="Reduction length."),
        n: int = typer.Option(128, "--n", help="Columns of B."),
        formats: str = typer.Option("mxfp8_e4m3,mxfp8_e5m2,mxfp6_e2m3,mxfp4,mxint8,nvfp4", "--formats", help="Block formats."),
        seed: int = typer.Option(0, "--seed"),
        scale_rule: str = typer.Option("floor", "--scale-rule", help="floor, rceil, ceil, even."),
        json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Error of an MX matmul (scaled block products, FP32 accumulation) on random normal operands."""
        import numpy as np

        from gpuplan.formats.block import block_format
        from gpuplan.formats.dot import matmul_error

        if min(m, k, n) < 1 or m * k * n > 1 << 31:
            raise InputError("--m, --k, --n must be >= 1 with m*k*n <= 2^31", field="shape")
        names = [block_format(f.strip()).name for f in formats.split(",") if f.strip()]
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        results = [matmul_error(a, b, f, scale_rule) for f in names]
        if json_out:
            print_json({"m": m, "k": k, "n": n, "seed": seed, "results": results})
            return
        console.print(table(f"MX matmul error, A {m}x{k} @ B {k}x{n} (normal), vs float64",
                            ["format", "rel. Frobenius err", "SNR dB", "max abs err"],
                            [[r.format, r.relative_frobenius_error, r.snr_db, r.max_abs_error] for r in results]))

    app.add_typer(sub, name="formats")


__all__ = ["register", "fmt"]
