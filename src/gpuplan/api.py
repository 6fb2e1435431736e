"""`gpuplan.api`: the stable Python surface (implemented in gpuplan.interfaces.api; see its docstring)."""

from gpuplan.interfaces.api import *  # noqa: F401,F403
from gpuplan.interfaces.api import __all__  # noqa: F401
