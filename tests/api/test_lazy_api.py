"""gpuplan.api imports each name on first use (issue 35): every name of `__all__` resolves to what
the eager re-export gave (functions wrapped by checked_numbers, constants as defined), and the
constants the CLI reads without importing the API agree with the modules that own them."""

from __future__ import annotations

import inspect

import pytest

from gpuplan import api
from gpuplan.errors import InputError
from gpuplan.interfaces.api import defaults


def test_every_name_resolves():
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert set(api.__all__) <= set(dir(api))
    with pytest.raises(AttributeError):
        api.no_such_function  # noqa: B018


def test_a_submodule_of_the_same_name_does_not_hide_the_function():
    import gpuplan.interfaces.api.comm as comm_module  # the package attribute `comm` is set to this module

    assert inspect.isfunction(api.comm) and api.comm is not comm_module
    assert api.comm.__wrapped__ is comm_module.comm


def test_functions_check_their_numbers_as_the_cli_does():
    # the same message as `gpuplan train --gpus -3` (validation_rules: counts are integers > 0)
    with pytest.raises(InputError, match="--gpus: must be an integer > 0"):
        api.train("llama-3-8b", "dgx-h100", -3)
    assert api.memory_headroom.__name__ == "headroom_scope"  # a context manager, not wrapped


def test_the_cli_defaults_agree_with_their_owners():
    from gpuplan.catalog.validation_sets import VALIDATION_SETS
    from gpuplan.workloads.inference.engines import GENERIC

    assert defaults.DEFAULT_ENGINE == GENERIC.name
    assert defaults.VALIDATION_SETS == VALIDATION_SETS
    assert api.SERVING_ENGINES[0] == api.DEFAULT_ENGINE  # "the default, then the engines"
