"""Lazy start (issue 35): a command imports only what it uses. `gpuplan --help` builds every
command's options and imports no layer below the CLI's own defaults; `gpuplan hw list` reads the
catalog and nothing that computes (no workload, no numba, no numpy). Each case runs the command in
a fresh interpreter and reads its `sys.modules` (what was imported, not how long it took: speed is
measured by benchmarks/startup.py, never asserted here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuplan

SRC = str(Path(gpuplan.__file__).resolve().parents[1])

#: runs the CLI in-process as the console script does, then writes the imported module names
_PROBE = """
import json, sys
from gpuplan.cli.main import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
"""

#: libraries that only computing commands need (each costs 50-300 ms to import on a 2-core machine)
HEAVY = ("numba", "llvmlite", "numpy", "scipy", "matplotlib", "fastapi", "ray", "pyarrow")

#: the gpuplan modules below the CLI that `gpuplan --help` may import: the lazy API package, its
#: option defaults (constants only), the plan's enums (the typed options) and the bottom utilities
HELP_MODULES = {
    "gpuplan", "gpuplan.api", "gpuplan.errors", "gpuplan.interfaces", "gpuplan.interfaces.api",
    "gpuplan.interfaces.api.defaults", "gpuplan.jsonable", "gpuplan.notices", "gpuplan.output_files",
    "gpuplan.specs", "gpuplan.specs.choices", "gpuplan.validation_rules",
}

#: `gpuplan hw list` adds the catalog (and the specs it builds) and the API's hardware functions
HW_LIST_MODULES = HELP_MODULES | {
    "gpuplan.catalog", "gpuplan.catalog.ceilings", "gpuplan.catalog.disk_cache", "gpuplan.input_files", "gpuplan.interfaces.api._common",
    "gpuplan.interfaces.api.hardware", "gpuplan.knobs", "gpuplan.specs._base", "gpuplan.specs.cloud",
    "gpuplan.specs.dtypes", "gpuplan.specs.gpu", "gpuplan.specs.interconnect", "gpuplan.specs.mixers",
    "gpuplan.specs.model", "gpuplan.specs.system", "gpuplan.specs.host",
}


def imported_by(tmp_path: Path, *argv: str) -> set[str]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run([sys.executable, "-c", _PROBE, str(out), *argv], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return set(json.loads(out.read_text()))


def below_cli(modules: set[str]) -> set[str]:
    """The gpuplan modules that are not the CLI's own."""
    return {m for m in modules if m.split(".")[0] == "gpuplan" and not m.startswith("gpuplan.cli")}


def heavy(modules: set[str], *, pydantic: bool = True) -> set[str]:
    """The HEAVY libraries imported (and pydantic, unless `pydantic` is False)."""
    names = HEAVY + (("pydantic", "pydantic_core") if pydantic else ())
    return {m for m in modules if m.split(".")[0] in names}


def test_help_imports_no_layer_below_the_cli(tmp_path):
    modules = imported_by(tmp_path, "--help")
    assert below_cli(modules) <= HELP_MODULES, below_cli(modules) - HELP_MODULES
    assert heavy(modules) == set()


@pytest.mark.parametrize("argv", [("hw", "--help"), ("train", "--help"), ("serve", "run", "--help"),
                                  ("validate", "--help"), ("plan", "--help"), ("sweep", "--help")])
def test_command_help_imports_no_layer_below_the_cli(tmp_path, argv):
    # the root callback runs before a subcommand parses its --help: it must stay as light. typer
    # coerces every option value through a pydantic TypeAdapter (typer/_coercion.py), the root's
    # and the `--help` option's too; cli/lazy_coercion.py builds one only for a value that needs it,
    # so a command's --help imports neither pydantic nor typer's adapters
    modules = imported_by(tmp_path, *argv)
    assert below_cli(modules) <= HELP_MODULES, below_cli(modules) - HELP_MODULES
    assert heavy(modules) == set()
    assert "typer._adapters" not in modules


