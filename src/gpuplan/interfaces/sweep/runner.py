"""Run a sweep: expand the spec into points, skip the points an earlier run finished, cut the rest
into chunks of about CHUNK_TARGET_S seconds, run them on a backend as they fit, write each
finished chunk at once (store.PartStore), and finally the sorted output file.

Chunk size adapts: the first chunks hold one point; later ones hold CHUNK_TARGET_S / (mean seconds
per point so far), at most a 1/workers share of what is left (so the last chunks spread over every
worker). The rows do not depend on the chunking (each point is evaluated alone), so a resumed run
or another backend gives the same rows.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpuplan.interfaces.sweep.backends import make_backend
from gpuplan.interfaces.sweep.evaluate import Context, columns, evaluate_point
from gpuplan.interfaces.sweep.hardware import hardware_axis
from gpuplan.interfaces.sweep.points import Points, make_points
from gpuplan.interfaces.sweep.spec import SweepSpec, load_spec
from gpuplan.interfaces.sweep.store import PartStore, check_out, write_rows

#: seconds of work per chunk (a few seconds: per-task overhead negligible, little lost on a kill)
CHUNK_TARGET_S = 2.0
MAX_CHUNK_POINTS = 1000


@dataclass(frozen=True)
class Prepared:
    """A spec made ready to run: its points, the shared context, the part store and what is done."""

    spec: SweepSpec
    points: Points
    context: Context
    store: PartStore | None
    finished: dict[int, dict]

    @property
    def pending(self) -> list[int]:
        return [i for i in range(len(self.points)) if i not in self.finished]


@dataclass(frozen=True)
class SweepSummary:
    name: str
    goal: str
    points: int
    resumed: int  # rows read from an earlier run's parts
    computed: int
    infeasible: int
    errors: int
    elapsed_s: float
    points_per_s: float  # computed / elapsed
    out: str | None
    backend: str
    workers: int
    chunks: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DryRun:
    name: str
    goal: str
    points: int
    finished: int
    pending: int
    sampler: str
    seconds_per_point: float  # one pending point timed here
    workers: int
    eta_s: float  # pending x seconds_per_point / workers

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def manifest(spec: SweepSpec, points: Points, knob_overrides: dict | None = None) -> dict:
    """What identifies a sweep's parts; knob overrides (a calibration profile, a memory headroom) are
    part of it when any is in effect, so a resume under other knob values is refused."""
    from gpuplan import __version__

    out = {"name": spec.name, "goal": spec.goal, "spec_hash": spec.digest(), "gpuplan_version": __version__,
           "points": len(points), "sampler": points.sampler}
    if knob_overrides:
        out["knob_overrides"] = dict(sorted(knob_overrides.items()))
    return out


def prepare(spec: SweepSpec | str | Path, out: str | Path | None, *, create: bool = True) -> Prepared:
    """Validate everything before any work: spec, output path, models, hardware (InputError).
    `create=False` (a dry run) reads an earlier run's parts but writes nothing."""
    from gpuplan.errors import InputError
    from gpuplan.interfaces.api._common import resolve_model

    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    out_path = check_out(out) if out is not None else None
    points = make_points(spec)
    models = {}
    for m in spec.axes.models:
        try:
            models[m] = resolve_model(m)
        except InputError as exc:
            raise InputError(f"axes.models: {exc}", field="axes.models") from None
    hardware = {h.name: h for h in hardware_axis(spec)}
    from gpuplan import knobs

    overrides = knobs.active_overrides()  # `--calibration`, `--memory-headroom`: re-applied in every worker
    ctx = Context(spec.goal, models, hardware, spec.train.model_dump(mode="json"), spec.serve.model_dump(mode="json"),
                  spec.constraints.model_dump(mode="json"), overrides)
    store = PartStore(out_path, manifest(spec, points, overrides)) if out_path is not None else None
    finished = store.open(create) if store is not None else {}
    return Prepared(spec, points, ctx, store, finished)


