"""Where sweep chunks run: a local process pool (default) or Ray. Both run `run_chunk` on the same
arguments, so the same spec gives the same rows; the runner only submits chunks and collects the
first finished ones (`submit`, `wait_any`).

- local: concurrent.futures.ProcessPoolExecutor; each worker receives the sweep's Context once
  (initializer). Workers start warm: where the OS has it (Linux, macOS), with the "forkserver" start
  method, whose server process imports the evaluation's modules once (WARM_MODULES, about 0.5 CPU-s
  of imports on a 2-core machine) and forks every worker from itself, already loaded; a worker
  started by "spawn" paid those imports again, which cost more than the points of a small sweep
  (issue 35: 2 workers were slower than 1). The server is single-threaded, so forking it is safe
  whatever threads the parent runs, and it is started once per process, then reused. Elsewhere
  (Windows): "spawn".
- ray: the Ray instance already initialised in this process, else `ray.init(address=...)` for an
  existing cluster, else a local instance bound to 127.0.0.1 only, without the dashboard
  (`local_ray_options`). The Context is put in the object store once.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import signal
import threading
import time
from contextlib import contextmanager
from typing import Any

from gpuplan.errors import InputError
from gpuplan.interfaces.sweep.evaluate import Context, evaluate_chunk

BACKENDS = ("local", "ray")

#: what a worker imports to evaluate points (`gpuplan.api.train` / `serve_plan` and the plan search,
#: the simulator): imported once by the fork server, inherited by every worker it forks
WARM_MODULES = ("gpuplan.interfaces.sweep.evaluate", "gpuplan.interfaces.api.training",
                "gpuplan.interfaces.api.serving", "gpuplan.workloads.training.plan_search")


def pool_context() -> multiprocessing.context.BaseContext:
    """The start method of the local pool's workers (module docstring): a fork server that has
    imported WARM_MODULES, or "spawn" where the OS has no fork server."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(list(WARM_MODULES))  # read when the server starts (once per process)
    return mp

_WORKER_CONTEXT: Context | None = None


def _init_worker(ctx: Context) -> None:
    global _WORKER_CONTEXT
    _WORKER_CONTEXT = ctx


def run_chunk(ctx: Context | None, points: list[dict]) -> tuple[list[dict], float]:
    """(rows, seconds spent) of a chunk of points: the task every backend runs."""
    t0 = time.perf_counter()
    rows = evaluate_chunk(ctx if ctx is not None else _WORKER_CONTEXT, points)
    return rows, time.perf_counter() - t0


@contextmanager
def _sigint_ignored():
    """SIGINT kept from the processes started in this block; main thread only. Where the OS can
    (POSIX), SIGINT is blocked, not ignored: processes started here inherit the blocked mask (the
    fork server and its workers never see it), and a Ctrl-C that arrives in the block is delivered
    to the driver when the block ends instead of being lost (the driver then stops the sweep);
    elsewhere it is ignored for the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if hasattr(signal, "pthread_sigmask"):
        previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class LocalBackend:
    name = "local"

    def __init__(self, ctx: Context, workers: int):
        self.workers = workers
        self._pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=pool_context(),
                                            initializer=_init_worker, initargs=(ctx,))
        self._futures: dict[cf.Future, Any] = {}

    def submit(self, points: list[dict], tag: Any) -> None:
        # worker processes start (lazily, here) with Ctrl-C ignored: the driver alone handles it,
        # cancels the pool and keeps what finished; workers do not print their own tracebacks
        with _sigint_ignored():
            self._futures[self._pool.submit(run_chunk, None, points)] = tag

    def wait_any(self) -> list[tuple[Any, list[dict], float]]:
        done, _ = cf.wait(self._futures, return_when=cf.FIRST_COMPLETED)
        out = []
        for fut in done:
            tag = self._futures.pop(fut)
            rows, seconds = fut.result()
            out.append((tag, rows, seconds))
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def local_ray_options(workers: int) -> dict:
    """ray.init arguments of a local instance: loopback only, no dashboard, `workers` CPUs."""
    return {"address": "local", "_node_ip_address": "127.0.0.1", "include_dashboard": False, "num_cpus": workers,
            "log_to_driver": False}


class RayBackend:
    name = "ray"

    def __init__(self, ctx: Context, workers: int | None, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise InputError("--backend: ray is not installed (pip install 'gpuplan[ray]')", field="backend") from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                import os

                ray.init(**local_ray_options(workers or os.cpu_count() or 1))
            self._started = True
        self.workers = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._ctx = ray.put(ctx)
        self._task = ray.remote(num_cpus=1, max_retries=3)(run_chunk)
        self._refs: dict[Any, Any] = {}

    def submit(self, points: list[dict], tag: Any) -> None:
        self._refs[self._task.remote(self._ctx, points)] = tag

    def wait_any(self) -> list[tuple[Any, list[dict], float]]:
        done, _ = self._ray.wait(list(self._refs), num_returns=1)
        out = []
        for ref in done:
            tag = self._refs.pop(ref)
            rows, seconds = self._ray.get(ref)
            out.append((tag, rows, seconds))
        return out

    def close(self) -> None:
        for ref in self._refs:
            self._ray.cancel(ref, force=True)
        self._refs.clear()
        if self._started:
            self._ray.shutdown()


def make_backend(name: str, ctx: Context, workers: int | None, address: str | None):
    if name not in BACKENDS:
        raise InputError(f"--backend: '{name}' is not one of {', '.join(BACKENDS)}", field="backend")
    if address and name != "ray":
        raise InputError("--address: only with --backend ray", field="address")
    if name == "local":
        import os

        return LocalBackend(ctx, workers or os.cpu_count() or 1)
    return RayBackend(ctx, workers, address)
