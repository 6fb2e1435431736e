"""The full fuzz run of issue 28: every command of `gpuplan --help`, every option, `--set` pairs,
path edge cases, crafted files, huge-but-valid inputs (tests/fuzz/full_cases.py, full_files.py),
then malformed requests to the HTTP API (benchmarks/fuzz_web.py). Not run in CI; a fixed sample
of the same cases runs in pytest (tests/fuzz/test_fuzz_full_sample.py).

Each invocation runs in a child forked from one process that has imported gpuplan (so 5,000 runs
do not pay 5,000 interpreter starts), `--workers` children at a time. A child gets
RLIMIT_AS = 3 GiB (resource.setrlimit), stdin /dev/null, stdout and stderr in files (or stdout
on /dev/full), and `--timeout` seconds. The oracle, per run:

- exit 0 or 2; anything else is an *internal error*; "Traceback" anywhere is a *traceback*;
- exit 2: exactly one `error:` line on stderr (notes and warnings aside), or under --json the JSON
  error object on stdout (`{"error": {...}}`) and no error line;
- exit 0 under --json: the output parses with non-finite numbers refused (gpuplan prints `null`);
- past the timeout: a *hang* (`gpuplan web` with a valid address: served, then stopped);
- MemoryError / "Cannot allocate memory" / killed by a signal: a *memory blow-up*;
- exit 0 on a case marked invalid (outside the option's documented range, a file that cannot say
  what it claims): a *silent acceptance*;
- an output path that is not a regular file (device, FIFO, folder, link to a device) changed
  in any way (type, device number, inode, link target): *output replaced*.

    python benchmarks/fuzz_run.py [--workers 2] [--per-option 8] [--sets 400] [--files 1000]
                                  [--sample N] [--timeout 60] [--seed 0] [--json failures.json]

Prints the counts per category (kind of input) and per failure class with the distinct causes.
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread per child: forked children never inherit a thread pool
os.environ.setdefault("COLUMNS", "100")

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fuzz"))
sys.path.insert(0, str(REPO / "benchmarks"))

MEMORY_CAP_BYTES = 3 * 2**30
CLASSES = ("internal error", "traceback", "hang", "memory blow-up", "silent acceptance", "not one line",
           "non-finite JSON", "output replaced")


def _reject(name):
    raise ValueError(f"non-finite {name}")


def snapshot(path: str):
    """What must not change about an output path that is not a regular file."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    link = os.readlink(path) if os.path.islink(path) else None
    return (st.st_mode & 0o170000, st.st_rdev, st.st_ino, link)


_ROOT = []


def root_command():
    """The click command `gpuplan` runs (typer builds it per call, ~0.3 s; once here, before forking)."""
    if not _ROOT:
        import typer

        from gpuplan.cli.main import app

        _ROOT.append(typer.main.get_command(app))
    return _ROOT[0]


