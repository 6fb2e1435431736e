"""gpuplan: model AI workloads on real hardware from first principles.

Layers (see DESIGN.md): catalog -> specs -> primitives -> workloads -> facilities -> interfaces.
"""

__version__ = "0.1.0"
