"""`gpuplan` root command. Each command group lives in its own module with a `register(app)`.

The one error path of the CLI (`GpuplanGroup.main`):

- GpuplanError (bad input, infeasible plan), pydantic ValidationError and click usage errors:
  one line `error: ...` on stderr, exit code 2, no traceback. Under `--json` the error is JSON on
  stdout instead: `{"error": {"field": ..., "allowed": ..., "message": ...}}` (what the HTTP API
  returns).
- `--format json` / `--output-format json` count as `--json` for the error object.
- `--debug` (root option) or `GPUPLAN_DEBUG=1`: the traceback as well, for bug reports.
- a closed pipe (`gpuplan ... | head`): exit 0, quietly (rich's own handler, which exits 1, is
  replaced: render._FormatConsole.on_broken_pipe).
- anything else is a bug in gpuplan: `internal error: ... (run with --debug ...)`, exit code 1.

Every numeric option of every command passes the checks of cli/params.py (finite, int64,
non-negative, per-option range and caps) before the command runs.
"""

from __future__ import annotations

import gc

#: Objects allocated (net) before a young-generation collection: CPython's default is 700. A command
#: allocates ~10^6 objects as it starts (modules, classes, dataclass and pydantic machinery,
#: numba's typing registries), nearly all of them long-lived, so at 700 a run makes 125 (`train`)
#: to 300 (`serve run`) collections whose older-generation passes rescan everything imported so
#: far: 50-135 ms of CPU (gc.callbacks with thread_time, 2026-11-28, 2-core machine), about a
#: tenth of a run. At 10,000 the same runs make 8-20 collections (15-80 ms). Collection still
#: runs, so a long-running command (`gpuplan web`, sweeps) keeps its cyclic garbage bounded.
GC_YOUNG_THRESHOLD = 10_000
gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])  # before the imports below: they are what it is for

import errno
import os
import sys
from contextlib import contextmanager
from typing import List, Optional

import typer
from typer.core import TyperGroup

from gpuplan import __version__
from gpuplan.cli.errors import OutputClosed, exit_on_error
from gpuplan.cli.lazy_coercion import defer_coercion
from gpuplan.cli.output_options import add_shared_options, refuse_table_with_json, wants_json
from gpuplan.cli.params import guard_numeric_options
from gpuplan.cli.render import begin_invocation, finish_invocation