def dry_run(prep: Prepared, workers: int) -> DryRun:
    """Point count and an ETA from one pending point evaluated here."""
    pending = prep.pending
    per_point = 0.0
    if pending:
        evaluate_point(prep.context, prep.points.point(pending[0]))  # warm imports and caches
        t0 = time.perf_counter()
        evaluate_point(prep.context, prep.points.point(pending[0]))
        per_point = time.perf_counter() - t0
    return DryRun(prep.spec.name, prep.spec.goal, len(prep.points), len(prep.finished), len(pending), prep.points.sampler,
                  per_point, workers, per_point * len(pending) / max(1, workers))


class ChunkSizer:
    """Points per chunk from the seconds per point measured so far (module docstring)."""

    def __init__(self, workers: int, target_s: float = CHUNK_TARGET_S):
        self.workers, self.target_s = workers, target_s
        self.seconds = 0.0
        self.points = 0

    def record(self, points: int, seconds: float) -> None:
        self.points += points
        self.seconds += seconds

    def size(self, left: int) -> int:
        if not self.points:
            return 1
        per_point = max(self.seconds / self.points, 1e-6)
        n = int(self.target_s / per_point)
        return max(1, min(n, MAX_CHUNK_POINTS, math.ceil(left / self.workers)))


def run(prep: Prepared, backend: str = "local", workers: int | None = None, address: str | None = None,
        progress: Callable[[int, int], None] | None = None,
        chunk_points: int | None = None) -> tuple[SweepSummary, list[dict]]:
    """Run the pending points of `prep`; (summary, every row sorted by point). Rows are written as
    chunks finish and the output file at the end (when `prep` has one). `chunk_points`: a fixed
    chunk size instead of the adaptive one (ChunkSizer)."""
    from gpuplan.errors import InputError

    for name, value in (("workers", workers), ("chunk_points", chunk_points)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InputError(f"--{name.replace('_', '-')} must be an integer >= 1", field=name)
    t0 = time.perf_counter()
    rows = dict(prep.finished)
    pending = prep.pending
    total = len(prep.points)
    if progress:
        progress(len(rows), total)
    computed = chunks = 0
    used_workers = workers or 0
    if pending:
        be = make_backend(backend, prep.context, workers, address)
        used_workers = be.workers
        sizer = ChunkSizer(be.workers)
        queue = list(reversed(pending))  # pop() from the end: lowest point first
        in_flight = 0
        try:
            while queue or in_flight:
                while queue and in_flight < 2 * be.workers:
                    n = chunk_points or sizer.size(len(queue))
                    chunk = [queue.pop() for _ in range(min(n, len(queue)))]
                    be.submit([prep.points.point(i) for i in chunk], len(chunk))
                    in_flight += 1
                for n, chunk_rows, seconds in be.wait_any():
                    in_flight -= 1
                    chunks += 1
                    sizer.record(n, seconds)
                    if prep.store is not None:
                        prep.store.write_part(chunk_rows)
                    for r in chunk_rows:
                        rows[r["point"]] = r
                    computed += len(chunk_rows)
                    if progress:
                        progress(len(rows), total)
        finally:
            be.close()
    ordered = [rows[i] for i in sorted(rows)]
    if prep.store is not None:
        write_rows(prep.store.out, ordered, columns(prep.spec.goal))
    elapsed = time.perf_counter() - t0
    summary = SweepSummary(
        prep.spec.name, prep.spec.goal, total, len(prep.finished), computed,
        sum(r["status"] == "infeasible" for r in ordered), sum(r["status"] == "error" for r in ordered),
        elapsed, computed / elapsed if elapsed > 0 else 0.0, str(prep.store.out) if prep.store else None,
        backend, used_workers, chunks)
    return summary, ordered


def run_sweep(spec: SweepSpec | str | Path, out: str | Path | None = None, *, backend: str = "local",
              workers: int | None = None, address: str | None = None,
              progress: Callable[[int, int], None] | None = None,
              chunk_points: int | None = None) -> tuple[SweepSummary, list[dict]]:
    """Prepare and run a sweep in one call (the Python entry point of `gpuplan sweep run`)."""
    return run(prepare(spec, out), backend, workers, address, progress, chunk_points)
