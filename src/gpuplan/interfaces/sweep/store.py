"""Where a sweep's rows live: part files as chunks finish, then one output file.

    results.parquet.parts/manifest.json     spec hash, gpuplan version, point count, sampler, goal,
                                            knob overrides in effect (when any)
    results.parquet.parts/part-*.json       the rows of one finished chunk
    results.parquet                          every row, sorted by point (Parquet or CSV by suffix)

Every file is written to a temporary name in the same folder and moved into place with
os.replace (atomic on POSIX), so an interrupted run leaves finished parts and no half-written
file. A rerun with the same --out reads the parts and skips their points; a manifest that differs
(another spec, another gpuplan version) is refused.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from pathlib import Path
from typing import Iterable

from gpuplan.errors import InputError

SUFFIXES = (".parquet", ".csv")


def check_out(out: str | Path) -> Path:
    """The output path, if its suffix names a format (InputError otherwise)."""
    p = Path(out)
    if p.suffix.lower() not in SUFFIXES:
        raise InputError(f"--out: '{p.name}' must end in .parquet or .csv", field="out")
    if p.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise InputError("--out: Parquet needs pyarrow (pip install 'gpuplan[sweep]'); or write .csv", field="out") from None
    return p


def atomic_write(path: Path, write) -> None:
    """Call write(temp_path), then move the temporary file onto `path` (never a partial file)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class PartStore:
    """The parts folder of one output file (module docstring)."""

    def __init__(self, out: Path, manifest: dict):
        self.out = out
        self.dir = out.with_name(out.name + ".parts")
        self.manifest = manifest

    def open(self, create: bool = True) -> dict[int, dict]:
        """Create the folder (or check its manifest) and return the finished rows by point;
        `create=False` (a dry run) writes nothing."""
        path = self.dir / "manifest.json"
        if not path.exists():
            if not create:
                return {}
            self.dir.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda t: t.write_text(json.dumps(self.manifest, indent=1, sort_keys=True)))
            return {}
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError):
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
                for row in json.loads(part.read_text())["rows"]:
                    if 0 <= row["point"] < self.manifest["points"]:
                        rows.setdefault(row["point"], row)
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable (cannot happen with atomic writes): its points are recomputed
        return rows

    def write_part(self, rows: list[dict]) -> None:
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
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a sweep output file (Parquet or CSV)."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise InputError(f"results: '{p.name}' must end in .parquet or .csv", field="results")
    if not p.exists():
        raise InputError(f"results: {p} does not exist", field="results")
    if p.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_table(p).to_pylist()
        except Exception as exc:  # noqa: BLE001 - any unreadable file is bad input
            raise InputError(f"results: {p.name} is not a readable Parquet file ({type(exc).__name__})", field="results") from None
    with p.open(newline="", encoding="utf-8") as f:
        return [{k: _cell(v) for k, v in row.items()} for row in csv.DictReader(f)]
