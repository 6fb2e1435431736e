"""Where a sweep's rows live: part files as chunks finish, then one output file.

    results.parquet.parts/manifest.json     spec hash, gpuplan version, point count, sampler, goal,
                                            knob overrides in effect (when any)
    results.parquet.parts/part-*.json       the rows of one finished chunk
    results.parquet                          every row, sorted by point (Parquet or CSV by suffix)

Every file is written through gpuplan.output_files (a temporary name in the same folder, moved
into place with os.replace), so an interrupted run leaves finished parts and no half-written
file; an output path or a parts folder that is something else (a device, a FIFO, a folder where a
file belongs) is refused before any work. The parts folder is created with the first finished
chunk, so a run that fails before any point finished leaves nothing behind. A rerun with the same
--out reads the parts and skips their points; a manifest that differs (another spec, another
gpuplan version) is refused.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Callable, Iterable

from gpuplan.errors import InputError
from gpuplan.input_files import MAX_DATA_BYTES, read_input_bytes
from gpuplan.output_files import atomic_output, check_output_folder, check_output_path, make_output_folder
from gpuplan.validation_rules import ASCII_INTEGER, is_ascii_number, load_json_text

SUFFIXES = (".parquet", ".csv")


def check_out(out: str | Path) -> Path:
    """The output path, if its suffix names a format and it and its parts folder may be written
    (gpuplan.output_files); InputError otherwise."""
    p = check_output_path(out, "--out")
    check_output_folder(p.with_name(p.name + ".parts"), "--out")
    if p.suffix.lower() not in SUFFIXES:
        raise InputError(f"--out: '{p.name}' must end in .parquet or .csv", field="out")
    if p.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError("--out: Parquet needs pyarrow (pip install 'gpuplan[sweep]'); or write .csv", field="out") from None
    return p


def atomic_write(path: Path, write: Callable[[Path], object], field: str = "--out") -> None:
    """Call write(temp_path), then move the temporary file onto `path` (gpuplan.output_files)."""
    with atomic_output(path, field) as tmp:
        write(tmp)


class PartStore:
    """The parts folder of one output file (module docstring)."""

    def __init__(self, out: Path, manifest: dict):
        self.out = out
        self.dir = out.with_name(out.name + ".parts")
        self.manifest = manifest

    def open(self, create: bool = True) -> dict[int, dict]:
        """Check the manifest of an earlier run's folder and return its finished rows by point (the
        folder itself is created with the first part, `write_part`); `create=False` (a dry run)
        never writes."""
        check_output_folder(self.dir, "--out")
        path = self.dir / "manifest.json"
        if not os.path.lexists(path):
            return {}
        try:
            found = load_json_text(read_input_bytes(path, "out", max_bytes=MAX_DATA_BYTES).decode("utf-8"),
                                   str(path), "out")
            if not isinstance(found, dict):
                raise ValueError
        except (InputError, ValueError):
            raise InputError(f"--out: {path} is unreadable; delete {self.dir} to start over", field="out") from None
        for key, what in (("gpuplan_version", "gpuplan version"), ("spec_hash", "spec"), ("points", "point count"),
                          ("sampler", "sampler"), ("knob_overrides", "set of knob overrides (calibration, headroom)")):
            if found.get(key) != self.manifest.get(key):
                raise InputError(
                    f"--out: {self.dir} holds a sweep of another {what} ({found.get(key)} != {self.manifest.get(key)}); "
                    f"give another --out or delete {self.dir}", field="out")
        rows: dict[int, dict] = {}
        for part in sorted(self.dir.glob("part-*.json")):
            try:
                for row in json.loads(read_input_bytes(part, "out", max_bytes=MAX_DATA_BYTES))["rows"]:
                    if 0 <= row["point"] < self.manifest["points"]:
                        rows.setdefault(row["point"], row)
            except (InputError, ValueError, KeyError, TypeError, RecursionError):
                continue  # unreadable (cannot happen with atomic writes): its points are recomputed
        return rows

    def write_part(self, rows: list[dict]) -> None:
        """One finished chunk's rows (the folder and its manifest are created with the first)."""
        if not os.path.lexists(self.dir / "manifest.json"):
            make_output_folder(self.dir, "--out")
            atomic_write(self.dir / "manifest.json",
                         lambda t: t.write_text(json.dumps(self.manifest, indent=1, sort_keys=True)))
        first = min(r["point"] for r in rows)
        name = f"part-{first:09d}-{len(rows):05d}-{os.getpid()}-{os.urandom(3).hex()}.json"
        atomic_write(self.dir / name, lambda t: t.write_text(json.dumps({"rows": rows}, allow_nan=False)))


def write_rows(path: Path, rows: list[dict], columns: Iterable[str]) -> None:
    """Every row (sorted by the caller) to Parquet or CSV by suffix, atomically."""
    cols = list(columns)
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist([{c: r.get(c) for c in cols} for r in rows])
        if not rows:
            table = pa.table({c: pa.array([], pa.null()) for c in cols})
        atomic_write(path, lambda t: pq.write_table(table, t))
        return

    def write_csv(t: Path) -> None:
        with t.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({c: "" if r.get(c) is None else r[c] for c in cols})

    atomic_write(path, write_csv)


def _cell(text: str):
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    if is_ascii_number(text):  # digits 0-9 only (int() and float() also take other scripts' digits)
        return int(text) if ASCII_INTEGER.fullmatch(text.strip()) else float(text)
    if text.lower() in ("nan", "inf", "-inf"):
        return float(text)
    return text


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a sweep output file (Parquet or CSV)."""
    import io

    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise InputError(f"results: '{p.name}' must end in .parquet or .csv", field="results")
    raw = read_input_bytes(p, "results", max_bytes=MAX_DATA_BYTES, what="sweep results file")
    if p.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return pq.read_table(pa.BufferReader(raw)).to_pylist()
        except Exception as exc:  # noqa: BLE001 - any unreadable file is bad input
            raise InputError(f"results: {p.name} is not a readable Parquet file ({type(exc).__name__})", field="results") from None
    from gpuplan.validation_rules import decode_utf8

    with io.StringIO(decode_utf8(raw, f"results: {p.name}", "results"), newline="") as f:
        try:
            return [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(f)]
        except csv.Error as exc:
            raise InputError(f"results: {p.name} is not a readable CSV file ({exc})", field="results") from None
