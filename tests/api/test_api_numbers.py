"""gpuplan.api checks its numeric arguments with the CLI's rules and one-line messages
(validation_rules.check_option via api._common.checked_numbers), and accepts string ids."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from gpuplan import api
from gpuplan.cli.main import app
from gpuplan.errors import InputError

runner = CliRunner()


@pytest.mark.parametrize("call, message", [
    (lambda: api.dc_power("dgx-h100", nodes=4, pue=math.nan), "--pue: must be a finite number > 0, got nan"),
    (lambda: api.dc_power("dgx-h100", nodes=4, pue=math.inf), "--pue: must be a finite number > 0, got inf"),
    (lambda: api.train("gpt3-125m", gpus=math.nan), "--gpus: must be an integer > 0, got nan"),
    (lambda: api.train("gpt3-125m", gpus=8, seq_len=2**70), "--seq-len: must be an integer > 0 within int64"),
    (lambda: api.train("gpt3-125m", gpus=8, usd_per_gpu_hour=-1.0), "--usd-per-gpu-hour: must be a finite number > 0"),
    (lambda: api.serve_plan("gpt3-125m", rate=-1.0), "--rate: must be a finite number > 0, got -1.0"),
    (lambda: api.fit_train("gpt3-125m", "h100-sxm5-80gb", 8, tp=math.inf), "--tp: must be an integer > 0, got inf"),
    (lambda: api.kernel_amdahl(1.5, 8), "--parallel-fraction: must be a number >= 0 and <= 1"),
    (lambda: api.plan("gpt3-125m", gpus=10**12), "--gpus: must be an integer > 0 and <= 10000000"),
])
def test_bad_numbers_raise_the_cli_message(call, message):
    with pytest.raises(InputError) as info:
        call()
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_same_message_as_the_cli():
    with pytest.raises(InputError) as info:
        api.dc_power("dgx-h100", nodes=4, pue=math.nan)
    r = runner.invoke(app, ["dc", "power", "--system", "dgx-h100", "--nodes", "4", "--pue", "nan"])
    assert r.exit_code == 2 and r.output.strip() == f"error: {info.value}"


def test_integral_float_is_taken_as_the_integer():
    a = api.train("gpt3-125m", "dgx-h100", 8.0, tokens="1B").to_dict()
    assert a["num_gpus"] == 8 and isinstance(a["num_gpus"], int)


def test_string_ids_everywhere():
    # issue 20: the API crashed on string ids; ids are resolved at the boundary
    assert api.train("gpt3-125m", "dgx-h100", 8, tokens="1B").to_dict()["model"] == "gpt3-125m"
    assert api.fit_train("gpt3-125m", "h100-sxm5-80gb", 8).to_dict()["gpu"] == "h100-sxm5-80gb"
    assert api.serve_frontier("gpt3-125m", "h100-sxm5-80gb", input_len=128, output_len=16).to_dict()["points"]
    assert api.hw_show("h100-sxm5-80gb").to_dict()["memory_gib"] == 80
