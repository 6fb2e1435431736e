"""`gpuplan.api` calibration: the knob registry (`calibrate_knobs`), fitting a profile to measured
rows (`calibrate_fit`), using a profile (`load_profile`, `apply`), turning tools' logs into rows
(`calibrate_import`) and measuring this machine (`bench`).

    >>> from gpuplan import api
    >>> with api.apply("profile.toml"):            # doctest: +SKIP
    ...     api.train("gpt3-175b", "dgx-h100", 1024).to_dict()["calibration"]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gpuplan.interfaces.api._common import Result
from gpuplan.interfaces.calibration.profile import Profile, apply_profile, load_profile


@dataclass(frozen=True)
class KnobsResult(Result):
    """`calibrate_knobs`: the knobs (gpuplan.knobs.Knob), in registry order."""

    knobs: tuple

    def json_data(self) -> dict:
        return {"count": len(self.knobs), "fitted_count": sum(k.fitted for k in self.knobs),
                "knobs": [k.to_dict() for k in self.knobs]}


def calibrate_knobs(fitted: bool = False) -> KnobsResult:
    """Every efficiency knob: name, unit, default and its source, value in effect, physical range,
    what it scales and, for fitted knobs, the validation families it was chosen on (`fitted`: only those)."""
    from gpuplan.interfaces.fitting.knob_catalog import load_all

    return KnobsResult(tuple(k for k in load_all().values() if k.fitted or not fitted))


@dataclass(frozen=True)
class FitProfileResult(Result):
    """`calibrate_fit`: the fit (interfaces.calibration.fit.CalibrationResult) and where the profile and
    plot were written (None when not asked)."""

    calibration: object
    profile_path: str | None
    plot_path: str | None

    def json_data(self) -> dict:
        return {**self.calibration.to_dict(), "profile_path": self.profile_path, "plot_path": self.plot_path}


def calibrate_fit(measurements: Sequence[str | Path] | str | Path, out: str | Path | None = None, *,
                  knobs: Sequence[str] | str | None = None, plot: str | Path | None = None, lam: float = 1.0,
                  prior_width: float = 1.0, method: str = "auto", progress=None) -> FitProfileResult:
    """Fit the knobs the measured rows inform (docs/calibration.md) and write the profile to `out`
    (atomically; nothing is written when the fit is refused). `knobs`: names (a list or
    "a,b") restricting the fit; default every knob the rows' predictions read. `method`: auto,
    hierarchical or flat (interfaces.calibration.fit). `progress(stage, fraction)` per stage and fold."""
    from gpuplan.interfaces.calibration.fit import calibrate_files
    from gpuplan.interfaces.reports.calibration_plot import check_plot_path, plot_fit
    from gpuplan.output_files import check_output_path

    paths = [measurements] if isinstance(measurements, (str, Path)) else list(measurements)
    names = [n.strip() for n in knobs.split(",") if n.strip()] if isinstance(knobs, str) else (list(knobs) if knobs else None)
    if out is not None:
        check_output_path(out, "out")
    if plot is not None:
        check_plot_path(plot)
    result = calibrate_files(paths, knob_names=names, lam=lam, prior_width=prior_width, method=method,
                             progress=progress)
    if out is not None:
        result.write_profile(out, "out")
    if plot is not None:
        err = result.error_block()
        plot_fit(plot, result.rows, err["mape_before_pct"], err["mape_after_pct"])
    return FitProfileResult(result, None if out is None else str(out), None if plot is None else str(plot))


@dataclass(frozen=True)
class ImportRowsResult(Result):
    """`calibrate_import`: the rows made from a tool's output (SCHEMA.md columns) and where they were written."""

    kind: str
    path: str
    rows: tuple
    out_path: str | None

    def json_data(self) -> dict:
        return {"kind": self.kind, "file": self.path, "count": len(self.rows), "rows": list(self.rows),
                "out_path": self.out_path}


def calibrate_import(kind: str, file: str | Path, out: str | Path | None = None, *, config: str | Path | None = None,
                     sets: Sequence[str] = ()) -> ImportRowsResult:
    """Turn a tool's output into measured rows (interfaces.calibration.importers: nccl-tests, mamf, vllm, sglang,
    torchtitan, megatron); `config` (TOML) and `sets` ("column=value") give the run's configuration.
    With `out`, the rows are written there as CSV, atomically."""
    from gpuplan.interfaces.calibration.importers import import_file, parse_config
    from gpuplan.output_files import check_output_path, write_atomic

    if out is not None:
        check_output_path(out, "out")
    result = import_file(kind, file, parse_config(config, sets))
    if out is not None:
        write_atomic(out, result.csv_text(), "out")
    return ImportRowsResult(kind, str(file), tuple(result.rows), None if out is None else str(out))


@dataclass(frozen=True)
class BenchResult(Result):
    """`bench`: the measurements (interfaces.calibration.bench.BenchReport) and the files written."""

    report: object
    rows_path: str | None
    profile_path: str | None

    def json_data(self) -> dict:
        return {**self.report.to_dict(), "rows_path": self.rows_path, "profile_path": self.profile_path}


def bench(device: str | None = None, quick: bool = False, out: str | Path | None = None,
          profile: str | Path | None = None, progress=None) -> BenchResult:
    """Measure this machine (interfaces.calibration.bench): GEMM sweep per dtype, memory bandwidth, attention,
    host-device copies and collectives (torch), compared with the catalog's peak. `out`: the GEMM
    (matmul) and collectives rows as CSV;
    `profile`: the fitted matmul ceilings (only for a catalog GPU). Files are written atomically."""
    from gpuplan.errors import InputError
    from gpuplan.interfaces.calibration.bench import run_bench
    from gpuplan.interfaces.calibration.importers import rows_csv
    from gpuplan.output_files import check_output_path, write_atomic

    for path, name in ((out, "out"), (profile, "profile")):
        if path is not None:
            check_output_path(path, name)
    report = run_bench(device, quick, progress, fit_profile=profile is not None)
    if profile is not None and report.calibration is None:
        raise InputError(f"profile: {report.device_name} is not a catalog GPU, so no knob of the registry describes "
                         "it; nothing to write (the rows can still be written with --out)", field="profile")
    if out is not None:
        write_atomic(out, rows_csv(report.rows()), "out")
    if profile is not None:
        report.calibration.write_profile(profile, "profile")
    return BenchResult(report, None if out is None else str(out), None if profile is None else str(profile))


def apply(profile: Profile | str | Path):
    """Context manager: within it every prediction uses the profile's knob values, and every
    result's JSON carries `calibration: {profile, knobs}` (interfaces.calibration.profile)."""
    return apply_profile(profile)


__all__ = ["BenchResult", "FitProfileResult", "ImportRowsResult", "KnobsResult", "apply", "bench", "calibrate_fit", "calibrate_import",
           "calibrate_knobs", "load_profile"]
