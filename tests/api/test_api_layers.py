"""The CLI parses and renders only: its modules import gpuplan.api (and cli helpers, errors, specs
for option types), never the layers that compute; the api never imports the CLI (DESIGN.md layers)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuplan"
COMPUTING = ("gpuplan.workloads", "gpuplan.facilities", "gpuplan.primitives", "gpuplan.catalog", "gpuplan.models",
             "gpuplan.kernel", "gpuplan.formats", "gpuplan.layers", "gpuplan.units")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_cli_imports_no_computing_layer():
    allowed_exceptions = {"main.py": {"gpuplan.catalog"}}  # --catalog FILE: loads the user's catalog before any command
    bad = {}
    for path in sorted((SRC / "cli").glob("*.py")):
        hits = {m for m in _imports(path) if m.startswith(COMPUTING)} - allowed_exceptions.get(path.name, set())
        if hits:
            bad[path.name] = sorted(hits)
    assert bad == {}


def test_api_never_imports_cli():
    for path in sorted((SRC / "interfaces").rglob("*.py")):
        assert not any(m.startswith("gpuplan.cli") for m in _imports(path)), path
