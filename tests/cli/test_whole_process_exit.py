"""The console entry point as a whole process (cli/main.py `main()` without argv): OpenBLAS asked for
one thread unless the user chose (`one_blas_thread`), and the process ending without the
interpreter's teardown (`exit_without_teardown`) yet with the exit status, output and atexit
callbacks the interpreter would give. Each case runs a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuplan

SRC = str(Path(gpuplan.__file__).resolve().parents[1])

#: runs `gpuplan ARGV...` as the console script does (main() reads sys.argv), with an atexit callback
#: and an object whose finaliser runs only in the interpreter's teardown of module globals;
#: PROFILE=1 installs a no-op profiler first (what cProfile or pyinstrument do; a builtin, as a
#: function defined here would keep this module's globals, and so `kept`, alive past the teardown)
_CONSOLE = """
import atexit, functools, os, sys
if os.environ.get("PROFILE") == "1":
    sys.setprofile(functools.partial(min, key=id))
atexit.register(lambda: sys.stderr.write("atexit ran\\n"))
class Teardown:
    def __del__(self):
        os.write(2, b"teardown ran\\n")
kept = Teardown()
sys.argv = ["gpuplan", *sys.argv[1:]]
from gpuplan.cli.main import main
main()
"""


def console(*argv: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                                                  "OMP_NUM_THREADS", "PROFILE")}
    full_env.update(PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    return subprocess.run([sys.executable, "-c", _CONSOLE, *argv], env=full_env, capture_output=True, text=True,
                          timeout=120)


def test_a_command_ends_with_its_output_status_and_atexit_callbacks_but_no_teardown():
    done = console("hw", "list", "--json")
    assert done.returncode == 0
    assert done.stdout.lstrip().startswith("[") and '"h100-sxm5-80gb"' in done.stdout  # the whole output came out
    assert "atexit ran" in done.stderr
    assert "teardown ran" not in done.stderr  # os._exit: module globals are not torn down


def test_bad_input_keeps_exit_status_2_and_its_one_line_error():
    done = console("hw", "show", "no-such-gpu")
    assert done.returncode == 2  # the CLI's bad-input status (gpuplan.cli.errors)
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert "atexit ran" in done.stderr and "teardown ran" not in done.stderr


def test_under_a_profiler_the_interpreter_ends_the_process_as_usual():
    # cProfile, pyinstrument and coverage write their results after the program returns: no os._exit
    done = console("hw", "list", "--json", PROFILE="1")
    assert done.returncode == 0
    assert "atexit ran" in done.stderr and "teardown ran" in done.stderr


#: prints the OpenBLAS thread variable numpy saw, after a run of the console entry point
_BLAS_PROBE = """
import os, sys
sys.argv = ["gpuplan", *sys.argv[1:]]
from gpuplan.cli.main import main
try:
    main()
finally:
    sys.stderr.write(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}\\n")
"""


@pytest.mark.parametrize(("argv", "env", "expected"), [
    (("hw", "--help"), {}, "1"),  # no choice made: one thread
    (("hw", "--help"), {"OPENBLAS_NUM_THREADS": "2"}, "2"),  # the user's choice stands
    (("hw", "--help"), {"OMP_NUM_THREADS": "2"}, "None"),  # OpenBLAS reads OMP_NUM_THREADS after its own
    (("bench", "--help"), {}, "None"),  # bench times the machine's own matmul: OpenBLAS's default
])
def test_openblas_gets_one_thread_unless_the_user_chose(argv, env, expected):
    full_env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                                                  "OMP_NUM_THREADS")}
    full_env.update(PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    # the exit path ends the process before `finally` would print: run it under a no-op profiler
    probe = "import functools, sys; sys.setprofile(functools.partial(min, key=id))\n" + _BLAS_PROBE
    done = subprocess.run([sys.executable, "-c", probe, *argv], env=full_env, capture_output=True, text=True,
                          timeout=120)
    assert f"OPENBLAS_NUM_THREADS={expected}" in done.stderr


def test_an_in_process_call_leaves_the_environment_alone(monkeypatch):
    from gpuplan.cli.main import main

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("GOTO_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["hw", "--help"])
    assert exc.value.code == 0
    assert "OPENBLAS_NUM_THREADS" not in os.environ
