"""CLI: `gpuplan bench [--device cpu|cuda|rocm|mps] [--quick] [--json] [--out rows.csv] [--profile p.toml]`:
measure this machine (gpuplan.api.bench -> interfaces.calibration.bench). A progress bar goes to stderr."""

from __future__ import annotations

from typing import Optional

import typer

from gpuplan import api
from gpuplan.cli.progress import progress_bar
from gpuplan.cli.render import fmt, print_json


def register(app: typer.Typer) -> None:
    """Add `gpuplan bench` to the root app."""

    @app.command("bench")
    def bench_command(
        device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda, rocm or mps (default: the best present)."),
        quick: bool = typer.Option(False, "--quick", help="A small sweep (under a minute on a CPU)."),
        out: Optional[str] = typer.Option(None, "--out", help="Write the GEMM and collectives results as rows (CSV)."),
        profile: Optional[str] = typer.Option(None, "--profile", help="Write the fitted matmul ceilings as a "
                                                                      "calibration profile (catalog GPUs only)."),
        as_json: bool = typer.Option(False, "--json", help="JSON: gemm_best_gflops, gemm_best_tflops, gemm, memory, "
                                                           "attention, host_device, collectives, catalog_peak_tflops, "
                                                           "rows, ..."),
    ) -> None:
        """Measure this machine: GEMM per dtype, memory bandwidth, attention, host-device copies, collectives."""
        with progress_bar("bench", delay_s=0.0) as bar:
            result = api.bench(device, quick, out, profile, progress=bar)
        data = result.to_dict()
        if as_json:
            print_json(data)
            return
        typer.echo(f"device: {data['device_name']} ({data['device']}, {data['backend']})")
        for dtype, p in data["gemm_best_by_dtype"].items():
            typer.echo(f"  GEMM {dtype:<5} best {fmt(p['gflops'])} GFLOP/s at {p['m']}x{p['n']}x{p['k']}")
        typer.echo(f"  vs catalog: {data['peak_comparison']}")
        mem = data["memory"]
        typer.echo(f"  memory: copy {fmt(mem['copy_gbps'])} GB/s, triad {fmt(mem['triad_gbps'])} GB/s (STREAM bytes)")
        if data["attention"]:
            a = data["attention"]
            typer.echo(f"  attention ({a['dtype']}): prefill {fmt(a['prefill_tflops'])} TFLOP/s at {a['prefill_seq']} "
                       f"tokens, decode {fmt(a['decode_kv_gbps'])} GB/s of KV at {a['decode_kv_len']}")
        if data["host_device"]:
            h = data["host_device"]
            typer.echo(f"  host->device {fmt(h['host_to_device_gbps'])} GB/s, device->host {fmt(h['device_to_host_gbps'])} GB/s")
        for c in data["collectives"]:
            typer.echo(f"  {c['collective']:<10} {c['ranks']} ranks {c['size_bytes']:>10} B: algbw {fmt(c['algbw_gbps'])} GB/s, "
                       f"busbw {fmt(c['busbw_gbps'])} GB/s ({fmt(c['time_us'])} us)")
        for what, why in data["skipped"].items():
            typer.echo(f"  {what}: skipped ({why})")
        typer.echo(f"run time {fmt(data['run_time_s'])} s")
        if result.rows_path:
            typer.echo(f"rows written: {result.rows_path}")
        if result.profile_path:
            typer.echo(f"profile written: {result.profile_path}")
