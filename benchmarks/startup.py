"""Start-up cost of the CLI: whole-process wall time of common commands (median of 7 runs), beside
the CPU seconds (user + system) each run used, which the machine's other load disturbs less.

Each command is run as a fresh `python -m gpuplan.cli.main ...` process (what the `gpuplan` console
script runs), output discarded; the first run of each command is a warm-up (page cache, .pyc files,
numba's on-disk cache) and is not counted. Bytecode is cached (PYTHONDONTWRITEBYTECODE is dropped and
the .pyc files go to a folder under the system's temp dir, PYTHONPYCACHEPREFIX), as in an installed
package, whose .pyc files pip writes at install time: without them every module is compiled from
source at each start (about +0.25 s for `--help` on this machine). `--src DIR` times another
checkout's src/ (a before / after comparison). Targets (issue 35): every `--help` and `hw list` under
0.3 s, `plan` / `train` / `serve run` on defaults under 0.5 s, on a 2-core machine.
Prints one line per command, `startup_s[<command>]: <wall> s (cpu <cpu> s)`, and the machine's
core count and load average first.

    python benchmarks/startup.py [--runs 7] [--only help] [--src OTHER_CHECKOUT/src]
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
    args = ap.parse_args()
    env = child_env(args.src.resolve())
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    for name, argv in COMMANDS.items():
        if args.only and args.only not in name:
            continue
        run_once(argv, env)  # warm-up
        runs = [run_once(argv, env) for _ in range(args.runs)]
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"startup_s[{name}]: {wall:.3f} s (cpu {cpu:.3f} s)", flush=True)


if __name__ == "__main__":
    main()
