"""gpuplan: model AI workloads on real hardware from first principles.

Layers (DESIGN.md), top to bottom; a module imports only lower layers (and its own package):
cli -> interfaces -> facilities -> workloads -> primitives (with formats, kernel) -> layers ->
models -> catalog -> specs -> knobs, units, errors. Enforced by [tool.importlinter] in pyproject.toml.
"""

__version__ = "0.1.0"
