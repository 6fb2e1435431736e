"""One option vocabulary (docs/options.md): renamed options keep their old spelling as a hidden
alias that still works and is absent from --help; `serve run` is a named, listed subcommand while
`gpuplan serve MODEL` keeps working."""

from __future__ import annotations

import json

import pytest

from gpuplan.cli.main import app


def _json(runner, args):
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


ALIASES = [
    # (command, new spelling args, old hidden spelling args, old flag)
    (["plan", "--gpus", "64"], ["gpt3-13b"], ["--model", "gpt3-13b"], "--model"),
    (["serve", "plan", "llama-3-8b", "--input-len", "256", "--output-len", "32"],
     ["--gpu", "h100-sxm5-80gb,a100-sxm4-80gb"], ["--gpus-from", "h100-sxm5-80gb,a100-sxm4-80gb"], "--gpus-from"),
    (["comm", "all_reduce", "--system", "dgx-h100", "--gpus", "16"], ["--gpus-per-domain", "4"],
     ["--gpus-per-node", "4"], "--gpus-per-node"),
]


@pytest.mark.parametrize("base,new,old,flag", ALIASES, ids=[a[3] for a in ALIASES])
def test_hidden_alias_works_and_is_not_in_help(runner, base, new, old, flag):
    assert _json(runner, base + new) == _json(runner, base + old)
    help_args = base[:2] if base[0] == "serve" else base[:1]
    text = runner.invoke(app, [*help_args, "--help"]).output
    assert flag not in text


def test_comm_alias_reaches_the_collective(runner):
    # 16 GPUs at 4 per NVLink domain = 4 domains (vs 2 packed 8-GPU domains)
    d = _json(runner, ["comm", "all_reduce", "--system", "dgx-h100", "--gpus", "16", "--gpus-per-node", "4"])
    assert (d["gpus_per_domain"], d["domains"]) == (4, 4)


def test_alias_and_new_spelling_disagreeing_exit_2(runner):
    res = runner.invoke(app, ["comm", "all_reduce", "--gpus", "16", "--gpus-per-domain", "4", "--gpus-per-node", "8"])
    assert res.exit_code == 2 and "--gpus-per-domain" in res.output


def test_serve_help_lists_run_and_plain_serve_still_runs(runner):
    text = runner.invoke(app, ["serve", "--help"]).output
    assert "run" in text.split("Commands:")[1].split()
    args = ["llama-3-8b", "--tp", "2", "--input-len", "256", "--output-len", "32", "--rate", "4"]
    assert _json(runner, ["serve", *args]) == _json(runner, ["serve", "run", *args])


def test_plan_model_argument_and_defaults(runner):
    help_text = runner.invoke(app, ["plan", "--help"]).output
    assert "[MODEL]" in help_text
    d = _json(runner, ["plan", "gpt3-13b", "--gpus", "64"])
    assert d["model"] == "gpt3-13b" and d["gpus"] == 64


def test_comm_and_fit_have_the_shared_defaults(runner):
    """--system defaults to dgx-h100 and --gpu to h100-sxm5-80gb wherever the command takes them."""
    assert _json(runner, ["comm", "all_reduce", "--gpus", "8"]) == _json(
        runner, ["comm", "all_reduce", "--gpus", "8", "--system", "dgx-h100"])
    assert _json(runner, ["fit", "train", "gpt2", "--gpus", "1"])["gpu"] == "h100-sxm5-80gb"
    assert _json(runner, ["mig", "profiles"])["gpu"] == "h100-sxm5-80gb"