def test_hw_list_reads_the_catalog_and_nothing_that_computes(tmp_path):
    modules = imported_by(tmp_path, "hw", "list")
    assert below_cli(modules) <= HW_LIST_MODULES, below_cli(modules) - HW_LIST_MODULES
    assert "gpuplan.catalog" in modules  # it did run
    assert heavy(modules, pydantic=False) == set()
    assert "typer._adapters" not in modules  # its options are all defaults: no value to coerce
    assert not any(m.startswith(("gpuplan.workloads", "gpuplan.layers", "gpuplan.primitives", "gpuplan.models",
                                 "gpuplan.facilities")) for m in modules)


def test_a_simulating_command_still_loads_what_it_runs(tmp_path):
    # the lazy API is not a stub: `train` imports the plan search (the other side of the two tests above)
    modules = imported_by(tmp_path, "train", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--json")
    assert "gpuplan.workloads.training.plan_search" in modules
    assert "numpy" in modules


@pytest.mark.parametrize("argv", [("train",), ("plan",)])
def test_training_commands_on_defaults_load_no_simulator_and_no_coercion_adapter(tmp_path, argv):
    # issue 35: `train` and `plan` on their defaults search plans with numpy alone: no numba (the
    # serving simulator's kernels), no typer adapter (their enum option defaults pass through
    # cli/lazy_coercion.py unchanged) and no numpy.ma (np.unique imports it; the search asks for
    # sorted distinct codes without it)
    modules = imported_by(tmp_path, *argv)
    assert "gpuplan.workloads.training.plan_search" in modules  # it did search
    assert {m for m in modules if m.split(".")[0] in ("numba", "llvmlite")} == set()
    assert "typer._adapters" not in modules
    assert "numpy.ma" not in modules


def test_serve_run_on_defaults_simulates_without_numba(tmp_path):
    # issue 35: `serve run MODEL` on its defaults simulates 2,000 requests in 2,831 engine steps,
    # within the interpreted budget of workloads/inference/jit.py (20,000 steps): the kernels run as
    # plain Python and neither numba nor llvmlite is imported (~0.35 CPU-s of numba start-up avoided)
    modules = imported_by(tmp_path, "serve", "run", "llama-3-8b")
    assert "gpuplan.workloads.inference.sim.events" in modules  # it did simulate
    assert {m for m in modules if m.split(".")[0] in ("numba", "llvmlite")} == set()
    # its percentiles are np.percentile's without np.unique's import of numpy.ma (10-35 ms;
    # sim/percentiles.py); the normal CDF of the attention-DP knob's default is math.erf's, not
    # `statistics`' (~3 ms); bundled files are found by path, not importlib.resources (~5 ms with
    # its zip reader); its fixed lengths in a closed loop draw nothing, so numpy.random is never
    # imported (~4 ms; arrivals.SeededGenerator)
    assert {"numpy.ma", "statistics", "importlib.resources", "zipfile", "numpy.random"} & modules == set()


def test_the_cli_raises_only_the_young_gc_threshold():
    # cli/main.py: 10,000 allocations before a young collection instead of CPython's 700; the
    # older generations keep CPython's defaults (10, 10: gc.get_threshold in a fresh interpreter)
    probe = "import gc, gpuplan.cli.main; print(*gc.get_threshold())"
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", probe], env=env, check=True, capture_output=True, text=True,
                         timeout=120).stdout.split()
    assert out == ["10000", "10", "10"]


def test_an_enum_default_passes_through_and_typed_enum_text_is_typers():
    # an enum option's default is one of the enum's members: typer's choice adapter returns it as
    # it is (typer/_param_types.py coerce_cli_choice), so no adapter is built for it; text typed
    # for it still goes through typer's adapter ("adamw" -> Optimizer.ADAMW)
    import typer.main

    from gpuplan.cli.lazy_coercion import DeferredRuntimeParam, _passes_through
    from gpuplan.cli.main import app
    from gpuplan.specs.choices import Optimizer

    train = typer.main.get_command(app).commands["train"]
    param = next(p for p in train.params if p.name == "optimizer")
    deferred = param._runtime_param
    assert isinstance(deferred, DeferredRuntimeParam)
    assert _passes_through(deferred.descriptor, Optimizer.ADAMW)
    assert not _passes_through(deferred.descriptor, "adamw")
    assert deferred.coerce(Optimizer.LION, param=param, ctx=None) is Optimizer.LION
    assert param._runtime_param is deferred  # nothing built for a member
    assert deferred.coerce("adamw", param=param, ctx=None) is Optimizer.ADAMW
    assert param._runtime_param is not deferred  # text: typer's own adapter, built now
    param._runtime_param = deferred


