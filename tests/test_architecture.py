"""The layer stack of DESIGN.md holds: no import runs upward, none runs in a circle.

The contracts live in pyproject.toml ([tool.importlinter]) and run through the venv's
`lint-imports`: one test per contract, so a failure names the broken one and prints the offending
import chain. The meta-tests copy the package, add one forbidden import, and check that the same
contracts then fail (a check that cannot fail checks nothing).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
CONTRACT_IDS = ("layers", "acyclic", "specs-not-catalog", "web-over-api")


def _lint_imports(config: Path, *contracts: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "lint-imports"  # the venv's, installed by the test extra
    if not exe.exists():
        exe = Path(shutil.which("lint-imports") or exe)
    args = [str(exe), "--config", str(config), "--no-cache", "--no-logo"]
    for contract in contracts:
        args += ["--contract", contract]
    env = dict(os.environ)
    if pythonpath is not None:  # analyse a copy of the package instead of the installed one
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(args, capture_output=True, text=True, cwd=config.parent, env=env, timeout=120)


@pytest.mark.parametrize("contract", CONTRACT_IDS)
def test_import_contract_is_kept(contract):
    result = _lint_imports(PYPROJECT, contract)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_every_contract_in_pyproject_is_tested():
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - tomli is a dependency below 3.11
        import tomli as tomllib
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    assert sorted(c["id"] for c in config["contracts"]) == sorted(CONTRACT_IDS)


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, first == last) of the directed graph, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(edges):
        if state.get(root):
            continue
        path, stack = [root], [iter(sorted(edges[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(edges.get(nxt, ()))))
    return None


def _import_edges(package: str = "gpuplan") -> dict[str, set[str]]:
    graph = grimp.build_graph(package, cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def test_no_two_modules_import_each_other_even_through_others():
    # stricter than the acyclic_siblings contract: package __init__ modules count as modules too
    cycle = _find_cycle(_import_edges())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_find_cycle_reports_a_cycle_and_none_in_a_chain():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


# ------------------------------------------------------------------------- the contracts can fail
VIOLATIONS = {
    # an upward import: specs (bottom layer) -> cli (top)
    "upward": ("gpuplan/specs/gpu.py", "import gpuplan.cli.main", "layers",
               "gpuplan.specs is not allowed to import gpuplan.cli"),
    # a bottom utility importing a layer
    "utility": ("gpuplan/units.py", "import gpuplan.specs", "layers",
                "gpuplan.units is not allowed to import gpuplan.specs"),
    # a circle inside one package: element is imported by block, and would import it back
    "cycle": ("gpuplan/formats/element.py", "import gpuplan.formats.block", "acyclic",
              "No cycles are allowed in gpuplan.formats"),
    # a workload reading the catalog instead of getting specs
    "catalog": ("gpuplan/workloads/inference/cost/memory.py", "import gpuplan.catalog", "specs-not-catalog",
                "gpuplan.workloads.inference.cost.memory -> gpuplan.catalog"),
}


@pytest.mark.parametrize("case", sorted(VIOLATIONS))
def test_contract_breaks_on_a_forbidden_import(case, tmp_path):
    relative, line, contract, message = VIOLATIONS[case]
    src = tmp_path / "src"
    shutil.copytree(REPO / "src" / "gpuplan", src / "gpuplan", ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    target = src / relative
    target.write_text(target.read_text() + f"\n{line}  # added by test_architecture\n")
    result = _lint_imports(tmp_path / "pyproject.toml", contract, pythonpath=src)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in " ".join(result.stdout.split()), result.stdout