class GpuplanGroup(TyperGroup):
    """Root group: numeric options guarded, every error turned into one line (see module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        add_shared_options(self)  # --format, --wide, --table, --memory-headroom (cli/output_options.py)
        guard_numeric_options(self)
        defer_coercion(self)  # typer's pydantic adapters built only for values that need them (cli/lazy_coercion.py)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(args=argv, prog_name=prog_name, complete_var=complete_var,
                                standalone_mode=False, **extra)
        debug = "--debug" in argv or os.environ.get("GPUPLAN_DEBUG", "") not in ("", "0")
        begin_invocation()  # this invocation's --format, --wide, --table (an earlier in-process one may have set them)
        with exit_on_error(as_json=wants_json(argv), debug=debug):
            refuse_table_with_json(argv)
            code = super().main(args=argv, prog_name=prog_name or "gpuplan", complete_var=complete_var,
                                standalone_mode=False, **extra)
            code = code if isinstance(code, int) else 0
            if code == 0:
                finish_invocation()  # --format csv: the one table; an unknown --table NAME
            sys.stdout.flush()  # a closed pipe fails here, inside the error path, not at interpreter exit
            sys.exit(code)

    def invoke(self, ctx):
        """Run the command; an EPIPE on stdout becomes OutputClosed (typer would exit 1 on it)."""
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:
                raise OutputClosed() from exc
            raise


_app = typer.Typer(
    cls=GpuplanGroup,
    name="gpuplan",
    help="Model AI workloads on real hardware: what fits, how fast, what it costs, and why.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        print(f"gpuplan {__version__}")
        raise typer.Exit()


def _print_config_warning(warning: str) -> None:
    sys.stderr.write(f"warning: {warning}\n")


@_app.callback()
def root(
    ctx: typer.Context,
    catalog: Optional[List[str]] = typer.Option(
        None, "--catalog", help="Extra catalog TOML file(s) adding or overriding GPUs, systems, interconnects, prices."
    ),
    calibration: Optional[str] = typer.Option(
        None, "--calibration", envvar="GPUPLAN_CALIBRATION",
        help="Calibration profile (TOML, from `gpuplan calibrate fit` or `gpuplan bench`) applied to every prediction.",
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    debug: bool = typer.Option(False, "--debug", help="Show the traceback of an error (also GPUPLAN_DEBUG=1)."),
) -> None:
    from gpuplan import notices  # imports nothing: `--help` and `hw list` load only what they use

    if not notices.alias_listeners:  # `--gpu h100`: say which part that means, on stderr (stdout stays data)
        notices.alias_listeners.append(lambda note: sys.stderr.write(f"note: {note}\n"))
    if _print_config_warning not in notices.config_warning_listeners:
        # an unknown model_type read by its fields: say so on stderr
        notices.config_warning_listeners.append(_print_config_warning)
    if catalog or "gpuplan.catalog" in sys.modules:  # nothing to clear before the catalog is first loaded
        from gpuplan.catalog import load_catalog, set_user_catalogs

        set_user_catalogs(catalog or [])  # also clears the files of a previous in-process invocation
        if catalog:
            load_catalog()  # validate the user files now, before any command runs
    if calibration:  # knobs.overridden for the whole command (validated here: bad profile -> exit 2)
        from gpuplan.interfaces.calibration.profile import apply_profile

        ctx.with_resource(apply_profile(calibration))


#: the CLI modules in registration order (the order of `gpuplan --help`) and the top-level command
#: each registers (`register(app)`); tests/cli/test_startup_imports.py checks the table against them
CLI_MODULES = {
    "hw": "hw", "systems": "systems", "model": "model", "fit": "fit", "comm": "comm", "train": "train",
    "validate": "validate", "serve": "serve", "formats": "formats", "kernel": "kernel", "datacenter": "dc",
    "mig": "mig", "plan": "plan", "calibrate": "calibrate", "web": "web", "sweep": "sweep", "bench": "bench",
}
#: module -> (the commands, the groups) it registered
_registered: dict[str, tuple[list, list]] = {}


def register_modules(modules) -> None:
    """Import and register the named CLI modules (each once); the app's lists keep CLI_MODULES order,
    whatever order modules were registered in."""
    import importlib

    for module in CLI_MODULES:
        if module in modules and module not in _registered:
            n_commands, n_groups = len(_app.registered_commands), len(_app.registered_groups)
            importlib.import_module(f"gpuplan.cli.{module}").register(_app)
            _registered[module] = (_app.registered_commands[n_commands:], _app.registered_groups[n_groups:])
    _app.registered_commands = [c for m in CLI_MODULES if m in _registered for c in _registered[m][0]]
    _app.registered_groups = [g for m in CLI_MODULES if m in _registered for g in _registered[m][1]]


def __getattr__(name: str):
    """`app`: the root typer app with every command registered (tests, the web app's CLI parity);
    `main()` registers only the command it runs."""
    if name == "app":
        register_modules(CLI_MODULES)
        return _app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: root options that take a value (the token after them is not a command name)
_ROOT_VALUE_OPTIONS = ("--catalog", "--calibration")


def invoked_command(argv: list[str]) -> str | None:
    """The top-level command `argv` names (`hw` in `--catalog x.toml hw list`), or None (`--help`, none)."""
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in _ROOT_VALUE_OPTIONS:
            skip = True
        elif token == "--":
            return None
        elif not token.startswith("-"):
            return token
    return None


def _registered_name(info, group: bool) -> str | None:
    """The name typer gives a registered command (CommandInfo: its name, else the callback's name with
    `_` -> `-`) or group (TyperInfo: its name); None where that is not known."""
    if getattr(info, "name", None):
        return info.name
    callback = getattr(info, "callback", None)
    return typer.main.get_command_name(callback.__name__) if callback is not None and not group else None


@contextmanager
def _only_the_invoked_command(argv: list[str]):
    """typer builds the click command of every registered command at each run (about 0.05 CPU-s for
    ~50 commands); build only the one `argv` invokes. Any doubt (no command named, an unknown name,
    an entry without a name) builds them all, so help listings and typo suggestions are typer's own."""
    name = invoked_command(argv)
    commands, groups = _app.registered_commands, _app.registered_groups
    names = [_registered_name(c, False) for c in commands] + [_registered_name(g, True) for g in groups]
    if name is None or None in names or names.count(name) != 1:
        yield
        return
    _app.registered_commands = [c for c in commands if _registered_name(c, False) == name]
    _app.registered_groups = [g for g in groups if _registered_name(g, True) == name]
    try:
        yield
    finally:
        _app.registered_commands, _app.registered_groups = commands, groups


#: commands that run the plan search or the serving simulator, many times over for some (sweep, validate,
#: calibrate, web): their process keeps freed memory in the heap (gpuplan.heap, ~1 ms of page faults a
#: plan search otherwise); the others skip the ctypes import
SEARCHING_COMMANDS = frozenset({"plan", "train", "fit", "serve", "sweep", "validate", "calibrate", "web"})
#: the environment variables OpenBLAS reads for its thread count, in its order of precedence
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread() -> None:
    """Ask numpy's OpenBLAS for one thread, unless the user chose a count. OpenBLAS starts its
    thread pool when numpy is imported (one thread per core, spinning before it sleeps): on the
    2-core machine that doubled the CPU of `import numpy` (0.11 -> 0.06 CPU-s with one thread;
    wall 0.14 -> 0.08 s, 2026-11-28). No command but `bench` (which times the machine's matmul)
    multiplies matrices large enough for OpenBLAS to split them (the fits' normal equations are
    tens of columns), so one thread changes no result. Set before numpy's first import, which the
    CLI's own modules never do (tests/cli/test_startup_imports.py)."""
    if not any(os.environ.get(name) for name in BLAS_THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def main(argv: list[str] | None = None) -> None:
    """Console entry point (errors handled by GpuplanGroup.main). Imports and registers the CLI module
    of the invoked command only (every module for `--help` or a name it does not know). Called
    without `argv` (the console script, `python -m gpuplan.cli.main`) the process is the command's
    own: OpenBLAS gets one thread (`one_blas_thread`) and the process ends without the interpreter's
    teardown (`exit_without_teardown`); an in-process call (tests, `main([...])`) changes neither."""
    whole_process = argv is None  # the console script or `python -m gpuplan.cli.main`, not an in-process call
    args = list(sys.argv[1:] if argv is None else argv)
    name = invoked_command(args)
    if whole_process and name != "bench":
        one_blas_thread()
    if whole_process and name in SEARCHING_COMMANDS:
        from gpuplan.heap import keep_freed_memory

        keep_freed_memory()  # freed numpy blocks stay in the heap: no page faults per search (gpuplan.heap)
    module = next((m for m, command in CLI_MODULES.items() if command == name), None)
    register_modules({module} if module is not None else CLI_MODULES)
    try:
        with _only_the_invoked_command(args):
            _app(args=argv)
    except SystemExit as exc:
        if whole_process:
            exit_without_teardown(exc.code)
        raise


def exit_without_teardown(code) -> None:
    """End the process with exit status `code` as the interpreter would, less its teardown of every
    module and object (~10^6 objects after a computing command: 0.07-0.09 CPU-s of a `train` of
    ~0.5 s, 2026-11-28, 2-core machine). CPython's own exit order (Py_FinalizeEx): join the
    non-daemon threads, run the atexit callbacks, flush stdout and stderr, then tear down; here the
    same up to the flush, then `os._exit`. Returns (the caller raises SystemExit as usual) where
    that would change anything: another thread still running, a tracer or profiler installed
    (coverage, cProfile, pdb write their results after the program), `python -i`, an exit status
    that is not an integer (a message), or a flush that fails."""
    import threading

    if not (code is None or isinstance(code, int)) or threading.active_count() > 1:
        return
    if sys.gettrace() is not None or sys.getprofile() is not None or sys.flags.inspect:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    import atexit

    atexit._run_exitfuncs()  # what the interpreter runs at exit (logging.shutdown, weakref.finalize, ...)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        code = 120  # CPython's exit status when its final flush fails (the sys.exit documentation)
    os._exit(code or 0)


if __name__ == "__main__":
    main()
