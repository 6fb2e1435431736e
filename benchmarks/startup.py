"""Start-up cost of the CLI: whole-process wall time of common commands (median of 7 runs), beside
the CPU seconds (user + system) each run used, which the machine's other load disturbs less.

Each command is run as a fresh `python -m gpuplan.cli.main ...` process (what the `gpuplan` console
script runs), output discarded; the first run of each command is a warm-up (page cache, .pyc files,
numba's on-disk cache) and is not counted. Bytecode is cached (PYTHONDONTWRITEBYTECODE is dropped and
the .pyc files go to a folder under the system's temp dir, PYTHONPYCACHEPREFIX), as in an installed
package, whose .pyc files pip writes at install time: without them every module is compiled from
source at each start (about +0.25 s for `--help` on this machine). `--src DIR` times another
checkout's src/; `--baseline OTHER/src` times both, alternating run by run (paired: the machine's
load drifts alike for both), and prints the ratio of their CPU medians. Targets (issue 35): every `--help` and `hw list` under
0.3 s, `plan` / `train` / `serve run` on defaults under 0.5 s, on a 2-core machine.
Prints one line per command, `startup_s[<command>]: <wall> s (cpu <cpu> s)` (with --baseline also
`baseline ... cpu ratio`), the machine's core count and load average first and the load at the end.

    python benchmarks/startup.py [--runs 7] [--only help] [--src OTHER_CHECKOUT/src] [--baseline OLD/src]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = {
    "--help": ["--help"],
    "hw list": ["hw", "list"],
    "hw --help": ["hw", "--help"],
    "train --help": ["train", "--help"],
    "plan --help": ["plan", "--help"],
    "serve run --help": ["serve", "run", "--help"],
    "validate --help": ["validate", "--help"],
    "model show --help": ["model", "show", "--help"],
    "sweep --help": ["sweep", "--help"],
    "plan": ["plan"],
    "train": ["train"],
    "train llama-3-8b --system dgx-h100 --gpus 8": ["train", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8"],
    "serve run llama-3-8b": ["serve", "run", "llama-3-8b"],
}


def child_env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(src)
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "gpuplan-startup-pycache")
    return env


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, cpu s) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *argv], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--only", default=None, help="run only the commands whose name contains this text")
    ap.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src",
                    help="the src/ folder whose gpuplan to time (default: this checkout's)")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout's src/, timed in alternation with --src (paired runs)")
    args = ap.parse_args()
    env = child_env(args.src.resolve())
    base_env = child_env(args.baseline.resolve()) if args.baseline else None
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    for name, argv in COMMANDS.items():
        if args.only and args.only not in name:
            continue
        run_once(argv, env)  # warm-up
        runs, base_runs = [], []
        if base_env is not None:
            run_once(argv, base_env)
        for _ in range(args.runs):
            runs.append(run_once(argv, env))
            if base_env is not None:
                base_runs.append(run_once(argv, base_env))
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        line = f"startup_s[{name}]: {wall:.3f} s (cpu {cpu:.3f} s)"
        if base_runs:
            base_wall = statistics.median(r[0] for r in base_runs)
            base_cpu = statistics.median(r[1] for r in base_runs)
            line += f"; baseline {base_wall:.3f} s (cpu {base_cpu:.3f} s), cpu ratio {cpu / base_cpu:.2f}"
        print(line, flush=True)
    print(f"machine: load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