def test_deferred_coercion_gives_typers_values():
    # cli/lazy_coercion.py passes a value through only where typer's own adapter would return it
    # unchanged: every option default of every command, and typed text, coerce to the same value
    # of the same type through both
    import typer.main
    from typer._coercion import build_runtime_param

    from gpuplan.cli.lazy_coercion import DeferredRuntimeParam
    from gpuplan.cli.main import app

    root = typer.main.get_command(app)
    stack, checked = [root], 0
    while stack:
        cmd = stack.pop()
        stack.extend(getattr(cmd, "commands", {}).values())
        for param in cmd.params:
            deferred = getattr(param, "_runtime_param", None)
            if not isinstance(deferred, DeferredRuntimeParam):
                continue
            typer_own = build_runtime_param(param.type_descriptor)
            samples = [param.default] + (["7"] if deferred.annotation in (int, float, str) else [])
            for value in samples:
                if value is None or callable(value) or param.multiple or param.nargs != 1:
                    continue
                ours = deferred.coerce(value, param=param, ctx=None)
                param._runtime_param = deferred  # coercion may have swapped in typer's own
                theirs = typer_own.coerce(value, param=param, ctx=None)
                assert (ours, type(ours)) == (theirs, type(theirs)), (cmd.name, param.name, value)
                checked += 1
    assert checked > 300  # about 330 options with a default or a typed number (tree of 2026-11)


def test_invoked_command_is_the_first_name_past_the_root_options():
    from gpuplan.cli.main import invoked_command

    assert invoked_command(["hw", "list"]) == "hw"
    assert invoked_command(["--catalog", "my.toml", "--debug", "train", "--gpus", "8"]) == "train"
    assert invoked_command(["--calibration=p.toml", "plan"]) == "plan"
    assert invoked_command(["--help"]) is None and invoked_command([]) is None
    assert invoked_command(["--", "hw"]) is None


@pytest.mark.parametrize("argv", [["hw", "--help"], ["hw", "list", "--json"], ["serve", "run", "--help"],
                                  ["hw", "lst"], ["plan", "--help"], ["train", "--gpus", "x"]])
def test_building_only_the_invoked_command_changes_no_output(argv, monkeypatch, capsys):
    # main() builds the click command of the invoked top-level command only; the output (and exit
    # code) must be what the whole tree gives
    from gpuplan.cli import main as cli_main

    def run() -> tuple[str, str, int]:
        try:
            cli_main.main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return out, err, code

    pruned = run()
    monkeypatch.setattr(cli_main, "invoked_command", lambda argv: None)  # the whole tree
    assert run() == pruned


def test_cli_module_table_names_what_each_module_registers():
    # main() imports only the CLI module of the invoked command (CLI_MODULES); the table must name
    # exactly the top-level command each module registers, or that command would not be found
    import typer

    from gpuplan.cli.main import CLI_MODULES, _registered_name

    for module, command in CLI_MODULES.items():
        probe = typer.Typer()
        __import__(f"gpuplan.cli.{module}", fromlist=["register"]).register(probe)
        names = ([_registered_name(c, False) for c in probe.registered_commands]
                 + [_registered_name(g, True) for g in probe.registered_groups])
        assert names == [command], (module, names)


def test_every_command_is_registered_for_the_app(tmp_path):
    # the whole app (gpuplan.cli.main.app) lists every module's command, in CLI_MODULES order
    from gpuplan.cli.main import CLI_MODULES, _registered_name, app

    names = ([_registered_name(c, False) for c in app.registered_commands]
             + [_registered_name(g, True) for g in app.registered_groups])
    assert sorted(names) == sorted(CLI_MODULES.values())
    # only the invoked command's module is imported by a run
    modules = imported_by(tmp_path, "hw", "list")
    assert {m for m in modules if m.startswith("gpuplan.cli.")} <= {
        "gpuplan.cli.main", "gpuplan.cli.hw", "gpuplan.cli.render", "gpuplan.cli.output_options",
        "gpuplan.cli.params", "gpuplan.cli.errors", "gpuplan.cli.lazy_coercion", "gpuplan.cli.table_layout"}
