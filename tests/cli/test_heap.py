"""gpuplan.heap: the CLI's process keeps freed memory in glibc's heap (mallopt M_MMAP_THRESHOLD 32 MiB,
M_TRIM_THRESHOLD 256 MiB), for the commands that search or simulate only."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from gpuplan import heap
from gpuplan.cli import main as cli_main


def test_thresholds_are_glibcs_limits():
    # mallopt(3): M_MMAP_THRESHOLD accepts at most DEFAULT_MMAP_THRESHOLD_MAX = 4 MiB x sizeof(long) = 32 MiB on
    # 64-bit; parameter numbers from glibc malloc.h: M_TRIM_THRESHOLD -1, M_MMAP_THRESHOLD -3
    assert heap.MMAP_THRESHOLD_BYTES == 32 * 1024 * 1024
    assert (heap.M_TRIM_THRESHOLD, heap.M_MMAP_THRESHOLD) == (-1, -3)
    assert heap.TRIM_THRESHOLD_BYTES > heap.MMAP_THRESHOLD_BYTES


@pytest.mark.skipif(not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"), reason="glibc only")
def test_glibc_accepts_the_settings():
    # run in a child: the setting is process-wide and the test process keeps its own allocator
    out = subprocess.run([sys.executable, "-c", "from gpuplan.heap import keep_freed_memory; print(keep_freed_memory())"],
                         capture_output=True, text=True, env={**os.environ}, check=True).stdout.strip()
    assert out == "True"


def test_only_searching_commands_set_it(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "keep_freed_memory", lambda: calls.append(1) or True)
    monkeypatch.setattr(cli_main, "exit_without_teardown", lambda code: None)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")  # main() of a whole process sets it; keep the test's environment
    monkeypatch.setattr(sys, "argv", ["gpuplan", "hw", "list", "--json"])
    with pytest.raises(SystemExit):
        cli_main.main()
    assert calls == []  # hw list: no search, no ctypes import
    monkeypatch.setattr(sys, "argv", ["gpuplan", "comm", "all_reduce", "--system", "dgx-h100", "--gpus", "8", "--size", "1MiB"])
    with pytest.raises(SystemExit):
        cli_main.main()
    assert calls == []
    monkeypatch.setattr(sys, "argv", ["gpuplan", "fit", "train", "llama-2-7b", "--gpu", "h100-sxm5-80gb", "--gpus", "1", "--json"])
    with pytest.raises(SystemExit):
        cli_main.main()
    assert calls == [1]  # fit runs the memory model: its process keeps freed memory
    assert {"plan", "train", "serve", "sweep", "validate"} <= cli_main.SEARCHING_COMMANDS