def child(case: dict, out: Path, err: Path) -> None:
    """In the forked child: limits, redirections, then the CLI; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)  # its own process group: a timeout kills what it started too
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        o = os.open("/dev/full" if case.get("stdout") == "full" else out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        e = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(o, 1)
        os.dup2(e, 2)
        # the real descriptors, whatever the parent had put there (pytest's capture objects)
        sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        if case.get("env"):  # read when gpuplan starts: a fresh interpreter, as a user's shell starts one
            os.execve(sys.executable, [sys.executable, "-m", "gpuplan.cli.main", *case["args"]],
                      {**os.environ, **case["env"]})
        sys.argv = ["gpuplan", *case["args"]]
        root_command().main(args=list(case["args"]), prog_name="gpuplan")  # GpuplanGroup.main: the CLI's error path
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported through stderr and the exit code
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - /dev/full: the CLI has reported it already
            pass
    os._exit(code)


def judge(case: dict, rc: int | None, out: str, err: str, before: dict) -> tuple[str | None, str]:
    """(failure class or None, cause) of one finished run (module docstring)."""
    for path, snap in before.items():
        if snapshot(path) != snap:
            return "output replaced", f"{case['kind']}: {path} changed"
    if rc is None:
        if case.get("serves") and "gpuplan web:" in err:
            return ("silent acceptance", f"{case['kind']} served") if case.get("invalid") else (None, "served")
        return "hang", case["kind"]
    text = out + err
    if "MemoryError" in text or "Cannot allocate memory" in text or "bad_alloc" in text or rc < 0:
        return "memory blow-up", f"{case['kind']}: {'signal ' + str(-rc) if rc < 0 else err.strip()[-160:]}"
    if "Traceback (most recent call last)" in text:
        return "traceback", f"{case['kind']}: {err.strip().splitlines()[-1][:160] if err.strip() else '?'}"
    if rc not in (0, 2) or "internal error" in text:
        last = (err.strip().splitlines() or ["?"])[-1][:160]
        return "internal error", f"{case['kind']}: exit {rc}: {last}"
    errors = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("note: ", "warning: "))]
    if rc == 2:
        as_json = out.strip().startswith("{") and '"error"' in out
        if not (len(errors) == 1 and errors[0].startswith("error: ") or as_json and not errors):
            return "not one line", f"{case['kind']}: {len(errors)} lines: {' | '.join(errors)[:160]!r}"
        return None, ""
    if "--json" in case["args"] and out.strip().startswith(("{", "[")):
        try:
            json.loads(out, parse_constant=_reject)
        except ValueError as exc:
            return "non-finite JSON", f"{case['kind']}: {str(exc)[:80]}"
    if case.get("invalid"):
        shown = next((a for a in reversed(case["args"]) if a != "--json"), "")
        return "silent acceptance", f"{case['kind']} {shown[:60]!r}"
    return None, ""


def run_all(cases: list[dict], workers: int, timeout: float, tmp: Path, progress: bool = True) -> list[dict]:
    """Fork `workers` children at a time; wait4 gives each one's exit status and peak memory."""
    runs = tmp / "runs"
    runs.mkdir(exist_ok=True)
    queue = list(enumerate(cases))
    running: dict[int, tuple] = {}
    results: list[dict] = [None] * len(cases)  # type: ignore[list-item]
    done = 0
    t0 = time.monotonic()
    while queue or running:
        while queue and len(running) < workers:
            i, case = queue.pop(0)
            out, err = runs / f"{i}.out", runs / f"{i}.err"
            before = {p: snapshot(p) for p in case.get("protect", [])}
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                child(case, out, err)
            running[pid] = (i, case, out, err, before, time.monotonic())
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        now = time.monotonic()
        finished = []
        if pid:
            finished.append((pid, os.waitstatus_to_exitcode(status), usage.ru_maxrss))
        for p, (i, case, *_rest, started) in list(running.items()):
            if p != pid and now - started > timeout:
                try:
                    os.killpg(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, usage = os.wait4(p, 0)
                finished.append((p, None, usage.ru_maxrss))
        if not finished:
            time.sleep(0.01)
            continue
        for p, rc, maxrss in finished:
            i, case, out, err, before, started = running.pop(p)
            try:
                os.killpg(p, signal.SIGKILL)  # anything it left running (a web server's threads are in-process)
            except (ProcessLookupError, PermissionError):
                pass
            o = out.read_text(errors="replace") if out.exists() else ""
            e = err.read_text(errors="replace") if err.exists() else ""
            failure, cause = judge(case, rc, o, e, before)
            results[i] = {"kind": case["kind"], "args": case["args"], "exit": rc, "failure": failure, "cause": cause,
                          "seconds": now - started, "maxrss_mib": maxrss / 1024, "invalid": case.get("invalid", False),
                          "note": case.get("note", ""), "stderr": e[-300:], "stdout": o[:300]}
            for f in (out, err):
                f.unlink(missing_ok=True)
            done += 1
            if progress and done % 250 == 0:
                print(f"  {done}/{len(cases)} runs, {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    return results


def warm_up() -> None:
    """Import gpuplan and compile its numba kernels once, in the parent (children inherit them)."""
    from typer.testing import CliRunner

    from gpuplan.cli.main import app

    from gpuplan.workloads.inference import jit

    jit.compile_kernels()  # small serving runs would stay interpreted (workloads/inference/jit.py)
    runner = CliRunner()
    for args in (["serve", "run", "gpt3-125m", "--gpu", "h100-sxm5-80gb", "--concurrency", "4", "--input-len", "128",
                  "--output-len", "16", "--json"], ["train", "gpt3-125m", "--gpus", "8", "--json"],
                 ["formats", "compare", "--random", "normal:256", "--json"], ["hw", "list", "--json"],
                 ["fit", "train", "gpt3-125m", "--gpu", "h100-sxm5-80gb", "--gpus", "8", "--json"]):
        runner.invoke(app, args)
    root_command()


def report(results: list[dict], web: dict | None, elapsed: float) -> dict:
    by_class: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        if r["failure"]:
            by_class[r["failure"]][r["cause"]] += 1
    categories = Counter(r["kind"].split()[0] for r in results)
    print("\ninvocations per category:")
    for cat, n in sorted(categories.items(), key=lambda kv: -kv[1]):
        fails = sum(1 for r in results if r["kind"].split()[0] == cat and r["failure"])
        print(f"  {cat:10s} {n:6d}  (failures {fails})")
    for cls in CLASSES:
        causes = by_class.get(cls, Counter())
        if causes:
            print(f"\n{cls}: {sum(causes.values())} runs, {len(causes)} distinct causes")
            for cause, n in causes.most_common(30):
                print(f"  {n:5d}  {cause}")
    slowest = max(results, key=lambda r: r["seconds"]) if results else None
    biggest = max(results, key=lambda r: r["maxrss_mib"]) if results else None
    from full_cases import command_tree

    paths = list(command_tree())
    reached = {p for p in paths for r in results if r["args"][:len(p)] == list(p) or
               r["args"][:1] == ["--catalog"] and r["args"][2:2 + len(p)] == list(p)}
    counts = {"invocations": len(results), "commands_reached": f"{len(reached)} of {len(paths)}",
              "exit_0": sum(r["exit"] == 0 for r in results), "exit_2": sum(r["exit"] == 2 for r in results),
              **{cls: sum(by_class.get(cls, Counter()).values()) for cls in CLASSES}, "elapsed_s": round(elapsed)}
    if slowest:
        print(f"\nslowest: {slowest['seconds']:.1f} s: gpuplan {' '.join(slowest['args'])[:150]}")
        print(f"largest peak RSS: {biggest['maxrss_mib']:.0f} MiB: gpuplan {' '.join(biggest['args'])[:150]}")
    if web is not None:
        counts.update({f"web_{k}": v for k, v in web.items() if isinstance(v, int)})
    print()
    for key, value in counts.items():
        print(f"{key}: {value}")
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--per-option", type=int, default=8, help="values per option (table and JSON modes alternate)")
    ap.add_argument("--sets", type=int, default=400, help="--set KEY=VALUE cases")
    ap.add_argument("--files", type=int, default=1000, help="crafted files (about)")
    ap.add_argument("--sample", type=int, default=0, help="run only this many cases, drawn at random (0: all)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per invocation")
    ap.add_argument("--web-requests", type=int, default=1200, help="malformed HTTP API requests (0: none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", dest="json_out", default=None, help="write every failing run and the counts here")
    args = ap.parse_args()
    from full_cases import all_cases

    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="gpuplan-fuzz-run-"))
    try:
        cases = all_cases(tmp, rng, args.per_option, args.sets, args.files)
        rng.shuffle(cases)
        if args.sample:
            cases = cases[: args.sample]
        print(f"cases: {len(cases)} in {tmp}", file=sys.stderr, flush=True)
        warm_up()
        t0 = time.monotonic()
        results = run_all(cases, args.workers, args.timeout, tmp)
        web = None
        if args.web_requests:
            from fuzz_web import run_web

            web = run_web(args.web_requests, rng)
        counts = report(results, web, time.monotonic() - t0)
        if web is not None:
            for cause, n in web["causes"].most_common(20):
                print(f"  web {n:5d}  {cause}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({"counts": counts, "failures": [r for r in results if r["failure"]]},
                                                      indent=1))
    finally:
        for p in tmp.rglob("*"):  # unreadable files: readable again, so rmtree can remove them
            try:
                if not p.is_symlink():
                    p.chmod(0o700)
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
